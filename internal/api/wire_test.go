package api

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/access"
	"github.com/cantal-go/cantal/internal/alerts"
	"github.com/cantal-go/cantal/internal/apiwire"
	"github.com/cantal-go/cantal/internal/cluster"
	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/registry"
	"github.com/cantal-go/cantal/internal/remote"
	"github.com/cantal-go/cantal/internal/selector"
	"github.com/cantal-go/cantal/internal/series"
)

// wirePeers answers /api/v1/peers as the agent does (agent.gossip.PeersJSON).
type wirePeers struct{ peers []cluster.Peer }

func (p wirePeers) PeersJSON() any    { return map[string]any{"peers": p.peers} }
func (p wirePeers) Join(string) error { return nil }

// wireServer is a Server over a registry with every kind of value the answers must carry:
// a counter above 2^53, NaN and ±Inf floats, floats the 'g' format writes with an exponent,
// a negative level, a state whose text is "NaN", and labels with characters encoding/json
// would escape (<, >, &, quotes, a control character, non-ASCII); peers answered from kept
// chunks (ok, stale with since, unreachable with an error); alerts; peers.
func wireServer(t *testing.T) *httptest.Server {
	t.Helper()
	h := history.New(history.Options{Retention: time.Hour, Interval: time.Second})
	reg := registry.New(h, time.Hour, slog.New(slog.DiscardHandler))
	odd := series.Labels{"metric": "odd<&>\"q\"\x01é", "pid": "1", "unit": "bytes"}
	big := reg.Series(series.Labels{"metric": "big", "pid": "1"}, series.Counter)
	small := reg.Series(series.Labels{"metric": "small"}, series.Counter)
	nan := reg.Series(series.Labels{"metric": "nan"}, series.Float)
	inf := reg.Series(series.Labels{"metric": "inf"}, series.Float)
	ninf := reg.Series(series.Labels{"metric": "ninf"}, series.Float)
	tiny := reg.Series(odd, series.Float)
	lvl := reg.Series(series.Labels{"metric": "lvl"}, series.Level)
	st := reg.Series(series.Labels{"metric": "phase", "x": "<b>"}, series.State)
	now := time.Now().UnixMilli()
	start := now - 9000
	for i := int64(0); i < 10; i++ {
		reg.Begin(start + i*1000)
		reg.Put(big, 1<<60+uint64(i)*1_000_001)
		reg.Put(small, uint64(i*i))
		reg.Put(nan, math.Float64bits(math.NaN()))
		reg.Put(inf, math.Float64bits(math.Inf(1)))
		reg.Put(ninf, math.Float64bits(math.Inf(-1)))
		reg.Put(tiny, math.Float64bits(1.5e-7*float64(i+1)+1e21*float64(i%2)))
		reg.Put(lvl, uint64(-3*i))
		reg.PutState(st, start, "NaN")
		reg.Commit()
	}
	peer := func(node string, v float64) remote.Series {
		return remote.Series{
			Latest: series.Sample{Labels: series.Labels{"metric": "m&m", "node": node}, Kind: series.Float, TS: now - 1000, Bits: math.Float64bits(v)},
			Points: []remote.Point{{TS: now - 3000, Value: v}, {TS: now - 1000, Value: math.NaN()}},
		}
	}
	var queries atomic.Int32
	kept := keptCluster{queries: &queries, answers: []remote.NodeAnswer{
		{Node: "p1", Status: remote.OK, Series: []remote.Series{peer("p1", 1e-9),
			{Latest: series.Sample{Labels: series.Labels{"metric": "phase", "node": "p1"}, Kind: series.State, Text: "up <ok>", Since: 5}}}},
		{Node: "p2<", Status: remote.Stale, Since: now - 5000, Series: []remote.Series{peer("p2<", 2.5e6)}},
		{Node: "p3", Status: remote.Unreachable, Since: now - 60000, Error: "dial: connection refused & \"gone\""},
	}}
	rtt := 12_345 * time.Microsecond
	snap := &alerts.Snapshot{Truncated: []string{"r&d"}, Alerts: []alerts.Alert{
		{Name: "hot", State: "firing", Severity: "critical", Labels: series.Labels{"metric": "t<1>"}, Value: 1e21, Op: ">", Threshold: 0.1, SinceMs: 7, Summary: "a & b"},
		{Name: "cold", State: "pending", Severity: "warning", Labels: series.Labels{}, Value: -1.5e-7, Op: "<", Threshold: 3, SinceMs: 8},
	}}
	srv := &Server{Registry: reg, Log: slog.New(slog.DiscardHandler), MaxWindow: time.Hour, NodeName: "local<1>",
		ClusterTimeout: 200 * time.Millisecond, Cluster: kept, Alerts: func() *alerts.Snapshot { return snap },
		Peers: wirePeers{peers: []cluster.Peer{
			{ID: "a1", Name: "n<1>", Addr: "10.0.0.1:22682", HTTP: "10.0.0.1:22682", Version: "v1", Status: cluster.StatusAlive,
				RTT: rtt, LastSeen: time.UnixMilli(now), Since: time.UnixMilli(now - 100)},
			{ID: "a2", Name: "n2", Addr: "10.0.0.2:22682", Status: cluster.StatusDead},
		}}}
	mux := http.NewServeMux()
	srv.Register(mux)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mux.ServeHTTP(w, r.WithContext(access.NewContext(r.Context(), testCallers["all"])))
	}))
	t.Cleanup(ts.Close)
	return ts
}

