package promcluster

import (
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

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/util/annotations"

	"github.com/cantal-go/cantal/internal/apiwire"
	"github.com/cantal-go/cantal/internal/hub"
	"github.com/cantal-go/cantal/internal/querylimit"
)

// Pushdown.
//
// A cluster-wide query fetches the series its selectors match from every peer and evaluates
// the query once over all of them: the asking node does the whole cluster's work, 21 times a
// node-local query's in a 21-node cluster, and every peer sends its raw samples. Most
// fleet-wide queries are aggregations, `sum by (job)(rate(x[1m]))`, whose answer is made of
// each node's own: the sum of every node's sums, the max of their maxes, the top k of their
// tops k. Plan finds such aggregations in a query (pushable) and has each node evaluate its
// own part (its node-local /prometheus API, each peer at once, the local node beside them);
// the asking node then evaluates the query with each pushed aggregation replaced by the
// same aggregation over the nodes' parts (a merge), with the same engine.
//
// An aggregation is pushed when what it aggregates is node-local: every series of its value
// comes from one node's series only and keeps that node's `node` label, so that evaluating
// it over the cluster is evaluating it over each node and taking all the series. Selectors
// are; functions of one series (rate, clamp, histogram_quantile, ...) are; an aggregation
// is when it keeps `node` (by (node, ...) or without (...) not naming node); a binary
// operation between two vectors is when its matching keeps `node`; one with a constant
// scalar is. vector(), scalar(), absent() and friends are not (they make series of no node
// or mix the nodes), nor is anything that rewrites the node label. The pushed operations
// are those whose answer is a function of the nodes' answers: sum, min, max, count (merged
// by sum), group, topk and bottomk (the top k of each node's top k), and avg (pushed as a sum
// and a count, merged as the sum of sums over the sum of counts). Aggregations inside a
// subquery are not pushed (the subquery evaluates them at its own steps). A query with
// nothing to push is evaluated as before; a part of a query that is not pushed (a selector
// beside a pushed aggregation) is fetched as before.
//
// Every node's part is a range query at the query's own steps (an instant query is a range
// of one step), so each part has a point at exactly the steps the merge is evaluated at; a
// step a part has no point at gets a staleness marker, so that the merge does not look back
// to the step before. A peer left out (down, too slow, its query failed) is a warning, as a
// peer left out of a fetch is.

// partialName is the metric name of the selector standing for pushed aggregation i in the
// merge. A query naming it itself is not pushed.
func partialName(i int) string { return partialPrefix + strconv.Itoa(i) + "__" }

const partialPrefix = "__cantal_partial_"

// nodePartLabel tells the parts of nodes apart in a merge whose parts' series could have the
// same labels (the sums by job of two nodes): the merge's grouping drops it.
const nodePartLabel = "__cantal_node__"

// pushedOps are the aggregations pushed, by the aggregation that merges their parts.
var pushedOps = map[parser.ItemType]parser.ItemType{
	parser.SUM:     parser.SUM,
	parser.MIN:     parser.MIN,
	parser.MAX:     parser.MAX,
	parser.COUNT:   parser.SUM,
	parser.GROUP:   parser.GROUP,
	parser.TOPK:    parser.TOPK,
	parser.BOTTOMK: parser.BOTTOMK,
}

// oneSeriesFuncs are the functions whose every output series is made of one input series (or
// of series with the same labels but le, histogram_quantile's) and keeps its node label.
var oneSeriesFuncs = map[string]bool{
	"abs": true, "acos": true, "acosh": true, "asin": true, "asinh": true, "atan": true,
	"atanh": true, "avg_over_time": true, "ceil": true, "changes": true, "clamp": true,
	"clamp_max": true, "clamp_min": true, "cos": true, "cosh": true, "count_over_time": true,
	"deg": true, "delta": true, "deriv": true, "exp": true, "floor": true,
	"histogram_avg": true, "histogram_count": true, "histogram_sum": true,
	"histogram_stddev": true, "histogram_stdvar": true, "histogram_fraction": true,
	"histogram_quantile": true, "double_exponential_smoothing": true, "idelta": true,
	"increase": true, "irate": true, "last_over_time": true, "ln": true, "log10": true,
	"log2": true, "mad_over_time": true, "max_over_time": true, "min_over_time": true,
	"predict_linear": true, "present_over_time": true, "quantile_over_time": true,
	"rad": true, "rate": true, "resets": true, "round": true, "sgn": true, "sin": true,
	"sinh": true, "sort": true, "sort_desc": true, "sort_by_label": true,
	"sort_by_label_desc": true, "sqrt": true, "stddev_over_time": true,
	"stdvar_over_time": true, "sum_over_time": true, "tan": true, "tanh": true,
	"timestamp": true, "first_over_time": true,
	// Of a time: node-local with their argument, the evaluation time without.
	"days_in_month": true, "day_of_month": true, "day_of_week": true, "day_of_year": true,
	"hour": true, "minute": true, "month": true, "year": true,
	// node-local unless they write the node label (checked below).
	"label_replace": true, "label_join": true,
}

