package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/cantal-go/cantal/internal/apiwire"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

// fakeCluster serves the cluster routes' shapes for three nodes: web-1 (ok), web-2 (stale; its
// scans 700 ms after web-1's) and db-1 (unreachable), and records the queries.
func fakeCluster(t *testing.T) (*httptest.Server, *[]string) {
	t.Helper()
	var queries []string
	mux := http.NewServeMux()
	reply := func(path, body string) {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			queries = append(queries, r.URL.Path+"?"+r.URL.RawQuery)
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(body))
		})
	}
	reply("/api/v1/cluster/metrics", `{"nodes":[
		{"node":"web-1","status":"ok","series":[
			{"labels":{"metric":"requests.number","node":"web-1","pid":"900","process":"app"},"kind":"counter","value":100,"ts":1699999998000,"rate":10},
			{"labels":{"metric":"heap","unit":"bytes","node":"web-1"},"kind":"level","value":1048576,"ts":1699999998000}]},
		{"node":"web-2","status":"stale","since":1699999990000,"series":[
			{"labels":{"metric":"requests.number","node":"web-2","pid":"77","process":"app"},"kind":"counter","value":300,"ts":1699999990000,"rate":30}]},
		{"node":"db-1","status":"unreachable","error":"dial tcp 10.0.0.9:22682: connect: connection refused","series":[]}],
		"aggregate":[{"labels":{"metric":"heap","unit":"bytes"},"kind":"level","fn":"sum","value":1048576,"nodes":1},
			{"labels":{"metric":"requests.number"},"kind":"counter","fn":"sum","value":400,"rate":40,"nodes":2}]}`)
	reply("/api/v1/cluster/history", `{"nodes":[
		{"node":"web-1","status":"ok","series":[
			{"labels":{"metric":"requests.number","node":"web-1","pid":"900"},"kind":"counter","fn":"rate","points":[[1699999990000,1],[1699999992000,2],[1699999994100,3],[1699999996000,4],[1700000000000,6]]}]},
		{"node":"web-2","status":"stale","since":1699999996000,"series":[
			{"labels":{"metric":"requests.number","node":"web-2","pid":"77"},"kind":"counter","fn":"rate","points":[[1699999990700,10],[1699999992700,20],[1699999994700,30]]}]},
		{"node":"db-1","status":"unreachable","error":"peer is down","series":[]}],
		"aggregate":[{"labels":{"metric":"requests.number"},"kind":"counter","fn":"sum","series":2,"step_ms":2000,
			"points":[[1699999990000,11,2,2],[1699999992000,22,2,2],[1699999994000,33,2,2],[1699999996000,4,1,2],[1700000000000,6,1,2]]}]}`)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, &queries
}

func TestClusterGolden(t *testing.T) {
	srv, queries := fakeCluster(t)
	for _, tc := range []struct {
		name  string
		args  []string
		query string
	}{
		{"cluster_metrics", []string{"cluster", "metrics", "requests.number", "--agg", "sum", "--without", "pid"},
			"/api/v1/cluster/metrics?agg=sum&match=requests.number&without=pid"},
		{"cluster_history", []string{"cluster", "history", "--rate", "--window", "1m", "--agg", "sum", "requests.number"},
			"/api/v1/cluster/history?agg=sum&fn=rate&match=requests.number&window=1m"},
		{"cluster_stats", []string{"cluster", "stats", "--agg", "max", "--rate"}, "/api/v1/cluster/history?agg=max&fn=rate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			*queries = nil
			c, out, errb := testCLI(map[string]string{"CANTAL_AGENT": srv.URL})
			if code := c.Run(context.Background(), tc.args); code != 0 {
				t.Fatalf("Run(%q) = %d; stderr: %s", tc.args, code, errb)
			}
			if len(*queries) != 1 || (*queries)[0] != tc.query {
				t.Errorf("Run(%q) sent %q; want [%q]", tc.args, *queries, tc.query)
			}
			golden(t, tc.name, out.String())
		})
	}
}

