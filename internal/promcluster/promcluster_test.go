package promcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/cantal-go/cantal/internal/apiwire"
	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/hub"
	"github.com/cantal-go/cantal/internal/promapi"
	"github.com/cantal-go/cantal/internal/promstore"
	"github.com/cantal-go/cantal/internal/registry"
	"github.com/cantal-go/cantal/internal/series"
)

const t0 = 1_700_000_000_000

// node is one node's storage: scans 2 s apart from t0 of its 1-minute load (load + i/100 at
// scan i) and of per-CPU counters (cpus of them).
func node(t testing.TB, name string, load float64, scans, cpus int) *promstore.Storage {
	t.Helper()
	return newNode(name, load, scans, cpus)
}

// newNode is node outside a test (the benchmark's peer process).
func newNode(name string, load float64, scans, cpus int) *promstore.Storage {
	hist := history.New(history.Options{})
	reg := registry.New(hist, time.Hour, nil)
	l := reg.Series(series.Labels{"metric": "system.load_avg_1min"}, series.Float)
	refs := make([]*series.Ref, cpus)
	for i := range refs {
		refs[i] = reg.Series(series.Labels{"metric": "cpu.user_ms", "cpu": fmt.Sprint(i)}, series.Counter)
	}
	for j := range scans {
		reg.Begin(t0 + int64(j)*2000)
		reg.Put(l, mathBits(load+float64(j)/100))
		for i, r := range refs {
			reg.Put(r, uint64(j*(i+1)*100))
		}
		reg.Commit()
	}
	return promstore.New(hist, promstore.RegistryCatalog(reg), promstore.Options{Instance: name + ":22682", Node: name})
}

// peer serves st's node-local API and its peer select, as a peer's agent does.
func peer(t testing.TB, st *promstore.Storage) *httptest.Server {
	mux := http.NewServeMux()
	mux.Handle(promapi.Prefix, promapi.New(st, promapi.Options{Now: func() time.Time { return time.UnixMilli(t0 + 3600_000) }}))
	mux.Handle(apiwire.PeerSelectPath, PeerHandler(st, PeerOptions{}))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// oldPeer serves st's node-local API only, as an agent from before the peer select does.
func oldPeer(t testing.TB, st *promstore.Storage) *httptest.Server {
	srv := httptest.NewServer(promapi.New(st, promapi.Options{Now: func() time.Time { return time.UnixMilli(t0 + 3600_000) }}))
	t.Cleanup(srv.Close)
	return srv
}

// cluster is the cluster API of local beside peers (name → server); down names a member the
// membership says is down, cut one whose address refuses connections.
func cluster(t testing.TB, local *promstore.Storage, peers map[string]*httptest.Server, down, cut string) http.Handler {
	var members []hub.Member
	for name, srv := range peers {
		members = append(members, hub.Member{ID: name, Name: name, HTTP: strings.TrimPrefix(srv.URL, "http://"), Up: true})
	}
	if down != "" {
		members = append(members, hub.Member{ID: down, Name: down, HTTP: "127.0.0.1:1", Up: false})
	}
	if cut != "" {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close() // nothing listens there now: connections are refused
		members = append(members, hub.Member{ID: cut, Name: cut, HTTP: addr, Up: true})
	}
	q := New(local, Options{Members: func() []hub.Member { return members }, Fetch: &hub.Fetcher{Timeout: time.Second}})
	return promapi.New(local, promapi.Options{Prefix: promapi.ClusterPrefix, Queryable: q,
		Now: func() time.Time { return time.UnixMilli(t0 + 3600_000) }})
}

type answer struct {
	Status    string   `json:"status"`
	ErrorType string   `json:"errorType"`
	Error     string   `json:"error"`
	Warnings  []string `json:"warnings"`
	Data      struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
			Values [][2]any          `json:"values"`
		} `json:"result"`
	} `json:"data"`
}

