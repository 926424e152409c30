package history

import (
	"context"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/series"
)

// TestAddBatchMatchesAdd writes the same random scans into two stores, one value at a time with
// Add and in random batches with AddBatch, and checks that they hold the same points and
// statistics: unknown and deleted IDs, a value given twice in a scan, a scan begun again without
// a commit, adds outside a scan, segment closes and expiry with ID reuse included.
func TestAddBatchMatchesAdd(t *testing.T) {
	opt := Options{BlockScans: 16, Retention: 60 * time.Second}
	one, many := New(opt), New(opt)
	rng := rand.New(rand.NewPCG(7, 8))
	var ids []ID
	register := func(key string, kind series.Kind) {
		a, err1 := one.Series(key, kind)
		b, err2 := many.Series(key, kind)
		if err1 != nil || err2 != nil || a != b {
			t.Fatalf("Series(%s) = %d, %v and %d, %v; want the same ID", key, a, err1, b, err2)
		}
		ids = append(ids, a)
	}
	kinds := []series.Kind{series.Counter, series.Level, series.Float}
	for i := range 300 {
		register("s"+strconv.Itoa(i), kinds[i%3])
	}
	ts := int64(1_700_000_000_000)
	next := 300
	for scan := range 200 {
		ts += 1000
		if scan%37 == 5 { // adds outside a scan are dropped
			one.Add(ids[0], 1)
			many.AddBatch(ids[:1], []uint64{1})
		}
		one.Begin(ts)
		many.Begin(ts)
		if scan%23 == 3 { // a scan begun again without a commit forgets its values
			for _, id := range ids[:50] {
				one.Add(id, 99)
			}
			many.AddBatch(ids[:50], make([]uint64, 50))
			ts += 10
			one.Begin(ts)
			many.Begin(ts)
		}
		var bid []ID
		var bits []uint64
		flush := func() {
			many.AddBatch(bid, bits)
			bid, bits = bid[:0], bits[:0]
		}
		// Series come and go: a run of them is skipped for a while, so they expire.
		for i, id := range ids {
			if (i/40+scan/60)%5 == 0 && scan > 20 {
				continue
			}
			if rng.IntN(20) == 0 {
				continue // a gap
			}
			v := uint64(scan*1000 + i)
			if i%3 == 2 {
				v = math.Float64bits(float64(v) / 100)
			}
			add := func(id ID, v uint64) {
				one.Add(id, v)
				bid = append(bid, id)
				bits = append(bits, v)
				if rng.IntN(30) == 0 {
					flush()
				}
			}
			add(id, v)
			if rng.IntN(50) == 0 {
				add(id, v+1) // twice in a scan: the last value wins
			}
			if rng.IntN(200) == 0 {
				add(ID(MaxSeries+rng.IntN(5)), 1) // unknown
			}
		}
		flush()
		one.Commit()
		many.Commit()
		a, b := one.Expire(), many.Expire()
		if len(a) != len(b) {
			t.Fatalf("scan %d: Expire deleted %d and %d series", scan, len(a), len(b))
		}
		for range len(a) { // new series take the freed IDs
			register("s"+strconv.Itoa(next), kinds[next%3])
			next++
		}
	}
	if sa, sb := one.Stats(), many.Stats(); sa != sb {
		t.Fatalf("stats differ:\nAdd:      %+v\nAddBatch: %+v", sa, sb)
	}
	if one.Stats().DroppedAdds == 0 {
		t.Fatalf("no add was dropped; the test lost its unknown IDs")
	}
	one.Each(func(id ID, key string, kind series.Kind) bool {
		if id2, kind2, ok := many.Lookup(key); !ok || id2 != id || kind2 != kind {
			t.Fatalf("%s: Lookup = %d %v %v; want %d %v", key, id2, kind2, ok, id, kind)
		}
		return true
	})
	if _, n := diffPoints(t, one, many, "with Add", "with AddBatch", true); n == 0 {
		t.Fatal("no points compared")
	}
}