// nodeLabel is the label every series of a node carries (promstore's Options.Node).
const nodeLabel = "node"

// constScalar reports whether e is a scalar that is the same on every node.
func constScalar(e parser.Expr) bool {
	switch e := e.(type) {
	case *parser.NumberLiteral, *parser.StringLiteral:
		return true
	case *parser.ParenExpr:
		return constScalar(e.Expr)
	case *parser.UnaryExpr:
		return constScalar(e.Expr)
	case *parser.BinaryExpr:
		return constScalar(e.LHS) && constScalar(e.RHS)
	case *parser.Call:
		switch e.Func.Name {
		case "time", "pi":
			return len(e.Args) == 0
		}
	}
	return false
}

// nodeLocal reports whether every series of e's value is made of one node's series and keeps
// its node label (see Pushdown).
func nodeLocal(e parser.Expr) bool {
	switch e := e.(type) {
	case *parser.VectorSelector, *parser.MatrixSelector:
		return true
	case *parser.NumberLiteral, *parser.StringLiteral:
		return true
	case *parser.ParenExpr:
		return nodeLocal(e.Expr)
	case *parser.UnaryExpr:
		return nodeLocal(e.Expr)
	case *parser.SubqueryExpr:
		return nodeLocal(e.Expr)
	case *parser.Call:
		if !oneSeriesFuncs[e.Func.Name] || len(e.Args) == 0 {
			return constScalar(e)
		}
		if e.Func.Name == "label_replace" || e.Func.Name == "label_join" {
			if len(e.Args) < 2 {
				return false
			}
			dst, ok := e.Args[1].(*parser.StringLiteral)
			if !ok || dst.Val == nodeLabel {
				return false
			}
		}
		for _, a := range e.Args {
			if a.Type() == parser.ValueTypeScalar || a.Type() == parser.ValueTypeString {
				if !constScalar(a) {
					return false
				}
			} else if !nodeLocal(a) {
				return false
			}
		}
		return true
	case *parser.BinaryExpr:
		ls, rs := e.LHS.Type() == parser.ValueTypeScalar, e.RHS.Type() == parser.ValueTypeScalar
		switch {
		case ls && rs:
			return constScalar(e.LHS) && constScalar(e.RHS)
		case ls:
			return constScalar(e.LHS) && nodeLocal(e.RHS)
		case rs:
			return nodeLocal(e.LHS) && constScalar(e.RHS)
		}
		if !nodeLocal(e.LHS) || !nodeLocal(e.RHS) || e.VectorMatching == nil {
			return false
		}
		return slices.Contains(e.VectorMatching.MatchingLabels, nodeLabel) == e.VectorMatching.On
	case *parser.AggregateExpr:
		if e.Param != nil && !constScalar(e.Param) {
			return false
		}
		return slices.Contains(e.Grouping, nodeLabel) != e.Without && nodeLocal(e.Expr)
	}
	return false
}

// pushable reports whether a is pushed (see Pushdown).
func pushable(a *parser.AggregateExpr) bool {
	if _, ok := pushedOps[a.Op]; !ok {
		return false
	}
	if a.Param != nil && !constScalar(a.Param) {
		return false
	}
	return nodeLocal(a.Expr)
}

// plan is a query's pushed aggregations and its merge.
type plan struct {
	pushed []*parser.AggregateExpr // each node evaluates these
	merge  string                  // the query over their parts
}

