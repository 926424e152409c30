package promstore

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/registry"
	"github.com/cantal-go/cantal/internal/series"
)

// The index: which series carry each Prometheus label pair (__name__="node_load1",
// job="x"), so that a selector with an equality matcher, or a set of alternatives
// (__name__=~"a|b"), or any matcher on __name__, reads only the series it may select rather
// than naming and testing every series held. A Prometheus name is not a function of the Cantal
// metric name alone (promname: the kind, a textfile's own names, rules that look at other
// labels), so the index is of the named series themselves.
//
// The index is kept in place across versions of a Versioned catalog (for the registry: a
// version is the count of series registered or forgotten). Series are indexed by their slot
// in the catalog (the registry's slot), in a table of atomic pointers shared by every version;
// a query that finds the version changed brings the index up to date, once for all the
// queries waiting on it: it compares each slot's series with the one it holds (a load and a
// comparison per slot, no naming, no map), stores the series that changed into their slots
// and rebuilds only the position lists of the label values they carry (under process churn:
// a few names among hundreds, instead of every list of every series at every scan). Each
// version's lists are immutable once published (copy on write of the lists that changed);
// the slots are not: a query still reading an older version's lists may find a slot's series
// replaced or gone. That is safe because every candidate is tested against every matcher on
// the series the slot holds when read, and a query's candidate list never holds a slot twice:
// a query sees a series registered or forgotten meanwhile, or not, as the registry's View.Each
// does.

// Versioned is a Catalog whose listing changes only when Version does, and whose series each
// keep one slot while listed.
type Versioned interface {
	// Version returns the version of the catalog's listing (any comparable value) and about
	// how many slots it has (a sizing hint).
	Version() (any, int)
	// EachSlot calls fn for every series listed (whatever its time) with its slot, a small
	// non-negative number that no other series listed at once has, until fn returns false.
	EachSlot(fn func(slot int32, e Entry) bool)
}

// Version is the registry's count of series registered or forgotten (registry.View.Changes).
func (c registryCatalog) Version() (any, int) {
	v := c.r.View()
	if v == nil {
		return nil, 0
	}
	return v.Changes, v.Len()
}

// EachSlot lists the latest View's series (states left out) by registry slot.
func (c registryCatalog) EachSlot(fn func(slot int32, e Entry) bool) {
	v := c.r.View()
	if v == nil {
		return
	}
	v.Each(func(h registry.Handle) bool {
		if h.Kind() == series.State {
			return true
		}
		return fn(h.Slot(), Entry{Key: h.Key(), Kind: h.Kind(), ID: h.HistoryID(), h: h, hasH: true})
	})
}

// index is the named series of one version of a catalog.
type index struct {
	version any
	// slots[i] is the series in slot i (nil: none), shared with the versions before and after
	// this one (see above).
	slots []atomic.Pointer[ientry]
	// names[value] lists the slots of the series named value, ascending.
	names map[string][]int32
	// post[label] is the same for the values of another label, made when a selector first
	// matches on it (most labels never are: building them all at every change of the series
	// cost five walks of every series), then kept up to date like names.
	mu   sync.Mutex
	post map[string]*postings
}

// postings lists, for each value of one label, the slots of the series with it.
type postings struct {
	once sync.Once
	vals map[string][]int32
}

// values returns the lists of label name, made on first use. Safe for concurrent use.
func (x *index) values(name string) map[string][]int32 {
	if name == labels.MetricName {
		return x.names
	}
	x.mu.Lock()
	p := x.post[name]
	if p == nil {
		p = &postings{}
		x.post[name] = p
	}
	x.mu.Unlock()
	p.once.Do(func() {
		p.vals = map[string][]int32{}
		for i := range x.slots {
			if ie := x.slots[i].Load(); ie != nil {
				labelValues(ie, name, func(v string) {
					if l := p.vals[v]; len(l) == 0 || l[len(l)-1] != int32(i) {
						p.vals[v] = append(l, int32(i))
					}
				})
			}
		}
	})
	return p.vals
}

