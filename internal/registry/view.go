package registry

import (
	"hash/maphash"
	"sync/atomic"

	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/selector"
	"github.com/cantal-go/cantal/internal/series"
)

// The read view: what readers see of a committed scan (View, Handle) and how it is published
// (publish, Subscribe). A View is immutable once published, except that its table of series is
// shared with the registry (View.Each); every method here is safe for concurrent use. The read
// index that View.Select walks is in index.go.

// Problem is one source that could not be read in a scan, and why.
type Problem struct {
	Source string `json:"source"`
	Reason string `json:"reason"`
}

// View is what readers see of one committed scan: the scan time, the series known after it,
// and the problems it met. A View does not change, except that its set of series is shared
// with the registry (see View.Each).
type View struct {
	TS       int64
	hist     *history.Store          // the registry's; see EachLatest
	slots    []atomic.Pointer[entry] // the registry's slots when published; see Each
	live     []uint64                // bit i: slot i was written by the view's scan; immutable
	newest   []atomic.Int64          // the registry's newest when published; see Select
	pidHash  []atomic.Uint32         // the registry's pidHash when published; see Select
	seed     maphash.Seed
	names    *nameTree // the metric names' postings lists, immutable; see Select
	n        int       // series in the registry when published
	Problems []Problem
	Added    int // series registered by the scan
	Removed  int // series forgotten by the scan
	Live     int // series written by the scan
	// Changes counts the series registered or forgotten since the registry was made, up to
	// this view: a reader that indexed an earlier view's series (internal/promstore) may keep
	// its index while Changes stays the same.
	Changes uint64
	// Evicted counts the series dropped since the start because the registry held more than
	// its limits (see SetMaxSeries and SetMaxPushed); EvictedNow those dropped by this scan;
	// EvictedPushed the pushed series among Evicted.
	Evicted       int64
	EvictedNow    int
	EvictedPushed int64
	// Pushed is the number of pushed series (labelled source="push") among the view's series,
	// and PushedBytes what they and their history cost in SetMaxPushed's byte budget.
	Pushed      int
	PushedBytes int64
}

func (r *Registry) publish() {
	v := &View{TS: r.scanTS, Problems: r.probs, Added: r.added, Removed: r.removed, Live: r.live,
		Evicted: r.evicted, EvictedNow: r.evictedNow, EvictedPushed: r.evictedP, Pushed: r.pushed, PushedBytes: r.pushedB + r.pushedHistoryBytes()}
	r.changes += uint64(r.added + r.removed)
	v.Changes = r.changes
	r.added, r.removed, r.live, r.evictedNow = 0, 0, 0, 0
	// The View shares the slots: publishing costs nothing per series, however many there are.
	v.slots, v.n, v.hist = r.slots[:r.nslots], r.count, r.hist
	v.newest, v.names = r.newest[:r.nslots], r.publishedNames()
	v.pidHash, v.seed = r.pidHash[:r.nslots], r.seed
	// The live bits go with the View, which never changes them; the next scan gets new ones
	// (one allocation of a bit per slot per scan).
	v.live = r.liveBits
	r.liveBits = make([]uint64, len(r.liveBits))
	r.view.Store(v)
	r.subsMu.Lock()
	for ch := range r.subs {
		select {
		case ch <- v:
		default: // a slow subscriber misses a view, never the scanner's time
		}
	}
	r.subsMu.Unlock()
}

// View returns the latest committed scan.
func (r *Registry) View() *View { return r.view.Load() }

// Subscribe makes ch receive each new View after a Commit; a send that would block is dropped.
// The returned function ends the subscription.
func (r *Registry) Subscribe(ch chan<- *View) (cancel func()) {
	r.subsMu.Lock()
	r.subs[ch] = struct{}{}
	r.subsMu.Unlock()
	return func() {
		r.subsMu.Lock()
		delete(r.subs, ch)
		r.subsMu.Unlock()
	}
}

// Len returns the number of series in the view.
func (v *View) Len() int { return v.n }

