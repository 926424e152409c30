package promcluster

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/cantal-go/cantal/internal/apiwire"
	"github.com/cantal-go/cantal/internal/hub"
	"github.com/cantal-go/cantal/internal/promapi"
)

// TestHostileClusterQueriesGetPrometheusErrors: malformed queries, huge ranges, tiny steps,
// regular expressions that cannot be compiled or that nest repetitions, and a selector of
// 10 000 series over the whole cluster are answered with Prometheus's errors and limits
// (never a 500, never an unbounded answer).
func TestHostileClusterQueriesGetPrometheusErrors(t *testing.T) {
	const scans = 30
	local := node(t, "a", 1, scans, 5000)
	srv := peer(t, node(t, "b", 2, scans, 5000))
	members := []hub.Member{{ID: "b", Name: "b", HTTP: strings.TrimPrefix(srv.URL, "http://"), Up: true}}
	q := New(local, Options{Members: func() []hub.Member { return members }, Fetch: &hub.Fetcher{Timeout: time.Second}})
	// 10 000 cpu series over the two nodes, 11 points each in 20 s: more than 50 000 samples.
	h := promapi.New(local, promapi.Options{Prefix: promapi.ClusterPrefix, Queryable: q, MaxSamples: 50_000,
		Now: func() time.Time { return time.UnixMilli(t0 + (scans-1)*2000) }})
	at := fmt.Sprint(float64(t0+(scans-1)*2000) / 1000)
	for _, c := range []struct {
		path string
		form url.Values
		code int
		typ  string
		msg  string
	}{
		{"query", url.Values{"query": {`sum(rate(x[1m]) by`}}, 400, "bad_data", `invalid parameter "query"`},
		{"query", url.Values{"query": {`{__name__=~"(a{1000}){1000}"}`}}, 400, "bad_data", "invalid repeat count"},
		{"query", url.Values{"query": {`{__name__=~"(`}}, 400, "bad_data", `invalid parameter "query"`},
		{"query", url.Values{"query": {`{cpu=~".*"}`}}, 400, "bad_data", "vector selector must contain at least one non-empty matcher"},
		{"query_range", url.Values{"query": {`node_load1`}, "start": {"0"}, "end": {"1e12"}, "step": {"1"}}, 400, "bad_data", "exceeded maximum resolution of 11,000 points"},
		{"query_range", url.Values{"query": {`node_load1`}, "start": {"0"}, "end": {at}, "step": {"1e-9"}}, 400, "bad_data", "exceeded maximum resolution of 11,000 points"},
		{"query_range", url.Values{"query": {`node_load1`}, "start": {"0"}, "end": {"1e300"}, "step": {"1"}}, 400, "bad_data", `invalid parameter "end"`},
		{"query", url.Values{"query": {`node_cpu_seconds_total[20s]`}, "time": {at}}, 422, "execution", "query processing would load too many samples into memory"},
		{"series", url.Values{"match[]": {`{__name__=~"(a{1000}){1000}"}`}}, 400, "bad_data", "invalid repeat count"},
	} {
		code, a, body := get(t, h, c.path, c.form)
		if code != c.code || a.Status != "error" || a.ErrorType != c.typ || !strings.Contains(a.Error, c.msg) {
			t.Errorf("%s %v: %d %.300s, want %d %s %q", c.path, c.form, code, body, c.code, c.typ, c.msg)
		}
	}
	// Nested repetitions are linear in RE2 (and tested once per metric name): the 10 000
	// series are answered, one series at a time within the samples limit, as Prometheus does.
	code, a, body := get(t, h, "query", url.Values{"query": {`count_over_time({__name__=~"(.+)+(.+)+(.+)+s_total"}[20s])`}, "time": {at}})
	if code != 200 || len(a.Data.Result) != 10000 {
		t.Fatalf("nested repetitions: %d %d series %.300s", code, len(a.Data.Result), body)
	}
	// A huge range over what is held answers what is held: 30 points of each node.
	code, a, body = get(t, h, "query", url.Values{"query": {`count_over_time(node_load1[100y])`}, "time": {at}})
	if code != 200 || len(a.Data.Result) != 2 || a.Data.Result[0].Value[1] != "30" {
		t.Fatalf("huge range: %d %.300s", code, body)
	}
}

