package history

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/series"
	"github.com/cantal-go/cantal/internal/testsupport/cputime"
)

// scanAt runs one scan at ts with fn between Begin and Commit.
func scanAt(s *Store, ts int64, fn func()) {
	s.Begin(ts)
	if fn != nil {
		fn()
	}
	s.Commit()
}

func TestAddAtPlacesOnTheScanGrid(t *testing.T) {
	s := New(Options{BlockScans: 16, Interval: 2 * time.Second})
	id, err := s.Series(`{"metric":"temp"}`, series.Float)
	if err != nil {
		t.Fatal(err)
	}
	// Scans at 10000, 12000, ..., 18000.
	for ts := int64(10000); ts <= 18000; ts += 2000 {
		scanAt(s, ts, nil)
	}
	scanAt(s, 20000, func() {
		for _, c := range []struct {
			ts, slot int64
			err      error
		}{
			{11500, 12000, nil},   // late: the scan after it
			{12000, 12000, nil},   // exactly a scan's time: that scan
			{19999, 20000, nil},   // the open scan
			{20000, 20000, nil},   // the open scan, the last value wins
			{20001, 0, ErrFuture}, // the next scan's
			{10000, 10000, nil},   // the first scan
			{-1, 0, ErrTooOld},    // more than MaxSlot (10000 ms) before the first scan ever
			{14500, 16000, nil},   // late, another chunk period than 12000 (8-scan chunks: same here)
			{11600, 12000, nil},   // the same slot as 11500: the last wins
			{5000, 10000, nil},    // within MaxSlot of the first scan
			{7001, 10000, nil},    // the same slot: the last call wins
			{20000, 20000, nil},   // again
		} {
			slot, err := s.AddAt(id, c.ts, math.Float64bits(float64(c.ts)))
			if !errors.Is(err, c.err) || err == nil && slot != c.slot {
				t.Errorf("AddAt(%d) = %d, %v; want %d, %v", c.ts, slot, err, c.slot, c.err)
			}
		}
	})
	pts := rangeAll(s, id, 0, math.MaxInt64)
	want := []Point{{10000, math.Float64bits(7001)}, {12000, math.Float64bits(11600)}, {16000, math.Float64bits(14500)}, {20000, math.Float64bits(20000)}}
	if !slices.Equal(pts, want) {
		t.Errorf("points %v; want %v", pts, want)
	}
	if st := s.Stats(); st.Points != int64(len(want)) {
		t.Errorf("Stats.Points = %d; want %d", st.Points, len(want))
	}
}

func TestAddAtTooOldAfterSegmentClosed(t *testing.T) {
	s := New(Options{BlockScans: 4, Interval: 2 * time.Second})
	id, _ := s.Series(`{"metric":"x"}`, series.Level)
	for ts := int64(2000); ts <= 8000; ts += 2000 { // closes the first segment
		scanAt(s, ts, nil)
	}
	if from := s.BackfillFrom(); from != 8000 {
		t.Errorf("BackfillFrom() = %d with an empty open segment; want 8000", from)
	}
	scanAt(s, 10000, func() {
		if _, err := s.AddAt(id, 7000, 1); !errors.Is(err, ErrTooOld) {
			t.Errorf("AddAt in a closed segment: %v; want ErrTooOld", err)
		}
		if slot, err := s.AddAt(id, 8500, 2); err != nil || slot != 10000 {
			t.Errorf("AddAt(8500) = %d, %v; want 10000 (the open scan)", slot, err)
		}
	})
	if from := s.BackfillFrom(); from != 8000 {
		t.Errorf("BackfillFrom() = %d; want 8000 (the last closed scan)", from)
	}
	// A gap in scanning: nothing between 10000 and 30000.
	scanAt(s, 30000, func() {
		if _, err := s.AddAt(id, 19000, 3); !errors.Is(err, ErrNoScan) {
			t.Errorf("AddAt in a gap of the scans: %v; want ErrNoScan", err)
		}
	})
	if pts := rangeAll(s, id, 0, math.MaxInt64); !slices.Equal(pts, []Point{{10000, 2}}) {
		t.Errorf("points %v; want [{10000 2}]", pts)
	}
}

