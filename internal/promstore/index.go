package promstore

import (
	"slices"

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
	// Version returns the version of the catalog's listing (any comparable value).
	Version() any
}

// Version is the registry's count of series registered or forgotten (registry.View.Changes).
func (c registryCatalog) Version() any {
	v := c.r.View()
	if v == nil {
		return nil
	}
	return v.Changes
}

// index is the named series of one version of a catalog.
type index struct {
	version any
	all     []ientry
	// post[name][value] lists the positions in all of the series with that label pair,
	// ascending.
	post map[string]map[string][]int32
}

type ientry struct {
	n *named
	e Entry
}

// buildIndex names every series of s.cat (served or not, whatever its time).
func (s *Storage) buildIndex(version any) *index {
	x := &index{version: version, post: map[string]map[string][]int32{}}
	s.cat.Each(minTime, func(e Entry) bool {
		n := s.name(e)
		if !n.ok {
			return true
		}
		i := int32(len(x.all))
		x.all = append(x.all, ientry{n: n, e: e})
		n.lset.Range(func(l labels.Label) {
			vals := x.post[l.Name]
			if vals == nil {
				vals = map[string][]int32{}
				x.post[l.Name] = vals
			}
			vals[l.Value] = append(vals[l.Value], i)
		})
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
	ver := vc.Version()
	if x := s.idx.Load(); x != nil && x.version == ver {
		return x
	}
	s.idxMu.Lock()
	defer s.idxMu.Unlock()
	if x := s.idx.Load(); x != nil && x.version == ver {
		return x
	}
	x := s.buildIndex(ver)
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
		vals := x.post[m.Name]
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
