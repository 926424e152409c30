package promcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/cantal-go/cantal/internal/apiwire"
	"github.com/cantal-go/cantal/internal/hub"
	"github.com/cantal-go/cantal/internal/promapi"
	"github.com/cantal-go/cantal/internal/querylimit"
)

// counted counts, by path, the requests a peer's server is asked, and keeps their queries.
type counted struct {
	mu      sync.Mutex
	paths   map[string]int
	queries []string
}

func (c *counted) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.paths[r.URL.Path]++
		if q := r.URL.Query().Get("query"); q != "" {
			c.queries = append(c.queries, q)
		}
		c.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

func (c *counted) reset() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.paths
	c.paths, c.queries = map[string]int{}, nil
	return p
}

// pushCluster is the cluster API over a (local), b and c (peers, c's scans ending half-way),
// with the pushdown (Planner) or without, and the count of the peers' requests.
func pushCluster(t *testing.T, scans int) (push, fetch http.Handler, reqs *counted) {
	t.Helper()
	reqs = &counted{paths: map[string]int{}}
	var members []hub.Member
	for _, p := range []struct {
		name  string
		load  float64
		scans int
		cpus  int
	}{{"b", 2, scans, 2}, {"c", 3, scans / 2, 4}} {
		st := node(t, p.name, p.load, p.scans, p.cpus)
		mux := http.NewServeMux()
		mux.Handle(promapi.Prefix, promapi.New(st, promapi.Options{Now: func() time.Time { return time.UnixMilli(t0 + 3600_000) }}))
		mux.Handle(apiwire.PeerSelectPath, PeerHandler(st, PeerOptions{}))
		srv := httptest.NewServer(reqs.wrap(mux))
		t.Cleanup(srv.Close)
		members = append(members, hub.Member{ID: p.name, Name: p.name, HTTP: strings.TrimPrefix(srv.URL, "http://"), Up: true})
	}
	local := node(t, "a", 1, scans, 2)
	q := New(local, Options{Node: "a", Members: func() []hub.Member { return members }, Fetch: &hub.Fetcher{Timeout: 5 * time.Second}})
	now := func() time.Time { return time.UnixMilli(t0 + 3600_000) }
	push = promapi.New(local, promapi.Options{Prefix: promapi.ClusterPrefix, Queryable: q, Planner: q, Now: now})
	fetch = promapi.New(local, promapi.Options{Prefix: promapi.ClusterPrefix, Queryable: q, Now: now})
	return push, fetch, reqs
}

// sameAnswer reports how got differs from want: the same series (labels), at the same times,
// values within a relative 1e-9 (sums of sums are added in another order).
func sameAnswer(got, want answer) error {
	if got.Status != want.Status || got.ErrorType != want.ErrorType || got.Data.ResultType != want.Data.ResultType {
		return fmt.Errorf("status %s %s %s, want %s %s %s (%s / %s)", got.Status, got.ErrorType, got.Data.ResultType,
			want.Status, want.ErrorType, want.Data.ResultType, got.Error, want.Error)
	}
	key := func(m map[string]string) string { return labels.FromMap(m).String() }
	type pts = [][2]any
	index := func(a answer) map[string]pts {
		out := map[string]pts{}
		for _, r := range a.Data.Result {
			v := r.Values
			if v == nil && r.Value[0] != nil {
				v = pts{r.Value}
			}
			out[key(r.Metric)] = v
		}
		return out
	}
	g, w := index(got), index(want)
	if len(got.Data.Result) != len(want.Data.Result) || len(g) != len(w) {
		return fmt.Errorf("%d series, want %d", len(got.Data.Result), len(want.Data.Result))
	}
	for k, wv := range w {
		gv, ok := g[k]
		if !ok {
			return fmt.Errorf("no series %s", k)
		}
		if len(gv) != len(wv) {
			return fmt.Errorf("%s: %d points, want %d", k, len(gv), len(wv))
		}
		for i := range wv {
			if gv[i][0] != wv[i][0] {
				return fmt.Errorf("%s: point %d at %v, want %v", k, i, gv[i][0], wv[i][0])
			}
			gf, _ := strconv.ParseFloat(gv[i][1].(string), 64)
			wf, _ := strconv.ParseFloat(wv[i][1].(string), 64)
			if gf != wf && !(math.IsNaN(gf) && math.IsNaN(wf)) && math.Abs(gf-wf) > 1e-9*math.Max(math.Abs(gf), math.Abs(wf)) {
				return fmt.Errorf("%s: point %d = %v, want %v", k, i, gv[i][1], wv[i][1])
			}
		}
	}
	return nil
}

