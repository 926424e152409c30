// Package registry is the agent's table of live series: the series.Sink that every scan is written
// into, backed by the history store, and the read side that queries, exports and subscriptions
// use.
//
// Concurrency: exactly one goroutine (the scanner) calls Begin, the Sink methods, PutBatch and
// Commit. Readers (View and what it leads to: Each, EachLive, Select, EachLatest, Handle's
// Labels, Live, Latest) may run on any goroutine at any time; they never block the scanner for
// longer than it takes to swap a pointer, and the scanner's per-point work (Put, PutBatch)
// takes no lock and no atomic operation: what readers learn of a scan's writes (Handle.Live,
// View.Live) is published with the View at Commit. A series.Batch given to PutBatch is the
// collector's, used by one scan at a time.
//
// Queries find their series with View.Select (index.go): the series of the metric names a
// selector allows that may have a point in the window (or are live), so that a query costs
// what it selects, not the hundred thousand dead processes' series a churned machine keeps for
// the hour. The index is kept by the scanner with the series table and read without a lock.
//
// Pushed series (those labelled source="push", which internal/ingest gives every series pushed
// to the agent and no collector gives its own) are kept in a budget of their own: the series
// limit (SetMaxSeries) counts and evicts only collected series, and SetMaxPushed bounds the
// pushed ones apart, so that no flood of pushed series can make the registry drop a machine,
// process or application series. A pushed point carries its own time: PutAt stores it at the
// scan that time falls in (a late one into the history's open segment), and Hold keeps a pushed
// series listed in a scan without a point of it (pushed.go).
//
// Files: registry.go is the table of series (Registry, its entries, adding and removing a
// series); write.go the scanner's write path (Begin, the Sink methods, PutBatch, Commit);
// limits.go the series limits and what is dropped for them or for age; view.go the read view
// (View, Handle, publishing); index.go the read index behind View.Select; pushed.go the pushed
// series' points and budget.
package registry

import (
	"hash/maphash"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/series"
)

// PushLabel and PushValue make the label that marks a pushed series: source="push"
// (series.SourceLabel, series.SourcePush).
const (
	PushLabel = series.SourceLabel
	PushValue = series.SourcePush
)

// pushedOverhead is what a pushed series costs in SetMaxPushed's byte budget beyond its key.
const pushedOverhead = 256

// pushedCost is what a pushed series with key key costs in the byte budget.
func pushedCost(key string) int64 { return int64(len(key)) + pushedOverhead }

