package api

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/access"
	"github.com/cantal-go/cantal/internal/apiwire"
	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/hub"
	"github.com/cantal-go/cantal/internal/registry"
	"github.com/cantal-go/cantal/internal/series"
)

// containerServer is a Server over two scans of three containers' cgroup series: web-1 (a
// nested cgroup inside it too), db-1 and a third with a CPU quota it is throttled at, plus a
// cgroup that is no container's.
func containerServer(t *testing.T) *httptest.Server {
	t.Helper()
	h := history.New(history.Options{Retention: time.Hour, Interval: time.Second})
	reg := registry.New(h, time.Hour, slog.New(slog.DiscardHandler))
	type put struct {
		labels series.Labels
		kind   series.Kind
		v0, v1 uint64
	}
	ctr := func(id, name, cg, metric string) series.Labels {
		return series.Labels{"metric": metric, "cgroup": cg, "container": name, "image": "localhost/" + name + ":1", "container_id": id}
	}
	var puts []put
	add := func(l series.Labels, k series.Kind, v0, v1 uint64) { puts = append(puts, put{l, k, v0, v1}) }
	// web-1: 250 ms of CPU a second, 100 MiB working set of 120 used, limit 1 GiB, 2 OOM kills.
	add(ctr("aaaaaaaaaaaa", "web-1", "libpod_parent.libpod-a", "cgroup.cpu.usage_ms"), series.Counter, 1000, 1250)
	add(ctr("aaaaaaaaaaaa", "web-1", "libpod_parent.libpod-a", "cgroup.memory.usage"), series.Level, 120<<20, 120<<20)
	add(ctr("aaaaaaaaaaaa", "web-1", "libpod_parent.libpod-a", "cgroup.memory.working_set"), series.Level, 100<<20, 100<<20)
	add(ctr("aaaaaaaaaaaa", "web-1", "libpod_parent.libpod-a", "cgroup.memory.limit"), series.Level, 1<<30, 1<<30)
	add(ctr("aaaaaaaaaaaa", "web-1", "libpod_parent.libpod-a", "cgroup.memory.oom_kill"), series.Counter, 2, 2)
	add(ctr("aaaaaaaaaaaa", "web-1", "libpod_parent.libpod-a", "cgroup.processes"), series.Level, 3, 3)
	// A cgroup web-1 made inside its own: its figures are in the parent's already, its
	// process is not.
	add(ctr("aaaaaaaaaaaa", "web-1", "libpod_parent.libpod-a.inner", "cgroup.cpu.usage_ms"), series.Counter, 0, 900)
	add(ctr("aaaaaaaaaaaa", "web-1", "libpod_parent.libpod-a.inner", "cgroup.processes"), series.Level, 1, 1)
	// db-1: 900 ms/s, 500 MiB, network and I/O per device and interface.
	add(ctr("bbbbbbbbbbbb", "db-1", "docker.b", "cgroup.cpu.usage_ms"), series.Counter, 0, 900)
	add(ctr("bbbbbbbbbbbb", "db-1", "docker.b", "cgroup.memory.working_set"), series.Level, 500<<20, 500<<20)
	io1 := ctr("bbbbbbbbbbbb", "db-1", "docker.b", "cgroup.io.read_bytes")
	io1["device"] = "8:0"
	io2 := ctr("bbbbbbbbbbbb", "db-1", "docker.b", "cgroup.io.read_bytes")
	io2["device"] = "8:16"
	add(io1, series.Counter, 0, 4096)
	add(io2, series.Counter, 0, 1024)
	add(ctr("bbbbbbbbbbbb", "db-1", "docker.b", "cgroup.net.rx.bytes"), series.Counter, 0, 2000)
	// quota-1: 10 periods a second, 8 throttled, 300 ms throttled.
	add(ctr("cccccccccccc", "quota-1", "docker.c", "cgroup.cpu.usage_ms"), series.Counter, 0, 500)
	add(ctr("cccccccccccc", "quota-1", "docker.c", "cgroup.cpu.periods"), series.Counter, 100, 110)
	add(ctr("cccccccccccc", "quota-1", "docker.c", "cgroup.cpu.throttled_periods"), series.Counter, 50, 58)
	add(ctr("cccccccccccc", "quota-1", "docker.c", "cgroup.cpu.throttled_ms"), series.Counter, 1000, 1300)
	add(ctr("cccccccccccc", "quota-1", "docker.c", "cgroup.memory.working_set"), series.Level, 1<<20, 1<<20)
	add(series.Labels{"metric": "cgroup.cpu.usage_ms", "cgroup": "system.nginx"}, series.Counter, 0, 5000)

	handles := make([]*series.Ref, len(puts))
	for i, p := range puts {
		handles[i] = reg.Series(p.labels, p.kind)
	}
	now := time.Now().UnixMilli()
	for scan, ts := range []int64{now - 1000, now} {
		reg.Begin(ts)
		for i, p := range puts {
			reg.Put(handles[i], []uint64{p.v0, p.v1}[scan])
		}
		reg.Commit()
	}
	srv := &Server{Registry: reg, Log: slog.New(slog.DiscardHandler), MaxWindow: time.Hour, NodeName: "n1"}
	mux := http.NewServeMux()
	srv.Register(mux)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mux.ServeHTTP(w, r.WithContext(access.NewContext(r.Context(), testCallers["none"])))
	}))
	t.Cleanup(ts.Close)
	return ts
}