func get(t testing.TB, h http.Handler, path string, params url.Values) (int, answer, []byte) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", promapi.ClusterPrefix+path+"?"+params.Encode(), nil))
	var a answer
	json.Unmarshal(rec.Body.Bytes(), &a) // the query answers' shape; others read the body
	if !json.Valid(rec.Body.Bytes()) {
		t.Fatalf("%s: not JSON: %s", path, rec.Body.Bytes())
	}
	return rec.Code, a, rec.Body.Bytes()
}

func mathBits(f float64) uint64 { return math.Float64bits(f) }

// TestClusterQueryEvaluatesEveryNode: sum by (node) and topk over the local node and two
// peers name all three, with each node's own values; a peer that is down and one that cannot
// be reached are named in the warnings, not silently missing.
func TestClusterQueryEvaluatesEveryNode(t *testing.T) {
	const scans = 30
	at := fmt.Sprint(float64(t0+(scans-1)*2000) / 1000)
	local := node(t, "a", 1, scans, 2)
	h := cluster(t, local, map[string]*httptest.Server{
		"b": peer(t, node(t, "b", 2, scans, 2)),
		"c": peer(t, node(t, "c", 3, scans, 4)),
	}, "d", "e")

	code, a, body := get(t, h, "query", url.Values{"query": {`sum by (node)(node_load1)`}, "time": {at}})
	if code != 200 || a.Status != "success" || len(a.Data.Result) != 3 {
		t.Fatalf("sum by (node): %d %s", code, body)
	}
	for _, r := range a.Data.Result {
		want := map[string]string{"a": "1.29", "b": "2.29", "c": "3.29"}[r.Metric["node"]]
		if r.Value[1] != want {
			t.Errorf("node %s: %v, want %s: %s", r.Metric["node"], r.Value[1], want, body)
		}
	}
	var warned []string
	for _, w := range a.Warnings {
		for _, n := range []string{"d", "e"} {
			if strings.Contains(w, "node "+n+" left out") {
				warned = append(warned, n)
			}
		}
	}
	slices.Sort(warned)
	if !slices.Equal(warned, []string{"d", "e"}) {
		t.Fatalf("warnings %q, want nodes d and e left out", a.Warnings)
	}

	// The two CPUs of c with the most time: topk across nodes.
	code, a, body = get(t, h, "query", url.Values{"query": {`topk(2, rate(node_cpu_seconds_total[20s]))`}, "time": {at}})
	if code != 200 || len(a.Data.Result) != 2 {
		t.Fatalf("topk: %d %s", code, body)
	}
	for _, r := range a.Data.Result {
		if r.Metric["node"] != "c" || r.Metric["instance"] != "c:22682" {
			t.Errorf("topk: %v, want c's cpus 2 and 3", r.Metric)
		}
	}

	// A range query: each node's series at every step.
	code, a, body = get(t, h, "query_range", url.Values{"query": {`node_load1`}, "start": {fmt.Sprint(t0 / 1000)},
		"end": {at}, "step": {"2"}})
	if code != 200 || len(a.Data.Result) != 3 {
		t.Fatalf("query_range: %d %s", code, body)
	}
	for _, r := range a.Data.Result {
		if len(r.Values) != scans {
			t.Errorf("node %s: %d points, want %d", r.Metric["node"], len(r.Values), scans)
		}
	}

	// series, labels and label values name every node.
	_, _, body = get(t, h, "label/node/values", url.Values{})
	var vals struct {
		Data     []string `json:"data"`
		Warnings []string `json:"warnings"`
	}
	json.Unmarshal(body, &vals)
	if !slices.Equal(vals.Data, []string{"a", "b", "c"}) || len(vals.Warnings) != 2 {
		t.Fatalf("label values: %s", body)
	}
	_, _, body = get(t, h, "series", url.Values{"match[]": {`node_load1`}})
	var ser struct {
		Data []map[string]string `json:"data"`
	}
	json.Unmarshal(body, &ser)
	if len(ser.Data) != 3 {
		t.Fatalf("series: %s", body)
	}
	_, _, body = get(t, h, "labels", url.Values{"match[]": {`node_cpu_seconds_total`}})
	if !strings.Contains(string(body), `"cpu"`) || !strings.Contains(string(body), `"node"`) {
		t.Fatalf("labels: %s", body)
	}
}