// FuzzClusterQuery: whatever the query, its parameters and a peer's answer, the cluster API
// answers Prometheus's JSON, a success or an error with a type, never a panic or a 500; a peer
// answer it cannot read leaves the peer out with a warning.
func FuzzClusterQuery(f *testing.F) {
	for _, s := range []struct{ q, peer string }{
		{`node_load1`, `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"__name__":"node_load1","node":"b"},"values":[[1700000000,"1"]]}]}}`},
		{`sum by (node)(node_load1)`, `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1e300,"NaN"],["x","+Inf"]]}]}}`},
		{`{__name__=~"node_.+"}`, `{"status":"error","errorType":"bad_data","error":"no"}`},
		{`topk(2, rate(node_cpu_seconds_total[20s]))`, `{"status":"success","data":["a","b"]}`},
		{`count_over_time(node_load1[1h])`, `not json`},
	} {
		f.Add(s.q, "1700000050", "2", "query", s.peer)
		f.Add(s.q, "1700000000", "1", "range", s.peer)
		f.Add(`node_load1`, "0", "0", "series", s.peer)
		f.Add(`node_load1`, "-1", "x", "labels", s.peer)
	}
	// Peer select answers: one series of a good chunk, of a chunk cut short, of samples out
	// of order.
	chunk := func(ts ...int64) []byte {
		c := chunkenc.NewXORChunk()
		app, _ := c.Appender()
		for _, t := range ts {
			app.Append(0, t, 1.5)
		}
		return c.Bytes()
	}
	for _, c := range [][]byte{chunk(t0, t0+2000), chunk(t0, t0+2000, t0+4000)[:5], chunk(t0+2000, t0), chunk(t0 - 1e6), {}, {0}} {
		b := apiwire.AppendPeerSelectHeader(nil)
		b = apiwire.AppendPeerSelectCount(b, 1)
		b = apiwire.AppendPeerSeries(b, apiwire.PeerSeries{Labels: []string{"__name__", "node_load1", "node", "b"}, Chunks: [][]byte{c}})
		f.Add(`node_load1`, "1700000050", "2", "query", string(b))
		f.Add(`node_load1`, "1700000000", "1", "range", string(b))
		// The same as a pushed part's answer (a peer part: the strings after the series).
		part := string(apiwire.AppendPeerStrings(apiwire.AppendPeerStrings(b, nil), nil))
		f.Add(`sum(node_load1)`, "1700000050", "2", "push-query", part)
		f.Add(`sum by (node)(node_load1)`, "1700000000", "1", "push-range", part)
	}
	local := node(f, "a", 1, 30, 2)
	var peerBody atomicString
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(peerBody.Load()))
	}))
	f.Cleanup(srv.Close)
	members := []hub.Member{{ID: "b", Name: "b", HTTP: strings.TrimPrefix(srv.URL, "http://"), Up: true}}
	q := New(local, Options{Members: func() []hub.Member { return members }, Fetch: &hub.Fetcher{Timeout: time.Second}})
	opt := promapi.Options{Prefix: promapi.ClusterPrefix, Queryable: q, MaxSamples: 100_000, Timeout: 2 * time.Second,
		Now: func() time.Time { return time.UnixMilli(t0 + 29*2000) }}
	fetch := promapi.New(local, opt)
	opt.Planner = q
	push := promapi.New(local, opt)
	f.Fuzz(func(t *testing.T, query, ts, step, which, peer string) {
		peerBody.Store(peer)
		var path string
		var form url.Values
		h := fetch
		if w, ok := strings.CutPrefix(which, "push-"); ok {
			h, which = push, w // the pushdown's parts, read from the same hostile peer
		}
		switch which {
		case "range":
			path, form = "query_range", url.Values{"query": {query}, "start": {ts}, "end": {"1700000058"}, "step": {step}}
		case "series":
			path, form = "series", url.Values{"match[]": {query}, "start": {ts}}
		case "labels":
			path, form = "labels", url.Values{"match[]": {query}, "end": {step}}
		default:
			path, form = "query", url.Values{"query": {query}, "time": {ts}}
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", promapi.ClusterPrefix+path+"?"+form.Encode(), nil))
		var a struct {
			Status    string `json:"status"`
			ErrorType string `json:"errorType"`
		}
		if err := jsonUnmarshal(rec.Body.Bytes(), &a); err != nil {
			t.Fatalf("%s %v: not JSON: %.300s", path, form, rec.Body.Bytes())
		}
		switch {
		case rec.Code == 200 && a.Status == "success":
		case rec.Code != 200 && rec.Code != 500 && a.Status == "error" && a.ErrorType != "":
		default:
			t.Fatalf("%s %v (peer %q): %d %.300s", path, form, peer, rec.Code, rec.Body.Bytes())
		}
	})
}