// A series registered after the scan a late point is for still gets the point; one whose ID
// held another series then does not see that series' points.
func TestAddAtBeforeBirth(t *testing.T) {
	s := New(Options{BlockScans: 16, Interval: 2 * time.Second})
	old, _ := s.Series(`{"metric":"old"}`, series.Level)
	scanAt(s, 2000, func() { s.Add(old, 7) })
	scanAt(s, 4000, nil)
	s.Drop(old)
	var id ID
	scanAt(s, 6000, func() {
		var err error
		id, err = s.Series(`{"metric":"new"}`, series.Level)
		if err != nil {
			t.Fatal(err)
		}
		if id != old {
			t.Skipf("ID not reused (%d, %d): the case does not arise", id, old)
		}
		if _, err := s.AddAt(id, 1900, 1); err == nil {
			t.Errorf("AddAt over the earlier holder's point: no error")
		}
		if slot, err := s.AddAt(id, 3000, 2); err != nil || slot != 4000 {
			t.Errorf("AddAt(3000) = %d, %v; want 4000", slot, err)
		}
	})
	if pts := rangeAll(s, id, 0, math.MaxInt64); !slices.Equal(pts, []Point{{4000, 2}}) {
		t.Errorf("points %v; want [{4000 2}]", pts)
	}
}

// A Group that remembered its run of chunks must not write into a chunk a late point replaced.
func TestAddAtKeepsGroupsRight(t *testing.T) {
	s := New(Options{BlockScans: 16, Interval: 2 * time.Second})
	var ids []ID
	for _, k := range []string{`{"m":"a"}`, `{"m":"b"}`, `{"m":"c"}`} {
		id, _ := s.Series(k, series.Level)
		ids = append(ids, id)
	}
	var g Group
	g.SetIDs(ids)
	scanAt(s, 2000, func() { s.AddGroup(&g, []uint64{1, 2, 3}) })
	scanAt(s, 4000, func() {
		s.AddGroup(&g, []uint64{11, 12, 13})
		if _, err := s.AddAt(ids[1], 1500, 99); err != nil {
			t.Fatal(err)
		}
	})
	scanAt(s, 6000, func() { s.AddGroup(&g, []uint64{21, 22, 23}) })
	want := [][]Point{{{2000, 1}, {4000, 11}, {6000, 21}}, {{2000, 99}, {4000, 12}, {6000, 22}}, {{2000, 3}, {4000, 13}, {6000, 23}}}
	for i, id := range ids {
		if pts := rangeAll(s, id, 0, math.MaxInt64); !slices.Equal(pts, want[i]) {
			t.Errorf("series %d: %v; want %v", i, pts, want[i])
		}
	}
	// And the segment compresses what the readers saw.
	for ts := int64(8000); ts <= 40000; ts += 2000 {
		scanAt(s, ts, nil)
	}
	for i, id := range ids {
		if pts := rangeAll(s, id, 0, math.MaxInt64); !slices.Equal(pts, want[i]) {
			t.Errorf("series %d after the segment closed: %v; want %v", i, pts, want[i])
		}
	}
}

// Readers running while late points are written see every scan's points whole (run with -race).
func TestAddAtConcurrentReaders(t *testing.T) {
	s := New(Options{BlockScans: 32, Interval: 2 * time.Second})
	id, _ := s.Series(`{"metric":"x"}`, series.Counter)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				prev := int64(0)
				s.Range(id, 0, math.MaxInt64, func(ts int64, bits uint64) bool {
					if ts <= prev || bits != uint64(ts) {
						t.Errorf("point (%d, %d) after %d: want increasing times with value = time", ts, bits, prev)
						return false
					}
					prev = ts
					return true
				})
				s.Latest(id)
			}
		}()
	}
	for k := int64(1); k <= 200; k++ {
		ts := k * 2000
		scanAt(s, ts, func() {
			if k%2 == 0 {
				// Every other scan's point arrives one scan late.
				if _, err := s.AddAt(id, ts-2000, uint64(ts-2000)); err != nil && !errors.Is(err, ErrTooOld) {
					t.Error(err)
				}
				s.Add(id, uint64(ts))
			}
		})
	}
	close(stop)
	wg.Wait()
}