// labelValues calls fn with the value of label name (__name__ included) of the series of ie
// and of its twin (see named), the empty value left out: a slot is listed under each.
func labelValues(ie *ientry, name string, fn func(string)) {
	for n := ie.n; n != nil && n.ok; n = n.twin {
		if v := n.lset.Get(name); v != "" {
			fn(v)
		}
	}
}

// at returns the series in slot i, or nil.
func (x *index) at(i int32) *ientry {
	if int(i) >= len(x.slots) {
		return nil
	}
	return x.slots[i].Load()
}

type ientry struct {
	n *named
	e Entry
}

// slotID is what identifies the series of a slot from one update to the next: the same key,
// kind and history ID are the same Prometheus identity and points.
type slotID struct {
	key  string
	id   history.ID
	kind series.Kind
	set  bool
}

// change is one slot whose series changed between two versions.
type change struct {
	slot     int32
	old, new *ientry // nil: none
}

// updateIndex returns the index of version ver, made from old (nil: none yet) by the changes
// of the catalog since. The caller holds s.idxMu.
func (s *Storage) updateIndex(vc Versioned, old *index, ver any, size int) *index {
	x := &index{version: ver, post: map[string]*postings{}}
	if old != nil {
		x.slots = old.slots
	}
	if cap(x.slots) < size {
		// Grown: the old versions keep the old table (they may miss what changes after).
		grown := make([]atomic.Pointer[ientry], len(x.slots), size+size/4)
		for i := range x.slots {
			grown[i].Store(x.slots[i].Load())
		}
		x.slots = grown
	}
	var changes []change
	// What each slot held at the last update, in a dense table of the updater's own (under
	// s.idxMu): the comparison of a slot's series reads it and the catalog's entry, not the
	// index's entry besides.
	held := s.idxHeld
	seen := make([]bool, len(x.slots)) // slots listed by the catalog
	vc.EachSlot(func(slot int32, e Entry) bool {
		if int(slot) >= len(x.slots) {
			if int(slot) >= cap(x.slots) {
				grown := make([]atomic.Pointer[ientry], int(slot)+1, 2*int(slot)+16)
				for i := range x.slots {
					grown[i].Store(x.slots[i].Load())
				}
				x.slots = grown
			}
			x.slots = x.slots[:slot+1]
		}
		if int(slot) >= len(seen) {
			seen = append(seen, make([]bool, int(slot)+1-len(seen))...)
		}
		if int(slot) >= len(held) {
			held = append(held, make([]slotID, int(slot)+1-len(held))...)
		}
		seen[slot] = true
		if h := &held[slot]; h.key == e.Key && h.kind == e.Kind && h.id == e.ID && h.set {
			return true
		}
		held[slot] = slotID{key: e.Key, kind: e.Kind, id: e.ID, set: true}
		cur := x.slots[slot].Load()
		ne := &ientry{n: s.name(e), e: e}
		x.slots[slot].Store(ne)
		changes = append(changes, change{slot: slot, old: cur, new: ne})
		return true
	})
	for i := range x.slots {
		if !seen[i] {
			if i < len(held) {
				held[i] = slotID{}
			}
			if cur := x.slots[i].Load(); cur != nil {
				x.slots[i].Store(nil)
				changes = append(changes, change{slot: int32(i), old: cur})
			}
		}
	}
	s.idxHeld = held
	s.idxChanged.Add(int64(len(changes)))
	names := func(ie *ientry, fn func(string)) { labelValues(ie, labels.MetricName, fn) }
	if old == nil {
		x.names = patch(nil, changes, names)
		return x
	}
	x.names = patch(old.names, changes, names)
	old.mu.Lock()
	built := make([]string, 0, len(old.post))
	for name := range old.post {
		built = append(built, name)
	}
	old.mu.Unlock()
	for _, name := range built {
		p := &postings{vals: patch(old.values(name), changes, func(ie *ientry, fn func(string)) { labelValues(ie, name, fn) })}
		p.once.Do(func() {}) // made
		x.post[name] = p
	}
	return x
}

