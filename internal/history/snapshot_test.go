package history

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/series"
)

// sampleStore returns a store with a few series over 30 scans from ts0, 2 s apart, with
// BlockScans 8 (so 3 closed segments and a partial one).
func sampleStore(ts0 int64) *Store {
	s := New(Options{BlockScans: 8})
	c, _ := s.Series(`{"metric":"c"}`, series.Counter)
	l, _ := s.Series(`{"metric":"l"}`, series.Level)
	f, _ := s.Series(`{"metric":"f"}`, series.Float)
	for j := int64(0); j < 30; j++ {
		s.Begin(ts0 + j*2000)
		s.Add(c, uint64(j*j))
		if j%4 != 0 {
			s.Add(l, uint64(-j))
		}
		s.Add(f, math.Float64bits([]float64{math.NaN(), math.Inf(-1), -0.0, 1.25}[j%4]))
		s.Commit()
	}
	return s
}

func snapshotBytes(t *testing.T, s *Store) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := s.WriteSnapshot(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestSnapshotRoundTrip(t *testing.T) {
	ts0 := int64(1_800_000_000_000)
	s := sampleStore(ts0)
	b := snapshotBytes(t, s)
	now := func() time.Time { return time.UnixMilli(ts0 + 60_000) }
	s2, err := ReadSnapshot(bytes.NewReader(b), Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`{"metric":"c"}`, `{"metric":"l"}`, `{"metric":"f"}`} {
		id, _, _ := s.Lookup(key)
		id2, _, ok := s2.Lookup(key)
		if !ok {
			t.Fatalf("loaded store lacks %s", key)
		}
		a, c := rangeAll(s, id, math.MinInt64, math.MaxInt64), rangeAll(s2, id2, math.MinInt64, math.MaxInt64)
		if len(a) != len(c) || len(a) == 0 {
			t.Fatalf("%s: %d points before, %d after", key, len(a), len(c))
		}
		for i := range a {
			if a[i] != c[i] {
				t.Fatalf("%s point %d: %v before, %v after", key, i, a[i], c[i])
			}
		}
	}
	if st, st2 := s.Stats(), s2.Stats(); st.Points != st2.Points || st.Series != st2.Series {
		t.Errorf("Stats before %+v, after %+v", st, st2)
	}
	if got := snapshotBytes(t, s2); !bytes.Equal(got, b) {
		t.Error("snapshot of the loaded store differs from the original snapshot")
	}
}

func TestSnapshotDropsStale(t *testing.T) {
	ts0 := int64(1_800_000_000_000)
	b := snapshotBytes(t, sampleStore(ts0))
	// An hour and a bit later, nothing is left.
	late := func() time.Time { return time.UnixMilli(ts0 + 2*3600_000) }
	s, err := ReadSnapshot(bytes.NewReader(b), Options{Now: late})
	if err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Series != 0 || st.Points != 0 {
		t.Errorf("stale snapshot loaded %+v; want empty", st)
	}
	// With the retention ending inside the data, whole old segments go, the rest stays.
	mid := func() time.Time { return time.UnixMilli(ts0 + 20_000 + 3600_000) }
	s, err = ReadSnapshot(bytes.NewReader(b), Options{Now: mid})
	if err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	if st.OldestMs > ts0+20_000 || st.OldestMs <= ts0 || st.Points == 0 {
		t.Errorf("partly stale snapshot loaded %+v; want oldest in (%d, %d]", st, ts0, ts0+20_000)
	}
}

func TestSnapshotRejects(t *testing.T) {
	b := snapshotBytes(t, sampleStore(1_800_000_000_000))
	for name, bad := range map[string][]byte{
		"empty":     {},
		"magic":     append([]byte("XANTALH\x00"), b[8:]...),
		"truncated": b[:len(b)/2],
		"flipped":   flip(b, len(b)/3),
		"no crc":    b[:len(b)-4],
	} {
		if _, err := ReadSnapshot(bytes.NewReader(bad), Options{}); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: ReadSnapshot = %v; want ErrCorrupt", name, err)
		}
	}
}

func flip(b []byte, i int) []byte {
	c := append([]byte(nil), b...)
	c[i] ^= 0x40
	return c
}

// TestLoadDirLegacy: a version 1 snapshot file (what agents wrote before snapshot directories)
// loads, and is deleted by the first save into the directory, which then loads the same.
func TestLoadDirLegacy(t *testing.T) {
	state := t.TempDir()
	dir, legacy := filepath.Join(state, "history"), filepath.Join(state, "history.snap")
	ts0 := int64(1_800_000_000_000)
	now := func() time.Time { return time.UnixMilli(ts0 + 60_000) }
	s, _, err := LoadDir(dir, legacy, Options{Now: now})
	if err != nil || s.Stats().Series != 0 {
		t.Fatalf("LoadDir(nothing) = %+v, %v; want empty, nil", s.Stats(), err)
	}
	orig := sampleStore(ts0)
	if err := os.WriteFile(legacy, snapshotBytes(t, orig), 0o644); err != nil {
		t.Fatal(err)
	}
	s, sv, err := LoadDir(dir, legacy, Options{Now: now})
	if err != nil || s.Stats().Points != orig.Stats().Points {
		t.Fatalf("LoadDir(legacy) = %+v, %v; want %+v", s.Stats(), err, orig.Stats())
	}
	if _, err := os.Stat(legacy); err != nil {
		t.Fatalf("legacy file gone before the first save: %v", err)
	}
	if _, err := sv.Save(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(legacy); !os.IsNotExist(err) {
		t.Errorf("legacy file still there after the first save: %v", err)
	}
	s2, _, err := LoadDir(dir, legacy, Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	sameStores(t, orig, s2)

	// A truncated legacy file: reported, moved aside, empty store.
	b := snapshotBytes(t, orig)
	if err := os.WriteFile(legacy, b[:len(b)-10], 0o644); err != nil {
		t.Fatal(err)
	}
	s, _, err = LoadDir(filepath.Join(state, "other"), legacy, Options{Now: now})
	if !errors.Is(err, ErrCorrupt) || s == nil || s.Stats().Series != 0 {
		t.Fatalf("LoadDir(truncated legacy) = %v, %v; want an empty store and ErrCorrupt", s, err)
	}
	aside := legacy + ".corrupt-" + "1800000060"
	if _, serr := os.Stat(aside); serr != nil || !strings.Contains(err.Error(), aside) {
		t.Errorf("corrupt file not moved to %s (%v); error %v", aside, serr, err)
	}
	if _, serr := os.Stat(legacy); !os.IsNotExist(serr) {
		t.Errorf("corrupt file still at %s", legacy)
	}
}

// sameStores fails unless a and b hold the same series (by key) with the same points.
func sameStores(t *testing.T, a, b *Store) {
	t.Helper()
	if sa, sb := a.Stats(), b.Stats(); sa.Series != sb.Series || sa.Points != sb.Points {
		t.Errorf("stats %+v and %+v differ", sa, sb)
	}
	diffPoints(t, a, b, "before", "after", true)
}
