package registry

import (
	"fmt"

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
// scan. A point for the open scan makes the series live in it, as Put does. Scanner goroutine
// only.
func (r *Registry) PutAt(ref *series.Ref, tsMs int64, bits uint64) (int64, error) {
	if ref.Kind == series.State {
		return 0, fmt.Errorf("registry: %s is a state: it has no history", ref.Key)
	}
	e := r.entry(ref)
	if e == nil {
		return 0, fmt.Errorf("registry: %s cannot be registered", ref.Key)
	}
	slot, err := r.hist.AddAt(e.hid, tsMs, bits)
	if err != nil {
		return 0, err
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