// makePlan finds the aggregations of expr to push and replaces them, in expr, by their merge.
func makePlan(expr parser.Expr) plan {
	var p plan
	var walk func(e parser.Expr, inSubquery bool) parser.Expr
	walk = func(e parser.Expr, inSubquery bool) parser.Expr {
		switch n := e.(type) {
		case *parser.AggregateExpr:
			if !inSubquery && n.Op == parser.AVG && nodeLocal(n.Expr) {
				// The sum of the nodes' sums over the sum of their counts.
				i := len(p.pushed)
				sum, count := *n, *n
				sum.Op, count.Op = parser.SUM, parser.COUNT
				p.pushed = append(p.pushed, &sum, &count)
				return &parser.ParenExpr{Expr: &parser.BinaryExpr{Op: parser.DIV,
					LHS: mergeOf(&sum, i), RHS: mergeOf(&count, i+1),
					VectorMatching: &parser.VectorMatching{Card: parser.CardOneToOne}}}
			}
			if !inSubquery && pushable(n) {
				i := len(p.pushed)
				p.pushed = append(p.pushed, n)
				return mergeOf(n, i)
			}
			n.Expr = walk(n.Expr, inSubquery)
			if n.Param != nil {
				n.Param = walk(n.Param, inSubquery)
			}
		case *parser.BinaryExpr:
			n.LHS, n.RHS = walk(n.LHS, inSubquery), walk(n.RHS, inSubquery)
		case *parser.ParenExpr:
			n.Expr = walk(n.Expr, inSubquery)
		case *parser.UnaryExpr:
			n.Expr = walk(n.Expr, inSubquery)
		case *parser.Call:
			for i, a := range n.Args {
				n.Args[i] = walk(a, inSubquery)
			}
		case *parser.SubqueryExpr:
			n.Expr = walk(n.Expr, true)
		}
		return e
	}
	merged := walk(expr, false)
	if len(p.pushed) > 0 {
		p.merge = merged.String()
	}
	return p
}

// mergeOf is the aggregation that merges the nodes' parts of a, pushed as the i-th.
func mergeOf(a *parser.AggregateExpr, i int) *parser.AggregateExpr {
	name := partialName(i)
	m := &parser.AggregateExpr{
		Op:      pushedOps[a.Op],
		Param:   a.Param,
		Without: a.Without,
		Expr: &parser.VectorSelector{Name: name, LabelMatchers: []*labels.Matcher{
			labels.MustNewMatcher(labels.MatchEqual, labels.MetricName, name)}},
		Grouping: slices.Clone(a.Grouping),
	}
	if a.Without && tagsParts(a.Op) {
		m.Grouping = append(m.Grouping, nodePartLabel)
	}
	return m
}

// tagsParts reports whether the parts of op carry nodePartLabel: those whose series are not
// the input's own (sums, counts ...), so that two nodes' could have the same labels.
func tagsParts(op parser.ItemType) bool { return op != parser.TOPK && op != parser.BOTTOMK }

// Plan implements the cluster API's pushdown (see Pushdown): for the query qs over [start,
// end] at step (0: an instant query at start) it returns the Queryable and query to give the
// engine instead: the query's pushed aggregations replaced by their merge over the nodes'
// parts, which it has evaluated (the local one with ng over the local series, each peer's by
// its node-local API, at most Options.Parallel at once). A query with nothing to push comes
// back as it is, over c. ctx bounds the parts' evaluation.
func (c *Queryable) Plan(ctx context.Context, ng *promql.Engine, qs string, start, end time.Time, step time.Duration) (storage.Queryable, string) {
	if strings.Contains(qs, partialPrefix) {
		return c, qs
	}
	expr, err := parser.NewParser(parser.Options{}).ParseExpr(qs)
	if err != nil {
		return c, qs // the engine reports it
	}
	p := makePlan(expr)
	if len(p.pushed) == 0 {
		return c, qs
	}
	pq := &planned{c: c, parts: make([][]*peerSeries, len(p.pushed)), errs: make([]error, len(p.pushed))}
	if step <= 0 {
		step = time.Second // a range of one step
	}
	// The peers' parts are asked for while this node evaluates its own under the request's
	// query slot; they are waited for without it (querylimit.Away): two nodes asking each other
	// at once would each wait for the slot the other holds.
	peersDone := make(chan struct{})
	go func() {
		defer close(peersDone)
		pq.peers(ctx, p, start, end, step)
	}()
	pq.local(ctx, ng, p, start, end, step)
	querylimit.Away(ctx, func() { <-peersDone })
	for i := range pq.parts {
		fillStale(pq.parts[i], end.UnixMilli(), step.Milliseconds())
		slices.SortFunc(pq.parts[i], func(a, b *peerSeries) int { return labels.Compare(a.lset, b.lset) })
	}
	return pq, p.merge
}

