package api

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/cantal-go/cantal/internal/access"
	"github.com/cantal-go/cantal/internal/apiwire"
	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/hub"
	"github.com/cantal-go/cantal/internal/registry"
	"github.com/cantal-go/cantal/internal/series"
)

// The callers of the privacy tests, chosen per request by the X-Test-Caller header (the
// Guard's part, which these tests stand in for).
var testCallers = map[string]access.Caller{
	"all":  {Name: "root", Via: "unix", Unix: true, Roles: access.Read, Processes: access.ProcessesAll},
	"own":  {Name: "uid:1000", Via: "unix", Unix: true, UID: 1000, Roles: access.Read, Processes: access.ProcessesOwn},
	"none": {Via: "anonymous", Roles: access.Read, Processes: access.ProcessesNone},
}

// privacyServer serves a registry with series of pid 100 (uid 1000), pid 200 (uid 2000),
// pid 300 (no longer a process), and series of no process (machine, cgroup).
func privacyServer(t *testing.T, uids func(int) (uint32, bool), cluster Cluster) *httptest.Server {
	t.Helper()
	h := history.New(history.Options{Retention: time.Hour, Interval: time.Second})
	reg := registry.New(h, time.Hour, slog.New(slog.DiscardHandler))
	var refs []*series.Ref
	for _, l := range []series.Labels{
		{"metric": "process.cpu", "pid": "100", "process": "mine"},
		{"metric": "process.cpu", "pid": "200", "process": "theirs"},
		{"metric": "process.cpu", "pid": "300", "process": "gone"},
		{"metric": "app.requests", "pid": "200", "appname": "db"},
		{"metric": "load.one"},
		{"metric": "cgroup.cpu", "cgroup": "/system.slice/x.service"},
	} {
		refs = append(refs, reg.Series(l, series.Float))
	}
	now := time.Now().UnixMilli()
	for i := int64(0); i < 5; i++ {
		reg.Begin(now - 4000 + i*1000)
		for _, r := range refs {
			reg.Put(r, math.Float64bits(float64(i)))
		}
		reg.Commit()
	}
	srv := &Server{Registry: reg, Log: slog.New(slog.DiscardHandler), MaxWindow: time.Hour, NodeName: "a",
		ProcessUID: uids, Cluster: cluster,
		Status: func(context.Context) apiwire.Status { return apiwire.Status{} },
		Processes: func(context.Context, ProcessQuery) apiwire.ProcessesAnswer {
			return apiwire.ProcessesAnswer{Processes: []apiwire.Process{}}
		}}
	mux := http.NewServeMux()
	srv.Register(mux)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, ok := testCallers[r.Header.Get("X-Test-Caller")]
		if !ok {
			t.Errorf("request without a test caller")
			return
		}
		mux.ServeHTTP(w, r.WithContext(access.NewContext(r.Context(), c)))
	}))
	t.Cleanup(ts.Close)
	return ts
}

func testUIDs(pid int) (uint32, bool) {
	switch pid {
	case 100:
		return 1000, true
	case 200:
		return 2000, true
	}
	return 0, false
}

// pidsOf returns the sorted pid labels of the series of a JSON answer ("-" for no pid).
func pidsOf(t *testing.T, b []byte) []string {
	t.Helper()
	var ans struct {
		Series []struct{ Labels map[string]string }
	}
	if err := json.Unmarshal(b, &ans); err != nil {
		t.Fatalf("%v in %s", err, b)
	}
	var pids []string
	for _, s := range ans.Series {
		p, ok := s.Labels["pid"]
		if !ok {
			p = "-"
		}
		if !slices.Contains(pids, p) {
			pids = append(pids, p)
		}
	}
	sort.Strings(pids)
	return pids
}

func getAs(t *testing.T, ts *httptest.Server, caller, path string) []byte {
	t.Helper()
	req, _ := http.NewRequest("GET", ts.URL+path, nil)
	req.Header.Set("X-Test-Caller", caller)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s as %s = %d %s", path, caller, resp.StatusCode, b)
	}
	return b
}

