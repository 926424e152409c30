// Package promstore lets Prometheus's own PromQL engine (github.com/prometheus/prometheus/promql)
// read the agent's held history: Storage is a storage.Queryable whose series are the agent's,
// named as the remote-write client names them (internal/promname: node_exporter's names for the
// machine, cantal_* for the agent's own series, applications' names by promname.Name, per-process
// series per pid), with the labels instance and node added where a series lacks them, and whose
// samples are the points of internal/history, converted to the exported unit (promname.Series.Value).
// Counters are passed as Prometheus counters: the engine's rate() and increase() see their resets.
//
// A Catalog says which series there are: RegistryCatalog reads the registry's published View
// (the agent), StoreCatalog a bare history.Store (tests, and the promqltest run of Prometheus's
// own test files). Reading never blocks the writer: the registry's View and the store's Range
// are safe for concurrent use, and a Storage keeps only a cache of names under its own lock.
//
// A Storage is safe for concurrent use; a Querier it returns may be used by one query's
// goroutines at once, as the engine does.
package promstore

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/util/annotations"

	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/promname"
	"github.com/cantal-go/cantal/internal/registry"
	"github.com/cantal-go/cantal/internal/selector"
	"github.com/cantal-go/cantal/internal/series"
)

// Entry is one series a Catalog lists.
type Entry struct {
	Key  string
	Kind series.Kind
	ID   history.ID
	// h gives the series' Cantal labels when set (a registry catalog's; held by value, not
	// in an interface: boxing it cost an allocation per series listed); else they are
	// parsed from Key.
	h    registry.Handle
	hasH bool
}

// Labels returns the entry's Cantal labels; the caller must not modify them.
func (e Entry) Labels() series.Labels {
	if e.hasH {
		return e.h.Labels()
	}
	l, err := series.ParseKey(e.Key)
	if err != nil {
		return series.Labels{}
	}
	return l
}

// Catalog lists the series a Storage serves.
type Catalog interface {
	// Each calls fn for every series with history that may have a point at or after fromMs
	// (it may pass series without one), until fn returns false. Safe for concurrent use.
	Each(fromMs int64, fn func(e Entry) bool)
}

// RegistryCatalog lists the series of r's latest View (registry.View.Select, which skips the
// series written last before fromMs without reading them). States, which have no history,
// are left out.
func RegistryCatalog(r *registry.Registry) Catalog { return registryCatalog{r} }

type registryCatalog struct{ r *registry.Registry }

var everything = selector.MustParse("")

func (c registryCatalog) Each(fromMs int64, fn func(e Entry) bool) {
	v := c.r.View()
	if v == nil {
		return
	}
	v.Select(everything, fromMs, false, func(h registry.Handle) bool {
		if h.Kind() == series.State {
			return true
		}
		return fn(Entry{Key: h.Key(), Kind: h.Kind(), ID: h.HistoryID(), h: h, hasH: true})
	})
}

// StoreCatalog lists every series of h (history.Store.Each), whatever fromMs.
func StoreCatalog(h *history.Store) Catalog { return storeCatalog{h} }

type storeCatalog struct{ h *history.Store }

func (c storeCatalog) Each(_ int64, fn func(e Entry) bool) {
	c.h.Each(func(id history.ID, key string, kind series.Kind) bool {
		if kind == series.State {
			return true
		}
		return fn(Entry{Key: key, Kind: kind, ID: id})
	})
}

// Namer appends to dst every Prometheus series a Cantal series is served as (its metric name,
// its other labels and the conversion of its values, promname.Series.Value), none for a series
// not served: the first is its own name, the next, if any, its twin under another name (a
// container's cgroup series is also one of cAdvisor's container_* families, as /metrics and
// remote write give it). Called from many goroutines at once.
type Namer func(dst []promname.Series, l series.Labels, k series.Kind) []promname.Series

// MapperNamer is the agent's naming, /metrics' and the remote-write client's: m.MapAll,
// per-process series per pid, without state series (Info).
func MapperNamer(m *promname.Mapper) Namer {
	return func(dst []promname.Series, l series.Labels, k series.Kind) []promname.Series {
		all := m.MapAll(dst, l, k)
		out := all[:len(dst)]
		for _, s := range all[len(dst):] {
			if s.Type != promname.Info {
				out = append(out, s)
			}
		}
		return out
	}
}

