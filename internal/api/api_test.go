package api

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/cantal-go/cantal/internal/apiwire"
	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/hub"
	"github.com/cantal-go/cantal/internal/registry"
	"github.com/cantal-go/cantal/internal/series"
)

// fixture is a registry with a counter (reset at scan 5, absent at scans 7-8), a float and a
// state over 10 scans one second apart ending now.
func fixture(t testing.TB) (*registry.Registry, *httptest.Server, int64) {
	t.Helper()
	h := history.New(history.Options{Retention: time.Hour, Interval: time.Second})
	reg := registry.New(h, time.Hour, slog.New(slog.DiscardHandler))
	c := reg.Series(series.Labels{"metric": "req", "pid": "1"}, series.Counter)
	f := reg.Series(series.Labels{"metric": "temp", "pid": "1"}, series.Float)
	s := reg.Series(series.Labels{"metric": "phase", "pid": "1"}, series.State)
	now := time.Now().UnixMilli()
	start := now - 9000
	for i := int64(0); i < 10; i++ {
		reg.Begin(start + i*1000)
		v := uint64(100 + 10*i)
		if i >= 5 {
			v = uint64(10 * (i - 5)) // restarted application
		}
		if i != 7 && i != 8 {
			reg.Put(c, v)
		}
		reg.Put(f, math.Float64bits(float64(i)))
		reg.PutState(s, start, "ok")
		reg.Commit()
	}
	srv := &Server{Registry: reg, Status: func(context.Context) apiwire.Status { return apiwire.Status{NodeName: "x"} },
		Processes: func(context.Context, ProcessQuery) apiwire.ProcessesAnswer {
			return apiwire.ProcessesAnswer{Processes: []apiwire.Process{}}
		},
		Log: slog.New(slog.DiscardHandler), MaxWindow: time.Hour}
	mux := http.NewServeMux()
	srv.Register(mux)
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	return reg, ts, now
}

func get(t *testing.T, ts *httptest.Server, path string, v any) int {
	t.Helper()
	resp, err := http.Get(ts.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("GET %s: Content-Type %q", path, ct)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("GET %s: %v in %s", path, err, b)
	}
	return resp.StatusCode
}

type apiSeries struct {
	Labels map[string]string
	Kind   string
	Value  any
	Rate   *float64
	Text   string
	Fn     string
	Points [][2]float64
	Count  int
	Min    any
	Max    any
	Slope  any
}

func TestMetrics(t *testing.T) {
	_, ts, _ := fixture(t)
	var ans struct{ Series []apiSeries }
	get(t, ts, "/api/v1/metrics?match="+url.QueryEscape(`{pid="1"}`), &ans)
	got := map[string]apiSeries{}
	for _, s := range ans.Series {
		got[s.Labels["metric"]] = s
	}
	if s := got["req"]; s.Kind != "counter" || s.Value.(float64) != 40 || s.Rate == nil || *s.Rate != 10 {
		t.Errorf("req = %+v; want counter 40 with rate 10", s)
	}
	if s := got["temp"]; s.Kind != "float" || s.Value.(float64) != 9 {
		t.Errorf("temp = %+v; want float 9", s)
	}
	if s := got["phase"]; s.Kind != "state" || s.Text != "ok" {
		t.Errorf("phase = %+v; want state ok", s)
	}
	get(t, ts, "/api/v1/metrics?match=temp", &ans)
	if len(ans.Series) != 1 || ans.Series[0].Labels["metric"] != "temp" {
		t.Errorf("match=temp = %+v; want only temp", ans.Series)
	}
}

func TestHistoryRatesAndGaps(t *testing.T) {
	_, ts, now := fixture(t)
	var ans struct{ Series []apiSeries }
	get(t, ts, "/api/v1/history?window=1m&match=req", &ans)
	if len(ans.Series) != 1 {
		t.Fatalf("history = %+v", ans.Series)
	}
	pts := ans.Series[0].Points
	if len(pts) != 8 {
		t.Errorf("history has %d points; want 8 (two scans missing): %v", len(pts), pts)
	}
	for _, p := range pts {
		if ts := int64(p[0]); ts == now-2000 || ts == now-1000 {
			t.Errorf("a point at %d, inside the gap", ts)
		}
	}
	get(t, ts, "/api/v1/history?window=1m&match=req&fn=rate", &ans)
	rates := ans.Series[0].Points
	for _, p := range rates {
		if p[1] < 0 {
			t.Errorf("negative rate %v across the reset", p)
		}
		if p[1] != 10 {
			t.Errorf("rate %v; every kept step grows by 10/s", p)
		}
	}
	// Steps: 4 before the reset, the reset step dropped, 1 after (5->6), the gap dropped.
	if len(rates) != 5 || ans.Series[0].Fn != "rate" {
		t.Errorf("rates = %v (fn %q); want 5 points of 10/s", rates, ans.Series[0].Fn)
	}
}

func TestStats(t *testing.T) {
	_, ts, _ := fixture(t)
	var ans struct{ Series []apiSeries }
	get(t, ts, "/api/v1/stats?window=1m&match=temp", &ans)
	if len(ans.Series) != 1 {
		t.Fatalf("stats = %+v", ans.Series)
	}
	s := ans.Series[0]
	if s.Count != 10 || s.Min.(float64) != 0 || s.Max.(float64) != 9 || math.Abs(s.Slope.(float64)-1) > 1e-9 {
		t.Errorf("stats = %+v; want count 10, min 0, max 9, slope 1/s", s)
	}
}