// TestSeriesRoutesShowOnlyVisible: /api/v1/metrics, history and stats answer a caller who may
// see only its own processes with the series of its processes and of no process; one who may
// see none with the series of no process; one who may see all with all. A pid that is no
// longer a process is hidden from all but the last.
//
// Security finding 12.
func TestSeriesRoutesShowOnlyVisible(t *testing.T) {
	ts := privacyServer(t, testUIDs, nil)
	want := map[string][]string{
		"all":  {"-", "100", "200", "300"},
		"own":  {"-", "100"},
		"none": {"-"},
	}
	for caller, pids := range want {
		for _, path := range []string{"/api/v1/metrics", "/api/v1/history?window=1m", "/api/v1/stats?window=1m", "/api/v1/metrics?match=process.cpu"} {
			got := pidsOf(t, getAs(t, ts, caller, path))
			w := pids
			if strings.Contains(path, "process.cpu") {
				w = slices.DeleteFunc(slices.Clone(pids), func(p string) bool { return p == "-" })
			}
			if !slices.Equal(got, w) {
				t.Errorf("GET %s as %s: pids %v; want %v", path, caller, got, w)
			}
		}
	}
}

// TestUnknownProcessUIDHidesProcessSeries: without a way to know a process's uid, per-process series are
// hidden from every caller who may not see all processes (privacy fails closed).
//
// Security finding 12.
func TestUnknownProcessUIDHidesProcessSeries(t *testing.T) {
	ts := privacyServer(t, nil, nil)
	for caller, want := range map[string][]string{"all": {"-", "100", "200", "300"}, "own": {"-"}, "none": {"-"}} {
		if got := pidsOf(t, getAs(t, ts, caller, "/api/v1/metrics")); !slices.Equal(got, want) {
			t.Errorf("metrics as %s without ProcessUID: pids %v; want %v", caller, got, want)
		}
	}
}

// TestSeeAllCallerGetsNoFilter: a caller who sees every process, or a context with no
// caller (internal use), gets no predicate at all: the handlers' hot path stays as it was.
//
// Security finding 12.
func TestSeeAllCallerGetsNoFilter(t *testing.T) {
	s := &Server{ProcessUID: testUIDs, NodeName: "a"}
	if s.SeriesVisible(context.Background()) != nil || s.PeerSeriesVisible(context.Background()) != nil {
		t.Error("no caller in the context: want no filter")
	}
	all := access.NewContext(context.Background(), testCallers["all"])
	if s.SeriesVisible(all) != nil || s.PeerSeriesVisible(all) != nil {
		t.Error("a caller who sees every process: want no filter")
	}
	own := s.SeriesVisible(access.NewContext(context.Background(), testCallers["own"]))
	for _, tc := range []struct {
		l    series.Labels
		want bool
	}{
		{series.Labels{"metric": "x"}, true},
		{series.Labels{"metric": "x", "pid": "100"}, true},
		{series.Labels{"metric": "x", "pid": "100", "node": "a"}, true},
		{series.Labels{"metric": "x", "pid": "100", "node": "b"}, false}, // another node's pid 100
		{series.Labels{"metric": "x", "pid": "200"}, false},
		{series.Labels{"metric": "x", "pid": "300"}, false},
		{series.Labels{"metric": "x", "pid": "0x64"}, false},
		{series.Labels{"metric": "x", "pid": ""}, false},
	} {
		if got := own(tc.l); got != tc.want {
			t.Errorf("own caller's SeriesVisible(%v) = %v; want %v", tc.l, got, tc.want)
		}
	}
	peer := s.PeerSeriesVisible(access.NewContext(context.Background(), testCallers["own"]))
	if peer(series.Labels{"pid": "100"}) || !peer(series.Labels{"metric": "x"}) {
		t.Error("PeerSeriesVisible: want a peer's process series hidden, others shown")
	}
}

// privacyCluster is a peer "b" with a series of its pid 100 (a number that is also a local
// process of the caller's uid) and one of no process.
type privacyCluster struct{ now int64 }

func (f privacyCluster) peerSeries() []series.Sample {
	return []series.Sample{
		{Labels: series.Labels{"metric": "process.cpu", "pid": "100"}, Kind: series.Float, Bits: math.Float64bits(1), TS: f.now},
		{Labels: series.Labels{"metric": "load.one"}, Kind: series.Float, Bits: math.Float64bits(2), TS: f.now},
	}
}

