package api

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/cantal-go/cantal/internal/apiwire"
	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/hub"
	"github.com/cantal-go/cantal/internal/registry"
	"github.com/cantal-go/cantal/internal/series"
	"github.com/cantal-go/cantal/internal/testsupport/testpki"
)

// fakeCluster has fixed members and no remote subscriptions.
type fakeCluster struct{ members []hub.Member }

func (f fakeCluster) Query(context.Context, string, bool) []hub.NodeAnswer   { return nil }
func (f fakeCluster) Listen(context.Context, string, bool, func(hub.Update)) {}
func (f fakeCluster) Members() []hub.Member                                  { return f.members }

// onePeerMux serves the API of a node "local" with an empty registry whose one member, name,
// is the HTTP server peer (fetched with the given ClusterTimeout).
func onePeerMux(peer *httptest.Server, name string, timeout time.Duration) *http.ServeMux {
	reg := registry.New(history.New(history.Options{Retention: time.Hour, Interval: time.Second}), time.Hour, slog.New(slog.DiscardHandler))
	srv := &Server{Registry: reg, Log: slog.New(slog.DiscardHandler), MaxWindow: time.Hour, NodeName: "local",
		ClusterTimeout: timeout,
		Cluster:        fakeCluster{[]hub.Member{{ID: "p", Name: name, HTTP: strings.TrimPrefix(peer.URL, "http://"), Up: true}}}}
	mux := http.NewServeMux()
	srv.Register(mux)
	return mux
}

// TestClusterHistoryDoesNotReuseConnections: a peer that was fetched from once and then
// vanished (its cable cut: the kept-alive connection stays open but nothing answers on it) must
// be reported unreachable after a fresh connection attempt, bounded by ClusterTimeout, instead
// of the request waiting on the old connection for the whole fetch deadline.
func TestClusterHistoryDoesNotReuseConnections(t *testing.T) {
	var calls atomic.Int32
	release := make(chan struct{})
	peer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) > 1 {
			select { // a peer that no longer answers
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		w.Write([]byte(`{"series":[{"labels":{"metric":"m"},"kind":"float","points":[[1,2]]}]}`))
	}))
	defer peer.Close()
	defer close(release)

	mux := onePeerMux(peer, "peer", 200*time.Millisecond)

	fetch := func() map[string]struct{ Status, Error string } {
		t.Helper()
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/cluster/history?match=m&window=1m", nil))
		var ans struct {
			Nodes []struct{ Node, Status, Error string }
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &ans); err != nil {
			t.Fatalf("cluster history: %v in %s", err, rec.Body)
		}
		out := map[string]struct{ Status, Error string }{}
		for _, n := range ans.Nodes {
			out[n.Node] = struct{ Status, Error string }{n.Status, n.Error}
		}
		return out
	}
	if got := fetch()["peer"]; got.Status != "ok" {
		t.Fatalf("first fetch: peer = %+v; want ok", got)
	}
	peer.Listener.Close() // new connections are refused; a kept-alive one would still reach the handler
	got := fetch()["peer"]
	if got.Status != "unreachable" {
		t.Errorf("after the peer vanished: peer = %+v; want unreachable", got)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("the vanished peer's handler was entered %d times; want once (a reused connection waits for the whole fetch deadline)", n)
	}
}

