package promstore

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/util/annotations"
	"github.com/prometheus/prometheus/util/teststorage"

	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/promname"
	"github.com/cantal-go/cantal/internal/series"
)

// historyStorage is the storage Prometheus's promqltest files run against: their load
// commands append into a teststorage (the appenders, StartTime and Close are its), and every
// query reads a history.Store holding the same float samples through a Storage over a
// StoreCatalog. The store is rebuilt, scan by scan over the union of the samples' times, after
// each commit of an appender.
type historyStorage struct {
	*teststorage.TestStorage

	mu    sync.Mutex
	gen   int // commits seen
	built int // gen of st
	st    *Storage
	// hists are the series (labels.String) with histogram samples, which the history
	// cannot hold: they are left out of it whole.
	hists map[string]bool
}

// identityNamer serves the Cantal labels as they are: __name__ is the metric name.
func identityNamer(dst []promname.Series, l series.Labels, _ series.Kind) []promname.Series {
	s := promname.Series{Name: l[labels.MetricName], Scale: 1}
	for n, v := range l {
		if n != labels.MetricName {
			s.Labels = append(s.Labels, promname.Label{Name: n, Value: v})
		}
	}
	return append(dst, s)
}

func (h *historyStorage) Appender(ctx context.Context) storage.Appender {
	return &countingAppender{Appender: h.TestStorage.Appender(ctx), h: h}
}

func (h *historyStorage) AppenderV2(ctx context.Context) storage.AppenderV2 {
	return &countingAppenderV2{AppenderV2: h.TestStorage.AppenderV2(ctx), h: h}
}

type countingAppender struct {
	storage.Appender
	h *historyStorage
}

func (a *countingAppender) Commit() error { a.h.commit(); return a.Appender.Commit() }

type countingAppenderV2 struct {
	storage.AppenderV2
	h *historyStorage
}

func (a *countingAppenderV2) Commit() error { a.h.commit(); return a.AppenderV2.Commit() }

func (h *historyStorage) commit() {
	h.mu.Lock()
	h.gen++
	h.mu.Unlock()
}

func (h *historyStorage) Querier(mint, maxt int64) (storage.Querier, error) {
	st, err := h.storage()
	if err != nil {
		return nil, err
	}
	return st.Querier(mint, maxt)
}

// storage returns the Storage over a history holding the teststorage's samples.
func (h *historyStorage) storage() (*Storage, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.st != nil && h.built == h.gen {
		return h.st, nil
	}
	q, err := h.TestStorage.Querier(math.MinInt64, math.MaxInt64)
	if err != nil {
		return nil, err
	}
	defer q.Close()
	hist := history.New(history.Options{})
	at := map[int64][]history.Point{} // by time: (series id, bits)
	ss := q.Select(context.Background(), false, nil, labels.MustNewMatcher(labels.MatchRegexp, labels.MetricName, ".*"))
	var it chunkenc.Iterator
	h.hists = map[string]bool{}
	var pts []history.Point
series:
	for ss.Next() {
		s := ss.At()
		pts = pts[:0]
		it = s.Iterator(it)
		for vt := it.Next(); vt != chunkenc.ValNone; vt = it.Next() {
			if vt != chunkenc.ValFloat {
				h.hists[s.Labels().String()] = true
				continue series
			}
			t, v := it.At()
			pts = append(pts, history.Point{TS: t, Bits: math.Float64bits(v)})
		}
		l := series.Labels{}
		s.Labels().Range(func(x labels.Label) { l[x.Name] = x.Value })
		id, err := hist.Series(l.Key(), series.Float)
		if err != nil {
			return nil, err
		}
		for _, p := range pts {
			at[p.TS] = append(at[p.TS], history.Point{TS: int64(id), Bits: p.Bits})
		}
	}
	if err := ss.Err(); err != nil {
		return nil, err
	}
	times := make([]int64, 0, len(at))
	for t := range at {
		times = append(times, t)
	}
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	for _, t := range times {
		hist.Begin(t)
		for _, p := range at[t] {
			hist.Add(history.ID(p.TS), p.Bits)
		}
		hist.Commit()
	}
	h.st = New(hist, StoreCatalog(hist), Options{Namer: identityNamer})
	h.built = h.gen
	return h.st, nil
}