// TestPushdownSameAsFetch: every query gives the same answer pushed down as fetched and
// evaluated once (the whole cluster's series at the asking node), instant and range, over a
// peer whose series end half-way (its parts end there too: a merge does not carry its last
// point on); the queries whose aggregations are pushed ask each peer query_range only, the
// others ask the peer select only.
func TestPushdownSameAsFetch(t *testing.T) {
	const (
		none = iota
		all
		partly // an aggregation pushed, a selector fetched
	)
	const scans = 300 // 10 minutes
	push, fetch, reqs := pushCluster(t, scans)
	end := float64(t0+(scans-1)*2000) / 1000
	for _, c := range []struct {
		q      string
		pushed int
	}{
		{`sum(rate(node_cpu_seconds_total[1m]))`, all},
		{`sum by (cpu)(rate(node_cpu_seconds_total[1m]))`, all},
		{`sum without (cpu)(rate(node_cpu_seconds_total[1m]))`, all},
		{`sum by (node)(rate(node_cpu_seconds_total[1m]))`, all},
		{`count(node_cpu_seconds_total)`, all},
		{`count by (cpu)(node_cpu_seconds_total)`, all},
		{`count without (node, instance)(node_cpu_seconds_total)`, all},
		{`max(node_load1)`, all},
		{`min by (instance)(node_load1)`, all},
		{`group by (node)(node_load1)`, all},
		{`topk(2, node_load1)`, all},
		{`bottomk(3, rate(node_cpu_seconds_total[1m]))`, all},
		{`topk by (cpu)(1, rate(node_cpu_seconds_total[1m]))`, all},
		{`sum(rate(node_cpu_seconds_total[1m])) / count(node_cpu_seconds_total)`, all},
		{`sum(node_load1) - max(node_load1)`, all},
		{`sum by (node)(sum by (node, cpu)(rate(node_cpu_seconds_total[1m])))`, all},
		{`sum(node_load1 * on(node, instance) group_left max by (node, instance)(node_load1))`, all},
		{`sum(node_load1 > 2.5)`, all},
		{`sum(clamp_max(node_load1, 3) * 2)`, all},
		{`count(node_load1 offset 1m)`, all},
		{`sum(increase(node_cpu_seconds_total[2m])) > 0`, all},
		{`absent(sum(no_such_metric))`, all},
		// Not pushed: the same answer from the fetch.
		{`avg(node_load1)`, all},
		{`avg by (cpu)(rate(node_cpu_seconds_total[1m]))`, all},
		{`avg without (cpu)(rate(node_cpu_seconds_total[1m]))`, all},
		{`stddev(node_load1)`, none},
		{`sum(vector(1))`, none},
		{`sum(label_replace(node_load1, "node", "x", "", ""))`, none},
		{`sum(rate(node_cpu_seconds_total[1m]) * ignoring(node, instance) group_left max without (node, instance)(rate(node_cpu_seconds_total[1m])))`, partly},
		{`sum by (cpu)(sum by (cpu)(rate(node_cpu_seconds_total[1m])))`, all}, // the inner one
		{`max_over_time(sum(node_load1)[5m:30s])`, none},
		{`quantile(0.5, node_load1)`, none},
	} {
		for _, kind := range []struct {
			path   string
			params url.Values
		}{
			{"query", url.Values{"time": {fmt.Sprint(end)}}},
			{"query", url.Values{"time": {fmt.Sprint(end - 300)}}},
			{"query_range", url.Values{"start": {fmt.Sprint(end - 590)}, "end": {fmt.Sprint(end)}, "step": {"10"}}},
			{"query_range", url.Values{"start": {fmt.Sprint(end - 37)}, "end": {fmt.Sprint(end + 60)}, "step": {"2"}}},
		} {
			kind.params.Set("query", c.q)
			reqs.reset()
			_, want, wb := get(t, fetch, kind.path, kind.params)
			reqs.reset()
			_, got, gb := get(t, push, kind.path, kind.params)
			asked := reqs.reset()
			name := c.q + " " + kind.path + " " + kind.params.Encode()
			if want.Status != "success" {
				t.Fatalf("%s: fetched: %s", name, wb)
			}
			if len(want.Data.Result) == 0 && !strings.Contains(c.q, "no_such") {
				t.Fatalf("%s: fetched: no series (a case that shows nothing)", name)
			}
			if err := sameAnswer(got, want); err != nil {
				t.Errorf("%s: pushed down: %v\npushed: %s\nfetched: %s", name, err, gb, wb)
			}
			select_, ranges := asked[apiwire.PeerSelectPath], asked[PeerPrefix+"query_range"]
			switch {
			case c.pushed == all && (ranges == 0 || select_ != 0):
				t.Errorf("%s: peers asked %v, want query_range only (pushed down)", name, asked)
			case c.pushed == none && ranges != 0:
				t.Errorf("%s: peers asked %v, want no query_range (not pushed)", name, asked)
			case c.pushed == partly && (ranges == 0 || select_ == 0):
				t.Errorf("%s: peers asked %v, want query_range and the peer select (partly pushed)", name, asked)
			}
		}
	}
}