// TestClusterQueryLimits: the limits of a node-local query hold over the cluster's series: a
// query loading more samples than --query-max-samples over the nodes together is refused with
// Prometheus's error, and so are its parameter errors.
func TestClusterQueryLimits(t *testing.T) {
	const scans = 100
	local := node(t, "a", 1, scans, 1)
	members := []hub.Member{}
	for _, n := range []string{"b", "c"} {
		srv := peer(t, node(t, n, 2, scans, 1))
		members = append(members, hub.Member{ID: n, Name: n, HTTP: strings.TrimPrefix(srv.URL, "http://"), Up: true})
	}
	q := New(local, Options{Members: func() []hub.Member { return members }, Fetch: &hub.Fetcher{Timeout: time.Second}})
	// 250 samples: a node's 100 fit, the three nodes' 300 do not.
	h := promapi.New(local, promapi.Options{Prefix: promapi.ClusterPrefix, Queryable: q, MaxSamples: 250})
	at := fmt.Sprint(float64(t0+(scans-1)*2000) / 1000)
	code, a, body := get(t, h, "query", url.Values{"query": {`node_load1[10m]`}, "time": {at}})
	if code != 422 || a.ErrorType != "execution" || !strings.Contains(a.Error, "too many samples") {
		t.Fatalf("over max samples: %d %s", code, body)
	}
	code, a, _ = get(t, h, "query_range", url.Values{"query": {`node_load1`}, "start": {"0"}, "end": {"100000"}, "step": {"1"}})
	if code != 400 || !strings.Contains(a.Error, "11,000 points") {
		t.Fatalf("tiny step: %d %+v", code, a)
	}
	code, a, _ = get(t, h, "query", url.Values{"query": {`sum(`}})
	if code != 400 || a.ErrorType != "bad_data" {
		t.Fatalf("malformed: %d %+v", code, a)
	}
}

// atomicString is a string read and written by different goroutines.
type atomicString struct{ v atomic.Value }

func (s *atomicString) Store(v string) { s.v.Store(v) }
func (s *atomicString) Load() string {
	v, _ := s.v.Load().(string)
	return v
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// TestPeerMatchersHideProcesses: the matchers Options.PeerMatchers gives a caller (the agent:
// pid="" for one who may not see every process) go with every request to a peer: the peer's
// process series and their label values are not in the answer; the local ones are the local
// storage's to filter.
func TestPeerMatchersHideProcesses(t *testing.T) {
	mk := func(name string) *promstore.Storage {
		hist := history.New(history.Options{})
		reg := registry.New(hist, time.Hour, nil)
		app := reg.Series(series.Labels{"metric": "work", "appname": "w"}, series.Level)
		proc := reg.Series(series.Labels{"metric": "work", "appname": "w", "pid": "4242"}, series.Level)
		for j := range 3 {
			reg.Begin(t0 + int64(j)*2000)
			reg.Put(app, 1)
			reg.Put(proc, 2)
			reg.Commit()
		}
		return promstore.New(hist, promstore.RegistryCatalog(reg), promstore.Options{Instance: name + ":22682", Node: name})
	}
	srv := peer(t, mk("b"))
	members := []hub.Member{{ID: "b", Name: "b", HTTP: strings.TrimPrefix(srv.URL, "http://"), Up: true}}
	type restricted struct{}
	q := New(node(t, "a", 1, 3, 1), Options{Members: func() []hub.Member { return members }, Fetch: &hub.Fetcher{Timeout: time.Second},
		PeerMatchers: func(ctx context.Context) []*labels.Matcher {
			if ctx.Value(restricted{}) == nil {
				return nil
			}
			return []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "pid", "")}
		}})
	for _, c := range []struct {
		ctx       context.Context
		series    int
		pidValues []string
	}{
		{context.Background(), 2, []string{"4242"}},
		{context.WithValue(context.Background(), restricted{}, true), 1, []string{}},
	} {
		qr, _ := q.Querier(t0, t0+4000)
		ss := qr.Select(c.ctx, true, nil, labels.MustNewMatcher(labels.MatchEqual, labels.MetricName, "work"))
		n := 0
		for ss.Next() {
			n++
		}
		if ss.Err() != nil || n != c.series {
			t.Errorf("restricted %v: %d series of b, want %d (%v)", c.ctx.Value(restricted{}), n, c.series, ss.Err())
		}
		vs, _, err := qr.LabelValues(c.ctx, "pid", nil)
		if err != nil || !slices.Equal(vs, c.pidValues) {
			t.Errorf("restricted %v: pid values %q, want %q (%v)", c.ctx.Value(restricted{}), vs, c.pidValues, err)
		}
	}
}