// withHistograms names the upstream test files that load native histograms (with or without
// floats beside them): the history holds floats only, so these run in
// TestPromQLTestFilesSameAsTeststorage, not here. Every other file runs whole.
var withHistograms = map[string]bool{
	"testdata/aggregators.test":       true,
	"testdata/extended_vectors.test":  true,
	"testdata/functions.test":         true,
	"testdata/histograms.test":        true,
	"testdata/info.test":              true,
	"testdata/limit.test":             true,
	"testdata/native_histograms.test": true,
	"testdata/operators.test":         true,
	"testdata/range_queries.test":     true,
	"testdata/start_timestamps.test":  true,
	"testdata/subquery.test":          true,
	"testdata/type_and_unit.test":     true,
}

// only is a promqltest.TBRun that runs the files for which run says so.
type only struct {
	*testing.T
	run func(name string) bool
}

func (o only) Run(name string, fn func(*testing.T)) bool {
	if !o.run(name) {
		return true
	}
	return o.T.Run(name, fn)
}

func newHistoryStorage(tb testing.TB) storage.Storage {
	return &historyStorage{TestStorage: promqltest.NewBuiltinTestStorage(tb)}
}

// TestPromQLTestFiles runs Prometheus's own PromQL test files (the promqltest package of the
// Prometheus module, its built-in testdata) of float samples with every query reading the
// agent's history through this package's Storage: their expectations are checked against
// what the adapter answers.
func TestPromQLTestFiles(t *testing.T) {
	ng := promqltest.NewTestEngine(t, false, 0, 50_000_000)
	ran := 0
	promqltest.RunBuiltinTestsWithStorage(only{t, func(n string) bool {
		if withHistograms[n] {
			return false
		}
		ran++
		return true
	}}, ng, newHistoryStorage)
	if ran < 10 {
		t.Fatalf("ran %d test files, want at least 10", ran)
	}
}

// TestPromQLTestFilesSameAsTeststorage runs every upstream test file, histograms included,
// and evaluates each of its queries three times: over the teststorage (that answer is what the
// file's expectations check), over the adapter, and over the teststorage without the series
// that have histogram samples (those the history holds). The last two must give the same
// answer, error or annotation count for every query (floats to 12 digits). Only
// start_timestamps.test is left out: its rate() and increase() read the samples' start
// timestamps, which the history does not keep.
func TestPromQLTestFilesSameAsTeststorage(t *testing.T) {
	d := &diffEngine{t: t, ng: promqltest.NewTestEngine(t, false, 0, 50_000_000)}
	promqltest.RunBuiltinTestsWithStorage(only{t, func(n string) bool { return n != "testdata/start_timestamps.test" }}, d, newHistoryStorage)
	t.Logf("%d queries compared", d.compared.Load())
	if d.compared.Load() < 1000 {
		t.Fatalf("compared %d queries, want at least 1000", d.compared.Load())
	}
}

type diffEngine struct {
	t        *testing.T
	ng       *promql.Engine
	compared atomic.Int64
}

func (d *diffEngine) NewInstantQuery(ctx context.Context, q storage.Queryable, opts promql.QueryOpts, qs string, ts time.Time) (promql.Query, error) {
	return d.three(q, qs, func(q storage.Queryable) (promql.Query, error) {
		return d.ng.NewInstantQuery(ctx, q, opts, qs, ts)
	})
}

func (d *diffEngine) NewRangeQuery(ctx context.Context, q storage.Queryable, opts promql.QueryOpts, qs string, start, end time.Time, step time.Duration) (promql.Query, error) {
	return d.three(q, qs, func(q storage.Queryable) (promql.Query, error) {
		return d.ng.NewRangeQuery(ctx, q, opts, qs, start, end, step)
	})
}

