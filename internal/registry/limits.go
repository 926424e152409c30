package registry

import (
	"cmp"
	"slices"
	"time"

	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/series"
)

// Limits and eviction: the series limits (SetMaxSeries, SetMaxPushed) and what Commit drops for
// them or for age (expired history, cold labels). Scanner goroutine only.

// The classes of slots for the series limits: evict walks the whole table and reads only these
// (a byte per slot, not the entry each: hundreds of thousands of cache misses under churn).
const (
	classCollected uint8 = 1 // a collected numeric series
	classPushed    uint8 = 2 // a pushed series, of any kind
)

// SetMaxSeries bounds the number of collected series (those not labelled source="push") to n
// (0: no bound). Call it before the first scan.
//
// A series stays for the whole history retention after it was last written, so a machine where
// thousands of processes come and go every minute (each with its own per-process series) would
// otherwise hold millions of them. When a scan leaves more than n collected series, the registry
// drops the collected ones written longest ago, with their history, down to 95 % of n; series
// written by that scan are never dropped, so more than n live series are all kept. Pushed series
// neither count towards n nor are dropped for it (see SetMaxPushed). Each drop is counted
// (View.Evicted) and the first one is logged.
func (r *Registry) SetMaxSeries(n int) { r.maxSeries = max(n, 0) }

// SetMaxPushed bounds the pushed series (labelled source="push") to n series (0: no bound) and
// bytes bytes (0: no bound), each series costing its key plus 256 bytes, and their history
// what it holds (see PushedFull). Call it before the first scan.
//
// The pusher (internal/ingest) bounds the pushed series it holds at once; these bounds cover
// the pushed series the registry keeps after the pusher let them go (kept, like every series,
// for the history retention after their last point), so a pusher that keeps making new names
// cannot pile them up. When a scan leaves more, the pushed series written longest ago are
// dropped with their history down to 95 % of each bound, never one written by that scan, and
// never a collected series.
func (r *Registry) SetMaxPushed(n int, bytes int64) {
	r.maxPushed, r.maxPushedB = max(n, 0), max(bytes, 0)
}

// expired forgets the series whose history expired (history.Store.ExpireFunc).
func (r *Registry) expired(hid history.ID, _ string) {
	if int(hid) < len(r.slotOf) {
		if slot := r.slotOf[hid]; slot >= 0 {
			r.remove(slot)
		}
	}
}

func (r *Registry) enforceMax() {
	if collected := r.count - r.pushed; r.maxSeries > 0 && collected > r.maxSeries {
		r.evict(false, collected-r.maxSeries*95/100, 0)
	}
	overN := r.maxPushed > 0 && r.pushed > r.maxPushed
	overB := r.maxPushedB > 0 && r.pushedB > r.maxPushedB
	if overN || overB {
		var n int
		var b int64
		if overN {
			n = r.pushed - r.maxPushed*95/100
		}
		if overB {
			b = r.pushedB - r.maxPushedB*95/100
		}
		r.evict(true, n, b)
	}
}

