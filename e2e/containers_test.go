package e2e

import (
	"fmt"
	"maps"
	"math"
	"net/url"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/cantal-go/cantal/internal/testsupport/podmantest"
)

// podman runs podman as this machine needs it (podmantest.Base) and returns its trimmed output.
func podman(t *testing.T, args ...string) string {
	t.Helper()
	return podmantest.Podman(t, args...)
}

// ctrImage builds an image locally (never pulled): the static e2e/ctrapp as the whole root of
// a tar, imported with podman. It is removed at the end of the test.
func ctrImage(t *testing.T) string {
	t.Helper()
	return podmantest.Image(t, "..", "./e2e/ctrapp", "ctrapp", nil)
}

// A real Podman container, started as web-1 at a CPU quota of 0.5, appears by name: its cgroup
// series and its process's series carry container="web-1", its image and its short id, and its
// CPU usage is held at the quota.
func TestPodmanContainerByName(t *testing.T) {
	quiet(t)
	image := ctrImage(t)
	exec.Command("podman", "rm", "-f", "web-1").Run() // a leftover of an interrupted run
	id := podman(t, "run", "-d", "--name", "web-1", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=4096:4096",
		"--cpus", "0.5", image, "-burn")
	t.Cleanup(func() { exec.Command("podman", "rm", "-f", "-t", "0", "web-1").Run() })
	if len(id) != 64 {
		t.Fatalf("podman run printed %q; want a container id", id)
	}
	want := map[string]string{"container": "web-1", "image": image, "container_id": id[:12], "cgroup": "libpod_parent.libpod-" + id}
	labelled := func(s Series) error {
		for k, v := range want {
			if s.Labels[k] != v {
				return fmt.Errorf("%s: %s=%q; want %q (labels %v)", s.Labels["metric"], k, s.Labels[k], v, s.Labels)
			}
		}
		return nil
	}
	a := startAgent(t)
	waitFor(t, 60*time.Second, func() error {
		ss, err := a.series("/api/v1/metrics", `{container="web-1"}`)
		if err != nil {
			return err
		}
		cpu, mem, proc := find(ss, "cgroup.cpu.usage_ms"), find(ss, "cgroup.memory.usage"), find(ss, "process.cpu.user_ms")
		thr, ws := find(ss, "cgroup.cpu.throttled_periods"), find(ss, "cgroup.memory.working_set")
		if cpu == nil || mem == nil || proc == nil || thr == nil || ws == nil {
			return fmt.Errorf("want cgroup.cpu.usage_ms, .throttled_periods, cgroup.memory.usage, .working_set and process.cpu.user_ms of web-1; have %v", ss)
		}
		for _, s := range []*Series{cpu, mem, proc, thr, ws} {
			if err := labelled(*s); err != nil {
				return err
			}
		}
		if proc.Labels["process"] != "ctrapp" {
			return fmt.Errorf("web-1's process is %q; want ctrapp", proc.Labels["process"])
		}
		// The quota: 0.5 CPU is 500 ms of CPU a second; the kernel's CFS periods let it
		// overshoot a little over one interval.
		if cpu.Rate == nil || *cpu.Rate < 350 || *cpu.Rate > 650 {
			return fmt.Errorf("web-1's CPU = %v ms/s; want 500±150 (quota 0.5)", cpu.Rate)
		}
		// A busy loop at half a CPU is throttled in most 100 ms periods: about 10 a second.
		if thr.Rate == nil || *thr.Rate < 3 {
			return fmt.Errorf("web-1's throttled periods rise at %v/s; want ≥ 3/s", thr.Rate)
		}
		if num(ws.Value) <= 0 || num(ws.Value) > num(mem.Value) {
			return fmt.Errorf("web-1's working set %v; want in (0, usage %v]", ws.Value, mem.Value)
		}
		return nil
	})
	// /metrics: cAdvisor's families, labelled as cAdvisor labels them, and promtool parses it.
	code, body := a.raw("GET", "/metrics", "")
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	lbl := fmt.Sprintf(`{id="/libpod_parent/libpod-%s",image=%q,name="web-1"}`, id, image)
	for _, name := range []string{"container_cpu_usage_seconds_total", "container_memory_working_set_bytes",
		"container_memory_rss", "container_cpu_cfs_throttled_periods_total", "container_cpu_cfs_periods_total"} {
		if !strings.Contains(body, "\n"+name+lbl+" ") {
			t.Errorf("/metrics lacks %s%s", name, lbl)
		}
	}
	check := exec.Command(need(t, "promtool"), "check", "metrics")
	check.Stdin = strings.NewReader(body)
	if out, err := check.CombinedOutput(); err != nil {
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 { // 3: lint findings only
			t.Errorf("promtool check metrics: %v\n%s", err, out)
		} else if strings.Contains(string(out), "container_") {
			t.Errorf("promtool lint findings on the container families:\n%s", out)
		}
	}
	// No other cgroup is named web-1.
	ss, err := a.series("/api/v1/metrics", `{metric="cgroup.processes", container="web-1"}`)
	if err != nil || len(ss) != 1 {
		t.Errorf("cgroup.processes of web-1: %v, %v; want exactly one", ss, err)
	}
}

