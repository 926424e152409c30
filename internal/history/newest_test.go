package history

import (
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/series"
)

// TestNewest: Newest is never earlier than a series' newest point, and is that point's scan for
// a series with points (in a closed segment or the open one), also after a snapshot's load.
func TestNewest(t *testing.T) {
	s := New(Options{Retention: time.Hour, Interval: time.Second, BlockScans: 8})
	a, _ := s.Series("a", series.Level)
	b, _ := s.Series("b", series.Level)
	base := int64(1_700_000_000_000)
	for i := int64(0); i < 20; i++ { // two closed segments, four open scans
		s.Begin(base + i*1000)
		if i < 3 {
			s.Add(a, 1) // only in the first segment
		}
		s.Add(b, 2)
		s.Commit()
	}
	check := func(s *Store, what string) {
		t.Helper()
		if got := s.Newest(a); got != base+2000 {
			t.Errorf("%s: Newest(a) = %d, want its last point %d", what, got-base, 2000)
		}
		if got := s.Newest(b); got != base+19_000 {
			t.Errorf("%s: Newest(b) = %d, want the open scan %d", what, got-base, 19_000)
		}
		if got := s.Newest(99); got != 0 {
			t.Errorf("%s: Newest of an unknown ID = %d", what, got)
		}
	}
	check(s, "written")
	dir := t.TempDir()
	if _, err := NewSaver(dir, s).Save(); err != nil {
		t.Fatal(err)
	}
	loaded, _, err := LoadDir(dir, "", Options{Retention: time.Hour, Interval: time.Second, BlockScans: 8, Now: func() time.Time { return time.UnixMilli(base + 20_000) }})
	if err != nil {
		t.Fatal(err)
	}
	check(loaded, "loaded")
	s.Begin(base + 20_000)
	s.Add(a, 1)
	if got := s.Newest(a); got != base+20_000 {
		t.Errorf("in a scan that added a point: Newest(a) = %d, want the open scan", got-base)
	}
}