// TestParseValuesAsJSON: the fast reading of a peer's values array gives what encoding/json's
// does, and leaves to it (false) what it does not read.
func TestParseValuesAsJSON(t *testing.T) {
	for _, c := range []struct {
		in   string
		fast bool
	}{
		{`[]`, true},
		{`[[1700000000,"1"]]`, true},
		{`[[1700000000.123,"1.5"],[1700000002.123,"NaN"],[1700000004,"+Inf"],[1700000006,"-Inf"],[1e9,"-2.5e-300"]]`, true},
		{`[[1700000000, "1"]]`, false},
		{`[ [1700000000,"1"] ]`, false},
		{`[[1700000000,"1"],]`, false},
		{`[[1700000000,1]]`, false},
		{`[[1700000000,"x"]]`, false},
		{`[["1700000000","1"]]`, false},
		{`[[1700000000,"1",3]]`, false},
		{`{}`, false},
	} {
		got, ok := parseValues([]byte(c.in))
		if ok != c.fast {
			t.Errorf("%s: fast %v, want %v", c.in, ok, c.fast)
			continue
		}
		if !ok {
			continue
		}
		var want []wirePoint
		if err := json.Unmarshal([]byte(c.in), &want); err != nil {
			t.Fatalf("%s: %v", c.in, err)
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d points, want %d", c.in, len(got), len(want))
		}
		for i := range got {
			if got[i].t != want[i].t || math.Float64bits(got[i].f) != math.Float64bits(want[i].f) && !(math.IsNaN(got[i].f) && math.IsNaN(want[i].f)) {
				t.Errorf("%s: point %d = %v, want %v", c.in, i, got[i], want[i])
			}
		}
	}
}

// TestSilentPeerIsLeftOutWithAWarning: a peer that accepts the request and never answers is
// left out after PeerTimeout, named in the warnings, and the others' series are answered.
func TestSilentPeerIsLeftOutWithAWarning(t *testing.T) {
	hang := make(chan struct{})
	silent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(silent.Close)
	t.Cleanup(func() { close(hang) })
	b := peer(t, node(t, "b", 2, 3, 1))
	members := []hub.Member{
		{ID: "b", Name: "b", HTTP: strings.TrimPrefix(b.URL, "http://"), Up: true},
		{ID: "s", Name: "s", HTTP: strings.TrimPrefix(silent.URL, "http://"), Up: true},
	}
	local := node(t, "a", 1, 3, 1)
	q := New(local, Options{Members: func() []hub.Member { return members }, Fetch: &hub.Fetcher{Timeout: time.Second},
		PeerTimeout: 300 * time.Millisecond})
	h := promapi.New(local, promapi.Options{Prefix: promapi.ClusterPrefix, Queryable: q, Timeout: 5 * time.Second})
	code, a, body := get(t, h, "query", url.Values{"query": {`node_load1`}, "time": {fmt.Sprint(float64(t0+4000) / 1000)}})
	if code != 200 || len(a.Data.Result) != 2 || len(a.Warnings) != 1 || !strings.Contains(a.Warnings[0], "node s left out: no answer within 300ms") {
		t.Fatalf("with a silent peer: %d %s", code, body)
	}
}