// A real Podman container's CPU reaches a real Prometheus through remote write under cAdvisor's
// name, with the labels /metrics shows for it (id, image, name) plus instance and node, and at
// the scan /metrics stamps a value with, the value /metrics gives: so kubernetes-mixin's rules
// and cAdvisor's dashboards work on a store fed by remote write as on one that scrapes.
//
// It compares its own agent's answers with its own Prometheus's at one scan, whatever the load:
// a test of the second line (aside).
func TestRemoteWriteContainerCAdvisorNames(t *testing.T) {
	aside(t)
	const name, node = "rw-web-1", "rw-ctr-e2e"
	image := ctrImage(t)
	id := podmantest.Run(t, name, image, []string{"--cpus", "0.2"}, "-burn")
	prom := &receiver{t: t, name: "prometheus", prog: need(t, "prometheus"), dir: t.TempDir(), addr: freePort(t)}
	prom.args = []string{"--config.file=" + writeFile(t, prom.dir, "prometheus.yml", "global: {}\n"),
		"--storage.tsdb.path=" + filepath.Join(prom.dir, "data"), "--web.listen-address=" + prom.addr,
		"--web.enable-remote-write-receiver", "--log.level=warn"}
	prom.start()
	t.Cleanup(prom.stop)
	cfg := fmt.Sprintf("remote_write:\n  - url: http://%s/api/v1/write\n    match: '{metric=\"cgroup.cpu.usage_ms\", container=%q}'\n"+
		"    queue_config: {min_backoff: 100ms, max_backoff: 2s}\n", prom.addr, name)
	a := startAgent(t, "--interval", "1s", "--node-name", node, "--remote-write-config", writeFile(t, t.TempDir(), "rw.yml", cfg))

	// /metrics' sample of the family for the container: its labels, value and scan time.
	const family = "container_cpu_usage_seconds_total"
	var want map[string]string
	var wantV float64
	var wantTS int64
	waitFor(t, 60*time.Second, func() error {
		code, body := a.raw("GET", "/metrics", "")
		if code != 200 {
			return fmt.Errorf("/metrics: %d", code)
		}
		parser := expfmt.NewTextParser(model.LegacyValidation)
		fams, err := parser.TextToMetricFamilies(strings.NewReader(body))
		if err != nil {
			return err
		}
		for _, m := range fams[family].GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if l["name"] == name && m.GetCounter().GetValue() > 0 {
				want, wantV, wantTS = l, m.GetCounter().GetValue(), m.GetTimestampMs()
				return nil
			}
		}
		return fmt.Errorf("/metrics has no %s{name=%q} yet", family, name)
	})
	if want["id"] != "/libpod_parent/libpod-"+id || want["image"] != image {
		t.Fatalf("/metrics labels %s %v; want id /libpod_parent/libpod-%s, image %s", family, want, id, image)
	}
	if wantTS == 0 {
		t.Fatalf("/metrics gives %s no timestamp; the test compares by scan", family)
	}

	// The receiver's raw samples of the series: one series, /metrics' labels plus instance and
	// node, and at /metrics' scan the same value.
	waitFor(t, 60*time.Second, func() error {
		now := time.Now()
		q := url.Values{"query": {fmt.Sprintf(`%s{name=%q}[%ds]`, family, name, (now.UnixMilli()-wantTS)/1000+5)},
			"time": {strconv.FormatFloat(float64(now.UnixMilli())/1000, 'f', 3, 64)}}
		var ans struct {
			Data struct {
				Result []struct {
					Metric map[string]string
					Values [][2]any
				}
			}
		}
		if err := httpJSON("http://"+prom.addr+"/api/v1/query?"+q.Encode(), &ans); err != nil {
			return err
		}
		if len(ans.Data.Result) != 1 {
			return fmt.Errorf("Prometheus has %d series %s{name=%q}; want 1", len(ans.Data.Result), family, name)
		}
		got := ans.Data.Result[0]
		if u, _ := url.Parse(a.URL); got.Metric["node"] != node || got.Metric["instance"] != node+":"+u.Port() {
			return fmt.Errorf("series %v: want node=%q and the agent's instance", got.Metric, node)
		}
		rest := maps.Clone(got.Metric)
		delete(rest, "node")
		delete(rest, "instance")
		w := maps.Clone(want)
		w["__name__"] = family
		if !maps.Equal(rest, w) {
			return fmt.Errorf("Prometheus labels %v; /metrics shows %v", rest, w)
		}
		for _, v := range got.Values {
			ts, _ := v[0].(float64)
			if int64(math.Round(ts*1000)) != wantTS {
				continue
			}
			s, _ := v[1].(string)
			if f, err := strconv.ParseFloat(s, 64); err != nil || f != wantV {
				t.Fatalf("at scan %d Prometheus holds %q, /metrics gave %v", wantTS, s, wantV)
			}
			return nil
		}
		return fmt.Errorf("Prometheus has no sample at /metrics' scan %d yet (%d samples)", wantTS, len(got.Values))
	})
}
