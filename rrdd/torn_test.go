package rrdd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const tornWriterEnv = "RRDD_TORN_WRITER"

func TestMain(m *testing.M) {
	if path := os.Getenv(tornWriterEnv); path != "" {
		if err := tornWriter(path); err != nil {
			fmt.Fprintln(os.Stderr, "torn writer:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// tornGeneration describes write k: the metadata changes every 25 writes (so does the file
// size), and every value of write k is k.
func tornGeneration(k int) (gen, count int) {
	gen = k / 25
	return gen, 50 + 100*(gen%4)
}

func tornDatasources(gen, count int) []Datasource {
	dss := make([]Datasource, count)
	for i := range dss {
		dss[i] = NewDatasource(fmt.Sprintf("g%d-ds%d", gen, i), Int64)
		dss[i].Description = strings.Repeat("x", gen%7*10)
	}
	return dss
}

// tornWriter rewrites the plugin file in place as fast as it can until it is killed (or for at
// most 30 s, should the parent die).
func tornWriter(path string) error {
	gen, count := tornGeneration(0)
	w, err := Create(path, V2, tornDatasources(gen, count))
	if err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for k := 0; time.Now().Before(deadline); k++ {
		g, n := tornGeneration(k)
		if g != gen {
			gen = g
			if err := w.SetDatasources(tornDatasources(g, n)); err != nil {
				return err
			}
		}
		vals := make([]Value, n)
		for i := range vals {
			vals[i] = IntValue(int64(k))
		}
		if err := w.Write(time.Unix(int64(k), 0), vals); err != nil {
			return err
		}
	}
	return nil
}

// TestTornWrites races a writer process rewriting a plugin file in place against this process
// reading it: every read either fails with a torn-read error (or no update) or yields one
// consistent snapshot, never a mix.
func TestTornWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "plugin")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), tornWriterEnv+"="+path)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cancel()
		_ = cmd.Wait()
	}()

	var r Reader
	var good, metaChanges int
	lastGen := uint64(0)
	end := time.Now().Add(2 * time.Second)
	for time.Now().Before(end) {
		b, err := os.ReadFile(path)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue // not created yet
			}
			t.Fatal(err)
		}
		if len(b) == 0 {
			continue
		}
		err = r.Read(b)
		switch {
		case err == nil:
		case errors.Is(err, ErrNoUpdate), errors.Is(err, ErrChecksum), errors.Is(err, ErrTruncated):
			continue
		case errors.Is(err, ErrHeader) && good == 0:
			// The writer's first write may be caught between sizing the new file and writing
			// its header; after that the header is never rewritten.
			continue
		default:
			t.Fatalf("Read: %v", err)
		}
		good++
		if g := r.MetadataGeneration(); g != lastGen {
			lastGen = g
			metaChanges++
		}
		vals, dss := r.Values(), r.Datasources()
		k := vals[0].Int()
		gen, count := tornGeneration(int(k))
		if len(vals) != count {
			t.Fatalf("write %d: %d values; want %d", k, len(vals), count)
		}
		for i, v := range vals {
			if v.Int() != k {
				t.Fatalf("write %d: value %d is %d: a mixed snapshot", k, i, v.Int())
			}
			if want := fmt.Sprintf("g%d-ds%d", gen, i); dss[i].Name != want {
				t.Fatalf("write %d: datasource %d is %q; want %q", k, i, dss[i].Name, want)
			}
		}
		if r.Timestamp().Unix() != k {
			t.Fatalf("write %d: timestamp %d", k, r.Timestamp().Unix())
		}
	}
	st := r.Stats()
	t.Logf("reads: %d good, %d metadata changes, stats %+v", good, metaChanges, st)
	if good < 20 || metaChanges < 2 {
		t.Errorf("only %d good reads and %d metadata changes in 2 s; the race did not happen", good, metaChanges)
	}
}