// planned is a planned query's Queryable: the pushed aggregations' parts under their
// partialName, every other selector the cluster's.
type planned struct {
	c     *Queryable
	mu    sync.Mutex
	parts [][]*peerSeries // by pushed aggregation: every node's series
	errs  []error         // by pushed aggregation: the local evaluation's error
	annos annotations.Annotations
}

// add appends a node's parts, tagged with its name when the part's aggregation needs it.
func (pq *planned) add(node string, p plan, parts [][]*peerSeries) {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	for i, list := range parts {
		if tagsParts(p.pushed[i].Op) {
			for _, s := range list {
				b := labels.NewBuilder(s.lset)
				b.Set(nodePartLabel, node)
				s.lset = b.Labels()
			}
		}
		pq.parts[i] = append(pq.parts[i], list...)
	}
}

// local evaluates the pushed aggregations over the local series.
func (pq *planned) local(ctx context.Context, ng *promql.Engine, p plan, start, end time.Time, step time.Duration) {
	parts := make([][]*peerSeries, len(p.pushed))
	for i, a := range p.pushed {
		list, annos, err := evalPart(ctx, ng, pq.c.local, a.String(), start, end, step)
		pq.mu.Lock()
		pq.annos.Merge(annos)
		pq.errs[i] = err
		pq.mu.Unlock()
		parts[i] = list
	}
	pq.add(pq.c.opt.Node, p, parts)
}

// evalPart evaluates qs over q as a range query and copies its answer out of the engine's.
func evalPart(ctx context.Context, ng *promql.Engine, q storage.Queryable, qs string, start, end time.Time, step time.Duration) ([]*peerSeries, annotations.Annotations, error) {
	qry, err := ng.NewRangeQuery(ctx, q, nil, qs, start, end, step)
	if err != nil {
		return nil, nil, err
	}
	defer qry.Close()
	res := qry.Exec(ctx)
	if res.Err != nil {
		return nil, res.Warnings, res.Err
	}
	m, ok := res.Value.(promql.Matrix)
	if !ok {
		return nil, res.Warnings, fmt.Errorf("a range query's answer of type %s", res.Value.Type())
	}
	list := make([]*peerSeries, 0, len(m))
	for _, s := range m {
		pts := make(points, len(s.Floats))
		for j, f := range s.Floats {
			pts[j] = point{t: f.T, f: f.F}
		}
		list = append(list, &peerSeries{lset: s.Metric, pts: pts})
	}
	return list, res.Warnings, nil
}

// peers asks every peer for its parts of the pushed aggregations, at most Parallel at once;
// a peer whose answer is missing or unreadable is left out with a warning.
func (pq *planned) peers(ctx context.Context, p plan, start, end time.Time, step time.Duration) {
	q := &querier{c: pq.c}
	extra := []*labels.Matcher(nil)
	if pq.c.opt.PeerMatchers != nil {
		extra = pq.c.opt.PeerMatchers(ctx)
	}
	queries := make([]string, len(p.pushed))
	for i, a := range p.pushed {
		queries[i] = withMatchers(a, extra)
	}
	members := pq.c.opt.Members()
	annos := q.fanOut(ctx, members, func(ctx context.Context, _ int, m hub.Member) error {
		parts := make([][]*peerSeries, len(queries))
		var peerAnnos annotations.Annotations
		for i, qs := range queries {
			params := url.Values{"query": {qs}, "start": {formatTime(start.UnixMilli())},
				"end": {formatTime(end.UnixMilli())}, "step": {strconv.FormatFloat(step.Seconds(), 'f', -1, 64)},
				apiwire.PeerPartParam: {apiwire.PeerPartV1}}
			result, ws, err := q.peerQuery(ctx, m, params)
			if err != nil {
				return err
			}
			peerAnnos.Merge(ws)
			list, err := checkPart(result, start.UnixMilli(), end.UnixMilli())
			if err != nil {
				return fmt.Errorf("reading the answer: %w", err)
			}
			parts[i] = list
		}
		pq.add(m.Name, p, parts)
		pq.mu.Lock()
		pq.annos.Merge(peerAnnos)
		pq.mu.Unlock()
		return nil
	})
	pq.mu.Lock()
	pq.annos.Merge(annos)
	pq.mu.Unlock()
}

