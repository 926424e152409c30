package history

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

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

// TestLoadDirDropsStale: data older than the retention is not loaded: whole segments (and
// the series left without a point) go, the rest stays.
func TestLoadDirDropsStale(t *testing.T) {
	ts0 := int64(1_800_000_000_000)
	dir, _ := savedDir(t, ts0)
	// An hour and a bit later, nothing is left.
	s, _, err := LoadDir(dir, "", Options{Now: nowAt(ts0 + 2*3600_000)})
	if err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Series != 0 || st.Points != 0 {
		t.Errorf("stale snapshot loaded %+v; want empty", st)
	}
	// With the retention ending inside the data, whole old segments go, the rest stays.
	s, _, err = LoadDir(dir, "", Options{Now: nowAt(ts0 + 20_000 + 3600_000)})
	if err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	if st.OldestMs > ts0+20_000 || st.OldestMs <= ts0 || st.Points == 0 {
		t.Errorf("partly stale snapshot loaded %+v; want oldest in (%d, %d]", st, ts0, ts0+20_000)
	}
}

// TestLoadDirRefusesVersion1File: a single-file snapshot of the version 1 format (what
// pre-release agents wrote before snapshot directories; testdata/history-v1.snap is one, of
// sampleStore) is no longer read. LoadDir says so, naming the file, and loses nothing else: the
// directory loads as without it, the file stays as it was (the operator removes it), and
// saves leave it alone.
func TestLoadDirRefusesVersion1File(t *testing.T) {
	ts0 := int64(1_800_000_000_000)
	opt := Options{Now: nowAt(ts0 + 60_000)}
	dir, orig := savedDir(t, ts0)
	v1 := filepath.Join(t.TempDir(), "history.snap")
	want, err := os.ReadFile("testdata/history-v1.snap")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(v1, want, 0o644); err != nil {
		t.Fatal(err)
	}
	s, sv, err := LoadDir(dir, v1, opt)
	if err == nil || !strings.Contains(err.Error(), v1) || !strings.Contains(err.Error(), "no longer read") {
		t.Errorf("LoadDir with a version 1 file: error %v; want one naming %s as no longer read", err, v1)
	}
	if errors.Is(err, ErrCorrupt) {
		t.Errorf("LoadDir with a version 1 file: error %v wraps ErrCorrupt; the file is not damaged", err)
	}
	sameStores(t, orig, s)
	if _, err := sv.Save(); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(v1); err != nil || !bytes.Equal(got, want) {
		t.Errorf("version 1 file after LoadDir and Save: %d bytes, %v; want it untouched", len(got), err)
	}
	// Without a snapshot directory, the store starts empty (the file's points are not read).
	s, _, err = LoadDir(filepath.Join(t.TempDir(), "none"), v1, opt)
	if err == nil || s == nil || s.Stats().Series != 0 {
		t.Errorf("LoadDir(no directory, version 1 file) = %+v, %v; want an empty store and the refusal", s.Stats(), err)
	}
	// No file, no error.
	if _, _, err := LoadDir(dir, filepath.Join(t.TempDir(), "history.snap"), opt); err != nil {
		t.Errorf("LoadDir without a version 1 file: %v", err)
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