func (d *diffEngine) three(q storage.Queryable, qs string, mk func(storage.Queryable) (promql.Query, error)) (promql.Query, error) {
	h := q.(*historyStorage)
	full, err := mk(h.TestStorage)
	if err != nil {
		return nil, err
	}
	ours, err := mk(h)
	if err != nil {
		return nil, err
	}
	floats, err := mk(floatsOnly{h})
	if err != nil {
		return nil, err
	}
	return &diffQuery{Query: full, d: d, qs: qs, ours: ours, floats: floats}, nil
}

type diffQuery struct {
	promql.Query
	d            *diffEngine
	qs           string
	ours, floats promql.Query
}

func (q *diffQuery) Exec(ctx context.Context) *promql.Result {
	a, b := q.ours.Exec(ctx), q.floats.Exec(ctx)
	q.d.compared.Add(1)
	if sa, sb := answer(a), answer(b); sa != sb {
		q.d.t.Errorf("%s:\nadapter:     %s\nteststorage: %s", q.qs, sa, sb)
	}
	return q.Query.Exec(ctx)
}

// answer is a comparable form of a result: its error, or its value with every float
// rounded to 12 significant digits (summation order may move the last bits: the adapter
// passes series in label order, the TSDB in its postings order), and how many warnings and
// infos it carries.
func answer(r *promql.Result) string {
	if r.Err != nil {
		return "error: " + r.Err.Error()
	}
	round := func(f float64) string { return strconv.FormatFloat(f, 'g', 12, 64) }
	var b strings.Builder
	switch v := r.Value.(type) {
	case promql.Vector:
		lines := make([]string, len(v))
		for i, s := range v {
			lines[i] = fmt.Sprintf("%s %s@%d", s.Metric, round(s.F), s.T)
		}
		slices.Sort(lines)
		b.WriteString(strings.Join(lines, "\n"))
	case promql.Matrix:
		lines := make([]string, len(v))
		for i, s := range v {
			var l strings.Builder
			l.WriteString(s.Metric.String())
			for _, p := range s.Floats {
				fmt.Fprintf(&l, " %s@%d", round(p.F), p.T)
			}
			lines[i] = l.String()
		}
		slices.Sort(lines)
		b.WriteString(strings.Join(lines, "\n"))
	case promql.Scalar:
		fmt.Fprintf(&b, "%s@%d", round(v.V), v.T)
	default:
		b.WriteString(r.Value.String())
	}
	w, i := r.Warnings.AsStrings("", 0, 0)
	return fmt.Sprintf("%s (%d warnings, %d infos)", b.String(), len(w), len(i))
}

// floatsOnly is the teststorage without the series that have histogram samples.
type floatsOnly struct{ h *historyStorage }

func (f floatsOnly) Querier(mint, maxt int64) (storage.Querier, error) {
	if _, err := f.h.storage(); err != nil { // fills f.h.hists
		return nil, err
	}
	q, err := f.h.TestStorage.Querier(mint, maxt)
	if err != nil {
		return nil, err
	}
	return filtered{q, f.h.hists}, nil
}

type filtered struct {
	storage.Querier
	hists map[string]bool
}

func (f filtered) Select(ctx context.Context, sorted bool, hints *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	var keep []storage.Series
	ss := f.Querier.Select(ctx, sorted, hints, ms...)
	for ss.Next() {
		if !f.hists[ss.At().Labels().String()] {
			keep = append(keep, ss.At())
		}
	}
	if ss.Err() != nil {
		return ss
	}
	return &listSet{list: keep, i: -1, warn: ss.Warnings()}
}

type listSet struct {
	list []storage.Series
	i    int
	warn annotations.Annotations
}

func (s *listSet) Next() bool                        { s.i++; return s.i < len(s.list) }
func (s *listSet) At() storage.Series                { return s.list[s.i] }
func (s *listSet) Err() error                        { return nil }
func (s *listSet) Warnings() annotations.Annotations { return s.warn }