// TestPushdownLeavesOutPeersWithAWarning: a peer that is down or cut is named in a pushed
// query's warnings, and the others' parts are in the answer.
func TestPushdownLeavesOutPeersWithAWarning(t *testing.T) {
	const scans = 30
	local := node(t, "a", 1, scans, 2)
	b := peer(t, node(t, "b", 2, scans, 2))
	members := []hub.Member{
		{ID: "b", Name: "b", HTTP: strings.TrimPrefix(b.URL, "http://"), Up: true},
		{ID: "d", Name: "d", HTTP: "127.0.0.1:1", Up: false},
	}
	q := New(local, Options{Node: "a", Members: func() []hub.Member { return members }, Fetch: &hub.Fetcher{Timeout: time.Second}})
	h := promapi.New(local, promapi.Options{Prefix: promapi.ClusterPrefix, Queryable: q, Planner: q,
		Now: func() time.Time { return time.UnixMilli(t0 + 3600_000) }})
	at := fmt.Sprint(float64(t0+(scans-1)*2000) / 1000)
	_, a, body := get(t, h, "query", url.Values{"query": {`sum(node_load1)`}, "time": {at}})
	if a.Status != "success" || len(a.Data.Result) != 1 {
		t.Fatalf("answer %s", body)
	}
	want := 1 + 2 + 2*float64(scans-1)/100
	if got, _ := strconv.ParseFloat(a.Data.Result[0].Value[1].(string), 64); math.Abs(got-want) > 1e-9 {
		t.Errorf("sum(node_load1) = %v, want a's and b's %v", got, want)
	}
	if len(a.Warnings) != 1 || !strings.Contains(a.Warnings[0], "node d left out") {
		t.Errorf("warnings %q, want node d left out", a.Warnings)
	}
}

