package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
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
		{"node":"db-1","status":"unreachable","error":"peer is down","series":[]}]}`)
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
			"/api/v1/cluster/history?fn=rate&match=requests.number&window=1m"},
		{"cluster_stats", []string{"cluster", "stats", "--agg", "max", "--rate"}, "/api/v1/cluster/history?fn=rate"},
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

// TestClusterHistoryAggregate checks the aggregate the CLI computes: web-2's points, 700 ms
// after web-1's, share web-1's slots; each slot sums the nodes that have a point in it; web-1's
// late scan (2.1 s after the previous one) stays in its own slot; no point is dropped.
func TestClusterHistoryAggregate(t *testing.T) {
	srv, _ := fakeCluster(t)
	c, out, errb := testCLI(map[string]string{"CANTAL_AGENT": srv.URL})
	if code := c.Run(context.Background(), []string{"cluster", "history", "--agg", "sum", "--json"}); code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	var ans struct {
		Nodes     []json.RawMessage `json:"nodes"`
		Aggregate []struct {
			Labels map[string]string `json:"labels"`
			Fn     string            `json:"fn"`
			Series int               `json:"series"`
			Points [][2]float64      `json:"points"`
		} `json:"aggregate"`
	}
	if err := json.Unmarshal(out.Bytes(), &ans); err != nil {
		t.Fatalf("--json output is not JSON: %v\n%s", err, out)
	}
	if len(ans.Nodes) != 3 || len(ans.Aggregate) != 1 {
		t.Fatalf("nodes %d, aggregate %d; want 3 and 1:\n%s", len(ans.Nodes), len(ans.Aggregate), out)
	}
	g := ans.Aggregate[0]
	if g.Fn != "sum" || g.Series != 2 || len(g.Labels) != 1 || g.Labels["metric"] != "requests.number" {
		t.Errorf("aggregate = %+v", g)
	}
	want := [][2]float64{{1699999990000, 11}, {1699999992000, 22}, {1699999994000, 33}, {1699999996000, 4}, {1700000000000, 6}}
	if len(g.Points) != len(want) {
		t.Fatalf("aggregate points %v; want %v", g.Points, want)
	}
	for i := range want {
		if g.Points[i] != want[i] {
			t.Errorf("aggregate point %d = %v; want %v", i, g.Points[i], want[i])
		}
	}

	// stats of one series equal the series' own: every point counted.
	c, out, errb = testCLI(map[string]string{"CANTAL_AGENT": srv.URL})
	if code := c.Run(context.Background(), []string{"cluster", "stats", "--agg", "avg", "-o", "json", "--by", "metric"}); code != 0 {
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
			Max    float64 `json:"max"`
		} `json:"aggregate"`
	}
	if err := json.Unmarshal(out.Bytes(), &st); err != nil {
		t.Fatalf("stats --json: %v\n%s", err, out)
	}
	if len(st.Nodes) != 3 || len(st.Nodes[0].Series) != 1 || st.Nodes[0].Series[0].Count != 5 || st.Nodes[1].Series[0].Count != 3 {
		t.Errorf("per-node stats = %+v", st.Nodes)
	}
	if len(st.Aggregate) != 1 || st.Aggregate[0].Count != 5 || st.Aggregate[0].Series != 2 || st.Aggregate[0].Max != 16.5 {
		t.Errorf("aggregate stats = %+v; want 5 slots of 2 series, max avg 16.5", st.Aggregate)
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
		f.procs = append(f.procs, processJSON{PID: i + 1, Name: "p", Cmdline: []string{strings.Repeat("x", 200)}, CPUPercent: num{F: float64(i), Valid: true}})
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
