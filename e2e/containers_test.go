package e2e

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

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
	serial(t)
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