// TestPushdownAsksPeersWithPeerMatchers: a pushed aggregation asked of a peer carries
// Options.PeerMatchers in each of its selectors, so a caller sees of another node only what
// it may.
func TestPushdownAsksPeersWithPeerMatchers(t *testing.T) {
	const scans = 30
	reqs := &counted{paths: map[string]int{}}
	st := node(t, "b", 2, scans, 2)
	srv := httptest.NewServer(reqs.wrap(promapi.New(st, promapi.Options{Now: func() time.Time { return time.UnixMilli(t0 + 3600_000) }})))
	t.Cleanup(srv.Close)
	members := []hub.Member{{ID: "b", Name: "b", HTTP: strings.TrimPrefix(srv.URL, "http://"), Up: true}}
	local := node(t, "a", 1, scans, 2)
	q := New(local, Options{Node: "a", Members: func() []hub.Member { return members }, Fetch: &hub.Fetcher{Timeout: time.Second},
		PeerMatchers: func(context.Context) []*labels.Matcher {
			return []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "pid", "")}
		}})
	h := promapi.New(local, promapi.Options{Prefix: promapi.ClusterPrefix, Queryable: q, Planner: q,
		Now: func() time.Time { return time.UnixMilli(t0 + 3600_000) }})
	at := fmt.Sprint(float64(t0+(scans-1)*2000) / 1000)
	get(t, h, "query", url.Values{"query": {`sum(rate(node_cpu_seconds_total[1m])) / sum(node_load1 * on(node) node_load1)`}, "time": {at}})
	if len(reqs.queries) != 2 {
		t.Fatalf("peer asked %q, want two pushed aggregations", reqs.queries)
	}
	for _, qs := range reqs.queries {
		e, err := parseExpr(qs)
		if err != nil {
			t.Fatalf("%q: %v", qs, err)
		}
		n := 0
		parser.Inspect(e, func(n2 parser.Node, _ []parser.Node) error {
			if vs, ok := n2.(*parser.VectorSelector); ok {
				n++
				if !slices.ContainsFunc(vs.LabelMatchers, func(m *labels.Matcher) bool { return m.Name == "pid" && m.Type == labels.MatchEqual && m.Value == "" }) {
					t.Errorf("%q: selector %s without pid=\"\"", qs, vs)
				}
			}
			return nil
		})
		if n == 0 {
			t.Errorf("%q: no selector", qs)
		}
	}
}

// TestPlanPushes: which aggregations of a query are pushed, and the merge that replaces them.
func TestPlanPushes(t *testing.T) {
	for _, c := range []struct {
		q      string
		pushed []string
		merge  string
	}{
		{`sum(rate(x[1m]))`, []string{`sum(rate(x[1m]))`}, `sum(__cantal_partial_0__)`},
		{`count without (cpu) (x)`, []string{`count without (cpu) (x)`}, `sum without (cpu, __cantal_node__) (__cantal_partial_0__)`},
		{`topk(3, x) * 2`, []string{`topk(3, x)`}, `topk(3, __cantal_partial_0__) * 2`},
		{`sum(x) / on() group_left count(y)`, []string{`sum(x)`, `count(y)`}, `sum(__cantal_partial_0__) / on () group_left () sum(__cantal_partial_1__)`},
		{`sum by (node)(avg by (node, cpu)(x))`, []string{`sum by (node) (avg by (node, cpu) (x))`}, `sum by (node) (__cantal_partial_0__)`},
		{`avg(sum by (job)(x))`, []string{`sum by (job) (x)`}, `avg(sum by (job) (__cantal_partial_0__))`},
		{`avg(sum by (node, job)(x))`, []string{`sum(sum by (node, job) (x))`, `count(sum by (node, job) (x))`}, `(sum(__cantal_partial_0__) / sum(__cantal_partial_1__))`},
		{`avg without (cpu)(x)`, []string{`sum without (cpu) (x)`, `count without (cpu) (x)`}, `(sum without (cpu, __cantal_node__) (__cantal_partial_0__) / sum without (cpu, __cantal_node__) (__cantal_partial_1__))`},
		{`avg(quantile(0.9, x))`, nil, ``},
		{`sum(x - ignoring(node) y)`, nil, ``},
		{`sum(x - on(job) y)`, nil, ``},
		{`sum(x - on(job, node) y)`, []string{`sum(x - on (job, node) y)`}, `sum(__cantal_partial_0__)`},
		{`sum(x * scalar(y))`, nil, ``},
		{`sum(x * time())`, []string{`sum(x * time())`}, `sum(__cantal_partial_0__)`},
		{`sum(hour())`, nil, ``},
		{`sum(hour(x))`, []string{`sum(hour(x))`}, `sum(__cantal_partial_0__)`},
		{`sum(absent(x))`, nil, ``},
		{`sum(label_join(x, "node", ",", "a"))`, nil, ``},
		{`sum(label_join(x, "other", ",", "a"))`, []string{`sum(label_join(x, "other", ",", "a"))`}, `sum(__cantal_partial_0__)`},
		{`max_over_time(sum(x)[5m:])`, nil, ``},
		{`sum(max_over_time(x[5m:]))`, []string{`sum(max_over_time(x[5m:]))`}, `sum(__cantal_partial_0__)`},
		{`stddev(x)`, nil, ``},
		{`__cantal_partial_0__`, nil, ``},
	} {
		expr, err := parseExpr(c.q)
		if err != nil {
			t.Fatal(err)
		}
		p := makePlan(expr)
		var pushed []string
		for _, a := range p.pushed {
			pushed = append(pushed, a.String())
		}
		if !slices.Equal(pushed, c.pushed) || p.merge != c.merge {
			t.Errorf("%s: pushed %q, merge %q; want %q, %q", c.q, pushed, p.merge, c.pushed, c.merge)
		}
	}
}