// BenchmarkAddAt: 1000 series, one point each per scan, stored with Add (the open scan), with
// AddAt at the open scan's time, and with AddAt one scan late (copy-on-write of a chunk per
// series at Commit), side by side. One op is one point; Begin/Commit included.
func BenchmarkAddAt(b *testing.B) {
	const n = 1000
	for _, mode := range []string{"Add", "AddAt-now", "AddAt-late"} {
		b.Run(mode, func(b *testing.B) {
			s := New(Options{Interval: 2 * time.Second})
			ids := make([]ID, n)
			for i := range ids {
				ids[i], _ = s.Series(fmt.Sprintf(`{"m":"%d"}`, i), series.Float)
			}
			ts := int64(1_700_000_000_000)
			scanAt(s, ts, nil)
			b.ReportAllocs()
			cpu0 := cputime.Process()
			k := 0
			for b.Loop() {
				if k%n == 0 {
					if k > 0 {
						s.Commit()
					}
					ts += 2000
					s.Begin(ts)
				}
				id, v := ids[k%n], uint64(k)
				switch mode {
				case "Add":
					s.Add(id, v)
				case "AddAt-now":
					s.AddAt(id, ts, v)
				default:
					s.AddAt(id, ts-2000, v)
				}
				k++
			}
			s.Commit()
			b.ReportMetric(float64((cputime.Process()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/point")
		})
	}
}

// Late points, and the earlier birth they give a series, survive a save and a load (both
// snapshot formats).
func TestAddAtSurvivesSnapshots(t *testing.T) {
	opt := Options{BlockScans: 8, Interval: 2 * time.Second}
	s := New(opt)
	id, _ := s.Series(`{"metric":"a"}`, series.Level)
	ts := int64(1_700_000_000_000)
	for k := range 12 { // one closed segment, 4 scans in the open one
		scanAt(s, ts+int64(k)*2000, func() { s.Add(id, uint64(k)) })
	}
	var late ID
	scanAt(s, ts+12*2000, func() {
		late, _ = s.Series(`{"metric":"late"}`, series.Level) // born now, with a point 2 scans back
		if _, err := s.AddAt(late, ts+10*2000-1, 77); err != nil {
			t.Fatal(err)
		}
		if _, err := s.AddAt(id, ts+9*2000, 99); err != nil { // replaces the value of scan 9
			t.Fatal(err)
		}
	})
	want := func(s2 *Store, how string) {
		t.Helper()
		id2, _, _ := s2.Lookup(`{"metric":"late"}`)
		if pts := rangeAll(s2, id2, 0, math.MaxInt64); !slices.Equal(pts, []Point{{ts + 10*2000, 77}}) {
			t.Errorf("%s: late series %v; want [{%d 77}]", how, pts, ts+10*2000)
		}
		ida, _, _ := s2.Lookup(`{"metric":"a"}`)
		pts := rangeAll(s2, ida, ts+9*2000, ts+9*2000)
		if !slices.Equal(pts, []Point{{ts + 9*2000, 99}}) {
			t.Errorf("%s: a at scan 9: %v; want 99", how, pts)
		}
	}
	want(s, "in memory")
	dir := t.TempDir()
	if _, err := NewSaver(dir, s).Save(); err != nil {
		t.Fatal(err)
	}
	opt.Now = nowAt(ts + 13*2000)
	s2, _, err := LoadDir(dir, "", opt)
	if err != nil {
		t.Fatal(err)
	}
	want(s2, "LoadDir")
}

// A birth moved earlier by a late point after the series was saved reaches the snapshot's
// series log.
func TestAddAtBornLogged(t *testing.T) {
	opt := Options{BlockScans: 16, Interval: 2 * time.Second}
	s := New(opt)
	ts := int64(1_700_000_000_000)
	dir := t.TempDir()
	sv := NewSaver(dir, s)
	scanAt(s, ts, nil)
	scanAt(s, ts+2000, nil)
	var id ID
	scanAt(s, ts+4000, func() { id, _ = s.Series(`{"metric":"x"}`, series.Float) })
	if _, err := sv.Save(); err != nil {
		t.Fatal(err)
	}
	scanAt(s, ts+6000, func() {
		if slot, err := s.AddAt(id, ts+1500, math.Float64bits(1.5)); err != nil || slot != ts+2000 {
			t.Fatalf("AddAt = %d, %v", slot, err)
		}
	})
	if _, err := sv.Save(); err != nil {
		t.Fatal(err)
	}
	opt.Now = nowAt(ts + 8000)
	s2, _, err := LoadDir(dir, "", opt)
	if err != nil {
		t.Fatal(err)
	}
	id2, _, _ := s2.Lookup(`{"metric":"x"}`)
	if pts := rangeAll(s2, id2, 0, math.MaxInt64); !slices.Equal(pts, []Point{{ts + 2000, math.Float64bits(1.5)}}) {
		t.Errorf("after load: %v; want the late point at %d", pts, ts+2000)
	}
}