func getContainers(t *testing.T, ts *httptest.Server, query string) (int, apiwire.ContainersAnswer) {
	t.Helper()
	resp, err := http.Get(ts.URL + "/api/v1/containers" + query)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a apiwire.ContainersAnswer
	if resp.StatusCode == 200 {
		if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode, a
}

// TestContainersAnswer: one row per container with its figures (rates of the latest two
// scans, levels, I/O summed over devices, throttling as a share of periods), the nested
// cgroup's figures not counted twice, the cgroup that is no container's left out; even a
// caller who sees no process sees them (no pid label); sort and limit.
func TestContainersAnswer(t *testing.T) {
	ts := containerServer(t)
	code, a := getContainers(t, ts, "")
	if code != 200 || a.Total != 3 || len(a.Containers) != 3 {
		t.Fatalf("answer %d %+v; want 3 containers", code, a)
	}
	names := func(rows []apiwire.Container) (s []string) {
		for _, c := range rows {
			s = append(s, c.Name)
		}
		return s
	}
	if got := names(a.Containers); got[0] != "db-1" || got[1] != "quota-1" || got[2] != "web-1" {
		t.Errorf("default order %v; want by name", got)
	}
	by := map[string]apiwire.Container{}
	for _, c := range a.Containers {
		by[c.Name] = c
	}
	web, db, q := by["web-1"], by["db-1"], by["quota-1"]
	near := func(what string, got apiwire.StdFloat, want float64) {
		if d := float64(got) - want; d < -0.01 || d > 0.01 {
			t.Errorf("%s = %v; want %v", what, got, want)
		}
	}
	if web.ID != "aaaaaaaaaaaa" || web.Image != "localhost/web-1:1" || web.Cgroup != "libpod_parent.libpod-a" {
		t.Errorf("web-1 identity %+v", web)
	}
	near("web-1 cpu_percent", web.CPUPercent, 25)
	if web.MemoryWorkingSet != 100<<20 || web.MemoryUsage != 120<<20 || web.MemoryLimit != 1<<30 || web.OOMKills != 2 || web.Processes != 4 {
		t.Errorf("web-1 = %+v; want ws 100 MiB, usage 120 MiB, limit 1 GiB, 2 OOM kills, 4 processes", web)
	}
	if web.IOReadRate != nil || web.NetRxRate != nil {
		t.Errorf("web-1 has I/O or network figures it was not measured for: %+v", web)
	}
	near("db-1 cpu_percent", db.CPUPercent, 90)
	if db.IOReadRate == nil || db.NetRxRate == nil || db.IOWriteRate != nil {
		t.Fatalf("db-1 I/O and network %+v", db)
	}
	near("db-1 io_read_rate", *db.IOReadRate, 5120)
	near("db-1 net_rx_rate", *db.NetRxRate, 2000)
	near("quota-1 cpu_throttled_periods", q.CPUThrottled, 8)
	near("quota-1 cpu_throttled_ms", q.CPUThrottledMs, 300)
	near("quota-1 throttled_percent", q.ThrottledPercent, 80)

	if _, a := getContainers(t, ts, "?sort=cpu"); names(a.Containers)[0] != "db-1" || names(a.Containers)[2] != "web-1" {
		t.Errorf("sort=cpu: %v", names(a.Containers))
	}
	if _, a := getContainers(t, ts, "?sort=mem&limit=2"); len(a.Containers) != 2 || a.Total != 3 || a.Containers[0].Name != "db-1" || a.Containers[1].Name != "web-1" {
		t.Errorf("sort=mem&limit=2: %v total %d", names(a.Containers), a.Total)
	}
	for _, bad := range []string{"?sort=name", "?limit=0", "?limit=70000", "?limit=x"} {
		if code, _ := getContainers(t, ts, bad); code != 400 {
			t.Errorf("%s: %d; want 400", bad, code)
		}
	}
}

// TestContainerRowWire: a row decodes into what was encoded, and a row without I/O figures
// has no I/O members (not collected is not 0).
func TestContainerRowWire(t *testing.T) {
	r := 1.5
	in := apiwire.ContainersAnswer{Total: 1, Containers: []apiwire.Container{{ID: "a", Name: "n", Image: "i", Pod: "p",
		Namespace: "ns", Cgroup: "c", CPUPercent: 1, MemoryLimit: 5, NetTxRate: (*apiwire.StdFloat)(&r), TS: 7}}}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out apiwire.ContainersAnswer
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	b2, _ := json.Marshal(out)
	if string(b) != string(b2) || *out.Containers[0].NetTxRate != 1.5 {
		t.Errorf("round trip:\n%s\n%s", b, b2)
	}
	for _, k := range []string{`"io_read_rate"`, `"net_rx_rate"`, `"node"`} {
		if strings.Contains(string(b), k) {
			t.Errorf("%s written for a row without it: %s", k, b)
		}
	}
}

// FuzzParseContainerQuery: any query string parses to a sort of "", cpu or mem and a limit of
// 0 to 65536, or to an error naming the parameter.
func FuzzParseContainerQuery(f *testing.F) {
	for _, s := range []string{"", "sort=cpu", "sort=mem&limit=10", "limit=0", "limit=-1", "sort=%00", "limit=99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		q, err := ParseContainerQuery(v)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "bad sort") && !strings.HasPrefix(err.Error(), "bad limit") {
				t.Errorf("error %q names no parameter", err)
			}
			return
		}
		if q.Sort != "" && q.Sort != "cpu" && q.Sort != "mem" || q.Limit < 0 || q.Limit > maxContainerLimit {
			t.Errorf("%q parsed to %+v", raw, q)
		}
	})
}

