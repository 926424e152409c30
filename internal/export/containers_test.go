package export

import (
	"strings"
	"testing"

	"github.com/cantal-go/cantal/internal/series"
)

// A container's cgroup series (labelled by internal/containers) keep their cantal_cgroup_*
// names and are also exported under cAdvisor's names and labels (id, name, image), which
// promtool accepts without a lint finding; a service's cgroup is not a container.
func TestContainerSeriesCAdvisorNames(t *testing.T) {
	const id = "ae12be5e3f80a914197473db58500c6867bfa52ae0ba2bbed86a67dba24e661d"
	ctr := func(metric string, kind series.Kind, v uint64) series.Sample {
		return series.Sample{Labels: series.Labels{"metric": metric, "cgroup": "libpod_parent.libpod-" + id,
			"container": "web-1", "image": "localhost/shop:1", "container_id": id[:12]}, Kind: kind, Bits: v, TS: 1}
	}
	samples := []series.Sample{
		ctr("cgroup.cpu.usage_ms", series.Counter, 2500),
		ctr("cgroup.cpu.user_ms", series.Counter, 2000),
		ctr("cgroup.cpu.system_ms", series.Counter, 500),
		ctr("cgroup.memory.usage", series.Level, 10<<20),
		ctr("cgroup.memory.anon", series.Level, 8<<20),
		ctr("cgroup.memory.file", series.Level, 2<<20),
		ctr("cgroup.memory.limit", series.Level, 64<<20),
		ctr("cgroup.memory.working_set", series.Level, 9<<20),
		ctr("cgroup.cpu.periods", series.Counter, 100),
		ctr("cgroup.cpu.throttled_periods", series.Counter, 40),
		ctr("cgroup.cpu.throttled_ms", series.Counter, 2000),
		ctr("cgroup.memory.oom", series.Counter, 4),
		ctr("cgroup.memory.oom_kill", series.Counter, 3),
		ctr("cgroup.processes", series.Level, 1),
		{Labels: series.Labels{"metric": "cgroup.cpu.usage_ms", "cgroup": "system.nginx"}, Kind: series.Counter, Bits: 700, TS: 1},
	}
	var e Prom
	out := string(e.Append(nil, samples, FormatText))
	lbl := `{id="/libpod_parent/libpod-` + id + `",image="localhost/shop:1",name="web-1"}`
	for _, want := range []string{
		`cantal_cgroup_cpu_usage_seconds_total{cgroup="libpod_parent.libpod-` + id + `",container="web-1",container_id="ae12be5e3f80",image="localhost/shop:1"} 2.5`,
		`cantal_cgroup_cpu_usage_seconds_total{cgroup="system.nginx"} 0.7`,
		"# TYPE container_cpu_usage_seconds_total counter",
		"container_cpu_usage_seconds_total" + lbl + " 2.5",
		"container_cpu_user_seconds_total" + lbl + " 2",
		"container_cpu_system_seconds_total" + lbl + " 0.5",
		"container_memory_usage_bytes" + lbl + " 1.048576e+07", // Prometheus reads either form
		"container_memory_rss" + lbl + " 8.388608e+06",
		"container_memory_cache" + lbl + " 2.097152e+06",
		"container_spec_memory_limit_bytes" + lbl + " 6.7108864e+07",
		"container_processes" + lbl + " 1",
		"container_memory_working_set_bytes" + lbl + " 9.437184e+06",
		"container_cpu_cfs_periods_total" + lbl + " 100",
		"container_cpu_cfs_throttled_periods_total" + lbl + " 40",
		"container_cpu_cfs_throttled_seconds_total" + lbl + " 2",
		"container_oom_events_total" + lbl + " 3",
		`cantal_cgroup_memory_working_set_bytes{cgroup="libpod_parent.libpod-` + id + `",container="web-1",container_id="ae12be5e3f80",image="localhost/shop:1"} 9437184`,
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, "container_cpu_usage_seconds_total{") != 1 {
		t.Errorf("a service's cgroup exported as a container:\n%s", out)
	}
	promtool(t, []byte(out), true)
}
