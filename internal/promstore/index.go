package promstore

import (
	"slices"
	"sync"

	"github.com/prometheus/prometheus/model/labels"
)

// The index: which series carry each Prometheus label pair (__name__="node_load1",
// job="x"), so that a selector with an equality matcher, or a set of alternatives
// (__name__=~"a|b"), or any matcher on __name__, reads only the series it may select rather
// than naming and testing every series held. A Prometheus name is not a function of the Cantal
// metric name alone (promname: the kind, a textfile's own names, rules that look at other
// labels), so the index is of the named series themselves.
//
// An index is built from a Versioned catalog and kept while the catalog's version stays the
// same (for the registry: while no series was registered or forgotten); a query that finds
// it stale builds the next one, once for all the queries waiting on it. Built, it is
// immutable and read by any number of queries at once.

// Versioned is a Catalog whose listing changes only when Version does.
type Versioned interface {
	// Version returns the version of the catalog's listing (any comparable value) and about
	// how many series it lists (a sizing hint).
	Version() (any, int)
}

// Version is the registry's count of series registered or forgotten (registry.View.Changes).
func (c registryCatalog) Version() (any, int) {
	v := c.r.View()
	if v == nil {
		return nil, 0
	}
	return v.Changes, v.Len()
}

// index is the named series of one version of a catalog.
type index struct {
	version any
	all     []ientry
	// names[value] lists the positions in all of the series named value, ascending.
	names map[string][]int32
	// post[label] is the same for the values of another label, made when a selector first
	// matches on it (most labels never are: building them all at every change of the series
	// cost five walks of every series).
	mu   sync.Mutex
	post map[string]*postings
}

// postings lists, for each value of one label, the positions of the series with it.
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
		for i, ie := range x.all {
			if v := ie.n.lset.Get(name); v != "" {
				p.vals[v] = append(p.vals[v], int32(i))
			}
		}
	})
	return p.vals
}

type ientry struct {
	n *named
	e Entry
}

// buildIndex names every series of s.cat (served or not, whatever its time).
func (s *Storage) buildIndex(version any, size int) *index {
	x := &index{version: version, names: map[string][]int32{}, post: map[string]*postings{},
		all: make([]ientry, 0, size)}
	s.cat.Each(minTime, func(e Entry) bool {
		n := s.name(e)
		if !n.ok {
			return true
		}
		i := int32(len(x.all))
		x.all = append(x.all, ientry{n: n, e: e})
		if name := n.s.Name; name != "" { // the series' __name__ (labelSet)
			x.names[name] = append(x.names[name], i)
		}
		return true
	})
	return x
}

// minTime is the earliest time a catalog is asked for: every series it lists.
const minTime = -1 << 62

// currentIndex returns the index of the catalog's current version, building it when the last
// one is stale, or nil when the catalog is not Versioned.
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
	if x := s.idx.Load(); x != nil && x.version == ver {
		return x
	}
	x := s.buildIndex(ver, size)
	s.idx.Store(x)
	s.idxBuilds.Add(1)
	return x
}

// candidates returns the positions in x.all of the series that may match ms, ascending: the
// shortest of the lists the matchers allow, or nil and false when no matcher narrows the
// search (every series must be tested).
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