// Registry maps series to history and keeps what history does not: states, problems and the
// scan clock.
type Registry struct {
	hist      *history.Store
	retention time.Duration
	log       *slog.Logger

	// Scanner-owned. A series' numeric key is found through the history (Lookup, then slotOf),
	// a state's in stateKeys: the registry keeps no map of its own keyed by the hundreds of
	// thousands of keys of dead processes' series.
	count      int                     // series in the table
	slotOf     []int32                 // by history ID: the series' slot, -1: none
	stateKeys  map[string]int32        // the slots of the State series, by key
	slots      []atomic.Pointer[entry] // by Ref.ID; nil slots are free. Shared with the published Views
	hot        []hotSlot               // by Ref.ID: what Put needs, without going through the entry
	lastTS     []int64                 // by Ref.ID: ts of the scan that last wrote it; 0: never
	class      []uint8                 // by Ref.ID: what the limits evict from (classCollected, classPushed); 0 for none (free, collected state)
	liveBits   []uint64                // bit i: slot i written by this scan; published with the View
	batchIDs   []history.ID            // PutBatch's scratch
	batchBits  []uint64                // PutBatch's scratch
	nslots     int                     // slots in use (free ones included)
	coldCursor int                     // next slot sweepCold looks at
	maxSeries  int                     // collected series; 0: no limit
	maxPushed  int                     // pushed series; 0: no limit
	maxPushedB int64                   // bytes of pushed series (pushedCost); 0: no limit
	pushed     int                     // pushed series held
	pushedB    int64                   // their cost
	// The history of pushed series in the byte budget (pushed.go): points put in the open
	// segment, the blocks of the segment closing, and those of closed segments not expired.
	pushedOpen  int64
	closing     int64
	closedSeen  int64
	pushedSegs  []pushedSegment
	pushedSegsB int64
	pushedFull  atomic.Bool
	evicted     int64 // series dropped by the limits, in all
	evictedP    int64 // pushed series dropped by their limits, in all
	evictedNow  int   // series dropped by the limits in this scan
	free        []int32
	evictTS     []int64 // evict's scratch
	entries     []entry // the entries not yet handed out by newEntry
	added       int     // series added in this scan
	removed     int     // series removed in this scan
	changes     uint64  // series added or removed since New (View.Changes)
	live        int     // series written in this scan
	scanTS      int64
	probs       []Problem
	logged      map[Problem]int64 // problems already logged, with the scan they were last seen in

	// The read index (index.go). newest is shared with the Views, like slots.
	names      map[string]*postings // by metric name
	nameTree   *nameTree            // the same, ordered
	nameTab    *nameTree            // the clone of nameTree last published
	namesDirty bool                 // names came or went since nameTab
	slotGen    []uint32             // by slot: generation of its latest entry
	newest     []atomic.Int64       // by slot: no point of the series is later than newest+newestStep (index.go)
	pidHash    []atomic.Uint32      // by slot: hash of its pid label (index.go); shared with the Views
	seed       maphash.Seed         // of pidHash

	// Published for readers after each Commit.
	view atomic.Pointer[View]

	subsMu sync.Mutex
	subs   map[chan<- *View]struct{}
}

// entry is a series as readers see it. key, kind, hid and pushed never change; the entry is
// dropped (never reused) when the series is forgotten.
type entry struct {
	key     string
	kind    series.Kind
	pushed  bool // labelled source="push"
	hid     history.ID
	gen     uint32                        // the slot's generation when the entry was made (index.go)
	post    *postings                     // the postings list of its metric name
	labels  atomic.Value                  // series.Labels, the linked Ref's; a nil map while the series is cold (see sweepCold)
	stateTS atomic.Int64                  // states only: ts of the scan that last wrote it
	state   atomic.Pointer[series.Sample] // states only: latest text and since
}

// New returns a Registry writing into hist. Series already in hist (loaded from a snapshot) are
// known from the start.
// States, which have no history, are forgotten when not seen for retention.
func New(hist *history.Store, retention time.Duration, log *slog.Logger) *Registry {
	r := &Registry{
		hist:      hist,
		retention: retention,
		log:       log,
		stateKeys: map[string]int32{},
		logged:    map[Problem]int64{},
		subs:      map[chan<- *View]struct{}{},
		names:     map[string]*postings{},
		nameTree:  newNameTree(),
		seed:      maphash.MakeSeed(),
	}
	hist.OnClose(r.closedBlock)
	r.closedSeen = hist.Closed()
	hist.Each(func(id history.ID, key string, kind series.Kind) bool {
		labels, err := series.ParseKey(key)
		if err != nil {
			log.Warn("history holds a series with an unreadable key", "key", key, "err", err)
			return true
		}
		slot := r.add(key, kind, id, labels, nil) // cold until a collector writes it
		r.markNewest(slot, hist.Newest(id))
		return true
	})
	r.publish()
	return r
}

// History returns the store behind the registry.
func (r *Registry) History() *history.Store { return r.hist }