// FuzzPlan: any query plans into a merge that parses and aggregations that parse.
func FuzzPlan(f *testing.F) {
	for _, s := range []string{`sum(rate(x[1m]))`, `topk(3, x) * 2`, `sum(x) / on() group_left count(y)`,
		`max_over_time(sum(x)[5m:])`, `count without (cpu) (x{a=~"b.*"} offset 5m)`, `sum(x @ end())`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, q string) {
		expr, err := parseExpr(q)
		if err != nil {
			return
		}
		p := makePlan(expr)
		if len(p.pushed) == 0 {
			return
		}
		if _, err := parseExpr(p.merge); err != nil {
			t.Fatalf("%q: merge %q: %v", q, p.merge, err)
		}
		for _, a := range p.pushed {
			if _, err := parseExpr(a.String()); err != nil {
				t.Fatalf("%q: pushed %q: %v", q, a, err)
			}
		}
	})
}

func parseExpr(q string) (parser.Expr, error) { return parser.NewParser(parser.Options{}).ParseExpr(q) }

// TestPushdownHostilePeerIsLeftOut: a peer whose part is unreadable (points out of order or
// outside the query's range, two series of the same labels, not a matrix, an error answer)
// is left out with a warning naming it; the other nodes' parts are answered. A query over
// the samples limit on the asking node is refused with Prometheus's error.
func TestPushdownHostilePeerIsLeftOut(t *testing.T) {
	const scans = 30
	at := int64(t0 + (scans-1)*2000)
	sec := func(ms int64) string { return strconv.FormatFloat(float64(ms)/1000, 'f', 3, 64) }
	for _, c := range []struct{ name, body string }{
		{"out of order", `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[` + sec(at) + `,"1"],[` + sec(at-2000) + `,"1"]]}]}}`},
		{"outside", `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[` + sec(at+60000) + `,"1"]]}]}}`},
		{"same labels", `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"a":"b"},"values":[[` + sec(at) + `,"1"]]},{"metric":{"a":"b"},"values":[[` + sec(at) + `,"1"]]}]}}`},
		{"vector", `{"status":"success","data":{"resultType":"vector","result":[]}}`},
		{"error", `{"status":"error","errorType":"execution","error":"no"}`},
		{"not JSON", `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,`},
		{"packed, out of order", string(packedPart(t, at, at-2000))},
		{"packed, outside", string(packedPart(t, at+60000))},
		{"packed, truncated", string(packedPart(t, at)[:len(apiwire.PeerSelectMagic)+3])},
		{"packed, empty chunk", string(apiwire.AppendPeerStrings(apiwire.AppendPeerStrings(apiwire.AppendPeerSeries(
			apiwire.AppendPeerSelectCount(apiwire.AppendPeerSelectHeader(nil), 1), apiwire.PeerSeries{Labels: []string{"x", "y"}, Chunks: [][]byte{{}}}), nil), nil))},
	} {
		t.Run(c.name, func(t *testing.T) {
			hostile := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, c.body)
			}))
			t.Cleanup(hostile.Close)
			b := peer(t, node(t, "b", 2, scans, 2))
			members := []hub.Member{
				{ID: "b", Name: "b", HTTP: strings.TrimPrefix(b.URL, "http://"), Up: true},
				{ID: "h", Name: "h", HTTP: strings.TrimPrefix(hostile.URL, "http://"), Up: true},
			}
			local := node(t, "a", 1, scans, 2)
			q := New(local, Options{Node: "a", Members: func() []hub.Member { return members }, Fetch: &hub.Fetcher{Timeout: time.Second}})
			h := promapi.New(local, promapi.Options{Prefix: promapi.ClusterPrefix, Queryable: q, Planner: q,
				Now: func() time.Time { return time.UnixMilli(t0 + 3600_000) }})
			_, a, body := get(t, h, "query", url.Values{"query": {`sum(node_load1)`}, "time": {sec(at)}})
			if a.Status != "success" || len(a.Data.Result) != 1 {
				t.Fatalf("answer %s", body)
			}
			want := 1 + 2 + 2*float64(scans-1)/100
			if got, _ := strconv.ParseFloat(a.Data.Result[0].Value[1].(string), 64); math.Abs(got-want) > 1e-9 {
				t.Errorf("sum(node_load1) = %v, want a's and b's %v", got, want)
			}
			if len(a.Warnings) != 1 || !strings.Contains(a.Warnings[0], "node h left out") {
				t.Errorf("warnings %q, want node h left out", a.Warnings)
			}
		})
	}
	t.Run("samples limit", func(t *testing.T) {
		local := node(t, "a", 1, scans, 5000)
		b := peer(t, node(t, "b", 2, scans, 5000))
		members := []hub.Member{{ID: "b", Name: "b", HTTP: strings.TrimPrefix(b.URL, "http://"), Up: true}}
		q := New(local, Options{Node: "a", Members: func() []hub.Member { return members }, Fetch: &hub.Fetcher{Timeout: time.Second}})
		h := promapi.New(local, promapi.Options{Prefix: promapi.ClusterPrefix, Queryable: q, Planner: q, MaxSamples: 50_000,
			Now: func() time.Time { return time.UnixMilli(t0 + 3600_000) }})
		// 5000 sums by cpu at each of 30 steps: 150 000 samples in the local part alone.
		code, a, body := get(t, h, "query_range", url.Values{"query": {`sum by (cpu)(node_cpu_seconds_total)`},
			"start": {sec(t0)}, "end": {sec(at)}, "step": {"2"}})
		if code != 422 || a.ErrorType != "execution" || !strings.Contains(a.Error, "query processing would load too many samples") {
			t.Errorf("%d %.300s, want 422 execution: too many samples", code, body)
		}
	})
}

