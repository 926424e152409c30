// Package registry is the agent's table of live series: the series.Sink that every scan is written
// into, backed by the history store, and the read side that queries, exports and subscriptions
// use.
//
// Concurrency: exactly one goroutine (the scanner) calls Begin, the Sink methods, PutBatch and
// Commit. Readers (View and what it leads to: Handle's Labels, Live, Latest) may run on any
// goroutine at any time; they never block the scanner for longer than it takes to swap a
// pointer, and the scanner's per-point work (Put, PutBatch) takes no lock and no atomic
// operation: what readers learn of a scan's writes (Handle.Live, View.Live) is published with
// the View at Commit.
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
package registry

import (
	"cmp"
	"fmt"
	"hash/maphash"
	"log/slog"
	mathbits "math/bits"
	"slices"
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
	batches    map[**series.Ref]*batch // PutBatch's slots of the Refs, by the caller's array
	scans      int64                   // scans begun
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

// hotSlot is the scanner's copy of what writing a point to a slot needs: a dense array of them,
// indexed by Ref.ID, makes Put a lookup in an array that is walked in order (a collector's
// series have consecutive IDs) instead of a pointer chase to the entry. A point costs that
// lookup, the history's and a bit set in liveBits; the rest of the bookkeeping (the time of the
// last write, the live count, labels of a series that had gone cold) is done at Commit, for the
// slots whose bit is set, in one pass in slot order. Scanner-owned.
//
// A slot is linked to at most one Ref (ref, whose ID is the slot): the one its collector writes
// through. A series not written for coldAfter is unlinked (its Ref's ID set to -1, its labels
// dropped from the entry): the collector of a dead process lets its Refs go, and then nothing
// holds its labels; a Ref written again is linked again (attach), its labels with it.
type hotSlot struct {
	ref *series.Ref // the slot's linked Ref; nil when the slot is free or the series cold
	hid history.ID
}

// batch is what PutBatch remembers of an array of Refs it was given: their slots, so that a
// later call with the same Refs finds them without reading the Refs themselves (a cache miss
// each, in the agent, where a scan's system calls and file reads evict them between two scans
// of an application), and their history IDs as a history.Group. A remembered slot is used only
// while it still holds the same Ref.
type batch struct {
	slots []int32 // by index in the array: the Ref's slot when last seen, -1 for none
	// group holds the history IDs of the Refs, in order, when every Ref of the array is a
	// numeric series with a slot (then the array is written with AddGroup); it is empty
	// otherwise.
	group history.Group
	used  int64 // the scan that last used it
}

// batchIdle is how many scans PutBatch remembers an array of Refs that it is not given.
const batchIdle = 16

// The classes of slots for the series limits: evict walks the whole table and reads only these
// (a byte per slot, not the entry each: hundreds of thousands of cache misses under churn).
const (
	classCollected uint8 = 1 // a collected numeric series
	classPushed    uint8 = 2 // a pushed series, of any kind
)

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
		batches:   map[**series.Ref]*batch{},
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

// link makes ref the Ref of slot, which holds its series: the Ref linked before, if another,
// is unlinked; the entry gets ref's labels back if the series had gone cold.
func (r *Registry) link(slot int32, ref *series.Ref) {
	if old := r.hot[slot].ref; old != nil && old != ref {
		old.ID = -1
	}
	r.hot[slot].ref = ref
	ref.ID = slot
	if e := r.slots[slot].Load(); ref.Labels != nil {
		if l, _ := e.labels.Load().(series.Labels); l == nil {
			e.labels.Store(ref.Labels)
		}
	}
}

// Begin starts a scan taken at tsMs (unix ms).
func (r *Registry) Begin(tsMs int64) {
	if tsMs <= r.scanTS {
		tsMs = r.scanTS + 1 // scans are ordered even if the clock steps back (as history does)
	}
	r.scanTS = tsMs
	r.scans++
	clear(r.liveBits) // a scan begun again without a commit starts over
	r.probs = r.probs[:0:0]
	r.hist.Begin(tsMs)
}

// Series implements series.Sink.
func (r *Registry) Series(labels series.Labels, kind series.Kind) *series.Ref {
	key := labels.Key()
	slot, cur, known := r.find(key)
	if known && cur != kind {
		// The same labels now carry another kind (an application changed a metric's type).
		// The old series keeps its key until its history expires; the new values are
		// refused meanwhile, and the status says why.
		r.Problem(key, fmt.Sprintf("series changed kind from %s to %s; new values dropped until the old history expires", cur, kind))
		return &series.Ref{Labels: labels, Key: key, Kind: kind, ID: -1}
	}
	if slot >= 0 {
		if ref := r.hot[slot].ref; ref != nil {
			return ref
		}
	}
	ref := &series.Ref{Labels: labels, Key: key, Kind: kind, ID: -1}
	if slot >= 0 {
		r.link(slot, ref)
	} else {
		r.register(ref, known)
	}
	return ref
}

// attach links a Ref without a slot to its series' entry, registering the series when new. It
// fails (nil) when the key is taken by a series of another kind, in the registry or in the
// history.
func (r *Registry) attach(ref *series.Ref) *entry {
	slot, cur, known := r.find(ref.Key)
	if known && cur != ref.Kind {
		return nil
	}
	if slot >= 0 {
		r.link(slot, ref)
		return r.slots[slot].Load()
	}
	return r.register(ref, known)
}

// register gives ref's series, which has no slot, a slot linked to ref, registering it in the
// history unless inHistory (the key is there already). It fails (nil) when the history refuses
// the series.
func (r *Registry) register(ref *series.Ref, inHistory bool) *entry {
	var hid history.ID
	if ref.Kind != series.State {
		var id history.ID
		var err error
		if inHistory {
			id, err = r.hist.Series(ref.Key, ref.Kind)
		} else {
			id, err = r.hist.Register(ref.Key, ref.Kind) // the key was just looked up: not there
		}
		if err != nil {
			r.Problem(ref.Key, err.Error())
			return nil
		}
		hid = id
	}
	return r.slots[r.add(ref.Key, ref.Kind, hid, ref.Labels, ref)].Load()
}

// entry returns ref's entry. Invariant: ref.ID >= 0 exactly when hot[ref.ID].ref == ref. A Ref
// whose series went cold or expired while its collector still held it is attached again.
func (r *Registry) entry(ref *series.Ref) *entry {
	if ref.ID >= 0 {
		return r.slots[ref.ID].Load()
	}
	return r.attach(ref)
}

// Put implements series.Sink.
func (r *Registry) Put(ref *series.Ref, bits uint64) {
	id := ref.ID
	if id < 0 || ref.Kind == series.State {
		r.putSlow(ref, bits)
		return
	}
	r.hist.Add(r.hot[id].hid, bits)
	r.liveBits[id>>6] |= 1 << (id & 63)
}

// putSlow is Put for a Ref without a slot (it is attached again) or of a State (ignored).
func (r *Registry) putSlow(ref *series.Ref, bits uint64) {
	e := r.entry(ref)
	if e == nil || ref.Kind == series.State {
		return
	}
	r.hist.Add(e.hid, bits)
	r.liveBits[ref.ID>>6] |= 1 << (ref.ID & 63)
}

// PutBatch is Put(refs[i], bits[i]) for every i, in a tight loop: a collector that has the
// values of a group of series at once (an application's values file) calls it once per group
// and scan. bits must be at least as long as refs. State Refs are skipped, as Put skips them.
// Scanner goroutine only, like Put.
//
// PutBatch remembers the slots of the Refs of an array it is given (by the address of its first
// element), so that the next scans with the same array find every series without reading its
// Ref: a collector should keep the array between scans and pass it whole. An array whose
// content changed is fine (each remembered slot is checked to hold the same Ref); one not given
// for batchIdle scans is forgotten. An array of numeric series only, all registered, is the
// fastest: its points go to the history as a history.Group.
func (r *Registry) PutBatch(refs []*series.Ref, bits []uint64) {
	if len(refs) == 0 {
		return
	}
	bits = bits[:len(refs)]
	b := r.batches[&refs[0]]
	if b == nil {
		b = &batch{}
		r.batches[&refs[0]] = b
	}
	b.used = r.scans
	hot, live := r.hot, r.liveBits
	if len(b.group.IDs()) == len(refs) && len(b.slots) == len(refs) {
		// The common case: check that every remembered slot still holds its Ref.
		ok := true
		for i, ref := range refs {
			id := b.slots[i]
			if uint(id) >= uint(len(hot)) || hot[id].ref != ref {
				ok = false
				break
			}
			live[id>>6] |= 1 << (id & 63)
		}
		if ok {
			r.hist.AddGroup(&b.group, bits)
			return
		}
	}
	r.putBatchSlow(b, refs, bits)
}

// putBatchSlow is PutBatch when b does not hold refs as a Group: it finds each Ref's slot
// (reading the Ref when the remembered slot does not hold it), and makes b's Group when all
// are numeric and registered.
func (r *Registry) putBatchSlow(b *batch, refs []*series.Ref, bits []uint64) {
	if len(b.slots) != len(refs) {
		b.slots = slices.Grow(b.slots[:0], len(refs))[:len(refs)]
		for i := range b.slots {
			b.slots[i] = -1
		}
	}
	slots := b.slots[:len(refs)]
	ids, vals := r.batchIDs[:0], r.batchBits[:0]
	hot, live := r.hot, r.liveBits
	whole := true // every Ref has a numeric slot
	for i, ref := range refs {
		id := slots[i]
		if uint(id) >= uint(len(hot)) || hot[id].ref != ref {
			// Not remembered (first call, or the Ref was re-attached): read the Ref.
			id = ref.ID
			if id < 0 || ref.Kind == series.State {
				if len(ids) > 0 { // keep the order of the points: a series may come twice
					r.hist.AddBatch(ids, vals)
					ids, vals = ids[:0], vals[:0]
				}
				r.putSlow(ref, bits[i])
				hot, live = r.hot, r.liveBits // putSlow may have added a slot
				slots[i] = -1
				whole = false
				continue
			}
			slots[i] = id
		}
		ids = append(ids, hot[id].hid)
		vals = append(vals, bits[i])
		live[id>>6] |= 1 << (id & 63)
	}
	if whole {
		b.group.SetIDs(ids)
		r.hist.AddGroup(&b.group, bits)
	} else {
		b.group.SetIDs(nil)
		r.hist.AddBatch(ids, vals)
	}
	r.batchIDs, r.batchBits = ids[:0], vals[:0]
}

// sweepBatches forgets the arrays of Refs that PutBatch was not given for batchIdle scans.
func (r *Registry) sweepBatches() {
	if r.scans%batchIdle != 0 {
		return
	}
	for k, b := range r.batches {
		if r.scans-b.used >= batchIdle {
			delete(r.batches, k)
		}
	}
}

// markWritten ends the bookkeeping of the scan's writes: every slot written by the scan (its
// bit set in liveBits) gets the scan's time as its last write; it returns their number. (A
// written slot is linked, so its entry has its labels: see link.)
func (r *Registry) markWritten() int {
	n := 0
	for w, word := range r.liveBits {
		n += mathbits.OnesCount64(word)
		for ; word != 0; word &= word - 1 {
			slot := w<<6 + mathbits.TrailingZeros64(word)
			r.lastTS[slot] = r.scanTS
			if c := &r.newest[slot]; r.scanTS-c.Load() >= newestStep.Milliseconds() {
				c.Store(r.scanTS) // a load, not a store, at most scans (index.go)
			}
		}
	}
	return n
}

// PutState implements series.Sink.
func (r *Registry) PutState(ref *series.Ref, sinceMs int64, text string) {
	e := r.entry(ref)
	if e == nil || ref.Kind != series.State {
		return
	}
	if old := e.state.Load(); old == nil || old.Since != sinceMs || old.Text != text {
		e.state.Store(&series.Sample{Labels: ref.Labels, Kind: series.State, Since: sinceMs, Text: text})
	}
	if e.stateTS.Load() != r.scanTS {
		e.stateTS.Store(r.scanTS)
	}
	r.liveBits[ref.ID>>6] |= 1 << (ref.ID & 63)
}

// Problem implements series.Sink. Each distinct (source, reason) is logged when it first appears
// (and again if it comes back after having gone away).
func (r *Registry) Problem(source, reason string) {
	p := Problem{source, reason}
	r.probs = append(r.probs, p)
	if _, seen := r.logged[p]; !seen {
		r.log.Warn("scan problem", "source", source, "reason", reason)
	}
	r.logged[p] = r.scanTS
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

// Commit ends the scan: the history gets its points, expired history is dropped, and readers
// and subscribers see the new View.
func (r *Registry) Commit() {
	r.hist.Commit()
	r.live = r.markWritten()
	r.hist.ExpireFunc(r.expired)
	r.settlePushedHistory()
	// States keep no history: forget one unseen for the retention period.
	horizon := r.scanTS - r.retention.Milliseconds()
	for _, slot := range r.stateKeys {
		if r.lastTS[slot] < horizon {
			r.remove(slot)
		}
	}
	r.sweepCold()
	r.enforceMax()
	r.sweepBatches()
	// Forget logged problems that did not recur, so a problem that comes back is logged again.
	for p, ts := range r.logged {
		if ts != r.scanTS {
			delete(r.logged, p)
		}
	}
	r.publish()
}

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

func (r *Registry) publish() {
	v := &View{TS: r.scanTS, Problems: r.probs, Added: r.added, Removed: r.removed, Live: r.live,
		Evicted: r.evicted, EvictedNow: r.evictedNow, EvictedPushed: r.evictedP, Pushed: r.pushed, PushedBytes: r.pushedB + r.pushedHistoryBytes()}
	r.added, r.removed, r.live, r.evictedNow = 0, 0, 0, 0
	// The View shares the slots: publishing costs nothing per series, however many there are.
	v.slots, v.n = r.slots[:r.nslots], r.count
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