// evict drops series of one class (pushed or collected) not written by this scan, those written
// longest ago first (of equal age, the lowest slot first), with their history, until wantN
// series and wantBytes bytes (pushedCost) are gone or no candidate is left. Collected states are
// never dropped (they have no history, and are forgotten after the retention); pushed ones are.
//
// Under process churn this runs every few scans over the whole table (hundreds of thousands of
// slots): a count alone is met without sorting, by finding the age of the wantN-th oldest
// candidate (evictCutoff) and dropping in slot order those older and enough of that age; only a
// byte budget sorts the candidates. Its scratch is kept between calls.
func (r *Registry) evict(pushed bool, wantN int, wantBytes int64) {
	class := classCollected
	if pushed {
		class = classPushed
	}
	isCand := func(i int) bool { return r.class[i] == class && r.lastTS[i] < r.scanTS }
	ages := r.evictTS[:0]
	for i := range r.nslots {
		if isCand(i) {
			ages = append(ages, r.lastTS[i])
		}
	}
	r.evictTS = ages[:0]
	if len(ages) == 0 {
		return
	}
	if pushed && r.evictedP == 0 {
		r.log.Warn("pushed series limit reached: dropping the pushed series written longest ago, with their history",
			"limit", r.maxPushed, "limit_bytes", r.maxPushedB, "pushed", r.pushed, "pushed_bytes", r.pushedB)
	} else if !pushed && r.evicted == r.evictedP {
		r.log.Warn("series limit reached: dropping the series written longest ago, with their history",
			"limit", r.maxSeries, "series", r.count-r.pushed, "dropping", min(wantN, len(ages)))
	}
	drop := func(slot int) {
		if e := r.slots[slot].Load(); e.kind != series.State {
			r.hist.Drop(e.hid)
		}
		r.remove(int32(slot))
		r.evicted++
		r.evictedNow++
		if pushed {
			r.evictedP++
		}
	}
	if wantBytes <= 0 {
		if wantN <= 0 {
			return
		}
		// Drop every candidate older than the wantN-th oldest's age, then, in slot order, as
		// many of that age as are still wanted.
		cut, older := evictCutoff(ages, wantN)
		sameAge := wantN - older
		for i := range r.nslots {
			if !isCand(i) {
				continue
			}
			switch ts := r.lastTS[i]; {
			case ts < cut:
				drop(i)
			case ts == cut && sameAge > 0:
				drop(i)
				sameAge--
			}
		}
		return
	}
	type cand struct {
		ts   int64
		slot int32
	}
	var cands []cand
	for i := range r.nslots {
		if isCand(i) {
			cands = append(cands, cand{r.lastTS[i], int32(i)})
		}
	}
	slices.SortFunc(cands, func(a, b cand) int { return cmp.Or(cmp.Compare(a.ts, b.ts), cmp.Compare(a.slot, b.slot)) })
	for _, c := range cands {
		if wantN <= 0 && wantBytes <= 0 {
			break
		}
		wantN--
		wantBytes -= pushedCost(r.slots[c.slot].Load().key)
		drop(int(c.slot))
	}
}

// evictCutoff returns the wantN-th smallest of ages (the largest when there are fewer) and how
// many of ages are smaller than it. It reorders ages (a quickselect: linear on average, however
// many there are).
func evictCutoff(ages []int64, wantN int) (cut int64, older int) {
	k := min(wantN, len(ages)) - 1 // the index the cut-off would have in sorted ages
	lo, hi := 0, len(ages)
	for hi-lo > 16 {
		// Three-way partition of ages[lo:hi] around the median of three.
		a, b, c := ages[lo], ages[lo+(hi-lo)/2], ages[hi-1]
		pivot := max(min(a, b), min(max(a, b), c))
		lt, i, gt := lo, lo, hi
		for i < gt {
			switch v := ages[i]; {
			case v < pivot:
				ages[lt], ages[i] = v, ages[lt]
				lt++
				i++
			case v > pivot:
				gt--
				ages[gt], ages[i] = v, ages[gt]
			default:
				i++
			}
		}
		switch {
		case k < lt:
			hi = lt
		case k >= gt:
			lo = gt
		default:
			cut = pivot
			for _, v := range ages {
				if v < cut {
					older++
				}
			}
			return cut, older
		}
	}
	slices.Sort(ages[lo:hi])
	cut = ages[k]
	for _, v := range ages {
		if v < cut {
			older++
		}
	}
	return cut, older
}

// coldAfter is how long a series goes unwritten before its labels are dropped from memory.
const coldAfter = 30 * time.Second

// sweepCold unlinks the series not written for coldAfter, a sixteenth of the table per scan:
// their Refs lose their slot (ID -1; a Ref written again is linked again) and their entries the
// labels. A dead process's series stay for the whole history retention (or until the series
// limit drops them); their labels, a map per series, would be most of what they cost outside
// the history, and the key holds the same information: Handle.Labels parses it for a cold
// series (readers match mostly live ones). The Refs themselves are not changed otherwise: their
// labels stay theirs, as series.Ref promises.
func (r *Registry) sweepCold() {
	n := max(1024, r.nslots/16)
	horizon := r.scanTS - coldAfter.Milliseconds()
	for ; n > 0; n-- {
		if r.coldCursor >= r.nslots {
			r.coldCursor = 0
			if r.nslots == 0 {
				return
			}
		}
		c := r.coldCursor
		r.coldCursor++
		e := r.slots[c].Load()
		if e == nil || e.kind == series.State || r.lastTS[c] >= horizon {
			continue
		}
		if ref := r.hot[c].ref; ref != nil {
			ref.ID = -1
			r.hot[c].ref = nil
		}
		if l, _ := e.labels.Load().(series.Labels); l != nil {
			e.labels.Store(series.Labels(nil))
		}
	}
}