// packedPart is a peer part (apiwire) of one series of the points at ts, value 1, as a hostile
// peer could write it: the chunk holds what it is given.
func packedPart(t *testing.T, ts ...int64) []byte {
	c := chunkenc.NewXORChunk()
	app, err := c.Appender()
	if err != nil {
		t.Fatal(err)
	}
	for _, at := range ts {
		app.Append(0, at, 1)
	}
	b := apiwire.AppendPeerSelectCount(apiwire.AppendPeerSelectHeader(nil), 1)
	b = apiwire.AppendPeerSeries(b, apiwire.PeerSeries{Labels: []string{"x", "y"}, Chunks: [][]byte{c.Bytes()}})
	return apiwire.AppendPeerStrings(apiwire.AppendPeerStrings(b, nil), nil)
}

// TestPushdownOlderPeerAnswersJSON: a peer that does not know the peer part (an agent from
// before it: it answers query_range in Prometheus's JSON) gives its part all the same, and the
// peers that know it answer packed.
func TestPushdownOlderPeerAnswersJSON(t *testing.T) {
	const scans = 30
	at := fmt.Sprint(float64(t0+(scans-1)*2000) / 1000)
	var packed, json atomic.Int32
	count := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			if rec.Header().Get("Content-Type") == apiwire.PeerSelectType {
				packed.Add(1)
			} else {
				json.Add(1)
			}
			w.Header().Set("Content-Type", rec.Header().Get("Content-Type"))
			w.WriteHeader(rec.Code)
			w.Write(rec.Body.Bytes())
		})
	}
	older := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			q := r.URL.Query()
			q.Del(apiwire.PeerPartParam)
			r.URL.RawQuery = q.Encode()
			h.ServeHTTP(w, r)
		})
	}
	now := func() time.Time { return time.UnixMilli(t0 + 3600_000) }
	b := httptest.NewServer(count(promapi.New(node(t, "b", 2, scans, 2), promapi.Options{Now: now})))
	c := httptest.NewServer(count(older(promapi.New(node(t, "c", 3, scans, 2), promapi.Options{Now: now}))))
	t.Cleanup(b.Close)
	t.Cleanup(c.Close)
	members := []hub.Member{
		{ID: "b", Name: "b", HTTP: strings.TrimPrefix(b.URL, "http://"), Up: true},
		{ID: "c", Name: "c", HTTP: strings.TrimPrefix(c.URL, "http://"), Up: true},
	}
	local := node(t, "a", 1, scans, 2)
	q := New(local, Options{Node: "a", Members: func() []hub.Member { return members }, Fetch: &hub.Fetcher{Timeout: time.Second}})
	h := promapi.New(local, promapi.Options{Prefix: promapi.ClusterPrefix, Queryable: q, Planner: q, Now: now})
	_, a, body := get(t, h, "query", url.Values{"query": {`sum(node_load1)`}, "time": {at}})
	want := 1 + 2 + 3 + 3*float64(scans-1)/100
	if a.Status != "success" || len(a.Data.Result) != 1 || len(a.Warnings) > 0 {
		t.Fatalf("answer %s", body)
	}
	if got, _ := strconv.ParseFloat(a.Data.Result[0].Value[1].(string), 64); math.Abs(got-want) > 1e-9 {
		t.Errorf("sum(node_load1) = %v, want %v", got, want)
	}
	if packed.Load() != 1 || json.Load() != 1 {
		t.Errorf("%d packed answers and %d JSON ones, want one of each", packed.Load(), json.Load())
	}
}