// checkPart checks a peer's part: series of distinct labels whose points are in time order
// within [start, end] (the merge reads them as a storage's), and returns them.
func checkPart(result []wireSeries, start, end int64) ([]*peerSeries, error) {
	list := make([]*peerSeries, len(result))
	for j, w := range result {
		last := start - 1
		for _, p := range w.pts {
			if p.t <= last || p.t > end {
				return nil, fmt.Errorf("series %d: point at %d out of order or outside [%d, %d]", j, p.t, start, end)
			}
			last = p.t
		}
		list[j] = &peerSeries{lset: w.lset, pts: w.pts}
	}
	slices.SortFunc(list, func(a, b *peerSeries) int { return labels.Compare(a.lset, b.lset) })
	for j := 1; j < len(list); j++ {
		if labels.Equal(list[j-1].lset, list[j].lset) {
			return nil, fmt.Errorf("two series of the same labels")
		}
	}
	return list, nil
}

// withMatchers is a written with extra added to each of its selectors (a peer's answer is only
// what the caller may see of another node).
func withMatchers(a *parser.AggregateExpr, extra []*labels.Matcher) string {
	if len(extra) == 0 {
		return a.String()
	}
	e, err := parser.NewParser(parser.Options{}).ParseExpr(a.String()) // a copy
	if err != nil {
		return a.String() // cannot be: a was parsed
	}
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			vs.LabelMatchers = append(vs.LabelMatchers, extra...)
		}
		return nil
	})
	return e.String()
}

// peerQuery fetches a peer's query_range answer and returns its matrix, warnings and infos,
// read in one pass.
func (q *querier) peerQuery(ctx context.Context, m hub.Member, params url.Values) ([]wireSeries, annotations.Annotations, error) {
	body, err := q.c.opt.Fetch.Get(ctx, m, PeerPrefix+"query_range?"+params.Encode(), q.c.opt.MaxAnswer)
	if err != nil {
		return nil, nil, peerErr(err)
	}
	var annos annotations.Annotations
	if series, warn, info, err := apiwire.DecodePeerPart(body); !errors.Is(err, apiwire.ErrNotPeerSelect) {
		if err != nil {
			return nil, nil, fmt.Errorf("reading the answer: %w", err)
		}
		result := make([]wireSeries, len(series))
		for j, ps := range series {
			b := labels.NewScratchBuilder(len(ps.Labels) / 2)
			for k := 0; k+1 < len(ps.Labels); k += 2 {
				b.Add(ps.Labels[k], ps.Labels[k+1])
			}
			b.Sort()
			result[j].lset = b.Labels()
			if result[j].pts, err = chunkPoints(ps.Chunks); err != nil {
				return nil, nil, fmt.Errorf("reading the answer: series %d: %w", j, err)
			}
		}
		addPeerAnnotations(&annos, warn, info)
		return result, annos, nil
	}
	// An older agent's JSON.
	var ans struct {
		Status string `json:"status"`
		Data   struct {
			ResultType string       `json:"resultType"`
			Result     []wireSeries `json:"result"`
		} `json:"data"`
		Warnings []string `json:"warnings"`
		Infos    []string `json:"infos"`
	}
	if err := json.Unmarshal(body, &ans); err != nil {
		return nil, nil, fmt.Errorf("reading the answer: %w", err)
	}
	if ans.Status != "success" {
		return nil, nil, fmt.Errorf("answer status %q", ans.Status)
	}
	if ans.Data.ResultType != "matrix" {
		return nil, nil, fmt.Errorf("answer of type %q, want matrix", ans.Data.ResultType)
	}
	addPeerAnnotations(&annos, ans.Warnings, ans.Infos)
	return ans.Data.Result, annos, nil
}

// addPeerAnnotations adds a peer's warnings and infos to annos.
func addPeerAnnotations(annos *annotations.Annotations, warnings, infos []string) {
	for _, w := range warnings {
		annos.Add(peerAnnotation{text: w, kind: annotations.PromQLWarning})
	}
	for _, w := range infos {
		annos.Add(peerAnnotation{text: w, kind: annotations.PromQLInfo})
	}
}