func (f privacyCluster) Query(ctx context.Context, match string, rate bool) []hub.NodeAnswer {
	var out []hub.Series
	for _, s := range f.peerSeries() {
		out = append(out, hub.Series{Latest: s, Points: []hub.Point{{TS: f.now - 1000, Value: 1}}})
	}
	return []hub.NodeAnswer{{Node: "b", Status: hub.OK, Series: out}}
}

func (f privacyCluster) Listen(ctx context.Context, match string, rate bool, fn func(hub.Update)) {
	fn(hub.Update{Node: "b", TS: f.now, Series: f.peerSeries()})
	<-ctx.Done()
}

func (f privacyCluster) Members() []hub.Member {
	return []hub.Member{{ID: "b", Name: "b", Up: true}}
}

// TestWebSocketShowsOnlyVisible: the WebSocket's history and updates, node and cluster scope,
// carry only the series the connection's caller may see; a peer's process series are hidden
// from a caller who may not see every process.
//
// Security finding 12.
func TestWebSocketShowsOnlyVisible(t *testing.T) {
	ts := privacyServer(t, testUIDs, privacyCluster{time.Now().UnixMilli()})
	type msg struct {
		Type, ID, Node string
		Series         []struct{ Labels map[string]string }
	}
	for caller, want := range map[string]struct{ local, peer []string }{
		"all":  {[]string{"-", "100", "200", "300"}, []string{"-", "100"}},
		"own":  {[]string{"-", "100"}, []string{"-"}},
		"none": {[]string{"-"}, []string{"-"}},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(ts.URL, "http")+"/api/v1/ws",
			&websocket.DialOptions{HTTPHeader: http.Header{"X-Test-Caller": {caller}}})
		if err != nil {
			t.Fatal(err)
		}
		c.Write(ctx, websocket.MessageText, []byte(`{"type":"subscribe","id":"n","history":"1m"}`))
		c.Write(ctx, websocket.MessageText, []byte(`{"type":"subscribe","id":"c","history":"1m","scope":"cluster"}`))
		got := map[string][]string{}
		for len(got) < 6 { // n: history, update; c: history and update of a and b
			_, b, err := c.Read(ctx)
			if err != nil {
				t.Fatalf("as %s, after %v: %v", caller, got, err)
			}
			var m msg
			if err := json.Unmarshal(b, &m); err != nil || m.Type == "error" {
				t.Fatalf("as %s: %s (%v)", caller, b, err)
			}
			var pids []string
			for _, s := range m.Series {
				p, ok := s.Labels["pid"]
				if !ok {
					p = "-"
				}
				if !slices.Contains(pids, p) {
					pids = append(pids, p)
				}
			}
			sort.Strings(pids)
			got[m.ID+"/"+m.Type+"/"+m.Node] = pids
		}
		c.CloseNow()
		cancel()
		for _, k := range []string{"n/history/", "n/update/", "c/history/a", "c/update/a"} {
			if !slices.Equal(got[k], want.local) {
				t.Errorf("as %s, %s: pids %v; want %v", caller, k, got[k], want.local)
			}
		}
		for _, k := range []string{"c/history/b", "c/update/b"} {
			if !slices.Equal(got[k], want.peer) {
				t.Errorf("as %s, %s: pids %v; want %v", caller, k, got[k], want.peer)
			}
		}
	}
}