// reencode decodes body into a T and encodes it again as the API would: with the type's own
// MarshalJSON when it has one (json.Marshal would HTML-escape its output), else json.Marshal.
func reencode[T any](t *testing.T, what string, body []byte) (T, []byte) {
	t.Helper()
	var v T
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("%s: decode: %v in %s", what, err, body)
	}
	var out []byte
	var err error
	if m, ok := any(v).(json.Marshaler); ok {
		out, err = m.MarshalJSON()
	} else {
		out, err = json.Marshal(v)
	}
	if err != nil {
		t.Fatalf("%s: encode: %v", what, err)
	}
	return v, append(out, '\n')
}

func fetchBody(t *testing.T, ts *httptest.Server, method, path, body string) []byte {
	t.Helper()
	req, err := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	return b.Bytes()
}

func sameBytes(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		i := 0
		for i < len(got) && i < len(want) && got[i] == want[i] {
			i++
		}
		lo := max(0, i-60)
		t.Errorf("%s: re-encoded answer differs at byte %d:\n got  …%s\n want …%s", what, i,
			got[lo:min(len(got), i+60)], want[lo:min(len(want), i+60)])
	}
}

// TestWireTypesGolden: every answer of the main routes, produced by the real handlers over
// values that stress the encoding, decodes into its apiwire type (no unknown member) and
// encodes back to exactly the same bytes.
func TestWireTypesGolden(t *testing.T) {
	ts := wireServer(t)
	q := url.QueryEscape
	check := func(what string, body []byte, roundTrip func(string, []byte) []byte) {
		t.Helper()
		sameBytes(t, what, roundTrip(what, body), body)
	}
	metrics := func(what string, body []byte) []byte {
		v, out := reencode[apiwire.MetricsAnswer](t, what, body)
		if len(v.Series) == 0 {
			t.Errorf("%s: no series", what)
		}
		return out
	}
	hist := func(what string, body []byte) []byte {
		v, out := reencode[apiwire.HistoryAnswer](t, what, body)
		if len(v.Series) == 0 {
			t.Errorf("%s: no series", what)
		}
		return out
	}
	stats := func(what string, body []byte) []byte {
		_, out := reencode[apiwire.StatsAnswer](t, what, body)
		return out
	}
	for _, path := range []string{"/api/v1/metrics", "/api/v1/metrics?match=" + q(`{metric=~"big|nan|phase"}`)} {
		check(path, fetchBody(t, ts, "GET", path, ""), metrics)
	}
	for _, path := range []string{"/api/v1/history?window=1m", "/api/v1/history?window=1m&fn=rate"} {
		check(path, fetchBody(t, ts, "GET", path, ""), hist)
	}
	for _, path := range []string{"/api/v1/stats?window=1m", "/api/v1/stats?window=1m&fn=rate", "/api/v1/stats?window=1m&match=none"} {
		check(path, fetchBody(t, ts, "GET", path, ""), stats)
	}
	for _, path := range []string{"/api/v1/cluster/metrics?match=" + q(`{metric=~"m&m|phase|nan"}`),
		"/api/v1/cluster/metrics?agg=sum&match=" + q(`{metric=~"m&m|small"}`) + "&fn=rate",
		"/api/v1/cluster/metrics?agg=avg&by=metric"} {
		check(path, fetchBody(t, ts, "GET", path, ""), func(what string, body []byte) []byte {
			v, out := reencode[apiwire.ClusterMetricsAnswer](t, what, body)
			if len(v.Nodes) != 4 {
				t.Errorf("%s: %d nodes; want local and 3 peers", what, len(v.Nodes))
			}
			return out
		})
	}
	// The peers' kept history is written as HistorySeries writes it; the local node's (and a
	// peer's fetched for a window longer than kept) goes through withNodeLabels, which
	// re-encodes each series as a map: members in alphabetical order, <>& escaped. So the
	// bytes are checked where the local node has no series, the JSON value everywhere.
	clusterHistory := func(what string, body []byte) []byte {
		_, out := reencode[apiwire.ClusterHistoryAnswer](t, what, body)
		return out
	}
	path := "/api/v1/cluster/history?window=1m&match=" + q(`m&m`)
	check(path, fetchBody(t, ts, "GET", path, ""), clusterHistory)
	path = "/api/v1/cluster/history?window=1m&match=" + q(`{metric=~"m&m|small|nan"}`)
	body := fetchBody(t, ts, "GET", path, "")
	if got, want := jsonValue(t, clusterHistory(path, body)), jsonValue(t, body); got != want {
		t.Errorf("%s: re-encoded answer is another JSON value:\n got  %s\n want %s", path, got, want)
	}
	check("/api/v1/alerts", fetchBody(t, ts, "GET", "/api/v1/alerts", ""), func(what string, body []byte) []byte {
		_, out := reencode[apiwire.AlertsAnswer](t, what, body)
		return out
	})
	check("/api/v1/peers", fetchBody(t, ts, "GET", "/api/v1/peers", ""), func(what string, body []byte) []byte {
		_, out := reencode[apiwire.PeersAnswer](t, what, body)
		return out
	})
	check("POST /api/v1/peers", fetchBody(t, ts, "POST", "/api/v1/peers", `{"addr":"h<1>:1"}`), func(what string, body []byte) []byte {
		_, out := reencode[apiwire.AddPeerAnswer](t, what, body)
		return out
	})
	for _, path := range []string{"/api/v1/metrics?match=" + q(`{<&`), "/api/v1/nope<&>"} {
		check(path, fetchBody(t, ts, "GET", path, ""), func(what string, body []byte) []byte {
			v, out := reencode[apiwire.ErrorAnswer](t, what, body)
			if v.Error == "" {
				t.Errorf("%s: no error message", what)
			}
			return out
		})
	}
}

