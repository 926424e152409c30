package rrdd

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func addSeeds(f *testing.F, pattern string) {
	files, err := filepath.Glob(filepath.Join("testdata", pattern))
	if err != nil || len(files) == 0 {
		f.Fatalf("no seed files %s: %v", pattern, err)
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// fuzzRead reads b with a fresh reader and with one that already holds the seed's state, checks
// the Reader's invariants, and re-encodes what it read.
func fuzzRead(t *testing.T, b []byte) {
	var fresh Reader
	check := func(r *Reader, err error) {
		if err != nil {
			checkErrorText(t, err)
			for _, known := range []error{ErrNoUpdate, ErrHeader, ErrChecksum, ErrTruncated, ErrPayload} {
				if errors.Is(err, known) {
					return
				}
			}
			t.Fatalf("Read error %v wraps none of the package's errors", err)
		}
		if len(r.Values()) != len(r.Datasources()) {
			t.Fatalf("%d values for %d datasources", len(r.Values()), len(r.Datasources()))
		}
	}
	err := fresh.Read(b)
	check(&fresh, err)
	if err := fresh.Read(b); err == nil {
		t.Fatalf("second Read of the same bytes succeeded; want ErrNoUpdate or an error")
	}
	if err != nil {
		return
	}
	// Whatever was read can be written again and reads back with the same values.
	enc, eerr := NewEncoder(fresh.Protocol(), fresh.Datasources())
	if eerr != nil {
		return // e.g. an empty datasource name: readable, not writable
	}
	out, eerr := enc.Encode(time.Unix(1, 0), fresh.Values())
	if eerr != nil {
		t.Fatal(eerr)
	}
	var again Reader
	if err := again.Read(out); err != nil {
		t.Fatalf("re-encoded file does not read: %v\n%q", err, out)
	}
	if len(again.Values()) != len(fresh.Values()) {
		t.Fatalf("re-read %d values, want %d", len(again.Values()), len(fresh.Values()))
	}
	for i, v := range fresh.Values() {
		w := again.Values()[i]
		if fresh.Protocol() == V1 && fresh.Datasources()[i].ValueType == Float {
			// v1 writes floats as text; NaN payloads are not preserved.
			if v.Float() != w.Float() && !(v.Float() != v.Float() && w.Float() != w.Float()) {
				t.Fatalf("value %d: %v re-read as %v", i, v.Float(), w.Float())
			}
			continue
		}
		if v != w {
			t.Fatalf("value %d: %#x re-read as %#x", i, v, w)
		}
	}
}

func FuzzReaderV2(f *testing.F) {
	addSeeds(f, "v2_*.bin")
	f.Fuzz(func(t *testing.T, b []byte) {
		fuzzRead(t, b)
		// A reader that has the seed cached must also cope.
		seed := buildV2(1, []uint64{1, 2}, `{"datasources": {"a": {"value_type": "int64"}, "b": {"value_type": "float"}}}`, "")
		var r Reader
		if err := r.Read(seed); err != nil {
			t.Fatal(err)
		}
		if err := r.Read(b); err == nil && len(r.Values()) != len(r.Datasources()) {
			t.Fatal("values and datasources out of step")
		}
	})
}

func FuzzReaderV1(f *testing.F) {
	addSeeds(f, "v1_*.txt")
	f.Fuzz(func(t *testing.T, b []byte) {
		fuzzRead(t, b)
		// Also fuzz the JSON inside valid framing, which random bytes rarely reach.
		if !bytes.HasPrefix(b, []byte("DATASOURCES")) {
			fuzzRead(t, v1File(string(b)))
		}
	})
}
