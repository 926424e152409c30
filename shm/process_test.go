package shm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

const writerEnv = "SHM_TEST_WRITER_BASE"

// TestMain runs the test binary as a writer process when writerEnv is set.
func TestMain(m *testing.M) {
	if base := os.Getenv(writerEnv); base != "" {
		if err := runWriter(base, 60); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runWriter restarts a writer gens times on base. Generation g publishes g+1 counters, all
// holding g, so a value decoded with another generation's layout shows up. Even generations
// use Collection (which removes the old .meta first); odd ones replace the files the way a
// client that does not remove them would: .values renamed over the old one, then .meta.
func runWriter(base string, gens int) error {
	for g := 1; g <= gens; g++ {
		if g%2 == 0 {
			c := NewCollection(Options{Path: base})
			for i := 0; i <= g; i++ {
				Must(c.Counter(map[string]string{"gen": strconv.Itoa(g), "i": strconv.Itoa(i)})).Add(uint64(g))
			}
			if err := c.Start(); err != nil {
				return err
			}
			time.Sleep(3 * time.Millisecond)
			if g%4 == 0 {
				c.Close()
			}
			continue
		}
		var meta, values []byte
		for i := 0; i <= g; i++ {
			meta = fmt.Appendf(meta, "counter 8: {\"gen\": \"%d\", \"i\": \"%d\"}\n", g, i)
			values = binary.NativeEndian.AppendUint64(values, uint64(g))
		}
		for _, f := range []struct {
			ext  string
			data []byte
		}{{".values", values}, {".meta", meta}} {
			if err := os.WriteFile(base+f.ext+".tmp", f.data, 0o644); err != nil {
				return err
			}
			if err := os.Rename(base+f.ext+".tmp", base+f.ext); err != nil {
				return err
			}
		}
		time.Sleep(3 * time.Millisecond)
	}
	return nil
}

// TestReadWriterProcess reads a writer process that keeps restarting: every value read must
// belong to the layout it was decoded with.
func TestReadWriterProcess(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(t.TempDir(), "app")
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), writerEnv+"="+base)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	r := NewReader(base, ReaderOptions{})
	defer r.Close()
	var ok, notReady, missing, changes int
	gens := map[string]bool{}
	for running := true; running; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("writer: %v", err)
			}
			running = false
		default:
		}
		snap, err := r.Read()
		switch {
		case errors.Is(err, ErrNotReady):
			notReady++
			continue
		case errors.Is(err, fs.ErrNotExist):
			missing++
			continue
		case err != nil:
			t.Fatalf("Read: %v", err)
		}
		ok++
		if snap.Changed {
			changes++
		}
		for i := range snap.Layout.Entries {
			e := &snap.Layout.Entries[i]
			g := e.Labels["gen"]
			gens[g] = true
			if got := strconv.FormatUint(e.Counter(snap.Values), 10); got != g {
				t.Fatalf("entry %v decoded as %s: values of another generation", e.Labels, got)
			}
		}
	}
	t.Logf("reads: %d ok (%d layout changes, %d generations seen), %d not ready, %d missing", ok, changes, len(gens), notReady, missing)
	if ok == 0 || len(gens) < 2 {
		t.Errorf("read %d snapshots of %d generations; want several", ok, len(gens))
	}
}