// TestWireTypesValues: the decoded values are the ones the registry holds: a counter above
// 2^53 exactly (its literal), NaN and ±Inf from their strings, a state's text "NaN" as text.
func TestWireTypesValues(t *testing.T) {
	ts := wireServer(t)
	var ans apiwire.MetricsAnswer
	if err := json.Unmarshal(fetchBody(t, ts, "GET", "/api/v1/metrics", ""), &ans); err != nil {
		t.Fatal(err)
	}
	got := map[string]apiwire.Series{}
	for _, s := range ans.Series {
		got[s.Labels["metric"]] = s
	}
	if s := got["big"]; !s.Value.IsInt() || s.Value.Raw != "1152921504615846985" || !s.Rate.Valid {
		t.Errorf("big = %+v; want the exact literal 2^60+9000009 and a rate", s)
	}
	if s := got["nan"]; !s.Value.Valid || !math.IsNaN(s.Value.F) {
		t.Errorf("nan = %+v; want NaN", s.Value)
	}
	if s := got["inf"]; !math.IsInf(s.Value.F, 1) || !math.IsInf(got["ninf"].Value.F, -1) {
		t.Errorf("inf, ninf = %+v, %+v; want +Inf, -Inf", s.Value, got["ninf"].Value)
	}
	if s := got["phase"]; s.Kind != "state" || s.Text != "NaN" || s.Value.Valid || s.Since == 0 {
		t.Errorf("phase = %+v; want state text NaN with its since", s)
	}
	if s := got["lvl"]; s.Value.F != -27 || s.Rate.Valid {
		t.Errorf("lvl = %+v; want -27 without a rate", s)
	}
}