// Each calls fn for every series in the view, in no particular order, until fn returns false.
// The view shares the registry's table of series rather than copying it at every scan (which
// would cost a pointer per series per scan, hundreds of thousands under process churn): a series
// registered or forgotten by a later scan may or may not be seen.
func (v *View) Each(fn func(h Handle) bool) {
	for i := range v.slots {
		e := v.slots[i].Load()
		if e == nil {
			continue
		}
		if !fn(Handle{e: e, live: v.live, slot: int32(i)}) {
			return
		}
	}
}

// Handle is a reader's access to one series of a View.
type Handle struct {
	e    *entry
	live []uint64 // the view's live bits
	slot int32
}

// Slot returns the series' position in the registry's table: it keeps it while registered, and
// a later series may take it once this one is forgotten (a reader that indexes series by slot,
// internal/promstore, compares what a slot holds from one view to the next).
func (h Handle) Slot() int32 { return h.slot }

// Labels returns the series' labels; the caller must not modify them. For a series not written
// for a while (a dead process's) they are parsed from its key, which allocates.
func (h Handle) Labels() series.Labels { return h.e.Labels() }

func (e *entry) Labels() series.Labels {
	if l, _ := e.labels.Load().(series.Labels); l != nil {
		return l
	}
	l, err := series.ParseKey(e.key)
	if err != nil {
		return series.Labels{} // unreachable: keys are made by Labels.Key
	}
	return l
}

// Key returns the series' canonical key.
func (h Handle) Key() string { return h.e.key }

// Kind returns the series' kind.
func (h Handle) Kind() series.Kind { return h.e.kind }

// HistoryID returns the series' id in the history store; meaningless for states.
func (h Handle) HistoryID() history.ID { return h.e.hid }

// Live reports whether the series was written by the view's scan. (A series registered after
// the view was published, which Each may show in the slot of one that was forgotten meanwhile,
// is live when the slot's previous series was.)
func (h Handle) Live() bool {
	w := int(h.slot) >> 6
	return w < len(h.live) && h.live[w]&(1<<(h.slot&63)) != 0
}

// Latest returns the series' latest value, with the rate of a counter when its last two points
// are consecutive without a reset. ok is false for a series with no value yet.
func (h Handle) Latest(hist *history.Store, scratch []history.Point) (s series.Sample, ok bool) {
	s.Labels = h.e.Labels()
	s.Kind = h.e.kind
	if s.Kind == series.State {
		st := h.e.state.Load()
		if st == nil {
			return s, false
		}
		s.Text, s.Since, s.TS = st.Text, st.Since, h.e.stateTS.Load()
		return s, true
	}
	if s.Kind == series.Counter {
		pts := hist.Last(h.e.hid, 2, scratch[:0])
		if len(pts) == 0 {
			return s, false
		}
		last := pts[len(pts)-1]
		s.TS, s.Bits = last.TS, last.Bits
		if len(pts) == 2 {
			s.Rate, s.HasRate = history.Rate(pts[0], last)
		}
		return s, true
	}
	p, ok := hist.Latest(h.e.hid)
	s.TS, s.Bits = p.TS, p.Bits
	return s, ok
}

// EachLatest calls fn with the latest sample of every series written by the view's scan that
// sel selects (nil: every one) and visible accepts (nil: every one), in slot order, until fn
// returns false; a series with no value yet is skipped. It is the one loop behind the latest
// values that readers serve (the exports, the latest-values and cluster answers, WebSocket
// updates): it visits only the live series of the names sel allows (Select), or the view's
// live bits when sel is nil (EachLive), never every series kept. A counter's sample has its
// rate when its last two points allow one (Handle.Latest). Safe for concurrent use; fn must
// not modify s.Labels (the series' own).
func (v *View) EachLatest(sel *selector.Selector, visible func(series.Labels) bool, fn func(h Handle, s series.Sample) bool) {
	var scratch [2]history.Point
	each := func(h Handle) bool {
		if visible != nil && !visible(h.Labels()) {
			return true
		}
		s, ok := h.Latest(v.hist, scratch[:0])
		if !ok {
			return true
		}
		return fn(h, s)
	}
	if sel == nil {
		v.EachLive(each)
		return
	}
	v.Select(sel, 0, true, each)
}
