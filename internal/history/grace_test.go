package history

import (
	"math"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/series"
	"github.com/cantal-go/cantal/internal/testsupport/cputime"
)

// With GraceScans, a closing segment leaves its newest scans in the open staging: a late point
// for them is still placed right after the close, and every point is read once.
func TestGraceScansKeepLateWindow(t *testing.T) {
	s := New(Options{BlockScans: 8, GraceScans: 4, Interval: 2 * time.Second})
	id, _ := s.Series(`{"m":"x"}`, series.Counter)
	ts := int64(1_700_000_000_000)
	var want []Point
	for k := range 40 {
		at := ts + int64(k)*2000
		scanAt(s, at, func() {
			if k%3 == 0 {
				return // a gap, filled late below
			}
			s.Add(id, uint64(at))
			if k%3 == 1 {
				// The gap of the scan before, whatever the segment boundaries.
				slot, err := s.AddAt(id, at-2000, uint64(at-2000))
				if err != nil || slot != at-2000 {
					t.Errorf("scan %d: AddAt(%d) = %d, %v", k, at-2000, slot, err)
				}
			}
		})
		if s.Closed() > 0 && s.w.j <= 4 && s.BackfillFrom() >= at-3*2000 {
			t.Errorf("scan %d, right after a close: BackfillFrom %d; want the 4 carried scans open", k, s.BackfillFrom())
		}
	}
	for k := range 39 { // the gap of scan 39 is never filled
		at := ts + int64(k)*2000
		want = append(want, Point{at, uint64(at)})
	}
	got := rangeAll(s, id, 0, math.MaxInt64)
	if !slices.Equal(got, want) {
		t.Errorf("points\n%v\nwant\n%v", got, want)
	}
	if st := s.Stats(); st.Points != int64(len(want)) || st.Segments != 4 {
		t.Errorf("Stats = %+v; want %d points, 4 segments of 8 (36 scans closed at 12, 20, 28, 36)", st, len(want))
	}
	// Snapshots: HEAD and v1, into a store with and without grace.
	dir := t.TempDir()
	if _, err := NewSaver(dir, s).Save(); err != nil {
		t.Fatal(err)
	}
	for _, g := range []int{0, 4} {
		s2, _, err := LoadDir(dir, "", Options{GraceScans: g, Interval: 2 * time.Second, Now: nowAt(ts + 80_000)})
		if err != nil {
			t.Fatal(err)
		}
		id2, _, _ := s2.Lookup(`{"m":"x"}`)
		if got := rangeAll(s2, id2, 0, math.MaxInt64); !slices.Equal(got, want) {
			t.Errorf("LoadDir (grace %d): %v; want %v", g, got, want)
		}
		scanAt(s2, ts+80_000, func() { s2.Add(id2, 1) }) // and it goes on
	}
}

// Snapshots taken at every scan of a grace cycle load with every point (full stagings too).
func TestGraceScansSnapshotEveryScan(t *testing.T) {
	s := New(Options{BlockScans: 4, GraceScans: 4})
	id, _ := s.Series(`{"m":"y"}`, series.Level)
	ts := int64(1_700_000_000_000)
	for k := range 20 {
		scanAt(s, ts+int64(k)*1000, func() { s.Add(id, uint64(k)) })
		dir := t.TempDir()
		if _, err := NewSaver(dir, s).Save(); err != nil {
			t.Fatal(err)
		}
		s2, _, err := LoadDir(dir, "", Options{Now: nowAt(ts + 30_000)})
		if err != nil {
			t.Fatalf("scan %d: %v", k, err)
		}
		id2, _, _ := s2.Lookup(`{"m":"y"}`)
		if got := rangeAll(s2, id2, 0, math.MaxInt64); len(got) != k+1 {
			t.Errorf("scan %d: LoadDir has %d points; want %d", k, len(got), k+1)
		}
	}
}

// Readers running across closes with carried scans see every point once, in order (-race).
func TestGraceScansConcurrentReaders(t *testing.T) {
	s := New(Options{BlockScans: 8, GraceScans: 8})
	id, _ := s.Series(`{"m":"z"}`, series.Counter)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				prev := int64(0)
				s.Range(id, 0, math.MaxInt64, func(ts int64, bits uint64) bool {
					if ts <= prev || bits != uint64(ts) {
						t.Errorf("point (%d, %d) after %d", ts, bits, prev)
						return false
					}
					prev = ts
					return true
				})
			}
		})
	}
	for k := int64(1); k <= 300; k++ {
		scanAt(s, k, func() { s.Add(id, uint64(k)) })
	}
	close(stop)
	wg.Wait()
	if got := rangeAll(s, id, 0, math.MaxInt64); len(got) != 300 {
		t.Errorf("%d points; want 300", len(got))
	}
}

// BenchmarkAddGrace: the steady-state writer (10000 series, one point each per scan, segments of
// 30 scans as the agent's at 2 s) without and with 8 grace scans, side by side: what carrying
// the scans over costs per point, closes included. One op is one point.
func BenchmarkAddGrace(b *testing.B) {
	const nser = 10000
	for _, g := range []int{0, 8} {
		b.Run("grace="+strconv.Itoa(g), func(b *testing.B) {
			s := New(Options{BlockScans: 30, GraceScans: g})
			ids := make([]ID, nser)
			for i := range ids {
				ids[i], _ = s.Series("s"+strconv.Itoa(i), series.Counter)
			}
			ts := int64(1_700_000_000_000)
			for j := range 100 { // warm up: several closes
				ts += 2000
				scanAt(s, ts, func() {
					for i, id := range ids {
						s.Add(id, uint64(j*(i%50+1)))
					}
				})
			}
			b.ReportAllocs()
			cpu0 := cputime.Process()
			i, j := 0, 100
			ts += 2000
			s.Begin(ts)
			for b.Loop() {
				s.Add(ids[i], uint64(j*(i%50+1)))
				if i++; i == nser {
					s.Commit()
					i, j, ts = 0, j+1, ts+2000
					s.Begin(ts)
				}
			}
			s.Commit()
			b.ReportMetric(float64((cputime.Process()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/point")
		})
	}
}
