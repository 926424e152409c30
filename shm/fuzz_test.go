package shm

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fixtureSeeds returns the client fixtures' .meta and .values files.
func fixtureSeeds(f *testing.F) (metas, values [][]byte) {
	f.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "compat", "*", "app.meta"))
	if err != nil || len(paths) == 0 {
		f.Fatalf("no fixtures: %v", err)
	}
	for _, p := range paths {
		m, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		v, err := os.ReadFile(strings.TrimSuffix(p, ".meta") + ".values")
		if err != nil {
			f.Fatal(err)
		}
		metas, values = append(metas, m), append(values, v)
	}
	return metas, values
}

func FuzzParseMeta(f *testing.F) {
	metas, _ := fixtureSeeds(f)
	for _, m := range metas {
		f.Add(m)
	}
	for _, s := range []string{
		"level 8 unsigned: {\"a\": \"b\"}\nhistogram 16: {\"a\": \"c\"}\npad 8\nstate 16: {\"\\ud83d\\ude00\": \"\\u00e9\"}\n",
		"counter 8: {\"a\": \"b\", \"a\": \"c\"}\n", "counter 8: {\"a\": 1}\r\n", "",
		"counter 8: {}\ncounter 8: {}\nstate 12: [1, {\"x\": [null, true, -0.5e+3]}]\npad 8: {\"p\": 1}\ncounter 0: {}\n",
		"state 9: {\"a\": {\"b\": {\"c\": [[[\"d\"]]]}}}\r\nlevel 8 signed x: {\"k\": 1, \"k\": \"v\"}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := ParseMeta("f", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "f:") {
				t.Fatalf("error %q does not start with the file name", err)
			}
			checkErrorText(t, err.Error())
			return
		}
		// Invariants of a parsed layout.
		prevEnd := 0
		for _, e := range l.Entries {
			if e.Offset < prevEnd || e.Offset+e.Size > l.Size || e.Labels == nil {
				t.Fatalf("bad entry %+v in layout of size %d", e, l.Size)
			}
			switch e.Kind {
			case KindCounter, KindLevel, KindFloat:
				if e.Size != 8 {
					t.Fatalf("%v entry of size %d", e.Kind, e.Size)
				}
			case KindState:
				if e.Size < MinStateSize || e.Size > MaxStateSize {
					t.Fatalf("state of size %d", e.Size)
				}
			default:
				t.Fatalf("unknown kind %v", e.Kind)
			}
			prevEnd = e.Offset + e.Size
		}
		for _, s := range l.Skipped {
			checkErrorText(t, s)
		}
		if len(l.Skipped) > maxSkipped+1 {
			t.Fatalf("%d skipped lines", len(l.Skipped))
		}
		// Decoding any values of the right length must not panic.
		values := make([]byte, l.Size)
		for i := range values {
			values[i] = byte(i * 7)
		}
		for i := range l.Entries {
			e := &l.Entries[i]
			if e.Kind == KindState {
				e.State(values)
			} else {
				e.Bits(values)
			}
		}
	})
}

// FuzzReader writes fuzzed .meta and .values files and reads them with a Reader, twice:
// whatever the bytes, Read returns values long enough for the layout or an error, and never
// panics.
func FuzzReader(f *testing.F) {
	metas, values := fixtureSeeds(f)
	for i := range metas {
		f.Add(metas[i], values[i])
		f.Add(metas[i], values[i][:len(values[i])/2])
	}
	f.Add([]byte("state 16: {\"a\": \"b\"}\n"), []byte("\x01\x00\x00\x00\x00\x00\x00\x00no nul!!"))
	dir := f.TempDir()
	base := filepath.Join(dir, "app")
	f.Fuzz(func(t *testing.T, meta, vals []byte) {
		os.Remove(base + ".meta")
		os.Remove(base + ".values")
		if err := os.WriteFile(base+".values", vals, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(base+".meta", meta, 0o644); err != nil {
			t.Fatal(err)
		}
		r := NewReader(base, ReaderOptions{MaxValuesSize: 1 << 20})
		defer r.Close()
		for range 2 {
			snap, err := r.Read()
			if err != nil {
				continue
			}
			if err := snap.Layout.CheckValues(snap.Values); err != nil {
				t.Fatal(err)
			}
			if len(snap.Values) > len(vals) {
				t.Fatalf("read %d bytes from a file of %d", len(snap.Values), len(vals))
			}
			for i := range snap.Layout.Entries {
				e := &snap.Layout.Entries[i]
				if e.Kind == KindState {
					_, text := e.State(snap.Values)
					if bytes.IndexByte(text, 0) >= 0 {
						t.Fatalf("state text %q contains NUL", text)
					}
				} else {
					e.Bits(snap.Values)
				}
			}
		}
	})
}