// TestClusterHistoryOverTLSNeedsClusterCert: a member with a TLS configuration is fetched from over
// HTTPS with the node's certificate; a peer that wants a certificate of the cluster answers
// nothing to a plain fetch or a foreign certificate.
//
// Security finding 10.
func TestClusterHistoryOverTLSNeedsClusterCert(t *testing.T) {
	ca, err := testpki.NewCA("cluster CA")
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := testpki.NewCA("foreign CA")
	if err != nil {
		t.Fatal(err)
	}
	peerID, _ := ca.NewNode("peer", net.IPv4(127, 0, 0, 1))
	mine, _ := ca.NewNode("me", net.IPv4(127, 0, 0, 1))
	impostor, _ := foreign.NewNode("me", net.IPv4(127, 0, 0, 1))
	impostor.CA = ca
	var reached atomic.Int32
	peer := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		w.Write([]byte(`{"series":[{"labels":{"metric":"m"},"kind":"float","points":[[1,2]]}]}`))
	}))
	peer.TLS = peerID.ServerTLS()
	peer.TLS.ClientAuth = tls.RequireAndVerifyClientCert
	peer.StartTLS()
	defer peer.Close()
	addr := strings.TrimPrefix(peer.URL, "https://")

	reg := registry.New(history.New(history.Options{Retention: time.Hour, Interval: time.Second}), time.Hour, slog.New(slog.DiscardHandler))
	fetch := func(m hub.Member) (status, errMsg string) {
		t.Helper()
		srv := &Server{Registry: reg, Log: slog.New(slog.DiscardHandler), MaxWindow: time.Hour, NodeName: "local",
			ClusterTimeout: time.Second, Cluster: fakeCluster{[]hub.Member{m}}}
		mux := http.NewServeMux()
		srv.Register(mux)
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/cluster/history?match=m&window=1m", nil))
		var ans struct {
			Nodes []struct {
				Node, Status, Error string
				Series              []json.RawMessage
			}
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &ans); err != nil {
			t.Fatalf("cluster history: %v in %s", err, rec.Body)
		}
		for _, n := range ans.Nodes {
			if n.Node == "peer" {
				if n.Status == "ok" && len(n.Series) != 1 {
					t.Errorf("peer ok with %d series; want 1", len(n.Series))
				}
				return n.Status, n.Error
			}
		}
		t.Fatalf("no peer in %s", rec.Body)
		return "", ""
	}
	if st, msg := fetch(hub.Member{ID: "p", Name: "peer", HTTP: addr, Up: true, TLS: mine.ClientTLS()}); st != "ok" {
		t.Fatalf("fetch with the cluster's certificate: %s (%s); want ok", st, msg)
	}
	n := reached.Load()
	for name, m := range map[string]hub.Member{
		"plain":               {ID: "p", Name: "peer", HTTP: addr, Up: true},
		"foreign certificate": {ID: "p", Name: "peer", HTTP: addr, Up: true, TLS: impostor.ClientTLS()},
	} {
		if st, _ := fetch(m); st != "unreachable" {
			t.Errorf("%s fetch: %s; want unreachable", name, st)
		}
	}
	if got := reached.Load(); got != n {
		t.Errorf("%d fetches without a certificate of the cluster reached the peer; want none", got-n)
	}
}

// keptCluster answers from fixed node answers, as a hub.Hub answers from its subscriptions,
// and counts its queries.
type keptCluster struct {
	answers []hub.NodeAnswer
	queries *atomic.Int32
}

func (f keptCluster) Query(context.Context, string, bool) []hub.NodeAnswer {
	f.queries.Add(1)
	return f.answers
}
func (f keptCluster) Listen(context.Context, string, bool, func(hub.Update)) {}
func (f keptCluster) Members() []hub.Member                                  { return nil }
func (f keptCluster) Kept() time.Duration                                    { return 5 * time.Minute }

func keptServer(t *testing.T, c Cluster) *http.ServeMux {
	t.Helper()
	reg := registry.New(history.New(history.Options{Retention: time.Hour, Interval: time.Second}), time.Hour, slog.New(slog.DiscardHandler))
	srv := &Server{Registry: reg, Log: slog.New(slog.DiscardHandler), MaxWindow: time.Hour, NodeName: "local",
		ClusterTimeout: 200 * time.Millisecond, Cluster: c}
	mux := http.NewServeMux()
	srv.Register(mux)
	return mux
}

func getJSON(t *testing.T, mux *http.ServeMux, url string, v any) int {
	t.Helper()
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", url, nil))
	if rec.Code == http.StatusOK {
		if err := json.Unmarshal(rec.Body.Bytes(), v); err != nil {
			t.Fatalf("GET %s: %v in %s", url, err, rec.Body)
		}
	}
	return rec.Code
}

