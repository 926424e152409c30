// Package promcluster is the storage.Queryable of the cluster-wide Prometheus query API
// (/cluster/prometheus/api/v1/): the local node's series (a promstore.Storage) beside every
// peer's, so that Prometheus's PromQL engine evaluates a query once over the whole cluster.
//
// The engine selects every selector of a query (Querier.Select, with the window it needs)
// before it reads any; the first read asks every peer that is up, through the Queryable's
// hub.Fetcher (one kept-alive connection per peer with Fetcher.KeepAlive; at most
// Options.Parallel peers at once under hub.FanOut), for all the query's selectors in one
// request: a peer select (apiwire.PeerSelectPath, served by PeerHandler), whose answer is each
// selector's series over its window only, with the peer's node and instance labels and its
// samples in Prometheus's XOR chunks, which the engine reads in place. Asking the peer in
// Prometheus's names, not the Cantal wire's, is what lets a selector on a Prometheus name
// reach a peer whose series are named by its own options. A peer that does not know the
// peer select (an older agent) is asked the old way, one selector at a time as an instant
// query of the selector as a range vector on its /prometheus API, and remembered as such for
// a while. A peer that is down, does not answer or answers something unreadable is left out
// with a warning naming it (the answer's "warnings"), never silently; the local series are
// always there.
//
// Queryable.Plan (pushdown.go) spares most queries the fetch: the aggregations each node can
// evaluate alone are evaluated by every node over its own series, and only their parts come
// to the asking node.
//
// A Queryable is safe for concurrent use.
package promcluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/annotations"

	"github.com/cantal-go/cantal/internal/apiwire"
	"github.com/cantal-go/cantal/internal/hub"
	"github.com/cantal-go/cantal/internal/querylimit"
)

// PeerPrefix is the path of a peer's own (node-local) query API.
const PeerPrefix = "/prometheus/api/v1/"

// Options configure a Queryable.
type Options struct {
	// Node is the local node's name (its series' node label): its part of a pushed
	// aggregation is told apart from the peers' by it (see Pushdown).
	Node string
	// Members returns the peers (not the local node). Required.
	Members func() []hub.Member
	// Fetch is the client of the requests to peers. Required.
	Fetch *hub.Fetcher
	// Parallel bounds the peers asked at once (default 16).
	Parallel int
	// MaxAnswer bounds one peer's answer in bytes (default 256 MiB).
	MaxAnswer int64
	// PeerTimeout bounds one peer's answer to one request (default 10 s): a peer that accepts
	// the connection and then does not answer (stopped, swamped) is left out with a warning
	// rather than holding the whole query until its timeout.
	PeerTimeout time.Duration
	// PeerMatchers returns, for a query's context, matchers added to every selector asked of
	// a peer, so that the peer answers (series, label names and values) only from the series
	// the caller may see of another node (the agent: pid="" for a caller who may not see
	// every process), or nil for none. nil: none.
	PeerMatchers func(ctx context.Context) []*labels.Matcher
}

// Queryable is the cluster's series: the local ones and every peer's.
type Queryable struct {
	local storage.Queryable
	opt   Options

	mu  sync.Mutex
	old map[string]time.Time // peers (ID@address) that did not answer the peer select, since
}

// New returns the Queryable of local's series and the peers'.
func New(local storage.Queryable, opt Options) *Queryable {
	if opt.Parallel <= 0 {
		opt.Parallel = 16
	}
	if opt.MaxAnswer <= 0 {
		opt.MaxAnswer = 256 << 20
	}
	if opt.PeerTimeout <= 0 {
		opt.PeerTimeout = 10 * time.Second
	}
	return &Queryable{local: local, opt: opt, old: map[string]time.Time{}}
}

// Querier implements storage.Queryable.
func (c *Queryable) Querier(mint, maxt int64) (storage.Querier, error) {
	lq, err := c.local.Querier(mint, maxt)
	if err != nil {
		return nil, err
	}
	return &querier{c: c, local: lq, mint: mint, maxt: maxt}, nil
}

type querier struct {
	c          *Queryable
	local      storage.Querier
	mint, maxt int64

	mu   sync.Mutex
	open *batch // the batch new selections join, until it starts
}

func (q *querier) Close() error { return q.local.Close() }