// patch returns the lists of m (a label's values to ascending slots; nil: none) after
// changes, values giving the label's values of a slot's series (see labelValues). Lists that
// did not change are shared with m, the others made anew: m is not modified.
func patch(m map[string][]int32, changes []change, values func(*ientry, func(string))) map[string][]int32 {
	out := make(map[string][]int32, len(m))
	for v, l := range m {
		out[v] = l
	}
	gone := map[string][]int32{}
	came := map[string][]int32{}
	for _, c := range changes {
		if c.old != nil {
			values(c.old, func(v string) { gone[v] = append(gone[v], c.slot) })
		}
		if c.new != nil {
			values(c.new, func(v string) { came[v] = append(came[v], c.slot) })
		}
	}
	touched := func(v string) {
		l := make([]int32, 0, len(out[v])+len(came[v]))
		rm := gone[v] // sorted
		for _, i := range out[v] {
			if _, found := slices.BinarySearch(rm, i); !found {
				l = append(l, i)
			}
		}
		l = append(l, came[v]...)
		slices.Sort(l)
		l = slices.Compact(l)
		if len(l) == 0 {
			delete(out, v)
		} else {
			out[v] = l
		}
	}
	for v, rm := range gone {
		slices.Sort(rm)
		gone[v] = rm
	}
	for v := range gone {
		touched(v)
	}
	for v := range came {
		if _, done := gone[v]; !done {
			touched(v)
		}
	}
	return out
}

// currentIndex returns the index of the catalog's current version, bringing the last one up
// to date when stale, or nil when the catalog is not Versioned.
func (s *Storage) currentIndex() *index {
	vc, ok := s.cat.(Versioned)
	if !ok {
		return nil
	}
	ver, size := vc.Version()
	if x := s.idx.Load(); x != nil && x.version == ver {
		return x
	}
	s.idxMu.Lock()
	defer s.idxMu.Unlock()
	old := s.idx.Load()
	if old != nil && old.version == ver {
		return old
	}
	x := s.updateIndex(vc, old, ver, size)
	s.idx.Store(x)
	s.idxBuilds.Add(1)
	return x
}

// candidates returns the slots of the series that may match ms, ascending: the shortest of
// the lists the matchers allow, or nil and false when no matcher narrows the search (every
// series must be tested).
func (x *index) candidates(ms []*labels.Matcher) ([]int32, bool) {
	var best []int32
	found := false
	take := func(l []int32) {
		if !found || len(l) < len(best) {
			best, found = l, true
		}
	}
	for _, m := range ms {
		if m.Matches("") {
			continue // a series without the label matches: no list holds them all
		}
		vals := x.values(m.Name)
		switch {
		case m.Type == labels.MatchEqual:
			take(vals[m.Value])
		case m.Type == labels.MatchRegexp && len(m.SetMatches()) > 0:
			var lists [][]int32
			for _, v := range m.SetMatches() {
				if l := vals[v]; len(l) > 0 {
					lists = append(lists, l)
				}
			}
			take(union(lists))
		case m.Name == labels.MetricName:
			// Few names: test each name once rather than each series.
			var lists [][]int32
			for v, l := range vals {
				if m.Matches(v) {
					lists = append(lists, l)
				}
			}
			take(union(lists))
		}
		if found && len(best) == 0 {
			break
		}
	}
	return best, found
}

// union merges ascending lists into one, ascending, without repeats.
func union(lists [][]int32) []int32 {
	switch len(lists) {
	case 0:
		return []int32{}
	case 1:
		return lists[0]
	}
	n := 0
	for _, l := range lists {
		n += len(l)
	}
	out := make([]int32, 0, n)
	for _, l := range lists {
		out = append(out, l...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}