func TestErrors(t *testing.T) {
	_, ts, _ := fixture(t)
	var e struct{ Error string }
	for path, code := range map[string]int{
		"/api/v1/metrics?match=%7B":     400,
		"/api/v1/history?window=2h":     400,
		"/api/v1/history?window=0s":     400,
		"/api/v1/stats?fn=log":          400,
		"/api/v1/missing":               404,
		"/api/v1/history?window=banana": 400,
	} {
		if got := get(t, ts, path, &e); got != code || e.Error == "" {
			t.Errorf("GET %s = %d %q; want %d with a reason", path, got, e.Error, code)
		}
	}
	resp, _ := http.Post(ts.URL+"/api/v1/metrics", "text/plain", nil)
	if resp.StatusCode != 405 || resp.Header.Get("Allow") == "" {
		t.Errorf("POST /api/v1/metrics = %d Allow=%q; want 405 with Allow", resp.StatusCode, resp.Header.Get("Allow"))
	}
}

func TestWebSocket(t *testing.T) {
	reg, ts, _ := fixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(ts.URL, "http")+"/api/v1/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	send := func(s string) {
		if err := c.Write(ctx, websocket.MessageText, []byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	type msg struct {
		Type, ID, Error string
		TS              int64
		Series          []apiSeries
	}
	read := func() msg {
		_, b, err := c.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var m msg
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%v in %s", err, b)
		}
		return m
	}
	send(`{"type":"subscribe","id":"bad","match":"{"}`)
	if m := read(); m.Type != "error" || m.ID != "bad" {
		t.Errorf("bad subscribe answered %+v; want an error", m)
	}
	send(`{"type":"subscribe","id":"t","match":"temp","history":"1m"}`)
	if m := read(); m.Type != "history" || len(m.Series) != 1 || len(m.Series[0].Points) != 10 {
		t.Errorf("history message = %+v; want temp's 10 points", m)
	}
	if m := read(); m.Type != "update" || len(m.Series) != 1 {
		t.Errorf("first update = %+v; want temp", m)
	}
	// A new scan pushes an update with the new value.
	f := reg.Series(series.Labels{"metric": "temp", "pid": "1"}, series.Float)
	reg.Begin(time.Now().UnixMilli())
	reg.Put(f, math.Float64bits(42))
	reg.Commit()
	m := read()
	if m.Type != "update" || m.ID != "t" || len(m.Series) != 1 || m.Series[0].Value.(float64) != 42 {
		t.Errorf("update after a scan = %+v; want temp 42", m)
	}
}

type scopeCluster struct{ now int64 }

func (f scopeCluster) Query(ctx context.Context, match string, rate bool) []hub.NodeAnswer {
	return []hub.NodeAnswer{{Node: "b", Status: hub.OK, Series: []hub.Series{{
		Latest: series.Sample{Labels: series.Labels{"metric": "temp", "node": "b"}, Kind: series.Float},
		Points: []hub.Point{{TS: f.now - 120_000, Value: 1}, {TS: f.now - 1000, Value: 2}},
	}}}}
}

func (f scopeCluster) Listen(ctx context.Context, match string, rate bool, fn func(hub.Update)) {
	fn(hub.Update{Node: "b", TS: f.now, Series: []series.Sample{{Labels: series.Labels{"metric": "temp"}, Kind: series.Float, Bits: math.Float64bits(3), TS: f.now}}})
	<-ctx.Done()
}

func (f scopeCluster) Members() []hub.Member {
	return []hub.Member{{ID: "b", Name: "b", Up: true}}
}

// TestWebSocketClusterScope: a cluster subscription gets every node's history chunk and the
// peers' updates as they arrive, each series labelled with its node.
func TestWebSocketClusterScope(t *testing.T) {
	h := history.New(history.Options{Retention: time.Hour, Interval: time.Second})
	reg := registry.New(h, time.Hour, slog.New(slog.DiscardHandler))
	f := reg.Series(series.Labels{"metric": "temp"}, series.Float)
	now := time.Now().UnixMilli()
	reg.Begin(now - 500)
	reg.Put(f, math.Float64bits(7))
	reg.Commit()
	srv := &Server{Registry: reg, Log: slog.New(slog.DiscardHandler), MaxWindow: time.Hour, NodeName: "a", Cluster: scopeCluster{now}}
	mux := http.NewServeMux()
	srv.Register(mux)
	ts := httptest.NewServer(mux)
	defer ts.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(ts.URL, "http")+"/api/v1/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	c.Write(ctx, websocket.MessageText, []byte(`{"type":"subscribe","id":"c","match":"temp","history":"1m","scope":"cluster"}`))
	type msg struct {
		Type, ID, Node string
		Series         []apiSeries
	}
	got := map[string]msg{}
	for len(got) < 4 {
		_, b, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("after %v: %v", got, err)
		}
		var m msg
		json.Unmarshal(b, &m)
		got[m.Type+"/"+m.Node] = m
	}
	if m := got["history/a"]; len(m.Series) != 1 || m.Series[0].Labels["node"] != "a" || len(m.Series[0].Points) != 1 {
		t.Errorf("local history = %+v; want temp with node=a and its point", m)
	}
	if m := got["history/b"]; len(m.Series) != 1 || len(m.Series[0].Points) != 1 || m.Series[0].Points[0][1] != 2 {
		t.Errorf("peer history = %+v; want b's one point inside the window", m)
	}
	if m := got["update/b"]; len(m.Series) != 1 || m.Series[0].Labels["node"] != "b" || m.Series[0].Value.(float64) != 3 {
		t.Errorf("peer update = %+v; want temp 3 labelled node=b", m)
	}
	if m := got["update/a"]; len(m.Series) != 1 || m.Series[0].Labels["node"] != "a" {
		t.Errorf("local update = %+v; want temp labelled node=a", m)
	}
}