// TestClusterHistoryFromKeptChunks: a window within what the subscriptions keep is answered
// from them (no request to any peer), with the window's points only, the node's status and
// since, states left out; a longer window falls back to fetching (here: no members).
func TestClusterHistoryFromKeptChunks(t *testing.T) {
	now := time.Now().UnixMilli()
	var queries atomic.Int32
	c := keptCluster{queries: &queries, answers: []hub.NodeAnswer{
		{Node: "p1", Status: hub.OK, Series: []hub.Series{
			{Latest: series.Sample{Labels: series.Labels{"metric": "m", "node": "p1"}, Kind: series.Float},
				Points: []hub.Point{{TS: now - 200_000, Value: 1}, {TS: now - 30_000, Value: 2}, {TS: now - 1000, Value: 3}}},
			{Latest: series.Sample{Labels: series.Labels{"metric": "s", "node": "p1"}, Kind: series.State}},
		}},
		{Node: "p2", Status: hub.Stale, Since: now - 5000, Series: []hub.Series{
			{Latest: series.Sample{Labels: series.Labels{"metric": "m", "node": "p2"}, Kind: series.Float},
				Points: []hub.Point{{TS: now - 200_000, Value: 1}}},
		}},
	}}
	mux := keptServer(t, c)
	var ans struct {
		Nodes []struct {
			Node, Status string
			Since        int64
			Series       []struct {
				Labels map[string]string
				Kind   string
				Points [][2]float64
			}
		}
	}
	if code := getJSON(t, mux, "/api/v1/cluster/history?match=m&window=1m", &ans); code != 200 {
		t.Fatalf("status %d", code)
	}
	if queries.Load() != 1 || len(ans.Nodes) != 3 {
		t.Fatalf("queries %d, nodes %+v; want 1 query and local, p1, p2", queries.Load(), ans.Nodes)
	}
	p1, p2 := ans.Nodes[1], ans.Nodes[2]
	if p1.Node != "p1" || p1.Status != "ok" || len(p1.Series) != 1 || len(p1.Series[0].Points) != 2 ||
		p1.Series[0].Points[0][1] != 2 || p1.Series[0].Labels["node"] != "p1" {
		t.Errorf("p1 = %+v; want ok with m's 2 points of the last minute", p1)
	}
	if p2.Node != "p2" || p2.Status != "stale" || p2.Since != now-5000 || len(p2.Series) != 0 {
		t.Errorf("p2 = %+v; want stale since %d with no series in the window", p2, now-5000)
	}
	if code := getJSON(t, mux, "/api/v1/cluster/history?match=m&window=10m", &ans); code != 200 {
		t.Fatalf("status %d", code)
	}
	if queries.Load() != 1 || len(ans.Nodes) != 1 {
		t.Errorf("10m window: queries %d, nodes %+v; want it fetched from the members (none here)", queries.Load(), ans.Nodes)
	}
}

// TestClusterAggregateGrouping: by default an aggregate drops the host labels (two processes of
// one app on two nodes are one group); by= keeps only the listed labels and the metric name,
// without= drops the listed ones and node; both at once is refused.
func TestClusterAggregateGrouping(t *testing.T) {
	mk := func(node, pid, process string, v float64) hub.NodeAnswer {
		return hub.NodeAnswer{Node: node, Status: hub.OK, Series: []hub.Series{{Latest: series.Sample{
			Labels: series.Labels{"metric": "app.requests", "app": "web", "pid": pid, "process": process, "node": node},
			Kind:   series.Float, TS: 1, Bits: math.Float64bits(v)}}}}
	}
	var queries atomic.Int32
	mux := keptServer(t, keptCluster{queries: &queries, answers: []hub.NodeAnswer{
		mk("p1", "10", "web", 1), mk("p2", "20", "web-exec", 2), mk("p3", "30", "web", 4)}})
	type group struct {
		Labels map[string]string
		Value  float64
		Nodes  int
	}
	var ans struct{ Aggregate []group }
	cases := []struct {
		query string
		want  []group
	}{
		{"", []group{{map[string]string{"metric": "app.requests", "app": "web"}, 7, 3}}},
		{"&by=app", []group{{map[string]string{"metric": "app.requests", "app": "web"}, 7, 3}}},
		{"&by=", []group{{map[string]string{"metric": "app.requests"}, 7, 3}}},
		{"&without=pid", []group{
			{map[string]string{"metric": "app.requests", "app": "web", "process": "web"}, 5, 2},
			{map[string]string{"metric": "app.requests", "app": "web", "process": "web-exec"}, 2, 1}}},
	}
	for _, c := range cases {
		ans.Aggregate = nil
		if code := getJSON(t, mux, "/api/v1/cluster/metrics?agg=sum&match=app.requests"+c.query, &ans); code != 200 {
			t.Fatalf("%s: status %d", c.query, code)
		}
		if fmt.Sprint(ans.Aggregate) != fmt.Sprint(c.want) {
			t.Errorf("agg=sum%s = %+v; want %+v", c.query, ans.Aggregate, c.want)
		}
	}
	if code := getJSON(t, mux, "/api/v1/cluster/metrics?agg=sum&by=app&without=pid", &ans); code != http.StatusBadRequest {
		t.Errorf("by and without: status %d; want 400", code)
	}
}

