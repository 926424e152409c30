package registry

import (
	"errors"
	"fmt"

	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/series"
)

// Pushed points (see internal/ingest). A pushed point carries its own time: PutAt stores it
// once, at the scan of the history's open segment that its time falls in (history.Store.AddAt),
// never again at later scans. Hold keeps a pushed series listed (Handle.Live) in a scan that
// has no point of it, so that /api/v1/metrics and the exports show it, with the time of its
// last point (its age), for as long as the pusher holds it. Scanner goroutine only, like Put.

// ScanTime returns the unix-ms time of the scan begun by Begin. Scanner goroutine only.
func (r *Registry) ScanTime() int64 { return r.scanTS }

// PutAt records bits as the value of ref at the scan that tsMs (unix ms) falls in: the open
// scan or a committed one of the history's open segment (see history.Store.AddAt for the
// rule and the errors: history.ErrFuture, ErrTooOld, ErrNoScan). It returns the time of that
// scan. A point for the open scan makes the series live in it, as Put does. A pushed series'
// point is refused with ErrPushedFull while PushedFull. Scanner goroutine only.
func (r *Registry) PutAt(ref *series.Ref, tsMs int64, bits uint64) (int64, error) {
	if ref.Kind == series.State {
		return 0, fmt.Errorf("registry: %s is a state: it has no history", ref.Key)
	}
	e := r.entry(ref)
	if e == nil {
		return 0, fmt.Errorf("registry: %s cannot be registered", ref.Key)
	}
	if e.pushed && r.maxPushedB > 0 && r.pushedB+r.pushedHistoryBytes() >= r.maxPushedB {
		r.pushedFull.Store(true)
		return 0, ErrPushedFull
	}
	slot, err := r.hist.AddAt(e.hid, tsMs, bits)
	if err != nil {
		return 0, err
	}
	if e.pushed {
		r.pushedOpen++
	}
	if slot == r.scanTS {
		r.liveBits[ref.ID>>6] |= 1 << (ref.ID & 63)
	} else {
		r.markNewest(ref.ID, slot) // a late point: the index must not skip it (index.go)
	}
	return slot, nil
}

// Hold marks ref as live in the open scan without a point: readers list it with its latest
// point. For the limits (SetMaxSeries, SetMaxPushed) a held series counts as written by the
// scan. Scanner goroutine only.
func (r *Registry) Hold(ref *series.Ref) {
	if e := r.entry(ref); e != nil {
		r.liveBits[ref.ID>>6] |= 1 << (ref.ID & 63)
	}
}

// BackfillFrom returns the time (unix ms) after which PutAt can still place a point: older
// points are refused as too old for the history's open segment. Safe for concurrent use.
func (r *Registry) BackfillFrom() int64 { return r.hist.BackfillFrom() }

// The history of pushed series is charged to their byte budget (SetMaxPushed) as it is held
// (issue 31, N11): a pushed series' points stay in the history for the retention, whatever
// becomes of the series (evicted or expired, its points in closed segments stay until those
// expire), so at the series cap it held some 1.5 GB outside any budget. Points in the open
// segment cost stagingPointCost each (its uncompressed row: 8 bytes of value, 1 of presence,
// in chunks); at each close, the segment's blocks of pushed series are charged at their
// compressed size until the segment expires. When keys and history together reach the byte
// budget, PushedFull reports it, and the pusher (internal/ingest) refuses points until
// segments expire.

// ErrPushedFull is PutAt's error for a pushed point while the pushed series and their history
// fill the byte budget.
var ErrPushedFull = errors.New("pushed series and their history fill their byte budget")

// stagingPointCost is what a pushed point costs while its segment is open.
const stagingPointCost = 16

// pushedSegment is the compressed history of pushed series in one closed segment.
type pushedSegment struct {
	lastMs int64 // the segment's newest scan (at most)
	bytes  int64
}

// closedBlock is the history's OnClose hook: it adds the block of a pushed series to the
// segment being closed. Scanner goroutine.
func (r *Registry) closedBlock(hid history.ID, bytes int) {
	if int(hid) >= len(r.slotOf) {
		return
	}
	if slot := r.slotOf[hid]; slot >= 0 && r.class[slot] == classPushed {
		r.closing += int64(bytes)
	}
}

// settlePushedHistory moves the charge of a segment that closed from the open segment's
// points to its blocks, and drops the charge of segments that expired. Scanner goroutine,
// after the history's Commit and Expire.
func (r *Registry) settlePushedHistory() {
	if c := r.hist.Closed(); c != r.closedSeen {
		r.closedSeen = c
		r.pushedSegs = append(r.pushedSegs, pushedSegment{lastMs: r.scanTS, bytes: r.closing})
		r.pushedSegsB += r.closing
		r.closing, r.pushedOpen = 0, 0
	}
	if len(r.pushedSegs) > 0 {
		oldest := r.hist.Stats().OldestMs
		k := 0
		for k < len(r.pushedSegs) && (oldest == 0 || r.pushedSegs[k].lastMs < oldest) {
			r.pushedSegsB -= r.pushedSegs[k].bytes
			k++
		}
		r.pushedSegs = append(r.pushedSegs[:0], r.pushedSegs[k:]...)
	}
	r.pushedFull.Store(r.maxPushedB > 0 && r.pushedB+r.pushedHistoryBytes() >= r.maxPushedB)
}

// pushedHistoryBytes is what the history of pushed series costs in the byte budget now.
func (r *Registry) pushedHistoryBytes() int64 {
	return r.pushedSegsB + r.pushedOpen*stagingPointCost
}

// PushedFull reports whether the pushed series and their history fill SetMaxPushed's byte
// budget: new pushed points should be refused until segments expire. Safe for concurrent use.
func (r *Registry) PushedFull() bool { return r.pushedFull.Load() }