// TestSeriesAsksPeersForLabelsOnly: the series API asks each peer for its series' labels
// (a labels-only peer select, or an older peer's own series API), not for the points of the
// whole window.
func TestSeriesAsksPeersForLabelsOnly(t *testing.T) {
	for _, old := range []bool{false, true} {
		st := node(t, "b", 2, 3, 2)
		mux := http.NewServeMux()
		mux.Handle(promapi.Prefix, promapi.New(st, promapi.Options{Now: func() time.Time { return time.UnixMilli(t0 + 4000) }}))
		if !old {
			mux.Handle(apiwire.PeerSelectPath, PeerHandler(st, PeerOptions{}))
		}
		var paths atomicString
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			paths.Store(paths.Load() + " " + r.URL.Path + "?" + r.URL.Query().Get("s"))
			mux.ServeHTTP(w, r)
		}))
		t.Cleanup(srv.Close)
		members := []hub.Member{{ID: "b", Name: "b", HTTP: strings.TrimPrefix(srv.URL, "http://"), Up: true}}
		local := node(t, "a", 1, 3, 2)
		q := New(local, Options{Members: func() []hub.Member { return members }, Fetch: &hub.Fetcher{Timeout: time.Second}})
		h := promapi.New(local, promapi.Options{Prefix: promapi.ClusterPrefix, Queryable: q, Now: func() time.Time { return time.UnixMilli(t0 + 4000) }})
		code, _, body := get(t, h, "series", url.Values{"match[]": {`node_cpu_seconds_total`}})
		var ser struct {
			Data []map[string]string `json:"data"`
		}
		json.Unmarshal(body, &ser)
		if code != 200 || len(ser.Data) != 4 {
			t.Fatalf("old peer %v: series: %d %s", old, code, body)
		}
		p := strings.TrimSpace(paths.Load())
		want := regexp.MustCompile(`^/prometheus/peer/v1/select\?-?\d+,\d+,l,\{__name__="node_cpu_seconds_total"\}$`)
		if old {
			want = regexp.MustCompile(`^/prometheus/peer/v1/select\?\S+ /prometheus/api/v1/series\?$`)
		}
		if !want.MatchString(p) {
			t.Fatalf("old peer %v: the peer was asked %q, want labels only (%s)", old, p, want)
		}
	}
}

