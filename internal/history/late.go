package history

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/cantal-go/cantal/internal/history/chunkenc"
)

// Points at their own time (pushed points).
//
// A pushed point carries its own timestamp. AddAt stores it once, at the scan of the open
// segment its time falls in: the first scan at or after it (scan j's slot is (ts[j-1], ts[j]]),
// provided that scan came at most MaxSlot after it. The point is stored at that scan's time
// (times are kept once per scan), so it moves forward by less than a scan interval. A point
// for a committed scan of the open segment (a late one) is written at Commit by copy-on-write:
// its chunk is copied, the copy gets the point, and the copy is published in place of the
// original with one atomic store, so a reader sees either chunk, whole, and never a scan
// change under it. Points older than the open segment are refused (ErrTooOld): closed
// segments are immutable.

// Errors of AddAt.
var (
	// ErrTooOld: the point's scan is in a closed segment (or before the first scan).
	ErrTooOld = errors.New("older than the open history segment")
	// ErrNoScan: no scan was taken within MaxSlot after the point (the agent was not scanning).
	ErrNoScan = errors.New("no scan was taken within one interval after its time")
	// ErrFuture: the point is after the open scan; it belongs to a later one.
	ErrFuture = errors.New("after the open scan")
)

// lateAdd is a point for a committed scan of the open segment, applied at Commit.
type lateAdd struct {
	id   ID
	j    int
	bits uint64
}

// MaxSlot returns how long after a point's time its scan may come for AddAt to place the point
// on it: 5 × Options.Interval. It bounds the distance between a point's own time and the scan
// it is stored at, not how far back from the newest scan a late point may land: that is any
// committed scan of the open segment, after BackfillFrom. A scan normally comes within one interval of any time; the
// margin keeps the points of a machine so loaded that its scans come late, and still refuses
// those of a time the agent was not running (a restart's gap).
func (s *Store) MaxSlot() int64 { return s.opt.Interval.Milliseconds() * 5 }

// AddAt records bits as the value of series id at the scan that tsMs (unix ms) falls in: the
// first scan of the open segment at or after tsMs, the open scan included. It returns that
// scan's time. A second value for the same series and scan replaces the first (the last call
// wins). Errors: ErrFuture when tsMs is after the open scan (the caller keeps the point for a
// later scan), ErrTooOld when the scan would be in a closed segment, ErrNoScan when the first
// scan after tsMs came more than MaxSlot after it; an unknown ID or a call outside Begin and
// Commit is an error too (counted in Stats.DroppedAdds). Writer goroutine only.
//
// A point for the open scan costs what Add costs. A point for an earlier scan is applied at
// Commit, copying its 8-scan chunk once per series and chunk per scan (see the comment at the
// top of late.go).
func (s *Store) AddAt(id ID, tsMs int64, bits uint64) (int64, error) {
	w := &s.w
	if !w.inScan || int(id) >= len(w.kinds) || w.kinds[id] == 0 {
		s.dropped.Add(1)
		return 0, fmt.Errorf("history: add at %d: series %d unknown or no scan open", tsMs, id)
	}
	if tsMs > w.ts {
		return 0, ErrFuture
	}
	st := w.st
	j := sort.Search(w.j+1, func(j int) bool { return st.ts[j] >= tsMs })
	// j ≤ w.j since ts[w.j] = w.ts ≥ tsMs.
	if j == 0 && tsMs <= s.prevSegmentLast() {
		return 0, ErrTooOld
	}
	if st.ts[j]-tsMs > s.MaxSlot() {
		if j == 0 && len(s.view.Load().segs) == 0 {
			return 0, ErrTooOld // before the first scan ever taken
		}
		return 0, ErrNoScan
	}
	if j == w.j {
		if st.set(id, j, bits) {
			w.adds++
		}
		return w.ts, nil
	}
	if err := s.lowerBorn(id, st.ts[j], j); err != nil {
		return 0, err
	}
	w.late = append(w.late, lateAdd{id, j, bits})
	return st.ts[j], nil
}

// prevSegmentLast returns the time of the newest scan of the closed segments, or MinInt64.
// Writer goroutine.
func (s *Store) prevSegmentLast() int64 {
	v := s.view.Load()
	if len(v.segs) == 0 {
		return math.MinInt64
	}
	return v.segs[len(v.segs)-1].last()
}