// add gives a new series a slot and an entry, linked to ref when it is not nil; labels are the
// series' (ref's when linked). It returns the slot.
func (r *Registry) add(key string, kind series.Kind, hid history.ID, labels series.Labels, ref *series.Ref) int32 {
	e := r.newEntry()
	e.key, e.kind, e.hid = key, kind, hid
	if ref != nil && labels != nil {
		e.labels.Store(labels)
	}
	if labels[PushLabel] == PushValue {
		e.pushed = true
		r.pushed++
		r.pushedB += pushedCost(key)
	}
	var slot int32
	if n := len(r.free); n > 0 {
		slot = r.free[n-1]
		r.free = r.free[:n-1]
	} else {
		if r.nslots == len(r.slots) {
			// Grow into a new array: Views published before keep the old one.
			slots := make([]atomic.Pointer[entry], max(1024, 2*len(r.slots)))
			newest := make([]atomic.Int64, len(slots))
			pidHash := make([]atomic.Uint32, len(slots))
			for i := range r.slots {
				slots[i].Store(r.slots[i].Load())
				newest[i].Store(r.newest[i].Load())
				pidHash[i].Store(r.pidHash[i].Load())
			}
			r.slots, r.newest, r.pidHash = slots, newest, pidHash
		}
		slot = int32(r.nslots)
		r.nslots++
		r.hot = append(r.hot, hotSlot{})
		r.lastTS = append(r.lastTS, 0)
		r.class = append(r.class, 0)
		r.slotGen = append(r.slotGen, 0)
		if n := (r.nslots + 63) >> 6; n > len(r.liveBits) {
			r.liveBits = append(r.liveBits, 0) // not published until Commit: grown in place
		}
	}
	r.hot[slot] = hotSlot{ref: ref, hid: hid}
	if ref != nil {
		ref.ID = slot
	}
	r.lastTS[slot] = 0
	r.newest[slot].Store(0)
	switch {
	case e.pushed:
		r.class[slot] = classPushed
	case kind != series.State:
		r.class[slot] = classCollected
	default:
		r.class[slot] = 0
	}
	r.indexAdd(e, slot, labels) // before readers see e
	r.slots[slot].Store(e)
	if kind == series.State {
		r.stateKeys[key] = slot
	} else {
		for int(hid) >= len(r.slotOf) {
			r.slotOf = append(r.slotOf, -1)
		}
		r.slotOf[hid] = slot
	}
	r.count++
	r.added++
	return slot
}

// entrySlab is how many entries the registry allocates at once (see newEntry).
const entrySlab = 64

// newEntry returns a zero entry from the registry's current slab. An entry is not its own heap
// object: under process churn hundreds of thousands of them (the series of dead processes, kept
// until the series limit or the hour drops them) would each cost the collector an object to
// mark at every cycle. An entry is never reused (readers may hold one), so a slab stays in
// memory while any of its entries does: at most entrySlab × 72 bytes for one long-lived series
// registered amid short-lived ones.
func (r *Registry) newEntry() *entry {
	if len(r.entries) == 0 {
		r.entries = make([]entry, entrySlab)
	}
	e := &r.entries[0]
	r.entries = r.entries[1:]
	return e
}

// find returns the slot of the series with key (-1: none) and, when the key is known (to the
// registry or the history), its kind.
func (r *Registry) find(key string) (slot int32, kind series.Kind, known bool) {
	if id, k, ok := r.hist.Lookup(key); ok {
		if int(id) < len(r.slotOf) && r.slotOf[id] >= 0 {
			return r.slotOf[id], k, true
		}
		return -1, k, true // in the history only (its key did not parse at New)
	}
	if slot, ok := r.stateKeys[key]; ok {
		return slot, series.State, true
	}
	return -1, 0, false
}

// remove forgets the series of slot; its linked Ref, if any, is left without a slot.
func (r *Registry) remove(slot int32) {
	e := r.slots[slot].Load()
	if e == nil {
		return
	}
	if e.pushed {
		r.pushed--
		r.pushedB -= pushedCost(e.key)
	}
	if e.kind == series.State {
		delete(r.stateKeys, e.key)
	} else if int(e.hid) < len(r.slotOf) && r.slotOf[e.hid] == slot {
		r.slotOf[e.hid] = -1
	}
	if ref := r.hot[slot].ref; ref != nil {
		ref.ID = -1
	}
	r.slots[slot].Store(nil)
	r.indexRemove(e)
	r.hot[slot] = hotSlot{}
	r.class[slot] = 0
	r.free = append(r.free, slot)
	r.count--
	r.removed++
}
