package histread

import (
	"slices"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/series"
)

// store holds two series over 10 scans 2 s apart from t0: a counter every scan, a level every
// other scan.
func store(t *testing.T) (*history.Store, history.ID, history.ID, int64) {
	t.Helper()
	h := history.New(history.Options{Retention: time.Hour, Interval: 2 * time.Second})
	c, err := h.Series(`{"metric":"c"}`, series.Counter)
	if err != nil {
		t.Fatal(err)
	}
	l, err := h.Series(`{"metric":"l","room":"a"}`, series.Level)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now().Add(-time.Minute).UnixMilli()
	for i := range 10 {
		h.Begin(t0 + int64(i)*2000)
		h.Add(c, uint64(i))
		if i%2 == 0 {
			h.Add(l, uint64(i))
		}
		h.Commit()
	}
	return h, c, l, t0
}

func TestReadWindowWantAndLabels(t *testing.T) {
	h, c, l, t0 := store(t)
	r := New(h)
	if o, n := r.Span(); o != t0 || n != t0+18000 {
		t.Errorf("Span = %d, %d; want %d, %d", o, n, t0, t0+18000)
	}
	got := map[string][]int64{}
	cut := r.Read(t0+4000, t0+10000, 0, func(s *Series) (int64, bool) {
		if s.Labels()["metric"] == "l" && s.Labels()["room"] != "a" {
			t.Errorf("labels of %s: %v", s.Key, s.Labels())
		}
		if s.ID == l {
			return t0, true // the level from further back
		}
		return t0 + 4000, true
	}, func(s *Series, pts []history.Point) bool {
		for _, p := range pts {
			got[s.Labels()["metric"]] = append(got[s.Labels()["metric"]], (p.TS-t0)/2000)
		}
		return true
	})
	if cut != t0+10000 {
		t.Errorf("cut %d; want the window's end without a limit", cut-t0)
	}
	if !slices.Equal(got["c"], []int64{2, 3, 4, 5}) || !slices.Equal(got["l"], []int64{0, 2, 4}) {
		t.Errorf("read %v; want c at scans 2-5, l at 0, 2, 4", got)
	}
	// A series skipped by want is not read.
	n := 0
	r.Read(t0, t0+18000, 0, func(s *Series) (int64, bool) { return t0, s.ID == c }, func(s *Series, pts []history.Point) bool {
		if s.ID != c || len(pts) != 10 {
			t.Errorf("read %s with %d points; want only c with 10", s.Key, len(pts))
		}
		n++
		return true
	})
	if n != 1 {
		t.Errorf("%d series read; want 1", n)
	}
}

// With a limit, Read returns the earliest time a series reached it: what follows is read by
// the next window.
func TestReadLimitCut(t *testing.T) {
	h, _, _, t0 := store(t)
	r := New(h)
	counts := map[string]int{}
	cut := r.Read(t0, t0+18000, 3, func(*Series) (int64, bool) { return t0, true }, func(s *Series, pts []history.Point) bool {
		counts[s.Labels()["metric"]] = len(pts)
		return true
	})
	// c reaches 3 points at scan 2, l at scan 4.
	if cut != t0+4000 || counts["c"] != 3 || counts["l"] != 3 {
		t.Errorf("cut at scan %d, points %v; want cut at scan 2, 3 points each", (cut-t0)/2000, counts)
	}
}

// An ID re-used by another series gets that series' labels, not the cached ones.
func TestReadLabelsFollowKey(t *testing.T) {
	src := &fakeSource{key: `{"metric":"a"}`}
	r := New(src)
	read := func() string {
		var m string
		r.Read(0, 10, 0, func(s *Series) (int64, bool) { m = s.Labels()["metric"]; return 0, true },
			func(*Series, []history.Point) bool { return true })
		return m
	}
	if m := read(); m != "a" {
		t.Fatalf("metric %q; want a", m)
	}
	src.key = `{"metric":"b"}`
	if m := read(); m != "b" {
		t.Errorf("metric %q after the ID was re-used; want b", m)
	}
	src.key = "not a key"
	r.Read(0, 10, 0, func(s *Series) (int64, bool) {
		if s.Labels() != nil {
			t.Errorf("labels %v of a key that does not parse; want nil", s.Labels())
		}
		return 0, false
	}, nil)
}

type fakeSource struct{ key string }

func (f *fakeSource) Each(fn func(history.ID, string, series.Kind) bool) { fn(7, f.key, series.Level) }
func (f *fakeSource) Range(_ history.ID, _, _ int64, fn func(int64, uint64) bool) {
	fn(5, 1)
}
func (f *fakeSource) Stats() history.Stats { return history.Stats{} }
func (f *fakeSource) BackfillFrom() int64  { return 0 }