// TestClusterHistoryAggregate: cluster history --agg asks the agent for the aggregate (agg=,
// by=, node=) and prints the agent's, partial slots marked as such, never its own sum; --json is
// the agent's answer; cluster stats --agg summarizes the agent's complete slots only.
func TestClusterHistoryAggregate(t *testing.T) {
	srv, queries := fakeCluster(t)
	c, out, errb := testCLI(map[string]string{"CANTAL_AGENT": srv.URL})
	if code := c.Run(context.Background(), []string{"cluster", "history", "--agg", "sum", "--by", "metric", "--node", "web-1", "--node=web-2,db-1"}); code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	if want := "/api/v1/cluster/history?agg=sum&by=metric&match=&node=web-1%2Cweb-2%2Cdb-1"; len(*queries) != 1 || strings.Replace((*queries)[0], "match=&", "", 1) != strings.Replace(want, "match=&", "", 1) {
		t.Errorf("sent %q; want %q", *queries, want)
	}
	for _, row := range [][]string{
		{"22:13:14", "3/s", "30/s", "33/s"},
		{"22:13:16", "4/s", "-", "4/s", "(partial:", "1", "of", "2)"},
		{"22:13:20", "6/s", "-", "6/s", "(partial:", "1", "of", "2)"},
	} {
		if !hasFields(out.String(), row...) {
			t.Errorf("no row %q in\n%s", row, out)
		}
	}

	*queries = nil
	c, out, errb = testCLI(map[string]string{"CANTAL_AGENT": srv.URL})
	if code := c.Run(context.Background(), []string{"cluster", "history", "--agg", "sum", "--json"}); code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	resp, err := http.Get(srv.URL + "/api/v1/cluster/history")
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	io.Copy(&want, resp.Body)
	resp.Body.Close()
	if out.String() != want.String()+"\n" {
		t.Errorf("--json printed\n%s\nwant the agent's answer\n%s", out, want.String())
	}

	// stats of the aggregate: the three complete slots (11, 22, 33), not the partial 4 and 6.
	c, out, errb = testCLI(map[string]string{"CANTAL_AGENT": srv.URL})
	if code := c.Run(context.Background(), []string{"cluster", "stats", "--agg", "sum", "-o", "json", "--by", "metric"}); code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	var st struct {
		Nodes []struct {
			Node   string `json:"node"`
			Series []struct {
				Count int     `json:"count"`
				Max   float64 `json:"max"`
			} `json:"series"`
		} `json:"nodes"`
		Aggregate []struct {
			Count  int     `json:"count"`
			Series int     `json:"series"`
			Min    float64 `json:"min"`
			Max    float64 `json:"max"`
		} `json:"aggregate"`
	}
	if err := json.Unmarshal(out.Bytes(), &st); err != nil {
		t.Fatalf("stats --json: %v\n%s", err, out)
	}
	if len(st.Nodes) != 3 || len(st.Nodes[0].Series) != 1 || st.Nodes[0].Series[0].Count != 5 || st.Nodes[1].Series[0].Count != 3 {
		t.Errorf("per-node stats = %+v", st.Nodes)
	}
	if len(st.Aggregate) != 1 || st.Aggregate[0].Count != 3 || st.Aggregate[0].Series != 2 || st.Aggregate[0].Min != 11 || st.Aggregate[0].Max != 33 {
		t.Errorf("aggregate stats = %+v; want 3 complete slots of 2 series, 11 to 33", st.Aggregate)
	}
}

// hasFields reports whether a line of out has the given white-space separated fields, in
// order, from its start.
func hasFields(out string, want ...string) bool {
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= len(want) && slices.Equal(f[:len(want)], want) {
			return true
		}
	}
	return false
}

