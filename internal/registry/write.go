package registry

import (
	"fmt"
	mathbits "math/bits"
	"slices"

	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/series"
)

// The write path: the scanner's side of the registry (Begin, the series.Sink methods, PutBatch,
// Commit). Everything here runs on the scanner goroutine only (see the package doc); what
// readers learn of it is published with the View at Commit (view.go).

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

// batch is what PutBatch keeps in a series.Batch it was given (its Sink field): the slots of
// its Refs, so that a later call with the same Batch finds them without reading the Refs
// themselves (a cache miss each, in the agent, where a scan's system calls and file reads evict
// them between two scans of an application), and their history IDs as a history.Group. A
// remembered slot is used only while it still holds the same Ref (so a Batch given to another
// registry, whose slots hold other Refs, has them looked up again). It lives as long as the
// collector keeps the Batch: the registry holds no table of them.
type batch struct {
	slots []int32 // by index in Refs: the Ref's slot when last seen, -1 for none
	// group holds the history IDs of the Refs, in order, when every Ref is a numeric series
	// with a slot (then the Batch is written with AddGroup); it is empty otherwise.
	group history.Group
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

// PutBatch is Put(sb.Refs[i], bits[i]) for every i, in a tight loop: a collector that has the
// values of a group of series at once (an application's values file) calls it once per group
// and scan. bits must be at least as long as sb.Refs. State Refs are skipped, as Put skips
// them. Scanner goroutine only, like Put.
//
// PutBatch remembers in sb the slots of its Refs, so that the next scans with the same Batch
// find every series without reading its Ref: a collector should keep the Batch between scans.
// Refs whose content changed are fine (each remembered slot is checked to hold the same Ref).
// A Batch of numeric series only, all registered, is the fastest: its points go to the history
// as a history.Group.
func (r *Registry) PutBatch(sb *series.Batch, bits []uint64) {
	refs := sb.Refs
	if len(refs) == 0 {
		return
	}
	bits = bits[:len(refs)]
	b, _ := sb.Sink.(*batch)
	if b == nil {
		b = &batch{}
		sb.Sink = b
	}
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
	// Forget logged problems that did not recur, so a problem that comes back is logged again.
	for p, ts := range r.logged {
		if ts != r.scanTS {
			delete(r.logged, p)
		}
	}
	r.publish()
}
