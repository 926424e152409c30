package registry

import (
	"cmp"
	"hash/maphash"
	mathbits "math/bits"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/btree"

	"github.com/cantal-go/cantal/internal/selector"
	"github.com/cantal-go/cantal/internal/series"
)

// The read index: what makes a query's cost follow the series it selects that are alive in its
// window, not every series the registry keeps. Under process churn the registry keeps, for the
// whole history retention, the series of every process that ran (a hundred thousand of them
// beside a thousand or two live ones); a query that visited each of them, parsing the labels of
// the cold ones back from their keys, took hundreds of milliseconds for one series.
//
//   - By metric name: every series is listed under its metric label's value ("" for none) in a
//     postings list, kept with the series table by the scanner (add appends, remove leaves a
//     stale entry that the list's next growth drops, or a compaction once stale entries
//     outnumber live ones twice). A selector whose metric matchers allow a finite set of names
//     (metric="x", a bare name, metric=~"a|b") reads only those names' lists; one with another
//     metric matcher (metric=~"cgroup\\..*") tests the matchers on the distinct names from the
//     regexp's literal prefix on, not on the series. A selector with no metric matcher visits every
//     slot, but reads no labels before the time test below and, when it allows a finite set
//     of pids (the process page's {pid="42"}), a test of pidHash, the hash of each slot's pid
//     label (a word per slot, pointer-free: the scanner keeps no object per process for it);
//     it tests a cold series on its key without parsing it (selector.MatchKey).
//   - By time: newest (by slot) is a time such that no point of the series is later than
//     newest + newestStep: the scan that wrote it, at most every newestStep (the scanner
//     writes tens of thousands of series a scan on a busy machine; an atomic store for each,
//     at every scan, would cost it a millisecond), and exactly the scan a late pushed point
//     went to or the history's newest point for a series loaded from a snapshot. A series
//     whose newest + newestStep is before the window has no point in it and is skipped
//     without reading its entry's labels; one that died up to newestStep before the window
//     is a candidate for nothing (its points are read and there are none).
//
// Concurrency: the scanner alone changes the index, readers read it at any time without a lock.
// A postings list's entries live in an array that is appended to in place (an entry is written
// before the count that publishes it) and replaced whole, never rewritten, when it is full, so
// a reader sees a prefix of a valid array. An entry names a slot and the slot's generation at
// registration (gen): a reader takes it only while the slot still holds an entry of that
// generation, so a stale entry (its series forgotten, the slot perhaps reused under another
// name) is never taken, and no series is taken twice. newest is an array of atomics shared
// with the Views, like the slots: a View published before it grew keeps the old array, whose
// values stopped at the growth, which came after the View's scan.

// postings lists the series of one metric name.
type postings struct {
	name string
	arr  atomic.Pointer[postArr]
	// Scanner-owned.
	n     int // series listed (valid entries)
	stale int // entries of forgotten series still in arr
}

// postArr is a postings list's array: e[:n] are published entries, slot<<32 | gen.
type postArr struct {
	e []uint64
	n atomic.Int32
}

// nameTree orders postings lists by name. The scanner keeps one (nameTree) besides its map,
// and publishes with a View a lazy copy-on-write clone of it (btree.BTreeG.Clone: O(1); the
// scanner's next changes copy the O(log n) nodes they touch): a View's names are immutable
// without copying every name at every scan where one came or went (a pusher of ever new metric
// names would make that a copy of a hundred thousand names a scan). google/btree, already in
// the module's graph, documents a clone and its original as safe to use concurrently.
type nameTree = btree.BTreeG[*postings]

func newNameTree() *nameTree {
	return btree.NewG(32, func(a, b *postings) bool { return a.name < b.name })
}

func postEntry(slot int32, gen uint32) uint64 { return uint64(uint32(slot))<<32 | uint64(gen) }

