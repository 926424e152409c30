package api

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/access"
	"github.com/cantal-go/cantal/internal/alerts"
	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/hub"
	"github.com/cantal-go/cantal/internal/registry"
	"github.com/cantal-go/cantal/internal/series"
)

func alertsServer(t *testing.T, node string, snap *alerts.Snapshot, cluster Cluster) *httptest.Server {
	t.Helper()
	reg := registry.New(history.New(history.Options{Retention: time.Hour, Interval: time.Second}), time.Hour, slog.New(slog.DiscardHandler))
	srv := &Server{Registry: reg, Log: slog.New(slog.DiscardHandler), NodeName: node, ProcessUID: testUIDs,
		Cluster: cluster, ClusterTimeout: time.Second, Alerts: func() *alerts.Snapshot { return snap }}
	mux := http.NewServeMux()
	srv.Register(mux)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, ok := testCallers[r.Header.Get("X-Test-Caller")]
		if !ok {
			c = testCallers["all"] // a peer's fetch
		}
		mux.ServeHTTP(w, r.WithContext(access.NewContext(r.Context(), c)))
	}))
	t.Cleanup(ts.Close)
	return ts
}

func alertOf(name, state, node string, l series.Labels) alerts.Alert {
	return alerts.Alert{Name: name, State: state, Severity: "warning", Node: node, Labels: l, Value: 11, Op: ">", Threshold: 10, SinceMs: 1}
}

// TestAlertsPrivacy: an alert over a process the caller may not see is listed without its
// labels; one over no process keeps them.
func TestAlertsPrivacy(t *testing.T) {
	snap := &alerts.Snapshot{Truncated: []string{"proc_hot"}, Alerts: []alerts.Alert{
		alertOf("proc_hot", "firing", "a", series.Labels{"metric": "process.cpu", "pid": "200", "process": "theirs"}),
		alertOf("load", "pending", "a", series.Labels{"metric": "load.one"}),
	}}
	ts := alertsServer(t, "a", snap, nil)
	for caller, wantPid := range map[string]string{"all": "200", "own": "", "none": ""} {
		var ans struct {
			Alerts    []alerts.Alert
			Truncated []string
		}
		if err := json.Unmarshal(getAs(t, ts, caller, "/api/v1/alerts"), &ans); err != nil {
			t.Fatal(err)
		}
		if len(ans.Truncated) != 1 || ans.Truncated[0] != "proc_hot" {
			t.Errorf("as %s: truncated %v; want [proc_hot]", caller, ans.Truncated)
		}
		if len(ans.Alerts) != 2 {
			t.Fatalf("as %s: %d alerts; want 2 (hidden labels, not hidden alerts)", caller, len(ans.Alerts))
		}
		if got := ans.Alerts[0].Labels["pid"]; got != wantPid || (wantPid == "" && len(ans.Alerts[0].Labels) != 0) {
			t.Errorf("as %s: proc_hot labels %v; want pid %q", caller, ans.Alerts[0].Labels, wantPid)
		}
		if ans.Alerts[1].Labels["metric"] != "load.one" {
			t.Errorf("as %s: load labels %v; want them kept", caller, ans.Alerts[1].Labels)
		}
	}
	if snap.Alerts[0].Labels["pid"] != "200" {
		t.Errorf("the answer changed the engine's snapshot: %v", snap.Alerts[0].Labels)
	}
}

// TestClusterAlerts: every peer's alerts, with their node; a down peer and one that does not
// answer are listed unreachable.
func TestClusterAlerts(t *testing.T) {
	peerB := alertsServer(t, "b", &alerts.Snapshot{Alerts: []alerts.Alert{
		alertOf("disk", "firing", "b", series.Labels{"mountpoint": "/"}),
		alertOf("proc", "firing", "b", series.Labels{"metric": "process.cpu", "pid": "7"}),
	}}, nil)
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("not json")) }))
	defer broken.Close()
	host := func(u string) string { return strings.TrimPrefix(u, "http://") }
	members := []hub.Member{
		{ID: "b", Name: "b", HTTP: host(peerB.URL), Up: true},
		{ID: "c", Name: "c", HTTP: "127.0.0.1:1", Up: false},
		{ID: "d", Name: "d", HTTP: host(broken.URL), Up: true},
	}
	ts := alertsServer(t, "a", &alerts.Snapshot{Alerts: []alerts.Alert{alertOf("cpu_busy", "pending", "a", series.Labels{"metric": "cpu.busy_pct"})}}, fakeCluster{members})
	for _, caller := range []string{"all", "none"} {
		var ans struct {
			Alerts []alerts.Alert
			Nodes  []struct {
				Node, Status, Error string
				Firing              int
			}
		}
		if err := json.Unmarshal(getAs(t, ts, caller, "/api/v1/cluster/alerts"), &ans); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, a := range ans.Alerts {
			got = append(got, a.Node+"/"+a.Name+"/"+a.State+"/"+a.Labels["pid"])
		}
		want := "b/disk/firing/ b/proc/firing/7 a/cpu_busy/pending/"
		if caller == "none" {
			want = "b/disk/firing/ b/proc/firing/ a/cpu_busy/pending/"
		}
		if strings.Join(got, " ") != want {
			t.Errorf("as %s: alerts %v; want %s (firing first, each with its node, a peer's pid hidden from who sees no process)", caller, got, want)
		}
		status := map[string]string{}
		for _, n := range ans.Nodes {
			status[n.Node] = n.Status
			if n.Node == "b" && n.Firing != 2 {
				t.Errorf("node b firing %d; want 2", n.Firing)
			}
		}
		if status["a"] != "ok" || status["b"] != "ok" || status["c"] != "unreachable" || status["d"] != "unreachable" {
			t.Errorf("as %s: nodes %v; want a, b ok and c (down), d (bad answer) unreachable", caller, status)
		}
	}
}