// TestAddBatchConcurrentReaders runs AddBatch flat out, with segment closes, while readers read
// every series; each value is a function of the series and the scan time, so a reader can check
// every point it sees. Run with -race: readers of the open segment read the chunk pages that
// AddBatch writes, without locks.
func TestAddBatchConcurrentReaders(t *testing.T) {
	s := New(Options{BlockScans: 16, Retention: time.Hour})
	const nser = 500
	ids := make([]ID, nser)
	for i := range ids {
		ids[i], _ = s.Series("s"+strconv.Itoa(i), series.Counter)
	}
	value := func(id ID, ts int64) uint64 { return uint64(id)*1_000_003 + uint64(ts) }
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var bad, checked atomic.Int64
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []Point
			for ctx.Err() == nil {
				for _, id := range ids {
					s.Range(id, math.MinInt64, math.MaxInt64, func(ts int64, bits uint64) bool {
						if bits != value(id, ts) {
							bad.Add(1)
						}
						checked.Add(1)
						return true
					})
					buf = s.Last(id, 3, buf[:0])
					for _, p := range buf {
						if p.Bits != value(id, p.TS) {
							bad.Add(1)
						}
					}
				}
			}
		}()
	}
	bits := make([]uint64, nser)
	ts := int64(1_700_000_000_000)
	for scan := 0; scan < 100 || checked.Load() == 0; scan++ {
		ts += 1000
		s.Begin(ts)
		for i, id := range ids {
			bits[i] = value(id, ts)
		}
		for lo := 0; lo < nser; lo += 100 {
			s.AddBatch(ids[lo:lo+100], bits[lo:lo+100])
		}
		s.Commit()
	}
	cancel()
	wg.Wait()
	if bad.Load() != 0 {
		t.Fatalf("readers saw %d wrong points of %d", bad.Load(), checked.Load())
	}
}

// TestAddGroupMatchesAdd writes the same scans into two stores, one value at a time with Add and
// by groups with AddGroup, and checks that they hold the same points and statistics. Groups
// come in a new order every scan and some skip scans; one holds an ID twice; one changes its
// series in the middle of a chunk period; series are dropped and their IDs reused; a scan is
// begun again without a commit; segments close.
func TestAddGroupMatchesAdd(t *testing.T) {
	opt := Options{BlockScans: 16, Retention: time.Hour}
	one, grp := New(opt), New(opt)
	const ngroups, per = 12, 20
	keyN := 0
	newID := func() ID {
		key := "s" + strconv.Itoa(keyN)
		keyN++
		a, err1 := one.Series(key, series.Counter)
		b, err2 := grp.Series(key, series.Counter)
		if err1 != nil || err2 != nil || a != b {
			t.Fatalf("Series(%s) = %d, %v and %d, %v; want the same ID", key, a, err1, b, err2)
		}
		return a
	}
	groups := make([]*Group, ngroups)
	for g := range groups {
		ids := make([]ID, per)
		for i := range ids {
			ids[i] = newID()
		}
		if g == 1 {
			ids[7] = ids[6] // an ID twice
		}
		groups[g] = &Group{}
		groups[g].SetIDs(ids)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	bits := make([]uint64, per)
	ts := int64(1_700_000_000_000)
	fast := 0
	for scan := range 100 {
		ts += 1000
		one.Begin(ts)
		grp.Begin(ts)
		if scan%29 == 7 { // values of a scan begun again are forgotten
			one.Add(groups[0].IDs()[0], 5)
			grp.AddGroup(groups[0], bits)
			ts += 10
			one.Begin(ts)
			grp.Begin(ts)
		}
		if scan%16 == 11 { // group 2 changes its series in the middle of a chunk period
			ids := append([]ID(nil), groups[2].IDs()...)
			ids[3], ids[4] = ids[4], ids[3]
			groups[2].SetIDs(ids)
		}
		for _, g := range rng.Perm(ngroups) {
			if g == 5 && scan%7 < 2 {
				continue // a gap
			}
			gr := groups[g]
			for i := range bits {
				bits[i] = uint64(scan*1000 + g*per + i)
			}
			for i, id := range gr.IDs() {
				one.Add(id, bits[i])
			}
			if gr.st == grp.w.st && gr.c0 >= 0 && gr.q == grp.w.j/chunkScans {
				fast++
			}
			grp.AddGroup(gr, bits)
		}
		one.Commit()
		grp.Commit()
		if scan%23 == 13 { // group 3's first series is dropped and its ID reused
			id := groups[3].IDs()[0]
			if !one.Drop(id) || !grp.Drop(id) {
				t.Fatalf("scan %d: Drop(%d) failed", scan, id)
			}
			if nid := newID(); nid != id {
				t.Fatalf("scan %d: the new series got ID %d; want the dropped %d", scan, nid, id)
			}
		}
	}
	if fast == 0 {
		t.Fatal("no AddGroup found its chunks by position; the test lost its point")
	}
	if sa, sb := one.Stats(), grp.Stats(); sa != sb {
		t.Fatalf("stats differ:\nAdd:      %+v\nAddGroup: %+v", sa, sb)
	}
	if _, n := diffPoints(t, one, grp, "with Add", "with AddGroup", true); n == 0 {
		t.Fatal("no points compared")
	}
}