// TestClusterRoutesShowOnlyVisible: cluster answers carry only the series the caller may see:
// the local node's as on /api/v1/metrics, and no peer's process series for a caller who may not
// see every process.
//
// Security finding 12.
func TestClusterRoutesShowOnlyVisible(t *testing.T) {
	ts := privacyServer(t, testUIDs, privacyCluster{time.Now().UnixMilli()})
	want := map[string]map[string][]string{
		"all":  {"a": {"-", "100", "200", "300"}, "b": {"-", "100"}},
		"own":  {"a": {"-", "100"}, "b": {"-"}},
		"none": {"a": {"-"}, "b": {"-"}},
	}
	for caller, byNode := range want {
		var ans struct {
			Nodes []struct {
				Node   string
				Series json.RawMessage
			}
		}
		b := getAs(t, ts, caller, "/api/v1/cluster/metrics")
		if err := json.Unmarshal(b, &ans); err != nil {
			t.Fatal(err)
		}
		for _, n := range ans.Nodes {
			got := pidsOf(t, []byte(`{"series":`+string(n.Series)+`}`))
			if !slices.Equal(got, byNode[n.Node]) {
				t.Errorf("cluster/metrics as %s, node %s: pids %v; want %v", caller, n.Node, got, byNode[n.Node])
			}
		}
		b = getAs(t, ts, caller, "/api/v1/cluster/history?window=1m")
		if err := json.Unmarshal(b, &ans); err != nil {
			t.Fatal(err)
		}
		for _, n := range ans.Nodes {
			if n.Node != "a" {
				continue // the fake peer has no HTTP address: unreachable
			}
			got := pidsOf(t, []byte(`{"series":`+string(n.Series)+`}`))
			if !slices.Equal(got, byNode["a"]) {
				t.Errorf("cluster/history as %s, node a: pids %v; want %v", caller, got, byNode["a"])
			}
		}
	}
	// A peer's history answer is filtered the same way.
	peer := []byte(`{"series":[{"labels":{"metric":"process.cpu","pid":"7"},"points":[]},{"labels":{"metric":"load.one"},"points":[]}]}`)
	got := pidsOf(t, []byte(`{"series":`+string(apiwire.AppendHistoryList(nil, peerHistorySeries(peer, "b", noProcessSeries)))+`}`))
	if !slices.Equal(got, []string{"-"}) {
		t.Errorf("a peer's history filtered for a caller who sees no process: pids %v; want [-]", got)
	}
}

// Without hidepid a local user sees every process, but of another user's only what /proc shows
// it: not the io counters (/proc/PID/io) nor the application's series, found through the
// environment (/proc/PID/environ); of its own processes, everything. Root sees everything; a
// peer's process series are filtered the same way. (issue 31, N13)
func TestSeriesVisibleHidesOthersPrivateDetails(t *testing.T) {
	uids := func(pid int) (uint32, bool) {
		switch pid {
		case 100:
			return 1000, true
		case 200:
			return 2000, true
		}
		return 0, false
	}
	s := &Server{ProcessUID: uids, NodeName: "a"}
	user := access.Caller{Via: "unix", Unix: true, UID: 1000, Roles: access.Read, Processes: access.ProcessesAll, Details: access.ProcessesOwn}
	ctx := access.NewContext(context.Background(), user)
	vis := s.SeriesVisible(ctx)
	if vis == nil {
		t.Fatal("no filter for a local user without hidepid")
	}
	for _, c := range []struct {
		l    series.Labels
		want bool
	}{
		{series.Labels{"metric": "process.cpu", "pid": "200"}, true},
		{series.Labels{"metric": "process.io.read_bytes", "pid": "200"}, false},
		{series.Labels{"metric": "app.requests", "pid": "200", "appname": "db"}, false},
		{series.Labels{"metric": "process.io.read_bytes", "pid": "100"}, true},
		{series.Labels{"metric": "app.requests", "pid": "100", "appname": "mine"}, true},
		{series.Labels{"metric": "load.one"}, true},
	} {
		if got := vis(c.l); got != c.want {
			t.Errorf("%v visible = %v; want %v", c.l, got, c.want)
		}
	}
	peer := s.PeerSeriesVisible(ctx)
	if peer == nil || peer(series.Labels{"metric": "process.io.read_bytes", "pid": "7", "node": "b"}) ||
		peer(series.Labels{"metric": "app.x", "pid": "7", "node": "b"}) || !peer(series.Labels{"metric": "process.cpu", "pid": "7", "node": "b"}) {
		t.Error("a peer's io counters or application series visible to a local user, or its process.cpu not")
	}
	root := access.Caller{Via: "unix", Unix: true, Roles: access.Read | access.Write, Processes: access.ProcessesAll}
	if s.SeriesVisible(access.NewContext(context.Background(), root)) != nil {
		t.Error("root gets a filter")
	}
}