// PeerError is the warning of a peer left out of an answer.
type PeerError struct {
	Node string
	Err  error
}

func (e PeerError) Error() string {
	return fmt.Sprintf("node %s left out: %v", e.Node, e.Err)
}

func (e PeerError) Unwrap() error { return e.Err }

// selectorString writes ms as a PromQL selector, {a="b",...}.
func selectorString(ms []*labels.Matcher) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, m := range ms {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(m.String())
	}
	b.WriteByte('}')
	return b.String()
}

// fanOut calls get for every peer in members, at most Parallel at once; it returns the
// warnings of those that failed (down ones too).
func (q *querier) fanOut(ctx context.Context, members []hub.Member, get func(ctx context.Context, i int, m hub.Member) error) annotations.Annotations {
	errs := hub.FanOut(ctx, members, q.c.opt.Parallel, func(ctx context.Context, i int, m hub.Member) error {
		ctx, cancel := context.WithTimeout(ctx, q.c.opt.PeerTimeout)
		defer cancel()
		err := get(ctx, i, m)
		if err != nil && ctx.Err() == context.DeadlineExceeded {
			return fmt.Errorf("no answer within %s", q.c.opt.PeerTimeout)
		}
		return err
	})
	var annos annotations.Annotations
	for i, err := range errs {
		if err != nil {
			annos.Add(PeerError{Node: members[i].Name, Err: err})
		}
	}
	return annos
}