// TestNodesAskingEachOtherAtOnce: two agents of one query slot each (the agent's limiter on a
// 2-core machine; or one --query-max-concurrency slot) asked a cluster query at the same moment, each holding its slot when it asks
// the other, both answer with both nodes and no warning: a node waiting for its peers gives its
// slot back meanwhile (querylimit.Away). Pushed down, fetched (a bare selector) and the label
// names; before, each waited for the slot the other held until the peer timeout.
func TestNodesAskingEachOtherAtOnce(t *testing.T) {
	const scans = 30
	at := fmt.Sprint(float64(t0+(scans-1)*2000) / 1000)
	now := func() time.Time { return time.UnixMilli(t0 + 3600_000) }
	for _, c := range []struct {
		path   string
		params url.Values
		check  func(a answer, body []byte) error
	}{
		{"query", url.Values{"query": {`sum by (node)(node_load1)`}, "time": {at}}, nil},
		{"query", url.Values{"query": {`node_load1`}, "time": {at}}, nil},
		{"labels", url.Values{}, func(a answer, body []byte) error {
			if !strings.Contains(string(body), `"node"`) {
				return fmt.Errorf("no node label: %s", body)
			}
			return nil
		}},
	} {
		for _, bound := range []string{"agent", "query-max-concurrency"} {
			t.Run(bound+" "+c.path+" "+c.params.Get("query"), func(t *testing.T) {
				agentSlots, maxConcurrency := 1, 20
				if bound != "agent" {
					agentSlots, maxConcurrency = 10, 1
				}
				var started sync.WaitGroup
				started.Add(2)
				both := make(chan struct{})
				go func() { started.Wait(); close(both) }()
				var members [2][]hub.Member
				var srvs [2]*httptest.Server
				for i, name := range []string{"a", "b"} {
					st := node(t, name, float64(i+1), scans, 2)
					q := New(st, Options{Node: name, Members: func() []hub.Member { return members[i] },
						Fetch: &hub.Fetcher{Timeout: time.Second, KeepAlive: true}, PeerTimeout: 5 * time.Second})
					local := promapi.New(st, promapi.Options{Now: now, MaxConcurrency: maxConcurrency})
					cl := promapi.New(st, promapi.Options{Prefix: promapi.ClusterPrefix, Queryable: q, Planner: q, Share: local, Now: now})
					mux := http.NewServeMux()
					mux.Handle(promapi.Prefix, local)
					mux.Handle(apiwire.PeerSelectPath, PeerHandler(st, PeerOptions{}))
					mux.Handle(promapi.ClusterPrefix, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
						started.Done()
						<-both // both hold their slot before either asks the other
						cl.ServeHTTP(w, r)
					}))
					srvs[i] = httptest.NewServer(querylimit.New(agentSlots, 64<<20, 256<<20).Handler(mux, true))
					t.Cleanup(srvs[i].Close)
				}
				for i, name := range []string{"b", "a"} {
					members[i] = []hub.Member{{ID: name, Name: name, HTTP: strings.TrimPrefix(srvs[1-i].URL, "http://"), Up: true}}
				}
				errs := make(chan error, 2)
				for i := range srvs {
					go func() {
						resp, err := http.Get(srvs[i].URL + promapi.ClusterPrefix + c.path + "?" + c.params.Encode())
						if err != nil {
							errs <- err
							return
						}
						body, _ := io.ReadAll(resp.Body)
						resp.Body.Close()
						var a answer
						json.Unmarshal(body, &a)
						switch {
						case a.Status != "success" || len(a.Warnings) > 0:
							errs <- fmt.Errorf("node %d: %s", i, body)
						case c.check != nil:
							errs <- c.check(a, body)
						case len(a.Data.Result) != 2:
							errs <- fmt.Errorf("node %d: %d series, want both nodes': %s", i, len(a.Data.Result), body)
						default:
							errs <- nil
						}
					}()
				}
				for range srvs {
					if err := <-errs; err != nil {
						t.Error(err)
					}
				}
			})
		}
	}
}