// indexAdd lists e, which has just been given slot, under its metric name. Scanner only.
func (r *Registry) indexAdd(e *entry, slot int32, labels series.Labels) {
	name := labels[selector.MetricLabel]
	p := r.names[name]
	if p == nil {
		p = &postings{name: name}
		p.arr.Store(&postArr{e: make([]uint64, 4)})
		r.names[name] = p
		r.nameTree.ReplaceOrInsert(p)
		r.namesDirty = true
	}
	r.slotGen[slot]++
	e.gen, e.post = r.slotGen[slot], p
	r.pidHash[slot].Store(pidHash(r.seed, labels[PIDLabel]))
	p.n++
	a := p.arr.Load()
	n := int(a.n.Load())
	if n == len(a.e) {
		a = r.compact(p, max(8, 2*p.n))
		n = int(a.n.Load())
	}
	a.e[n] = postEntry(slot, e.gen)
	a.n.Store(int32(n + 1))
}

// indexRemove takes e, whose slot has just been emptied, off its postings list: its entry
// goes stale, and the list goes when it has no series left. Scanner only.
func (r *Registry) indexRemove(e *entry) {
	p := e.post
	if p == nil {
		return
	}
	p.n--
	p.stale++
	if p.n == 0 {
		delete(r.names, p.name)
		r.nameTree.Delete(p)
		r.namesDirty = true
		return
	}
	if p.stale > 64 && p.stale > 2*p.n {
		r.compact(p, 2*p.n) // bound the stale entries a reader skips (and the memory)
	}
}

// compact publishes a new array of capacity size for p holding its valid entries, and returns
// it. Scanner only.
func (r *Registry) compact(p *postings, size int) *postArr {
	old := p.arr.Load()
	a := &postArr{e: make([]uint64, max(size, p.n))}
	k := 0
	for _, x := range old.e[:old.n.Load()] {
		if e := r.slots[int32(x>>32)].Load(); e != nil && e.post == p && e.gen == uint32(x) {
			a.e[k] = x
			k++
		}
	}
	a.n.Store(int32(k))
	p.stale = 0
	p.arr.Store(a)
	return a
}

// publishedNames returns the names to publish: the previous clone unless names came or went.
func (r *Registry) publishedNames() *nameTree {
	if r.namesDirty || r.nameTab == nil {
		r.nameTab, r.namesDirty = r.nameTree.Clone(), false
	}
	return r.nameTab
}

// newestStep is how far behind a series' last write its newest may be (see the read index).
const newestStep = 30 * time.Second

// PIDLabel is the label of a process's series that the read index keeps a hash of.
const PIDLabel = "pid"

// pidHash is the hash of a pid label's value ("" for none) in the pidHash column.
func pidHash(seed maphash.Seed, pid string) uint32 { return uint32(maphash.String(seed, pid)) }

// markNewest records that series of slot may have a point at tsMs. Scanner only.
func (r *Registry) markNewest(slot int32, tsMs int64) {
	if c := &r.newest[slot]; c.Load() < tsMs {
		c.Store(tsMs)
	}
}