// chunkPoints reads a peer part's XOR chunks into points (their order and range are checked
// by checkPart).
func chunkPoints(raw [][]byte) (points, error) {
	var pts points
	var it chunkenc.Iterator
	for _, r := range raw {
		if len(r) < 2 { // its count of samples: NumSamples reads it unchecked
			return nil, fmt.Errorf("chunk of %d bytes", len(r))
		}
		c, err := chunkenc.FromData(chunkenc.EncXOR, r)
		if err != nil {
			return nil, err
		}
		if pts == nil {
			// Sized by the first chunk's count, which a sample's bits bound (the count is the
			// peer's word: a hostile one must not make this allocate what its bytes cannot hold).
			pts = make(points, 0, min(c.NumSamples(), 8*len(r)))
		}
		n := 0
		it = c.Iterator(it)
		for vt := it.Next(); vt != chunkenc.ValNone; vt = it.Next() {
			if vt != chunkenc.ValFloat {
				return nil, fmt.Errorf("a %s sample", vt)
			}
			t, f := it.At()
			pts = append(pts, point{t: t, f: f})
			n++
		}
		if err := it.Err(); err != nil {
			return nil, err
		}
		if n != c.NumSamples() || n == 0 {
			return nil, fmt.Errorf("chunk of %d samples holding %d", c.NumSamples(), n)
		}
	}
	return pts, nil
}

// peerAnnotation is a warning or an info of a peer's answer, as the peer wrote it.
type peerAnnotation struct {
	text string
	kind error // annotations.PromQLWarning or PromQLInfo
}

func (a peerAnnotation) Error() string { return a.text }
func (a peerAnnotation) Unwrap() error { return a.kind }

// fillStale puts a staleness marker one step after every point of a series that the next
// step has none, so that the merge's lookback does not carry the point on.
func fillStale(list []*peerSeries, end, step int64) {
	if step <= 0 {
		return
	}
	stale := math.Float64frombits(value.StaleNaN)
	for _, s := range list {
		var out points
		for j, p := range s.pts {
			next := p.t + step
			if (j+1 < len(s.pts) && s.pts[j+1].t <= next) || next > end {
				if out != nil {
					out = append(out, p)
				}
				continue
			}
			if out == nil {
				out = append(make(points, 0, 2*len(s.pts)), s.pts[:j]...)
			}
			out = append(out, p, point{t: next, f: stale})
		}
		if out != nil {
			s.pts = out
		}
	}
}

// Querier implements storage.Queryable.
func (pq *planned) Querier(mint, maxt int64) (storage.Querier, error) {
	cq, err := pq.c.Querier(mint, maxt)
	if err != nil {
		return nil, err
	}
	return &plannedQuerier{Querier: cq, pq: pq, mint: mint, maxt: maxt}, nil
}

type plannedQuerier struct {
	storage.Querier
	pq         *planned
	mint, maxt int64
}

// Select implements storage.Querier: a part's series for its partialName, the cluster's
// otherwise.
func (q *plannedQuerier) Select(ctx context.Context, sortSeries bool, hints *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	for _, m := range ms {
		if m.Name != labels.MetricName || m.Type != labels.MatchEqual || !strings.HasPrefix(m.Value, partialPrefix) {
			continue
		}
		i, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(m.Value, partialPrefix), "__"))
		if err != nil || i < 0 || i >= len(q.pq.parts) {
			break
		}
		if err := q.pq.errs[i]; err != nil {
			return storage.ErrSeriesSet(err)
		}
		mint, maxt := q.mint, q.maxt
		if hints != nil {
			mint, maxt = max(mint, hints.Start), min(maxt, hints.End)
		}
		var list []*peerSeries
		for _, s := range q.pq.parts[i] {
			lo, _ := slices.BinarySearchFunc(s.pts, mint, func(p point, t int64) int { return cmpInt(p.t, t) })
			hi, _ := slices.BinarySearchFunc(s.pts, maxt+1, func(p point, t int64) int { return cmpInt(p.t, t) })
			if lo < hi {
				list = append(list, &peerSeries{lset: s.lset, pts: s.pts[lo:hi]})
			}
		}
		return &warned{SeriesSet: &seriesSet{list: list, i: -1}, annos: q.pq.annos}
	}
	return q.Querier.Select(ctx, sortSeries, hints, ms...)
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