// FuzzPeerPart: whatever a peer sends as its packed part, reading it (the answer, its chunks'
// points, their order and range) fails or gives series of distinct labels whose points are in
// time order within the range; it never panics.
func FuzzPeerPart(f *testing.F) {
	t := &testing.T{}
	f.Add(packedPart(t, t0, t0+2000))
	f.Add(packedPart(t, t0+2000, t0))
	f.Add([]byte(apiwire.PeerSelectMagic + "\x01\x00\x01\x05\x00\x01\x02\x03\x04\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		series, _, _, err := apiwire.DecodePeerPart(b)
		if err != nil {
			return
		}
		result := make([]wireSeries, 0, len(series))
		for _, ps := range series {
			pts, err := chunkPoints(ps.Chunks)
			if err != nil {
				return
			}
			lb := labels.NewScratchBuilder(0)
			for k := 0; k+1 < len(ps.Labels); k += 2 {
				lb.Add(ps.Labels[k], ps.Labels[k+1])
			}
			lb.Sort()
			result = append(result, wireSeries{lset: lb.Labels(), pts: pts})
		}
		list, err := checkPart(result, t0, t0+3600_000)
		if err != nil {
			return
		}
		for j, s := range list {
			if j > 0 && labels.Compare(list[j-1].lset, s.lset) >= 0 {
				t.Fatalf("series %d not after the one before", j)
			}
			for k, p := range s.pts {
				if p.t < t0 || p.t > t0+3600_000 || (k > 0 && p.t <= s.pts[k-1].t) {
					t.Fatalf("series %d point %d at %d", j, k, p.t)
				}
			}
		}
	})
}
