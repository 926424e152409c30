package api

import (
	"bytes"
	"context"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/access"
	"github.com/cantal-go/cantal/internal/alerts"
	"github.com/cantal-go/cantal/internal/apiwire"
	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/hub"
	"github.com/cantal-go/cantal/internal/registry"
	"github.com/cantal-go/cantal/internal/series"
	"github.com/cantal-go/cantal/internal/testsupport/golden"
)

// wirePeers answers /api/v1/peers with fixed peers (agent.peerWire makes them from the
// membership; TestPeerWireBytes there holds it to the bytes cluster.Peer encodes).
type wirePeers struct{ peers []apiwire.Peer }

func (p wirePeers) Peers() []apiwire.Peer { return p.peers }
func (p wirePeers) Join(string) error     { return nil }

// wireCluster is a keptCluster whose Listen pushes one peer update.
type wireCluster struct {
	keptCluster
	update hub.Update
}

func (c wireCluster) Listen(_ context.Context, _ string, _ bool, fn func(hub.Update)) {
	fn(c.update)
}

// wireServer is a Server over a registry with every kind of value the answers must carry:
// a counter above 2^53, NaN and ±Inf floats, floats the 'g' format writes with an exponent,
// a negative level, a state whose text is "NaN", and labels with characters encoding/json
// would escape (<, >, &, quotes, a control character, non-ASCII); peers answered from kept
// chunks (ok, stale with since, unreachable with an error); alerts; peers.
func wireServer(t *testing.T) (*httptest.Server, int64) {
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
	peer := func(node string, v float64) hub.Series {
		return hub.Series{
			Latest: series.Sample{Labels: series.Labels{"metric": "m&m", "node": node}, Kind: series.Float, TS: now - 1000, Bits: math.Float64bits(v)},
			Points: []hub.Point{{TS: now - 3000, Value: v}, {TS: now - 1000, Value: math.NaN()}},
		}
	}
	var queries atomic.Int32
	kept := wireCluster{keptCluster: keptCluster{queries: &queries, answers: []hub.NodeAnswer{
		{Node: "p1", Status: hub.OK, Series: []hub.Series{peer("p1", 1e-9),
			{Latest: series.Sample{Labels: series.Labels{"metric": "phase", "node": "p1"}, Kind: series.State, Text: "up <ok>", Since: 5}}}},
		{Node: "p2<", Status: hub.Stale, Since: now - 5000, Series: []hub.Series{peer("p2<", 2.5e6)}},
		{Node: "p3", Status: hub.Unreachable, Since: now - 60000, Error: "dial: connection refused & \"gone\""},
	}}, update: hub.Update{Node: "p1<", TS: now - 2000, Series: []series.Sample{
		{Labels: series.Labels{"metric": "m&m"}, Kind: series.Float, TS: now - 2000, Bits: math.Float64bits(math.Inf(-1)), Rate: 1e21, HasRate: true},
		{Labels: series.Labels{"metric": "big", "pid": "1"}, Kind: series.Counter, TS: now - 2000, Bits: 1<<60 + 7},
		{Labels: series.Labels{"metric": "lvl"}, Kind: series.Level, TS: now - 2000, Bits: uint64(1<<64 - 5)},
		{Labels: series.Labels{"metric": "phase"}, Kind: series.State, TS: now - 2000, Text: "NaN", Since: 3},
	}}}
	snap := &alerts.Snapshot{Truncated: []string{"r&d"}, Alerts: []alerts.Alert{
		{Name: "hot", State: "firing", Severity: "critical", Labels: series.Labels{"metric": "t<1>"}, Value: 1e21, Op: ">", Threshold: 0.1, SinceMs: 7, Summary: "a & b"},
		{Name: "cold", State: "pending", Severity: "warning", Labels: series.Labels{}, Value: -1.5e-7, Op: "<", Threshold: 3, SinceMs: 8},
	}}
	srv := &Server{Registry: reg, Log: slog.New(slog.DiscardHandler), MaxWindow: time.Hour, NodeName: "local<1>",
		ClusterTimeout: 200 * time.Millisecond, Cluster: kept, Alerts: func() *alerts.Snapshot { return snap },
		Peers: wirePeers{peers: []apiwire.Peer{
			{ID: "a1", Name: "n<1>", Addr: "10.0.0.1:22682", HTTP: "10.0.0.1:22682", Version: "v1", Status: "alive",
				RTTMs: apiwire.Number{F: 12.345, Raw: "12.345", Valid: true}, LastSeen: now, Since: now - 100},
			{ID: "a2", Name: "n2", Addr: "10.0.0.2:22682", Status: "dead"},
		}}}
	mux := http.NewServeMux()
	srv.Register(mux)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mux.ServeHTTP(w, r.WithContext(access.NewContext(r.Context(), testCallers["all"])))
	}))
	t.Cleanup(ts.Close)
	return ts, now
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