// lowerBorn makes the series id born no later than tsMs, the time of committed scan j of the
// open segment, so that a late point there is seen. An ID that held another series may keep
// that series' points in the open segment (readers filter them by birth): then a point before
// the current series' birth is refused. Writer goroutine only.
func (s *Store) lowerBorn(id ID, tsMs int64, j int) error {
	m := s.meta(id)
	if m == nil || m.born <= tsMs {
		return nil
	}
	st := s.w.st
	var vals [chunkenc.MaxScans]uint64
	var pres [chunkenc.MaxScans]uint8
	if st.row(id, s.w.j, &vals, &pres) {
		for k := j; k < s.w.j; k++ {
			if pres[k] != 0 && st.ts[k] < m.born {
				return fmt.Errorf("history: series %s: its ID held an earlier series at that time", m.key)
			}
		}
	}
	s.metas.Load().m[id].Store(&meta{key: m.key, kind: m.kind, born: tsMs})
	return nil
}

// BackfillFrom returns the time after which AddAt can place a point (unix ms, exclusive): the
// slot of the first scan of the open segment begins there. Points at or before it are refused
// with ErrTooOld. Before the first scan it returns MinInt64. Safe for concurrent use.
//
// A reader that streams history by position (an exporter resending from where it left off)
// and must not miss late points re-reads, for the series that may get them (pushed ones), the
// scans after BackfillFrom: a scan at or before it never changes again.
func (s *Store) BackfillFrom() int64 {
	v := s.acquire()
	defer s.release(v)
	prev := int64(math.MinInt64)
	if len(v.segs) > 0 {
		prev = v.segs[len(v.segs)-1].last()
	}
	if n := v.open.n.Load(); n > 0 {
		return max(prev, v.open.ts[0]-s.MaxSlot()-1)
	}
	return prev
}

// applyLate writes the late points of the scan being committed into the open staging. Each
// chunk that gets points is copied, changed and published in place of the original. Writer
// goroutine only, before the scan is published.
func (s *Store) applyLate() {
	w := &s.w
	late := w.late
	if len(late) == 0 {
		return
	}
	st := w.st
	// Group by series and chunk, keeping the order of the calls within a group (the last wins).
	slices.SortStableFunc(late, func(a, b lateAdd) int {
		if a.id != b.id {
			return int(a.id) - int(b.id)
		}
		return a.j/chunkScans - b.j/chunkScans
	})
	for i := 0; i < len(late); {
		id, q := late[i].id, late[i].j/chunkScans
		k := i
		for k < len(late) && late[k].id == id && late[k].j/chunkScans == q {
			k++
		}
		if w.kinds[id] != 0 { // not dropped meanwhile
			w.adds += st.setLate(id, q, late[i:k])
		}
		i = k
	}
	clear(late)
	w.late = late[:0]
}

// setLate writes the points of pts (all of series id and chunk period q, for committed scans)
// into a copy of the series' chunk q and publishes the copy. It returns the number of new
// points. Writer only.
func (st *staging) setLate(id ID, q int, pts []lateAdd) int {
	st.slotOf.ensure(int(id) + 1)
	sp := st.slotOf.wget(int(id))
	slot := int(sp.Load()) - 1
	if slot < 0 {
		slot = len(st.ids)
		st.ids = append(st.ids, id)
		st.chunkOf.ensure((slot + 1) * st.cpr)
		sp.Store(int32(slot + 1)) // a slot without chunks: readers find no point in it
	}
	cp := st.chunkOf.wget(slot*st.cpr + q)
	c := st.nchunks
	st.nchunks++
	st.chunks.ensure(st.nchunks)
	ch := st.chunks.wget(c)
	if old := int(cp.Load()) - 1; old >= 0 {
		*ch = *st.chunks.wget(old)
	} else {
		*ch = chunk{}
	}
	adds := 0
	for _, p := range pts {
		k := p.j % chunkScans
		ch.vals[k] = p.bits
		if ch.pres[k] == 0 {
			ch.pres[k] = 1
			adds++
		}
	}
	cp.Store(int32(c + 1)) // publish the copy: readers see the old chunk or this one, whole
	if q == st.curQ && int(id) < len(st.cur) {
		st.cur[id] = int32(c + 1)
	}
	st.moved++ // a Group's run of chunks may have lost one
	return adds
}