// jsonValue returns b's JSON value in a canonical form (maps sorted, numbers as written).
func jsonValue(t *testing.T, b []byte) string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("%v in %s", err, b)
	}
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// TestAlertsNonFinite: an alert whose value is NaN or infinite is answered (the strings
// apiwire.Number decodes), not refused as encoding/json refuses such a float.
func TestAlertsNonFinite(t *testing.T) {
	snap := &alerts.Snapshot{Alerts: []alerts.Alert{
		{Name: "inf", State: "firing", Labels: series.Labels{}, Value: math.Inf(1), Op: ">", Threshold: 1},
		{Name: "nan", State: "pending", Labels: series.Labels{}, Value: math.NaN(), Op: "!=", Threshold: math.Inf(-1)},
	}}
	ts := alertsServer(t, "n1", snap, nil)
	body := fetchBody(t, ts, "GET", "/api/v1/alerts", "")
	var ans apiwire.AlertsAnswer
	if err := json.Unmarshal(body, &ans); err != nil {
		t.Fatalf("%v in %s", err, body)
	}
	if len(ans.Alerts) != 2 || !math.IsInf(float64(ans.Alerts[0].Value), 1) || !math.IsNaN(float64(ans.Alerts[1].Value)) ||
		!math.IsInf(float64(ans.Alerts[1].Threshold), -1) {
		t.Errorf("alerts = %s; want +Inf, then NaN with threshold -Inf", body)
	}
}

// BenchmarkMetricsWire: a /api/v1/metrics answer of 1000 counters (with rates), encoded by the
// handler's appender (LatestJSON, what the agent serves) and by apiwire.MetricsAnswer from the
// decoded answer, side by side; and decoded into apiwire.MetricsAnswer (what the CLI does) and
// into map[string]any (a client without types).
//
//	go test -run '^$' -bench MetricsWire ./internal/api/
func BenchmarkMetricsWire(b *testing.B) {
	h := history.New(history.Options{Retention: time.Hour, Interval: time.Second})
	reg := registry.New(h, time.Hour, slog.New(slog.DiscardHandler))
	var refs []*series.Ref
	for i := range 1000 {
		refs = append(refs, reg.Series(series.Labels{"metric": "app.requests", "pid": strconv.Itoa(1000 + i), "process": "web"}, series.Counter))
	}
	now := time.Now().UnixMilli()
	for s := range int64(3) {
		reg.Begin(now - 4000 + s*2000)
		for i, r := range refs {
			reg.Put(r, uint64(int64(i)*s*7))
		}
		reg.Commit()
	}
	sel, err := selector.Parse("")
	if err != nil {
		b.Fatal(err)
	}
	q := Query{Sel: sel}
	body := LatestJSON(nil, reg, q)
	var ans apiwire.MetricsAnswer
	if err := json.Unmarshal(body, &ans); err != nil {
		b.Fatal(err)
	}
	runCPU(b, "encode/LatestJSON", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		buf := make([]byte, 0, len(body)+64)
		for range b.N {
			buf = LatestJSON(buf[:0], reg, q)
		}
	})
	runCPU(b, "encode/apiwire", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		for range b.N {
			if _, err := ans.MarshalJSON(); err != nil {
				b.Fatal(err)
			}
		}
	})
	runCPU(b, "decode/apiwire", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		for range b.N {
			var a apiwire.MetricsAnswer
			if err := json.Unmarshal(body, &a); err != nil {
				b.Fatal(err)
			}
		}
	})
	runCPU(b, "decode/cli-before", func(b *testing.B) {
		// The CLI's own struct before apiwire (value kept raw, decoded per row).
		type seriesJSON struct {
			Labels map[string]string `json:"labels"`
			Kind   string            `json:"kind"`
			Value  json.RawMessage   `json:"value"`
			TS     int64             `json:"ts"`
			Rate   apiwire.Number    `json:"rate"`
			Text   *string           `json:"text"`
			Since  int64             `json:"since"`
		}
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		for range b.N {
			var a struct {
				Series []seriesJSON `json:"series"`
			}
			if err := json.Unmarshal(body, &a); err != nil {
				b.Fatal(err)
			}
			for _, s := range a.Series {
				var n apiwire.Number
				if err := json.Unmarshal(s.Value, &n); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	runCPU(b, "decode/map", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		for range b.N {
			var a map[string]any
			if err := json.Unmarshal(body, &a); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// runCPU is b.Run that also reports the process's CPU time per op (rusage: user + system),
// which a busy machine disturbs less than the wall time.
func runCPU(b *testing.B, name string, f func(b *testing.B)) {
	b.Run(name, func(b *testing.B) {
		var ru0, ru1 syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
		f(b)
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
		cpu := ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano()
		b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
	})
}