// FuzzPeerHandler: whatever selectors a peer select asks for, the answer is a 200 that reads
// as a peer select answer of that many selectors, or Prometheus's JSON error, never a 500 or
// a panic.
func FuzzPeerHandler(f *testing.F) {
	f.Add(`1700000000000,1700000060000,p,{__name__="node_load1"}`, `0,1,l,{node="a"}`)
	f.Add(`1700000000000,1700000060000,p,{__name__=~".+"}`, `x`)
	f.Add(`-9223372036854775808,9223372036854775807,p,{cpu!=""}`, `1,0,p,{}`)
	h := PeerHandler(node(f, "a", 1, 30, 2), PeerOptions{MaxSamples: 200, Timeout: 2 * time.Second})
	f.Fuzz(func(t *testing.T, s1, s2 string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", apiwire.PeerSelectPath+"?"+url.Values{"s": {s1, s2}}.Encode(), nil))
		switch {
		case rec.Code == 200:
			if _, err := apiwire.DecodePeerSelect(rec.Body.Bytes(), 2); err != nil {
				t.Fatalf("%q %q: %v", s1, s2, err)
			}
		case rec.Code == 500:
			t.Fatalf("%q %q: %d %s", s1, s2, rec.Code, rec.Body)
		default:
			var a struct{ Status, ErrorType string }
			if err := jsonUnmarshal(rec.Body.Bytes(), &a); err != nil || a.Status != "error" || a.ErrorType == "" {
				t.Fatalf("%q %q: %d %s", s1, s2, rec.Code, rec.Body)
			}
		}
	})
}

// FuzzParseValues: whatever valid JSON a peer sends as a values array, the fast reading
// either leaves it to encoding/json (false) or reads exactly what encoding/json reads.
func FuzzParseValues(f *testing.F) {
	for _, s := range []string{`[]`, `[[1700000000.123,"1.5"],[1700000002,"NaN"]]`, `[[1,"+Inf"]]`, `[[1e9,"-2e-3"],[2,"0x1p-2"]]`, `[[1,"1"],]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !json.Valid([]byte(s)) {
			return // parseValues reads a part of a document encoding/json has checked
		}
		got, ok := parseValues([]byte(s))
		if !ok {
			return
		}
		var want []wirePoint
		if err := json.Unmarshal([]byte(s), &want); err != nil {
			t.Fatalf("%q read fast as %v, encoding/json refuses it: %v", s, got, err)
		}
		if len(got) != len(want) {
			t.Fatalf("%q: %d points, encoding/json %d", s, len(got), len(want))
		}
		for i := range got {
			same := got[i].f == want[i].f || math.IsNaN(got[i].f) && math.IsNaN(want[i].f)
			if got[i].t != want[i].t || !same {
				t.Fatalf("%q: point %d = %v, encoding/json %v", s, i, got[i], want[i])
			}
		}
	})
}

// TestBadPeerSelectAnswerIsLeftOutWithAWarning: a peer select answer whose chunk is cut
// short, holds samples out of order or outside the window asked leaves the peer out with a
// warning naming it; the local series are answered, and the engine never reads a bad chunk.
func TestBadPeerSelectAnswerIsLeftOutWithAWarning(t *testing.T) {
	chunk := func(ts ...int64) []byte {
		c := chunkenc.NewXORChunk()
		app, _ := c.Appender()
		for _, t := range ts {
			app.Append(0, t, 1.5)
		}
		return c.Bytes()
	}
	at := int64(t0 + 10*2000)
	for name, c := range map[string][]byte{
		"cut short":    chunk(at-4000, at-2000, at)[:6],
		"out of order": chunk(at-2000, at-4000),
		"outside":      chunk(at + 1000),
		"empty":        {},
		"one byte":     {0},
	} {
		var body atomicString
		b := apiwire.AppendPeerSelectHeader(nil)
		b = apiwire.AppendPeerSelectCount(b, 1)
		b = apiwire.AppendPeerSeries(b, apiwire.PeerSeries{Labels: []string{"__name__", "node_load1", "node", "b"}, Chunks: [][]byte{c}})
		body.Store(string(b))
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(body.Load())) }))
		t.Cleanup(srv.Close)
		h := cluster(t, node(t, "a", 1, 11, 1), map[string]*httptest.Server{"b": srv}, "", "")
		code, a, out := get(t, h, "query", url.Values{"query": {`node_load1`}, "time": {fmt.Sprint(float64(at) / 1000)}})
		if code != 200 || len(a.Data.Result) != 1 || a.Data.Result[0].Metric["node"] != "a" ||
			len(a.Warnings) != 1 || !strings.Contains(a.Warnings[0], "node b left out: reading the answer") {
			t.Errorf("%s: %d %s", name, code, out)
		}
	}
}