// TestClusterMetricsDoesNotWaitForChunks: cluster/metrics, served from a real hub.Hub,
// answers with a peer's current values while the peer holds back every history it is asked
// for (and, as the agent does, the values it would queue after it): a metrics query waits
// for the peers' latest values only. The hub's timeout is a minute: a metrics query that
// waited for the chunk (as it did when it asked the hub the history's Query) would not answer
// within the test's 30 s.
func TestClusterMetricsDoesNotWaitForChunks(t *testing.T) {
	peer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		ctx := r.Context()
		for {
			_, data, err := c.Read(ctx)
			if err != nil {
				return
			}
			var req map[string]string
			if json.Unmarshal(data, &req) != nil || req["type"] != "subscribe" {
				continue
			}
			if req["history"] != "" {
				continue // held back: the history, then the current values
			}
			now := time.Now().UnixMilli()
			u, _ := json.Marshal(map[string]any{"type": "update", "id": req["id"], "ts": now, "series": []any{
				map[string]any{"labels": map[string]string{"metric": "m"}, "kind": "float", "value": 42, "ts": now}}})
			if c.Write(ctx, websocket.MessageText, u) != nil {
				return
			}
		}
	}))
	defer peer.Close()
	h := hub.New(hub.Config{Members: func() []hub.Member {
		return []hub.Member{{ID: "p", Name: "peer", HTTP: strings.TrimPrefix(peer.URL, "http://"), Up: true}}
	}, Interval: time.Second, Timeout: time.Minute})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go h.Run(ctx)
	mux := keptServer(t, h)

	type answer struct {
		Nodes []struct {
			Node, Status string
			Series       []struct {
				Labels map[string]string
				Value  float64
			}
		}
	}
	get := func(url string) answer {
		t.Helper()
		done := make(chan answer, 1)
		go func() {
			var ans answer
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, httptest.NewRequest("GET", url, nil))
			json.Unmarshal(rec.Body.Bytes(), &ans)
			done <- ans
		}()
		select {
		case ans := <-done:
			return ans
		case <-time.After(30 * time.Second):
			t.Fatalf("GET %s: no answer in 30 s: it waited for the peer's history chunk", url)
			return answer{}
		}
	}
	check := func(what string, ans answer) {
		t.Helper()
		for _, n := range ans.Nodes {
			if n.Node != "peer" {
				continue
			}
			if n.Status != "ok" || len(n.Series) != 1 || n.Series[0].Value != 42 || n.Series[0].Labels["node"] != "peer" {
				t.Errorf("%s: peer %+v; want ok with its value 42", what, n)
			}
			return
		}
		t.Errorf("%s: no peer in %+v", what, ans)
	}
	check("first metrics query", get("/api/v1/cluster/metrics?match=m"))
	check("second metrics query", get("/api/v1/cluster/metrics?match=m"))
}

// TestClusterServerTiming: both cluster routes say in Server-Timing how long the peers' part
// and the whole answer took at this node, the peers' part within the whole.
func TestClusterServerTiming(t *testing.T) {
	var queries atomic.Int32
	mux := keptServer(t, keptCluster{queries: &queries})
	re := regexp.MustCompile(`^peers;dur=([0-9.]+), total;dur=([0-9.]+)$`)
	for _, url := range []string{"/api/v1/cluster/metrics?match=m", "/api/v1/cluster/history?match=m&window=1m"} {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("GET", url, nil))
		h := rec.Header().Get("Server-Timing")
		m := re.FindStringSubmatch(h)
		if rec.Code != 200 || m == nil {
			t.Errorf("GET %s: %d, Server-Timing %q; want 200 with peers;dur=MS, total;dur=MS", url, rec.Code, h)
			continue
		}
		peers, _ := strconv.ParseFloat(m[1], 64)
		total, _ := strconv.ParseFloat(m[2], 64)
		if peers > total {
			t.Errorf("GET %s: Server-Timing %q: the peers' part longer than the whole", url, h)
		}
	}
	if queries.Load() != 2 {
		t.Errorf("%d hub queries; want 2", queries.Load())
	}
}