// goldenRoutes are the answers testdata/wire holds, by file name.
var goldenRoutes = []struct{ name, method, path, body string }{
	{"metrics", "GET", "/api/v1/metrics", ""},
	{"history", "GET", "/api/v1/history?window=1m", ""},
	{"history-rate", "GET", "/api/v1/history?window=1m&fn=rate", ""},
	{"stats", "GET", "/api/v1/stats?window=1m", ""},
	{"stats-rate", "GET", "/api/v1/stats?window=1m&fn=rate", ""},
	{"cluster-metrics", "GET", "/api/v1/cluster/metrics?match=" + url.QueryEscape(`{metric=~"m&m|phase|nan|big"}`), ""},
	{"cluster-metrics-sum", "GET", "/api/v1/cluster/metrics?agg=sum&fn=rate&match=" + url.QueryEscape(`{metric=~"m&m|small"}`), ""},
	{"cluster-history", "GET", "/api/v1/cluster/history?window=1m&match=" + url.QueryEscape(`{metric=~"m&m|small|nan"}`), ""},
	{"alerts", "GET", "/api/v1/alerts", ""},
	{"peers", "GET", "/api/v1/peers", ""},
	{"peers-post", "POST", "/api/v1/peers", `{"addr":"h<1>:1"}`},
	{"error-match", "GET", "/api/v1/metrics?match=" + url.QueryEscape(`{<&`), ""},
	{"error-route", "GET", "/api/v1/nope<&>", ""},
}

// timeNum matches the 13-digit unix-ms times in an answer.
var timeNum = regexp.MustCompile(`\b1[0-9]{12}\b`)

// normalizeTimes replaces each time within 10 minutes of now by "NOW", "NOW-9000", ...: the
// fixture's times are relative to the wall clock, everything else in the answers is fixed.
func normalizeTimes(b []byte, now int64) []byte {
	return timeNum.ReplaceAllFunc(b, func(m []byte) []byte {
		n, err := strconv.ParseInt(string(m), 10, 64)
		if err != nil || n < now-600_000 || n > now+600_000 {
			return m
		}
		if d := n - now; d != 0 {
			return []byte("NOW" + strconv.FormatInt(d, 10))
		}
		return []byte("NOW")
	})
}

// TestWireBytesUnchanged: the answers of the main routes are byte for byte those the handlers
// served before internal/apiwire existed (testdata/wire, written by this test at commit 7cec891
// with CANTAL_UPDATE_GOLDEN=1; times relative to the fixture's clock), so moving the answers
// onto the apiwire types changed nothing a client or a DESIGN.md contract sees.
func TestWireBytesUnchanged(t *testing.T) {
	ts, now := wireServer(t)
	for _, r := range goldenRoutes {
		t.Run(r.name, func(t *testing.T) {
			golden.Check(t, filepath.Join("testdata", "wire", r.name+".json"), normalizeTimes(fetchBody(t, ts, r.method, r.path, r.body), now))
		})
	}
}