// peerGet fetches a peer's answer to path?params and decodes its data into v; a peer's error
// answer is its error.
func (q *querier) peerGet(ctx context.Context, m hub.Member, path string, params url.Values, v any) error {
	body, err := q.c.opt.Fetch.Get(ctx, m, PeerPrefix+path+"?"+params.Encode(), q.c.opt.MaxAnswer)
	if err != nil {
		return peerErr(err)
	}
	var ans struct {
		Status string          `json:"status"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &ans); err != nil {
		return fmt.Errorf("reading the answer: %w", err)
	}
	if ans.Status != "success" {
		return fmt.Errorf("answer status %q", ans.Status)
	}
	if err := json.Unmarshal(ans.Data, v); err != nil {
		return fmt.Errorf("reading the answer's data: %w", err)
	}
	return nil
}

// peerErr is the warning's text of a failed request to a peer: a peer's error answer is its
// error; the request's URL (the peer's and the query's, said elsewhere) is left out.
func peerErr(err error) error {
	var se hub.StatusError
	if errors.As(err, &se) {
		var ans struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(se.Body, &ans) == nil && ans.Error != "" {
			return fmt.Errorf("%s: %s", se.Status, ans.Error)
		}
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// Select implements storage.Querier: the local series and each peer's, sorted, merged. The
// peers are not asked here but when the first of the query's selections is read: the engine
// selects every selector of a query before it reads any, so one request to each peer carries
// them all (see batch).
func (q *querier) Select(ctx context.Context, _ bool, hints *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	mint, maxt := q.mint, q.maxt
	if hints != nil {
		mint, maxt = max(mint, hints.Start), min(maxt, hints.End)
	}
	local := q.local.Select(ctx, true, hints, ms...)
	if maxt < mint {
		return local
	}
	p := &pending{sel: apiwire.PeerSelector{Start: mint, End: maxt,
		// The series API wants labels only: the peers' series, not their points.
		LabelsOnly: hints != nil && hints.Func == "series",
		Matchers:   selectorString(q.peerMatchers(ctx, ms))}}
	q.mu.Lock()
	if q.open == nil || q.open.started {
		q.open = &batch{ctx: ctx}
	}
	b := q.open
	b.sels = append(b.sels, p)
	q.mu.Unlock()
	return &lazySet{q: q, b: b, p: p, local: local}
}

// pending is one selection of a batch: its selector, and once the batch ran each peer's
// series (by member index) and the warnings of the peers left out.
type pending struct {
	sel   apiwire.PeerSelector
	peers [][]*peerSeries
	annos annotations.Annotations
}

// batch is the selections of a query made before any was read, asked of the peers together.
// Its fields but once are guarded by the querier's mu until started; after once they are
// read only.
type batch struct {
	ctx     context.Context // the first selection's
	sels    []*pending
	started bool
	once    sync.Once
}

// run asks every peer for the batch's selections, at most Parallel peers at once.
func (q *querier) run(b *batch) {
	q.mu.Lock()
	b.started = true
	sels := b.sels
	q.mu.Unlock()
	members := q.c.opt.Members()
	for _, p := range sels {
		p.peers = make([][]*peerSeries, len(members))
	}
	annos := q.fanOut(b.ctx, members, func(ctx context.Context, i int, m hub.Member) error {
		lists, err := q.peerBatch(ctx, m, sels)
		for k, list := range lists {
			sels[k].peers[i] = list
		}
		return err
	})
	for _, p := range sels {
		p.annos = annotations.Annotations{}
		p.annos.Merge(annos)
	}
}

// lazySet is a Select's answer: the local series and, when first read, the peers'.
type lazySet struct {
	q     *querier
	b     *batch
	p     *pending
	local storage.SeriesSet
	set   storage.SeriesSet
}

func (s *lazySet) init() storage.SeriesSet {
	if s.set != nil {
		return s.set
	}
	// The peers are waited for without the request's query slot (querylimit.Away): two
	// nodes asking each other at once would each wait for the slot the other holds.
	s.b.once.Do(func() { querylimit.Away(s.b.ctx, func() { s.q.run(s.b) }) })
	if err := s.b.ctx.Err(); err != nil {
		s.set = storage.ErrSeriesSet(err)
		return s.set
	}
	sets := []storage.SeriesSet{s.local}
	for _, list := range s.p.peers {
		if len(list) > 0 {
			sets = append(sets, &seriesSet{list: list, i: -1})
		}
	}
	s.set = &warned{SeriesSet: storage.NewMergeSeriesSet(sets, 0, storage.ChainedSeriesMerge), annos: s.p.annos}
	return s.set
}

func (s *lazySet) Next() bool                        { return s.init().Next() }
func (s *lazySet) At() storage.Series                { return s.init().At() }
func (s *lazySet) Err() error                        { return s.init().Err() }
func (s *lazySet) Warnings() annotations.Annotations { return s.init().Warnings() }

// errNoPeerSelect is the error of a peer that does not answer the peer select (an older agent).
var errNoPeerSelect = errors.New("no peer select")

// oldPeerFor is how long a peer that did not answer the peer select is asked the old way
// before it is tried again (it may have been upgraded).
const oldPeerFor = 5 * time.Minute

// peerBatch fetches sels from m: in one peer select, or from an older peer one selector at a
// time from its query API. It returns a sorted list of series for each selection.
func (q *querier) peerBatch(ctx context.Context, m hub.Member, sels []*pending) ([][]*peerSeries, error) {
	key := m.ID + "@" + m.HTTP
	q.c.mu.Lock()
	since, old := q.c.old[key]
	if old && time.Since(since) > oldPeerFor {
		delete(q.c.old, key)
		old = false
	}
	q.c.mu.Unlock()
	if !old {
		lists, err := q.peerSelect(ctx, m, sels)
		if !errors.Is(err, errNoPeerSelect) {
			return lists, err
		}
		q.c.mu.Lock()
		for k, t := range q.c.old { // members that left are not kept for ever
			if time.Since(t) > oldPeerFor {
				delete(q.c.old, k)
			}
		}
		q.c.old[key] = time.Now()
		q.c.mu.Unlock()
	}
	lists := make([][]*peerSeries, len(sels))
	for k, p := range sels {
		list, err := q.peerJSON(ctx, m, p.sel)
		if err != nil {
			return lists, err
		}
		lists[k] = list
	}
	return lists, nil
}

// peerSelect asks m for sels in one apiwire peer select.
func (q *querier) peerSelect(ctx context.Context, m hub.Member, sels []*pending) ([][]*peerSeries, error) {
	params := make([]string, len(sels))
	for k, p := range sels {
		params[k] = p.sel.Param()
	}
	body, err := q.c.opt.Fetch.Get(ctx, m, apiwire.PeerSelectPath+"?"+url.Values{"s": params}.Encode(), q.c.opt.MaxAnswer)
	if err != nil {
		var se hub.StatusError
		if errors.As(err, &se) && (strings.HasPrefix(se.Status, "404") || strings.HasPrefix(se.Status, "405")) {
			return nil, errNoPeerSelect
		}
		return nil, peerErr(err)
	}
	wire, err := apiwire.DecodePeerSelect(body, len(sels))
	if errors.Is(err, apiwire.ErrNotPeerSelect) {
		return nil, errNoPeerSelect
	}
	if err != nil {
		return nil, fmt.Errorf("reading the answer: %w", err)
	}
	lists := make([][]*peerSeries, len(sels))
	for k, ws := range wire {
		list := make([]*peerSeries, len(ws))
		for j, w := range ws {
			ps, err := readPeerSeries(w, sels[k].sel)
			if err != nil {
				return nil, fmt.Errorf("reading the answer: selector %d, series %d: %w", k, j, err)
			}
			list[j] = ps
		}
		slices.SortFunc(list, func(a, b *peerSeries) int { return labels.Compare(a.lset, b.lset) })
		lists[k] = list
	}
	return lists, nil
}

// readPeerSeries checks a series of a peer select answer: its chunks are XOR chunks whose
// samples are in time order within the selector's window (so that reading them in the
// engine cannot fail), none for a labels-only selector.
func readPeerSeries(w apiwire.PeerSeries, sel apiwire.PeerSelector) (*peerSeries, error) {
	b := labels.NewScratchBuilder(len(w.Labels) / 2)
	for i := 0; i+1 < len(w.Labels); i += 2 {
		b.Add(w.Labels[i], w.Labels[i+1])
	}
	b.Sort()
	ps := &peerSeries{lset: b.Labels()}
	if sel.LabelsOnly {
		if len(w.Chunks) > 0 {
			return nil, errors.New("samples for a labels-only selector")
		}
		return ps, nil
	}
	last := sel.Start - 1
	var it chunkenc.Iterator
	for _, raw := range w.Chunks {
		if len(raw) < 2 { // its count of samples: NumSamples reads it unchecked
			return nil, fmt.Errorf("chunk of %d bytes", len(raw))
		}
		c, err := chunkenc.FromData(chunkenc.EncXOR, raw)
		if err != nil {
			return nil, err
		}
		n := 0
		it = c.Iterator(it)
		for vt := it.Next(); vt != chunkenc.ValNone; vt = it.Next() {
			t := it.AtT()
			if vt != chunkenc.ValFloat || t <= last || t > sel.End {
				return nil, fmt.Errorf("sample at %d out of order or outside [%d, %d]", t, sel.Start, sel.End)
			}
			last = t
			n++
		}
		if err := it.Err(); err != nil {
			return nil, err
		}
		if n != c.NumSamples() || n == 0 {
			return nil, fmt.Errorf("chunk of %d samples holding %d", c.NumSamples(), n)
		}
		ps.chunks = append(ps.chunks, c)
	}
	return ps, nil
}

// peerJSON asks an older peer for one selection from its query API (series API for labels).
func (q *querier) peerJSON(ctx context.Context, m hub.Member, sel apiwire.PeerSelector) ([]*peerSeries, error) {
	if sel.LabelsOnly {
		params := url.Values{"match[]": {sel.Matchers}, "start": {formatTime(sel.Start)}, "end": {formatTime(sel.End)}}
		var data []map[string]string
		if err := q.peerGet(ctx, m, "series", params, &data); err != nil {
			return nil, err
		}
		list := make([]*peerSeries, len(data))
		for j, l := range data {
			list[j] = &peerSeries{lset: labels.FromMap(l)}
		}
		slices.SortFunc(list, func(a, b *peerSeries) int { return labels.Compare(a.lset, b.lset) })
		return list, nil
	}
	// The samples in [mint, maxt]: a range selector at maxt reaches back (maxt-d, maxt].
	params := url.Values{
		"query": {fmt.Sprintf("%s[%dms]", sel.Matchers, sel.End-sel.Start+1)},
		"time":  {formatTime(sel.End)},
	}
	var data struct {
		ResultType string       `json:"resultType"`
		Result     []wireSeries `json:"result"`
	}
	if err := q.peerGet(ctx, m, "query", params, &data); err != nil {
		return nil, err
	}
	if data.ResultType != "matrix" {
		return nil, fmt.Errorf("answer of type %q, want matrix", data.ResultType)
	}
	list := make([]*peerSeries, 0, len(data.Result))
	for _, ws := range data.Result {
		list = append(list, &peerSeries{lset: ws.lset, pts: ws.pts})
	}
	slices.SortFunc(list, func(a, b *peerSeries) int { return labels.Compare(a.lset, b.lset) })
	return list, nil
}

// labelWalk is LabelNames or LabelValues: the local answer and every peer's, merged.
func (q *querier) labelWalk(ctx context.Context, path string, hints *storage.LabelHints, ms []*labels.Matcher, local func() ([]string, annotations.Annotations, error)) ([]string, annotations.Annotations, error) {
	vs, annos, err := local()
	if err != nil {
		return nil, annos, err
	}
	params := url.Values{"start": {formatTime(q.mint)}, "end": {formatTime(q.maxt)}}
	if pms := q.peerMatchers(ctx, ms); len(pms) > 0 {
		if len(ms) == 0 {
			// match[] needs a matcher that fails the empty string.
			pms = append(pms, labels.MustNewMatcher(labels.MatchRegexp, labels.MetricName, ".+"))
		}
		params.Set("match[]", selectorString(pms))
	}
	members := q.c.opt.Members()
	peers := make([][]string, len(members))
	querylimit.Away(ctx, func() {
		annos.Merge(q.fanOut(ctx, members, func(ctx context.Context, i int, m hub.Member) error {
			return q.peerGet(ctx, m, path, params, &peers[i])
		}))
	})
	if err := ctx.Err(); err != nil {
		return nil, annos, err
	}
	set := map[string]struct{}{}
	for _, list := range append(peers, vs) {
		for _, v := range list {
			set[v] = struct{}{}
		}
	}
	out := make([]string, 0, len(set))
	for v := range set {
		out = append(out, v)
	}
	slices.Sort(out)
	if hints != nil && hints.Limit > 0 && len(out) > hints.Limit {
		out = out[:hints.Limit]
	}
	return out, annos, nil
}

// peerMatchers is ms with Options.PeerMatchers' for ctx.
func (q *querier) peerMatchers(ctx context.Context, ms []*labels.Matcher) []*labels.Matcher {
	if q.c.opt.PeerMatchers == nil {
		return ms
	}
	extra := q.c.opt.PeerMatchers(ctx)
	if len(extra) == 0 {
		return ms
	}
	return append(slices.Clip(ms), extra...)
}

// LabelValues implements storage.Querier.
func (q *querier) LabelValues(ctx context.Context, name string, hints *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	return q.labelWalk(ctx, "label/"+url.PathEscape(name)+"/values", hints, ms, func() ([]string, annotations.Annotations, error) {
		return q.local.LabelValues(ctx, name, hints, ms...)
	})
}

// LabelNames implements storage.Querier.
func (q *querier) LabelNames(ctx context.Context, hints *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	return q.labelWalk(ctx, "labels", hints, ms, func() ([]string, annotations.Annotations, error) {
		return q.local.LabelNames(ctx, hints, ms...)
	})
}

// formatTime writes a time in milliseconds as Prometheus's API takes it: unix seconds.
func formatTime(ms int64) string {
	switch {
	case ms <= math.MinInt64/2:
		return "-9999999999"
	case ms >= math.MaxInt64/2:
		return "9999999999"
	}
	return strconv.FormatFloat(float64(ms)/1000, 'f', 3, 64)
}

// warned is a SeriesSet with the warnings of the peers left out.
type warned struct {
	storage.SeriesSet
	annos annotations.Annotations
}

func (w *warned) Warnings() annotations.Annotations {
	a := w.SeriesSet.Warnings()
	return a.Merge(w.annos)
}

// peerSeries is one peer series of a Select, its points read from the answer.
type peerSeries struct {
	lset   labels.Labels
	pts    points           // from an older peer's JSON
	chunks []chunkenc.Chunk // from a peer select, checked
}

func (s *peerSeries) Labels() labels.Labels { return s.lset }
func (s *peerSeries) Iterator(it chunkenc.Iterator) chunkenc.Iterator {
	switch len(s.chunks) {
	case 0:
		return storage.NewListSeriesIterator(s.pts)
	case 1:
		return s.chunks[0].Iterator(it)
	}
	its := make([]chunkenc.Iterator, len(s.chunks))
	for i, c := range s.chunks {
		its[i] = c.Iterator(nil)
	}
	return storage.ChainSampleIteratorFromIterators(nil, its)
}

// seriesSet is a sorted list of series.
type seriesSet struct {
	list []*peerSeries
	i    int
}

func (s *seriesSet) Next() bool {
	s.i++
	return s.i < len(s.list)
}
func (s *seriesSet) At() storage.Series                { return s.list[s.i] }
func (s *seriesSet) Err() error                        { return nil }
func (s *seriesSet) Warnings() annotations.Annotations { return nil }

// points are a series' points, as storage.Samples.
type points []point

func (p points) Get(i int) chunks.Sample { return &p[i] }
func (p points) Len() int                { return len(p) }

// point is one float sample (chunks.Sample).
type point struct {
	t int64
	f float64
}

func (p *point) T() int64                      { return p.t }
func (p *point) ST() int64                     { return 0 }
func (p *point) F() float64                    { return p.f }
func (p *point) H() *histogram.Histogram       { return nil }
func (p *point) FH() *histogram.FloatHistogram { return nil }
func (p *point) Type() chunkenc.ValueType      { return chunkenc.ValFloat }
func (p *point) Copy() chunks.Sample           { c := *p; return &c }

// wireSeries is one series of a peer's matrix answer: {"metric":{...},"values":[[t,"v"],...]}.
type wireSeries struct {
	lset labels.Labels
	pts  points
}

func (w *wireSeries) UnmarshalJSON(b []byte) error {
	var raw struct {
		Metric map[string]string `json:"metric"`
		Values json.RawMessage   `json:"values"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	w.lset = labels.FromMap(raw.Metric)
	if pts, ok := parseValues(raw.Values); ok {
		w.pts = pts
		return nil
	}
	// Not in the shape the agent writes: the general decoder, and its errors.
	var vals []wirePoint
	if err := json.Unmarshal(raw.Values, &vals); err != nil {
		return err
	}
	w.pts = make(points, len(vals))
	for i, v := range vals {
		w.pts[i] = point(v)
	}
	return nil
}

// parseValues reads a values array (valid JSON: a part of a document encoding/json has
// checked) as a peer's agent writes it, [[1700000000.5,"1.25"],...]
// (promql.FPoint's JSON, no spaces), a point at a time without reflection: decoding each
// point through encoding/json was most of a cluster query's time over an hour. It reports
// false for anything else (spaces, another shape, a value it cannot read), which the caller
// decodes in full.
func parseValues(b []byte) (points, bool) {
	if len(b) < 2 || b[0] != '[' || b[len(b)-1] != ']' {
		return nil, false
	}
	body := b[1 : len(b)-1]
	pts := make(points, 0, bytes.Count(body, []byte("],["))+1)
	for len(body) > 0 {
		if body[0] != '[' {
			return nil, false
		}
		comma := bytes.IndexByte(body, ',')
		if comma < 0 {
			return nil, false
		}
		sec, err := strconv.ParseFloat(string(body[1:comma]), 64)
		if err != nil {
			return nil, false
		}
		rest := body[comma+1:]
		if len(rest) < 3 || rest[0] != '"' {
			return nil, false
		}
		end := bytes.IndexByte(rest[1:], '"')
		if end < 0 || len(rest) < end+3 || rest[end+2] != ']' {
			return nil, false
		}
		f, err := strconv.ParseFloat(string(rest[1:end+1]), 64)
		if err != nil {
			return nil, false
		}
		pts = append(pts, point{t: int64(math.Round(sec * 1000)), f: f})
		body = rest[end+3:]
		if len(body) > 0 {
			if body[0] != ',' {
				return nil, false
			}
			body = body[1:]
			if len(body) == 0 {
				return nil, false
			}
		}
	}
	return pts, true
}

// wirePoint is [unix seconds, "value"].
type wirePoint point

func (p *wirePoint) UnmarshalJSON(b []byte) error {
	var pair [2]json.RawMessage
	if err := json.Unmarshal(b, &pair); err != nil {
		return err
	}
	sec, err := strconv.ParseFloat(string(pair[0]), 64)
	if err != nil {
		return fmt.Errorf("sample time: %w", err)
	}
	v, err := strconv.Unquote(string(pair[1]))
	if err != nil {
		return fmt.Errorf("sample value: %w", err)
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return fmt.Errorf("sample value: %w", err)
	}
	p.t, p.f = int64(math.Round(sec*1000)), f
	return nil
}