// phased returns a kept remote series of node: one point every step from base+phase, n of
// them, each late by jitter(i) ms, all of value v.
func phased(node string, base, phase, step int64, n int, v float64, jitter func(int) int64) hub.Series {
	pts := make([]hub.Point, n)
	for i := range pts {
		pts[i] = hub.Point{TS: base + phase + int64(i)*step + jitter(i), Value: v}
	}
	return hub.Series{Latest: series.Sample{Labels: series.Labels{"metric": "m", "node": node}, Kind: series.Float}, Points: pts}
}

// TestClusterHistoryAggregateStraddling: two nodes whose scans fall 1990 ms and 10 ms into a
// 2 s step, jittering across its edge, sum to the same total in every complete slot of the
// history aggregate (no node counted twice in one slot and missing from the next); only the
// window's edge slots may be partial, and they say so (nodes < expected).
func TestClusterHistoryAggregateStraddling(t *testing.T) {
	const step = 2000
	now := time.Now().UnixMilli()
	base := (now-100_000)/step*step - step // 50 scans up to now
	wobble := func(i int) int64 { return []int64{-15, 15, 0, 12, -12, 5}[i%6] }
	var queries atomic.Int32
	mux := keptServer(t, keptCluster{queries: &queries, answers: []hub.NodeAnswer{
		{Node: "p1", Status: hub.OK, Series: []hub.Series{phased("p1", base, 1990, step, 50, 30, wobble)}},
		{Node: "p2", Status: hub.OK, Series: []hub.Series{phased("p2", base, 10, step, 50, 80, func(i int) int64 { return -wobble(i) })}},
	}})
	var ans apiwire.ClusterHistoryAnswer
	if code := getJSON(t, mux, "/api/v1/cluster/history?match=m&window=3m&agg=sum", &ans); code != 200 {
		t.Fatalf("status %d", code)
	}
	if len(ans.Aggregate) != 1 {
		t.Fatalf("aggregate %+v; want one group", ans.Aggregate)
	}
	g := ans.Aggregate[0]
	if g.Series != 2 || g.StepMs != step || g.Fn != "sum" || g.Labels.Key() != `{"metric":"m"}` {
		t.Errorf("group %+v; want m over 2 series, step 2000 ms", g)
	}
	complete := 0
	for i, p := range g.Points {
		if p.Partial() {
			if i != 0 && i != len(g.Points)-1 {
				t.Errorf("slot %d at %d: %d of %d series; only the edges may be partial", i, p.TS, p.N, p.Expected)
			}
			continue
		}
		complete++
		if p.Value.F != 110 || p.N != 2 {
			t.Errorf("slot %d at %d: sum %v of %d series; want 110 of 2", i, p.TS, p.Value.F, p.N)
		}
	}
	if complete < 48 {
		t.Errorf("%d complete slots of %d; want every slot but the edges", complete, len(g.Points))
	}
	// Without agg= there is no aggregate member.
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/cluster/history?match=m&window=3m", nil))
	if strings.Contains(rec.Body.String(), `"aggregate"`) {
		t.Errorf("no agg=: answer has an aggregate: %s", rec.Body)
	}
	if code := getJSON(t, mux, "/api/v1/cluster/history?match=m&agg=median", &ans); code != http.StatusBadRequest {
		t.Errorf("agg=median: status %d; want 400", code)
	}
}