// TestClusterContainers: a peer's containers come from its latest values with the peer as
// their node; an unreachable peer's last values give no rows, and every node has its head.
func TestClusterContainers(t *testing.T) {
	now := time.Now().UnixMilli()
	smp := func(node, metric string, kind series.Kind, v uint64, rate float64) hub.Series {
		return hub.Series{Latest: series.Sample{Labels: series.Labels{"metric": metric, "cgroup": "docker.x", "container": "db-" + node,
			"image": "pg:16", "container_id": "ddddddddddd" + node[1:]}, Kind: kind, TS: now, Bits: v, Rate: rate, HasRate: rate != 0}}
	}
	var queries atomic.Int32
	mux := keptServer(t, keptCluster{queries: &queries, answers: []hub.NodeAnswer{
		{Node: "p1", Status: hub.OK, Series: []hub.Series{smp("p1", "cgroup.cpu.usage_ms", series.Counter, 5000, 300), smp("p1", "cgroup.memory.working_set", series.Level, 1<<20, 0)}},
		{Node: "p2", Status: hub.Unreachable, Since: now - 60000, Error: "refused", Series: []hub.Series{smp("p2", "cgroup.cpu.usage_ms", series.Counter, 1, 1)}},
	}})
	var a apiwire.ContainersAnswer
	if code := getJSON(t, mux, "/api/v1/cluster/containers?sort=cpu", &a); code != 200 {
		t.Fatalf("code %d", code)
	}
	if a.Total != 1 || len(a.Containers) != 1 {
		t.Fatalf("rows %+v; want p1's container only", a)
	}
	c := a.Containers[0]
	if c.Node != "p1" || c.Name != "db-p1" || c.CPUPercent != 30 || c.MemoryWorkingSet != 1<<20 {
		t.Errorf("row %+v; want db-p1 of node p1 at 30 %% CPU, 1 MiB", c)
	}
	if len(a.Nodes) != 3 || a.Nodes[0].Node != "local" || a.Nodes[2].Status != string(hub.Unreachable) || a.Nodes[2].Error != "refused" {
		t.Errorf("nodes %+v; want local, p1, p2 unreachable", a.Nodes)
	}
}