// Options tune a Storage.
type Options struct {
	// Namer names the series; nil: MapperNamer of a promname.Mapper with default options.
	Namer Namer
	// Instance and Node, when set, are the values of the labels instance and node added to
	// every series that lacks them (as the remote-write client's default labels).
	Instance, Node string
	// Visible returns for a query's context the predicate of the series (by Cantal labels) its
	// caller may see, or nil for every series (the agent's api.Server.SeriesVisible). nil:
	// every series.
	Visible func(ctx context.Context) func(series.Labels) bool
}

// Storage is a storage.Queryable over a history.Store and the Catalog of its series. Make one
// with New.
type Storage struct {
	hist *history.Store
	cat  Catalog
	opt  Options

	mu    sync.RWMutex
	names map[string]*named // by series key

	idxMu      sync.Mutex // held while the index is brought up to date
	idx        atomic.Pointer[index]
	idxBuilds  atomic.Int64 // index versions made (tests)
	idxChanged atomic.Int64 // slots whose series changed, over every version (tests)
	idxHeld    []slotID     // what each slot held at the last update; under idxMu
	tested     atomic.Int64 // series tested against a selector's matchers (tests)
}

// named is the Prometheus identity of one series key, immutable once made.
type named struct {
	kind series.Kind
	ok   bool
	lset labels.Labels
	s    promname.Series
	// twin is the same points served under a second name (see Namer), nil if none.
	twin *named
}

// maxNamed bounds the cache of names; it is cleared when full.
const maxNamed = 1 << 18

// New returns a Storage reading hist through cat.
func New(hist *history.Store, cat Catalog, opt Options) *Storage {
	if opt.Namer == nil {
		opt.Namer = MapperNamer(promname.New(promname.Options{}))
	}
	return &Storage{hist: hist, cat: cat, opt: opt, names: make(map[string]*named)}
}

// name returns the Prometheus identity of e, from the cache when known.
func (s *Storage) name(e Entry) *named {
	s.mu.RLock()
	n := s.names[e.Key]
	s.mu.RUnlock()
	if n != nil && n.kind == e.Kind {
		return n
	}
	n = &named{kind: e.Kind}
	if all := s.opt.Namer(nil, e.Labels(), e.Kind); len(all) > 0 {
		n.s, n.ok = all[0], true
		n.lset = s.labelSet(&n.s)
		if len(all) > 1 {
			t := &named{kind: e.Kind, ok: true, s: all[1]}
			t.lset = s.labelSet(&t.s)
			n.twin = t
		}
	}
	s.mu.Lock()
	if len(s.names) >= maxNamed {
		clear(s.names)
	}
	s.names[e.Key] = n
	s.mu.Unlock()
	return n
}

// labelSet is __name__, the series' labels, then instance and node where the series lacks
// them; empty values left out (for Prometheus an empty label is no label).
func (s *Storage) labelSet(ps *promname.Series) labels.Labels {
	b := labels.NewScratchBuilder(len(ps.Labels) + 3)
	if ps.Name != "" {
		b.Add(labels.MetricName, ps.Name)
	}
	has := func(n string) bool {
		return slices.ContainsFunc(ps.Labels, func(l promname.Label) bool { return l.Name == n && l.Value != "" })
	}
	for _, l := range ps.Labels {
		if l.Value != "" && l.Name != labels.MetricName {
			b.Add(l.Name, l.Value)
		}
	}
	if s.opt.Instance != "" && !has("instance") {
		b.Add("instance", s.opt.Instance)
	}
	if s.opt.Node != "" && !has("node") {
		b.Add("node", s.opt.Node)
	}
	b.Sort()
	return b.Labels()
}

// Metadata is the type and help of one metric name, as /api/v1/metadata gives them.
type Metadata struct {
	Type string
	Help string
}

// Metadata returns the type and help of every metric name with a series that may have a point
// at or after fromMs and that ctx's caller may see.
func (s *Storage) Metadata(ctx context.Context, fromMs int64) (map[string]Metadata, error) {
	out := map[string]Metadata{}
	err := s.each(ctx, fromMs, math.MaxInt64, false, nil, func(n *named, _ Entry) {
		if _, ok := out[n.s.Name]; ok {
			return
		}
		help := n.s.Help
		if help == "" {
			help = "Cantal metric " + n.s.Name
		}
		out[n.s.Name] = Metadata{Type: n.s.Type.String(), Help: help}
	})
	return out, err
}

// Querier implements storage.Queryable.
func (s *Storage) Querier(mint, maxt int64) (storage.Querier, error) {
	return &querier{s: s, mint: mint, maxt: maxt}, nil
}

// checkEvery is how many series a walk reads between two looks at its context.
const checkEvery = 1024