// TestClusterNodeSelection: {node="n2"} and node=n2 select the node by name: only that peer is
// asked (the others not at all), with the selector minus its node matcher; a node the cluster
// does not have is reported as unknown, not as a node without data.
func TestClusterNodeSelection(t *testing.T) {
	type peerLog struct {
		calls   atomic.Int32
		matches chan string
	}
	peers := map[string]*peerLog{}
	var members []hub.Member
	for _, name := range []string{"n2", "n3"} {
		pl := &peerLog{matches: make(chan string, 16)}
		peers[name] = pl
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			pl.calls.Add(1)
			pl.matches <- r.URL.Query().Get("match")
			w.Write([]byte(`{"series":[{"labels":{"metric":"m"},"kind":"float","points":[[1,2]]}]}`))
		}))
		t.Cleanup(srv.Close)
		members = append(members, hub.Member{ID: name, Name: name, HTTP: strings.TrimPrefix(srv.URL, "http://"), Up: true})
	}
	mux := keptServer(t, fakeCluster{members})
	type node struct{ Node, Status, Error string }
	for _, tc := range []struct {
		query string
		want  []node
		asked string // the match n2 must get
	}{
		{`match={node="n2", metric="m"}`, []node{{"n2", "ok", ""}}, `{metric="m"}`},
		{`match=m&node=n2`, []node{{"n2", "ok", ""}}, "m"},
		{`match={node=~"n2|local"}`, []node{{"local", "ok", ""}, {"n2", "ok", ""}}, "{}"},
		{`match={node="n9"}`, []node{{"n9", "unknown", "no such node in the cluster"}}, ""},
		{`node=n2,n9`, []node{{"n2", "ok", ""}, {"n9", "unknown", "no such node in the cluster"}}, ""},
	} {
		for _, pl := range peers {
			pl.calls.Store(0)
		}
		var ans struct{ Nodes []node }
		q := strings.NewReplacer(" ", "%20", `"`, "%22", "{", "%7B", "}", "%7D", "|", "%7C").Replace(tc.query)
		if code := getJSON(t, mux, "/api/v1/cluster/history?window=10m&"+q, &ans); code != 200 {
			t.Fatalf("%s: status %d", tc.query, code)
		}
		if fmt.Sprint(ans.Nodes) != fmt.Sprint(tc.want) {
			t.Errorf("%s: nodes %+v; want %+v", tc.query, ans.Nodes, tc.want)
		}
		if n := peers["n3"].calls.Load(); n != 0 {
			t.Errorf("%s: n3 asked %d times; want never", tc.query, n)
		}
		if tc.asked != "" {
			select {
			case m := <-peers["n2"].matches:
				if m != tc.asked {
					t.Errorf("%s: n2 asked match=%q; want %q", tc.query, m, tc.asked)
				}
			default:
				t.Errorf("%s: n2 not asked", tc.query)
			}
		}
		for len(peers["n2"].matches) > 0 {
			<-peers["n2"].matches
		}
	}
	// cluster/metrics: the same selection, and unknown nodes.
	var queries atomic.Int32
	kmux := keptServer(t, keptCluster{queries: &queries, answers: []hub.NodeAnswer{
		{Node: "p1", Status: hub.OK}, {Node: "p2", Status: hub.OK}}})
	var ans struct{ Nodes []node }
	if code := getJSON(t, kmux, `/api/v1/cluster/metrics?match=`+url.QueryEscape(`{node="p2"}`), &ans); code != 200 {
		t.Fatalf("metrics: status %d", code)
	}
	if fmt.Sprint(ans.Nodes) != fmt.Sprint([]node{{"p2", "ok", ""}}) {
		t.Errorf(`metrics {node="p2"}: nodes %+v; want p2 only`, ans.Nodes)
	}
	if code := getJSON(t, kmux, `/api/v1/cluster/metrics?node=`, &ans); code != http.StatusBadRequest {
		t.Errorf("node= empty: status %d; want 400", code)
	}
}

// TestClusterHistoryServesFetchedPeerAsWritten: a peer's /api/v1/history answer fetched for the
// cluster history is served as apiwire.HistorySeries writes it (labels, kind, fn, points;
// the node label added, nothing escaped, each value's literal kept) and aggregated from the
// same decoded series.
func TestClusterHistoryServesFetchedPeerAsWritten(t *testing.T) {
	peer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"series":[{"labels":{"metric":"m&m"},"kind":"counter","fn":"rate","points":[[1000,1.50],[2000,"NaN"],[3000,1e+21]]}]}` + "\n"))
	}))
	defer peer.Close()
	mux := onePeerMux(peer, "p<1>", 5*time.Second)
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/cluster/history?match=m%26m&window=1m&agg=sum", nil))
	want := `{"node":"p<1>","status":"ok","series":[{"labels":{"metric":"m&m","node":"p<1>"},"kind":"counter","fn":"rate","points":[[1000,1.50],[2000,"NaN"],[3000,1e+21]]}]}`
	if !strings.Contains(rec.Body.String(), want) {
		t.Fatalf("cluster history:\n %s\nwant the peer's node as\n %s", rec.Body, want)
	}
	var ans apiwire.ClusterHistoryAnswer
	if err := json.Unmarshal(rec.Body.Bytes(), &ans); err != nil {
		t.Fatal(err)
	}
	if len(ans.Aggregate) != 1 || ans.Aggregate[0].Series != 1 || len(ans.Aggregate[0].Points) == 0 {
		t.Fatalf("aggregate %+v; want one group of the peer's one series", ans.Aggregate)
	}
}
