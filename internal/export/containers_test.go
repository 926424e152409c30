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

// A container's I/O per device, network per interface, tasks and pressure are exported under
// cAdvisor's names (device as a path, interface as is), and a Kubernetes container's series
// carry kubelet's cAdvisor labels container, pod and namespace; promtool accepts them.
func TestContainerResourcesCAdvisorNames(t *testing.T) {
	const id = "4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d"
	cg := "kubepods.burstable.pod9e8d7c6b-5a49-4382-a1b0-c9d8e7f6a5b4." + id
	ctr := func(metric string, kind series.Kind, v uint64, extra ...string) series.Sample {
		l := series.Labels{"metric": metric, "cgroup": cg, "container": "nginx", "image": "docker.io/library/nginx:1.27",
			"container_id": id[:12], "pod": "web-0", "namespace": "shop"}
		for i := 0; i < len(extra); i += 2 {
			l[extra[i]] = extra[i+1]
		}
		return series.Sample{Labels: l, Kind: kind, Bits: v, TS: 1}
	}
	samples := []series.Sample{
		ctr("cgroup.cpu.usage_ms", series.Counter, 1500),
		ctr("cgroup.io.read_bytes", series.Counter, 4096, "device", "vda"),
		ctr("cgroup.io.write_bytes", series.Counter, 8192, "device", "vda"),
		ctr("cgroup.io.reads", series.Counter, 1, "device", "vda"),
		ctr("cgroup.io.writes", series.Counter, 2, "device", "vda"),
		ctr("cgroup.net.rx.bytes", series.Counter, 12345, "interface", "eth0"),
		ctr("cgroup.net.tx.bytes", series.Counter, 5432, "interface", "eth0"),
		ctr("cgroup.net.rx.packets", series.Counter, 67, "interface", "eth0"),
		ctr("cgroup.net.tx.packets", series.Counter, 21, "interface", "eth0"),
		ctr("cgroup.net.rx.errors", series.Counter, 1, "interface", "eth0"),
		ctr("cgroup.net.tx.errors", series.Counter, 3, "interface", "eth0"),
		ctr("cgroup.net.rx.drop", series.Counter, 2, "interface", "eth0"),
		ctr("cgroup.net.tx.drop", series.Counter, 4, "interface", "eth0"),
		ctr("cgroup.pids", series.Level, 7),
		ctr("cgroup.pids.limit", series.Level, 4096),
		ctr("cgroup.pressure.cpu.some_ms", series.Counter, 2500),
		ctr("cgroup.pressure.io.full_ms", series.Counter, 40),
	}
	var e Prom
	out := string(e.Append(nil, samples, FormatText))
	k8s := `container="nginx",id="/` + strings.ReplaceAll(cg, ".", "/") + `",image="docker.io/library/nginx:1.27",name="` + id[:12] + `",namespace="shop",pod="web-0"`
	for _, want := range []string{
		"container_cpu_usage_seconds_total{" + k8s + "} 1.5",
		`container_fs_reads_bytes_total{` + k8s[:len(`container="nginx"`)] + `,device="/dev/vda",` + k8s[len(`container="nginx",`):] + "} 4096",
		`container_fs_writes_bytes_total{container="nginx",device="/dev/vda",`,
		`container_fs_reads_total{container="nginx",device="/dev/vda",`,
		`container_fs_writes_total{container="nginx",device="/dev/vda",`,
		`container_network_receive_bytes_total{container="nginx",id="/kubepods/burstable/pod9e8d7c6b-5a49-4382-a1b0-c9d8e7f6a5b4/` + id + `",image="docker.io/library/nginx:1.27",interface="eth0",name="4d4d4d4d4d4d",namespace="shop",pod="web-0"} 12345`,
		`container_network_transmit_bytes_total{container="nginx",`,
		`container_network_receive_packets_total{container="nginx",`,
		`container_network_transmit_packets_total{container="nginx",`,
		`container_network_receive_errors_total{container="nginx",`,
		`container_network_transmit_errors_total{container="nginx",`,
		`container_network_receive_packets_dropped_total{container="nginx",`,
		`container_network_transmit_packets_dropped_total{container="nginx",`,
		"container_threads{" + k8s + "} 7",
		"container_threads_max{" + k8s + "} 4096",
		"container_pressure_cpu_waiting_seconds_total{" + k8s + "} 2.5",
		"container_pressure_io_stalled_seconds_total{" + k8s + "} 0.04",
		`cantal_cgroup_io_read_bytes_total{cgroup="` + cg + `",container="nginx",container_id="4d4d4d4d4d4d",device="vda",image="docker.io/library/nginx:1.27",namespace="shop",pod="web-0"} 4096`,
		`cantal_cgroup_network_receive_bytes_total{cgroup="` + cg + `",container="nginx",container_id="4d4d4d4d4d4d",image="docker.io/library/nginx:1.27",interface="eth0",namespace="shop",pod="web-0"} 12345`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	promtool(t, []byte(out), true)
}