// each calls fn for every series that matches ms, that ctx's caller may see and (with points)
// that has a point in [mint, maxt]. It ends early with ctx's error. With points, and a
// Versioned catalog, it reads only the series the index allows (see index.go).
func (s *Storage) each(ctx context.Context, mint, maxt int64, points bool, ms []*labels.Matcher, fn func(n *named, e Entry)) error {
	var visible func(series.Labels) bool
	if s.opt.Visible != nil {
		visible = s.opt.Visible(ctx)
	}
	var err error
	i := 0
	test := func(n *named, e Entry) bool {
		if i++; i%checkEvery == 0 {
			if err = ctx.Err(); err != nil {
				return false
			}
		}
		if !n.ok {
			return true
		}
		s.tested.Add(1)
		for _, m := range ms {
			if !m.Matches(n.lset.Get(m.Name)) {
				return true
			}
		}
		if visible != nil && !visible(e.Labels()) {
			return true
		}
		if points && !s.hasPoint(e.ID, mint, maxt) {
			return true
		}
		fn(n, e)
		return true
	}
	visit := func(n *named, e Entry) bool {
		if !test(n, e) {
			return false
		}
		return n.twin == nil || test(n.twin, e)
	}
	if x := s.currentIndexFor(points); x != nil {
		if cands, ok := x.candidates(ms); ok {
			for _, c := range cands {
				if ie := x.at(c); ie != nil && !visit(ie.n, ie.e) {
					break
				}
			}
		} else {
			for i := range x.slots {
				if ie := x.slots[i].Load(); ie != nil && !visit(ie.n, ie.e) {
					break
				}
			}
		}
		return err
	}
	s.cat.Each(mint, func(e Entry) bool { return visit(s.name(e), e) })
	return err
}

// currentIndexFor is the current index for a walk that tests each series' time itself
// (points), nil otherwise: the index lists series whatever their time, the catalog's walk
// leaves out those without a recent point.
func (s *Storage) currentIndexFor(points bool) *index {
	if !points {
		return nil
	}
	return s.currentIndex()
}

func (s *Storage) hasPoint(id history.ID, mint, maxt int64) bool {
	found := false
	s.hist.Range(id, mint, maxt, func(int64, uint64) bool {
		found = true
		return false
	})
	return found
}

// querier is a storage.Querier of a Storage over [mint, maxt].
type querier struct {
	s          *Storage
	mint, maxt int64
}

func (q *querier) Close() error { return nil }

func (q *querier) Select(ctx context.Context, sortSeries bool, hints *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	mint, maxt := q.mint, q.maxt
	if hints != nil {
		mint, maxt = max(mint, hints.Start), min(maxt, hints.End)
	}
	var out []*promSeries
	err := q.s.each(ctx, mint, maxt, true, ms, func(n *named, e Entry) {
		out = append(out, &promSeries{hist: q.s.hist, n: n, id: e.ID, mint: mint, maxt: maxt})
	})
	if err != nil {
		return storage.ErrSeriesSet(fmt.Errorf("selecting series: %w", err))
	}
	// Sorted whatever sortSeries says: the engine's matrix answers and the series API list
	// series in label order, and a sort of what a selector found is cheap beside its points.
	_ = sortSeries
	sort.Slice(out, func(i, j int) bool { return labels.Compare(out[i].n.lset, out[j].n.lset) < 0 })
	return &seriesSet{list: out, i: -1}
}

// labelWalk collects what fn takes from every series of [q.mint, q.maxt] matching ms.
func (q *querier) labelWalk(ctx context.Context, hints *storage.LabelHints, ms []*labels.Matcher, fn func(lset labels.Labels, add func(string))) ([]string, annotations.Annotations, error) {
	set := map[string]struct{}{}
	add := func(v string) { set[v] = struct{}{} }
	err := q.s.each(ctx, q.mint, q.maxt, true, ms, func(n *named, _ Entry) { fn(n.lset, add) })
	if err != nil {
		return nil, nil, fmt.Errorf("reading labels: %w", err)
	}
	out := make([]string, 0, len(set))
	for v := range set {
		out = append(out, v)
	}
	slices.Sort(out)
	if hints != nil && hints.Limit > 0 && len(out) > hints.Limit {
		out = out[:hints.Limit]
	}
	return out, nil, nil
}

func (q *querier) LabelValues(ctx context.Context, name string, hints *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	return q.labelWalk(ctx, hints, ms, func(lset labels.Labels, add func(string)) {
		if v := lset.Get(name); v != "" {
			add(v)
		}
	})
}