// TestClusterNodes: an unknown node (the agent's status unknown) is an error naming it, after
// the nodes table; cluster metrics marks an unreachable node's rows and shows no values of it.
func TestClusterNodes(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/api/v1/cluster/metrics", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"nodes":[
			{"node":"n1","status":"ok","series":[{"labels":{"metric":"m","node":"n1"},"kind":"level","value":5,"ts":1699999998000}]},
			{"node":"n2","status":"unreachable","since":1699999900000,"error":"peer is down","series":[{"labels":{"metric":"m","node":"n2"},"kind":"level","value":777,"ts":1699999900000}]},
			{"node":"n9","status":"unknown","error":"no such node in the cluster","series":[]}],"aggregate":[]}`))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c, out, errb := testCLI(map[string]string{"CANTAL_AGENT": srv.URL})
	code := c.Run(context.Background(), []string{"cluster", "metrics", "m", "--node", "n1,n2,n9"})
	if code != ExitError || !strings.Contains(errb.String(), "cantal: unknown node n9: no such node in the cluster") {
		t.Errorf("exit %d, stderr %q; want 1 and unknown node n9", code, errb)
	}
	if !hasFields(out.String(), "n9", "unknown", "0", "no", "such", "node", "in", "the", "cluster") {
		t.Errorf("nodes table without n9 unknown:\n%s", out)
	}
	c, out, errb = testCLI(map[string]string{"CANTAL_AGENT": srv.URL})
	c.Run(context.Background(), []string{"cluster", "metrics", "m"})
	if !hasFields(out.String(), "m", "n2", "unreachable", "level", "-", "-") || strings.Contains(out.String(), "777") {
		t.Errorf("n2 (unreachable) shown with its last value as current:\n%s", out)
	}
	if !hasFields(out.String(), "m", "n1", "ok", "level", "5", "-") {
		t.Errorf("n1's row missing:\n%s", out)
	}
}

// TestHistoryOutageIsAGap: a node stopped for 45 s shows as a gap in history and cluster
// history (a row saying so, its cells empty), never as values carried over or interpolated.
func TestHistoryOutageIsAGap(t *testing.T) {
	var pts []string
	for ts := int64(1699999800000); ts <= 1700000000000; ts += 2000 {
		if ts > 1699999900000 && ts < 1699999946000 {
			continue // stopped
		}
		pts = append(pts, fmt.Sprintf("[%d,%d]", ts, (ts/2000)%7))
	}
	list := strings.Join(pts, ",")
	mux := http.NewServeMux()
	mux.HandleFunc("/api/v1/history", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"series":[{"labels":{"metric":"m"},"kind":"level","points":[` + list + `]}]}`))
	})
	mux.HandleFunc("/api/v1/cluster/history", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"nodes":[{"node":"n1","status":"ok","series":[{"labels":{"metric":"m","node":"n1"},"kind":"level","points":[` + list + `]}]}]}`))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for _, args := range [][]string{{"history", "m"}, {"cluster", "history", "m"}} {
		c, out, errb := testCLI(map[string]string{"CANTAL_AGENT": srv.URL})
		if code := c.Run(context.Background(), args); code != 0 {
			t.Fatalf("%q: exit %d: %s", args, code, errb)
		}
		if !hasFields(out.String(), "…", "(no", "data", "for", "46s)") {
			t.Errorf("%q: no gap row for the 46 s outage:\n%s", args, out)
		}
		for _, ts := range []string{"22:11:42", "22:11:44", "22:12:00", "22:12:24"} { // inside the outage
			if strings.Contains(out.String(), ts) {
				t.Errorf("%q: a row at %s, inside the outage:\n%s", args, ts, out)
			}
		}
	}
}

func TestClusterUsage(t *testing.T) {
	for _, args := range [][]string{
		{"cluster"},
		{"cluster", "--agg", "sum"},
		{"cluster", "bogus"},
		{"cluster", "metrics", "--agg", "median"},
		{"cluster", "history", "--by", "a", "--without", "b"},
		{"cluster", "metrics", "--window", "1m"},
		{"top", "--interval", "1ms"},
		{"top", "extra"},
	} {
		c, _, errb := testCLI(map[string]string{"CANTAL_AGENT": "http://127.0.0.1:1"})
		if code := c.Run(context.Background(), args); code != ExitUsage {
			t.Errorf("Run(%q) = %d; want %d (usage); stderr %s", args, code, ExitUsage, errb)
		}
	}
}

func TestTopOnce(t *testing.T) {
	srv, queries := fakeAgent(t)
	c, out, errb := testCLI(map[string]string{"CANTAL_AGENT": srv.URL, "COLUMNS": "70", "LINES": "12"})
	if code := c.Run(context.Background(), []string{"top", "--once", "--sort", "rss"}); code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	if len(*queries) != 3 || (*queries)[1] != "/api/v1/metrics?match="+url.QueryEscape(topSelector) {
		t.Errorf("queries %q", *queries)
	}
	golden(t, "top_once", out.String())
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	// --once to a pipe lists every process, biggest RSS first
	if len(lines) != 7+3 || !strings.HasPrefix(lines[7], "900 ") || !strings.HasPrefix(lines[8], "1 ") {
		t.Errorf("top --once --sort rss:\n%s", out)
	}
}

func TestTopRender(t *testing.T) {
	f := &topFrame{node: "n1", vals: map[string]float64{"memory.MemTotal": 8 << 30, "memory.MemAvailable": 6 << 30,
		"system.load_avg_1min": 1.5, "system.uptime_s": 3600},
		rates:   map[string]float64{"cpu.user_ms": 500, "cpu.system_ms": 250, "cpu.idle_ms": 1250, "net.interface.rx.bytes": 2048},
		hasRate: map[string]bool{"net.interface.rx.bytes": true}}
	for i := range 50 {
		f.procs = append(f.procs, apiwire.Process{PID: i + 1, Name: "p", Cmdline: []string{strings.Repeat("x", 200)}, CPUPercent: float64(i)})
	}
	lines := f.render(60, 12, "cpu", time.UTC)
	if len(lines) != 12 {
		t.Fatalf("%d lines; want 12 (the height)", len(lines))
	}
	for _, l := range lines {
		if len([]rune(l)) > 60 {
			t.Errorf("line longer than 60 columns: %q", l)
		}
	}
	for i, want := range map[int]string{
		1: "CPU   37.5% busy  user 25.0  sys 12.5",
		2: "Mem  2.0 GiB used / 8.0 GiB (25.0%)",
		4: "Net  rx 2.0 KiB/s  tx -",
		7: "50 ",
	} {
		if !strings.HasPrefix(lines[i], want) {
			t.Errorf("line %d = %q; want it to start with %q", i, lines[i], want)
		}
	}
}

func TestPartition(t *testing.T) {
	devs := []string{"sda", "sda1", "nvme0n1", "nvme0n1p2", "loop0", "dm-0", "sdb"}
	for dev, want := range map[string]bool{"sda": false, "sda1": true, "nvme0n1": false, "nvme0n1p2": true, "loop0": true, "dm-0": false, "sdb": false} {
		if got := partition(dev, devs); got != want {
			t.Errorf("partition(%q) = %v; want %v", dev, got, want)
		}
	}
}