// Select calls fn, in slot order (the order of Each), for every series of the view that sel
// selects and that may have a point at or after fromMs (with live, instead: that was written
// by the view's scan, Handle.Live), until fn returns false. A series whose every point is
// before fromMs - newestStep is not passed; one passed may have no point in the window. Its cost follows the series of the names sel allows that are alive after
// fromMs, not the series kept (see the read index above); a selector without a metric matcher
// costs a test of a word per slot besides. Like Each, it may or may not see a series
// registered or forgotten after the view was published. Safe for concurrent use.
func (v *View) Select(sel *selector.Selector, fromMs int64, live bool, fn func(h Handle) bool) {
	alive := func(slot int32) bool {
		if live {
			w := int(slot) >> 6
			return w < len(v.live) && v.live[w]&(1<<(slot&63)) != 0
		}
		return int(slot) < len(v.newest) && v.newest[slot].Load() >= fromMs-newestStep.Milliseconds()
	}
	// When sel allows a few pids (the process page's {pid="42"}), the hash of a slot's pid
	// rules out most series before their entry is read.
	var pids []uint32
	if vals, ok := sel.Values(PIDLabel); ok && len(v.pidHash) >= len(v.slots) {
		pids = make([]uint32, 0, len(vals))
		for _, p := range vals {
			pids = append(pids, pidHash(v.seed, p))
		}
	}
	if v.names == nil || !sel.Constrains(selector.MetricLabel) {
		// No list to read: a test of the series' time (or live bit) and pid before its labels.
		for i := range v.slots {
			if pids != nil && !slices.Contains(pids, v.pidHash[i].Load()) || !alive(int32(i)) {
				continue
			}
			e := v.slots[i].Load()
			if e == nil || !e.matches(sel) {
				continue
			}
			if !fn(Handle{e: e, live: v.live, slot: int32(i)}) {
				return
			}
		}
		return
	}
	var lists []*postings
	if names, ok := sel.MetricNames(); ok {
		key := &postings{}
		for _, n := range names {
			key.name = n
			if p, ok := v.names.Get(key); ok {
				lists = append(lists, p)
			}
		}
	} else {
		// Only the names from the selector's literal prefix on (cgroup. for cgroup\..*).
		prefix := sel.Prefix(selector.MetricLabel)
		v.names.AscendGreaterOrEqual(&postings{name: prefix}, func(p *postings) bool {
			if !strings.HasPrefix(p.name, prefix) {
				return false
			}
			if sel.MatchValue(selector.MetricLabel, p.name) {
				lists = append(lists, p)
			}
			return true
		})
	}
	var cands []Handle
	for _, p := range lists {
		a := p.arr.Load()
		for _, x := range a.e[:a.n.Load()] {
			slot := int32(x >> 32)
			if int(slot) >= len(v.slots) || !alive(slot) || pids != nil && !slices.Contains(pids, v.pidHash[slot].Load()) {
				continue
			}
			if e := v.slots[slot].Load(); e != nil && e.post == p && e.gen == uint32(x) {
				cands = append(cands, Handle{e: e, live: v.live, slot: slot})
			}
		}
	}
	slices.SortFunc(cands, func(a, b Handle) int { return cmp.Compare(a.slot, b.slot) })
	// A slot reused under another name while the lists were read may be in two of them, with
	// its old series and its new one: pass one, as Each would.
	cands = slices.CompactFunc(cands, func(a, b Handle) bool { return a.slot == b.slot })
	// The lists' names satisfy sel's metric matchers: a selector with no other needs no labels.
	whole := !sel.Only(selector.MetricLabel)
	for _, h := range cands {
		if whole && !h.e.matches(sel) {
			continue
		}
		if !fn(h) {
			return
		}
	}
}

// matches reports whether sel selects e: from its labels while it has them, else from its key
// (selector.MatchKey: no map parsed for a cold series), parsing the key only when MatchKey
// cannot read it.
func (e *entry) matches(sel *selector.Selector) bool {
	if l, _ := e.labels.Load().(series.Labels); l != nil {
		return sel.Match(l)
	}
	if m, ok := sel.MatchKey(e.key); ok {
		return m
	}
	return sel.Match(e.Labels())
}

// EachLive calls fn for every series written by the view's scan (Handle.Live), in slot order,
// until fn returns false: a walk of the view's live bits, however many series are kept.
func (v *View) EachLive(fn func(h Handle) bool) {
	for w, word := range v.live {
		for ; word != 0; word &= word - 1 {
			slot := int32(w<<6 + mathbits.TrailingZeros64(word))
			if int(slot) >= len(v.slots) {
				return
			}
			e := v.slots[slot].Load()
			if e == nil {
				continue
			}
			if !fn(Handle{e: e, live: v.live, slot: slot}) {
				return
			}
		}
	}
}