func (q *querier) LabelNames(ctx context.Context, hints *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	return q.labelWalk(ctx, hints, ms, func(lset labels.Labels, add func(string)) {
		lset.Range(func(l labels.Label) { add(l.Name) })
	})
}

// seriesSet is a sorted list of series.
type seriesSet struct {
	list []*promSeries
	i    int
}

func (s *seriesSet) Next() bool {
	s.i++
	return s.i < len(s.list)
}
func (s *seriesSet) At() storage.Series                { return s.list[s.i] }
func (s *seriesSet) Err() error                        { return nil }
func (s *seriesSet) Warnings() annotations.Annotations { return nil }
func (s *promSeries) Labels() labels.Labels            { return s.n.lset }
func (s *promSeries) Iterator(it chunkenc.Iterator) chunkenc.Iterator {
	// The engine hands back the iterator of the series it read before (it is done with it):
	// its list is refilled rather than a new one allocated per series (a 10 000-series
	// query_range allocated 290 MB of lists, and the collections and page faults that came
	// with them cost more than reading the points).
	pi, ok := it.(*pointIter)
	if !ok {
		pi = &pointIter{}
	}
	pi.reset(s.points(pi.pts[:0]))
	return pi
}

// promSeries is one series of a Select: its points are read when iterated.
type promSeries struct {
	hist       *history.Store
	n          *named
	id         history.ID
	mint, maxt int64
}

// points appends the series' points to dst.
func (s *promSeries) points(dst []promql.FPoint) []promql.FPoint {
	// Sized for a point per scan interval (a series written every scan): growing the list
	// point by point cost a quarter of a 10 000-series query_range.
	step := max(s.hist.Options().Interval.Milliseconds(), 1)
	if want := int(min((s.maxt-s.mint)/step+2, maxPresize)); cap(dst) < want {
		dst = make([]promql.FPoint, 0, want)
	}
	conv := s.n.s.Value
	kind := s.n.kind
	s.hist.Range(s.id, s.mint, s.maxt, func(ts int64, bits uint64) bool {
		dst = append(dst, promql.FPoint{T: ts, F: conv(series.ToFloat(kind, bits))})
		return true
	})
	return dst
}

// maxPresize bounds the points a series' list is sized for before it is read.
const maxPresize = 1 << 14

// pointIter is a chunkenc.Iterator over a list of float points, refilled from one series to
// the next (promSeries.Iterator).
type pointIter = listIter[int64]

// listIter is pointIter. It is generic only for go vet: its stdmethods check takes any method
// named Seek whose first parameter is an int64 for a mistaken io.Seeker (Seek(int64, int)
// (int64, error)), and chunkenc.Iterator's Seek(t int64) ValueType is not one. With the
// parameter's type a type parameter (always int64) the check does not apply, and vet stays on.
type listIter[T ~int64] struct {
	pts []promql.FPoint
	i   int
}

func (it *listIter[T]) reset(pts []promql.FPoint) {
	it.pts = pts
	it.i = -1
}

func (it *listIter[T]) Next() chunkenc.ValueType {
	if it.i+1 >= len(it.pts) {
		it.i = len(it.pts)
		return chunkenc.ValNone
	}
	it.i++
	return chunkenc.ValFloat
}

// Seek moves to the first point at or after t, never backwards (chunkenc.Iterator).
func (it *listIter[T]) Seek(t T) chunkenc.ValueType {
	i := max(it.i, 0)
	if i >= len(it.pts) {
		return chunkenc.ValNone
	}
	if it.pts[i].T < int64(t) {
		rest := it.pts[i:]
		i += sort.Search(len(rest), func(k int) bool { return rest[k].T >= int64(t) })
	}
	it.i = i
	if i >= len(it.pts) {
		return chunkenc.ValNone
	}
	return chunkenc.ValFloat
}

func (it *listIter[T]) At() (int64, float64) { p := it.pts[it.i]; return p.T, p.F }
func (it *listIter[T]) AtT() int64           { return it.pts[it.i].T }
func (it *listIter[T]) AtST() int64          { return 0 }
func (it *listIter[T]) Err() error           { return nil }

func (it *listIter[T]) AtHistogram(*histogram.Histogram) (int64, *histogram.Histogram) {
	panic("promstore: a series of floats has no histograms")
}

func (it *listIter[T]) AtFloatHistogram(*histogram.FloatHistogram) (int64, *histogram.FloatHistogram) {
	panic("promstore: a series of floats has no histograms")
}