// TestOneRequestPerPeerPerQuery: a query of three selectors (a binary operation, two
// aggregations) asks each peer once, in one peer select carrying the three, each for the
// query's window only (a minute's rate at one instant: not the held hour), over one kept-alive
// connection across queries; its answer is the node-local engine's over the same series.
func TestOneRequestPerPeerPerQuery(t *testing.T) {
	const scans = 1800
	st := node(t, "b", 2, scans, 2)
	inner := peer(t, st)
	var reqs atomic.Int32
	var params atomicString
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reqs.Add(1)
		params.Store(strings.Join(r.URL.Query()["s"], " "))
		r.URL.Host, r.URL.Scheme, r.RequestURI = strings.TrimPrefix(inner.URL, "http://"), "http", ""
		resp, err := http.DefaultTransport.RoundTrip(r)
		if err != nil {
			http.Error(w, err.Error(), 502)
			return
		}
		defer resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	members := []hub.Member{{ID: "b", Name: "b", HTTP: strings.TrimPrefix(srv.URL, "http://"), Up: true}}
	local := node(t, "a", 1, scans, 2)
	f := &hub.Fetcher{Timeout: time.Second, KeepAlive: true}
	t.Cleanup(f.CloseIdle)
	q := New(local, Options{Members: func() []hub.Member { return members }, Fetch: f})
	now := func() time.Time { return time.UnixMilli(t0 + (scans-1)*2000) }
	h := promapi.New(local, promapi.Options{Prefix: promapi.ClusterPrefix, Queryable: q, Now: now})
	const query = `node_load1 * on(node) group_left sum by (node)(rate(node_cpu_seconds_total[1m])) / on(node) count by (node)(node_cpu_seconds_total)`
	at := fmt.Sprint(float64(now().UnixMilli()) / 1000)
	for i := range 3 {
		reqs.Store(0)
		code, a, body := get(t, h, "query", url.Values{"query": {query}, "time": {at}})
		if code != 200 || len(a.Data.Result) != 2 || len(a.Warnings) > 0 {
			t.Fatalf("query %d: %d %s", i, code, body)
		}
		if n := reqs.Load(); n != 1 {
			t.Errorf("query %d: %d requests to the peer; want 1", i, n)
		}
		sels := strings.Fields(params.Load())
		if len(sels) != 3 {
			t.Fatalf("query %d: the peer was asked for %q; want the query's 3 selectors", i, sels)
		}
		for _, s := range sels {
			sel, err := apiwire.ParsePeerSelector(s)
			if err != nil || sel.End != now().UnixMilli() || sel.End-sel.Start > 5*60_000 {
				t.Errorf("query %d: selector %q (%v): want one ending at the query's time, no longer than the 5-minute lookback", i, s, err)
			}
		}
		// The node-local engine over b's storage gives b's row of the answer.
		_, la, lbody := get(t, promapi.New(st, promapi.Options{Prefix: promapi.ClusterPrefix, Now: now}), "query", url.Values{"query": {query}, "time": {at}})
		found := false
		for _, r := range a.Data.Result {
			if r.Metric["node"] == "b" {
				found = len(la.Data.Result) == 1 && r.Value[1] == la.Data.Result[0].Value[1]
			}
		}
		if !found {
			t.Errorf("query %d: b's row of %s is not the node-local %s", i, body, lbody)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("%d connections to the peer for 3 queries; want 1", n)
	}
}

// TestOlderPeerIsAskedItsQueryAPI: a peer without the peer select (an older agent) is asked
// the old way, one selector at a time from its query API, and gives the same answer as a new
// one; it is not asked for the peer select again at the next query.
func TestOlderPeerIsAskedItsQueryAPI(t *testing.T) {
	const scans = 30
	var selects atomic.Int32
	oldInner := oldPeer(t, node(t, "c", 3, scans, 2))
	old := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == apiwire.PeerSelectPath {
			selects.Add(1)
		}
		r.URL.Host, r.URL.Scheme, r.RequestURI = strings.TrimPrefix(oldInner.URL, "http://"), "http", ""
		resp, err := http.DefaultTransport.RoundTrip(r)
		if err != nil {
			http.Error(w, err.Error(), 502)
			return
		}
		defer resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	}))
	t.Cleanup(old.Close)
	h := cluster(t, node(t, "a", 1, scans, 2), map[string]*httptest.Server{"b": peer(t, node(t, "b", 3, scans, 2)), "c": old}, "", "")
	at := fmt.Sprint(float64(t0+(scans-1)*2000) / 1000)
	for i := range 2 {
		code, a, body := get(t, h, "query", url.Values{"query": {`sum by (node)(rate(node_cpu_seconds_total[20s])) + on(node) node_load1`}, "time": {at}})
		if code != 200 || len(a.Data.Result) != 3 || len(a.Warnings) > 0 {
			t.Fatalf("query %d: %d %s", i, code, body)
		}
		vals := map[string]any{}
		for _, r := range a.Data.Result {
			vals[r.Metric["node"]] = r.Value[1]
		}
		if vals["b"] == nil || vals["b"] != vals["c"] {
			t.Errorf("query %d: b (new) %v and c (old), holding the same points, %v", i, vals["b"], vals["c"])
		}
	}
	if n := selects.Load(); n != 1 {
		t.Errorf("the older peer was asked for the peer select %d times over 2 queries; want once", n)
	}
}
