package export

import (
	"math"
	"strings"
	"testing"

	"github.com/cantal-go/cantal/internal/series"
)

func machineSamples() []series.Sample {
	ts := int64(1700000000000)
	return []series.Sample{
		{Labels: series.Labels{"metric": "cpu.user_ms"}, Kind: series.Counter, Bits: 999999, TS: ts},
		{Labels: series.Labels{"metric": "cpu.user_ms", "cpu": "0"}, Kind: series.Counter, Bits: 123450, TS: ts},
		{Labels: series.Labels{"metric": "cpu.idle_ms", "cpu": "0"}, Kind: series.Counter, Bits: 10, TS: ts},
		{Labels: series.Labels{"metric": "memory.Active(anon)"}, Kind: series.Level, Bits: 4096, TS: ts},
		{Labels: series.Labels{"metric": "system.uptime_s"}, Kind: series.Float, Bits: 0x4059000000000000, TS: ts}, // 100
		{Labels: series.Labels{"metric": "disk.read.time_ms", "device": "vda"}, Kind: series.Counter, Bits: 1500, TS: ts},
		{Labels: series.Labels{"metric": "disk.read.time_ms", "device": "vda1"}, Kind: series.Counter, Bits: 1500, TS: ts},
		{Labels: series.Labels{"metric": "net.Tcp.RetransSegs"}, Kind: series.Counter, Bits: 3, TS: ts},
		{Labels: series.Labels{"metric": "tcp.sockets", "state": "listen"}, Kind: series.Level, Bits: 4, TS: ts},
	}
}

func TestPromNodeExporterNames(t *testing.T) {
	var e Prom
	out := string(e.Append(nil, machineSamples(), FormatText))
	for _, want := range []string{
		"# TYPE node_cpu_seconds_total counter\nnode_cpu_seconds_total{cpu=\"0\",mode=\"user\"} 123.45\nnode_cpu_seconds_total{cpu=\"0\",mode=\"idle\"} 0.01\n",
		"# TYPE node_memory_Active_anon_bytes gauge\nnode_memory_Active_anon_bytes 4096\n",
		"# TYPE cantal_uptime_seconds gauge\ncantal_uptime_seconds 100\n",
		"# TYPE node_time_seconds gauge\nnode_time_seconds 1.7e+09\n",
		"node_disk_read_time_seconds_total{device=\"vda\"} 1.5\n",
		"# TYPE node_netstat_Tcp_RetransSegs untyped\nnode_netstat_Tcp_RetransSegs 3\n",
		"# TYPE cantal_tcp_sockets gauge\ncantal_tcp_sockets{state=\"listen\"} 4\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("exposition lacks\n%s\ngot:\n%s", want, out)
		}
	}
	for _, bad := range []string{"999.999", `device="vda1"`, "cpu_user_ms"} {
		if strings.Contains(out, bad) {
			t.Errorf("exposition has %q:\n%s", bad, out)
		}
	}
	checkContiguous(t, out)
	promtool(t, []byte(out), false)
}

func procSamples(pids ...string) []series.Sample {
	var out []series.Sample
	for _, pid := range pids {
		l := func(m string) series.Labels {
			return series.Labels{"metric": m, "pid": pid, "process": "worker", "cgroup": "system.w"}
		}
		out = append(out,
			series.Sample{Labels: l("process.cpu.user_ms"), Kind: series.Counter, Bits: 1000},
			series.Sample{Labels: l("process.memory.rss"), Kind: series.Level, Bits: 100},
			series.Sample{Labels: l("process.threads"), Kind: series.Level, Bits: 2},
		)
	}
	// A process without cgroup is grouped by command name; one with an application by it.
	out = append(out,
		series.Sample{Labels: series.Labels{"metric": "process.threads", "pid": "9", "process": "sh"}, Kind: series.Level, Bits: 1},
		series.Sample{Labels: series.Labels{"metric": "process.threads", "pid": "10", "process": "shop", "cgroup": "system.shop"}, Kind: series.Level, Bits: 3},
		series.Sample{Labels: series.Labels{"metric": "orders", "pid": "10", "process": "shop", "appname": "shop-app"}, Kind: series.Counter, Bits: 5},
	)
	return out
}

func TestPromProcessGroups(t *testing.T) {
	var e Prom
	out := string(e.Append(nil, procSamples("1", "2", "3"), FormatText))
	for _, want := range []string{
		"cantal_process_cpu_seconds_total{groupname=\"system.w\",mode=\"user\"} 3\n",
		"cantal_process_memory_bytes{groupname=\"system.w\",memtype=\"resident\"} 300\n",
		"cantal_process_num_threads{groupname=\"system.w\"} 6\n",
		"cantal_process_num_procs{groupname=\"system.w\"} 3\n",
		"cantal_process_num_procs{groupname=\"sh\"} 1\n",
		"cantal_process_num_threads{groupname=\"shop-app\"} 3\n",
		"orders_total{appname=\"shop-app\",pid=\"10\",process=\"shop\"} 5\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("exposition lacks\n%s\ngot:\n%s", want, out)
		}
	}
	if strings.Contains(out, `cantal_process_cpu_seconds_total{pid=`) {
		t.Errorf("per-pid series by default:\n%s", out)
	}
	checkContiguous(t, out)
	promtool(t, []byte(out), true)

	// A member exits: the group's counter keeps what it counted.
	out = string(e.Append(nil, procSamples("1", "2"), FormatText))
	if want := "cantal_process_cpu_seconds_total{groupname=\"system.w\",mode=\"user\"} 3\n"; !strings.Contains(out, want) {
		t.Errorf("after an exit, exposition lacks\n%s\ngot:\n%s", want, out)
	}
	if want := "cantal_process_num_procs{groupname=\"system.w\"} 2\n"; !strings.Contains(out, want) {
		t.Errorf("after an exit, exposition lacks\n%s\ngot:\n%s", want, out)
	}
	// A new process takes a pid: still no decrease.
	s := procSamples("1", "2", "4")
	s[6].Bits = 10 // pid 4's cpu: 10 ms
	out = string(e.Append(nil, s, FormatText))
	if want := "cantal_process_cpu_seconds_total{groupname=\"system.w\",mode=\"user\"} 3.01\n"; !strings.Contains(out, want) {
		t.Errorf("after a new member, exposition lacks\n%s\ngot:\n%s", want, out)
	}
}

func TestPromPerPID(t *testing.T) {
	e := Prom{Options: Options{PerPID: true}}
	out := string(e.Append(nil, procSamples("1"), FormatText))
	for _, want := range []string{
		"cantal_process_cpu_seconds_total{cgroup=\"system.w\",mode=\"user\",pid=\"1\",process=\"worker\"} 1\n",
		"cantal_process_num_threads{cgroup=\"system.w\",pid=\"1\",process=\"worker\"} 2\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("exposition lacks\n%s\ngot:\n%s", want, out)
		}
	}
	if strings.Contains(out, "groupname") || strings.Contains(out, "num_procs") {
		t.Errorf("groups with PerPID:\n%s", out)
	}
	promtool(t, []byte(out), true)
}

func TestPromStatsdSummary(t *testing.T) {
	f := func(v float64) uint64 { return math.Float64bits(v) }
	l := func(m string) series.Labels { return series.Labels{"metric": m, "source": "push", "route": "/api"} }
	samples := []series.Sample{
		{Labels: l("api.latency.count"), Kind: series.Counter, Bits: 5},
		{Labels: l("api.latency.min"), Kind: series.Float, Bits: f(10)},
		{Labels: l("api.latency.max"), Kind: series.Float, Bits: f(40)},
		{Labels: l("api.latency.mean"), Kind: series.Float, Bits: f(25)},
		{Labels: l("api.latency.median"), Kind: series.Float, Bits: f(25)},
		{Labels: l("api.latency.p90"), Kind: series.Float, Bits: f(37)},
		{Labels: l("api.latency.p99_9"), Kind: series.Float, Bits: f(39.97)},
		{Labels: l("api.latency.sum"), Kind: series.Float, Bits: f(120)},
		// A pushed series named like a part, without its timer's count: not a summary.
		{Labels: l("other.p90"), Kind: series.Float, Bits: f(1)},
	}
	var e Prom
	out := string(e.Append(nil, samples, FormatText))
	want := "# HELP api_latency Cantal metric api.latency\n# TYPE api_latency summary\n" +
		"api_latency{route=\"/api\",source=\"push\",quantile=\"0.5\"} 25\n" +
		"api_latency{route=\"/api\",source=\"push\",quantile=\"0.9\"} 37\n" +
		"api_latency{route=\"/api\",source=\"push\",quantile=\"0.999\"} 39.97\n" +
		"api_latency_sum{route=\"/api\",source=\"push\"} 120\n" +
		"api_latency_count{route=\"/api\",source=\"push\"} 5\n"
	if !strings.Contains(out, want) {
		t.Errorf("exposition lacks\n%s\ngot:\n%s", want, out)
	}
	for _, w := range []string{"api_latency_min{", "api_latency_mean{", "other_p90{"} {
		if !strings.Contains(out, w) {
			t.Errorf("exposition lacks %s:\n%s", w, out)
		}
	}
	promtool(t, []byte(out), true)
	om := string(e.Append(nil, samples, FormatOpenMetrics))
	if !strings.Contains(om, "# TYPE api_latency summary\n") {
		t.Errorf("OpenMetrics:\n%s", om)
	}
}

func TestPercentQuantile(t *testing.T) {
	for in, want := range map[string]string{"90": "0.9", "99_9": "0.999", "5": "0.05", "50": "0.5", "x": "", "100": "", "0": "", "": ""} {
		if got := percentQuantile(in); got != want {
			t.Errorf("percentQuantile(%q) = %q; want %q", in, got, want)
		}
	}
}

func TestAppendMillisAsSeconds(t *testing.T) {
	for ts, want := range map[int64]string{1700000000123: "1700000000.123", 1700000000000: "1700000000",
		1700000000100: "1700000000.1", 1700000000020: "1700000000.02", 5: "0.005", -1500: "-1.5"} {
		if got := string(appendMillisAsSeconds(nil, ts)); got != want {
			t.Errorf("appendMillisAsSeconds(%d) = %s; want %s", ts, got, want)
		}
	}
}
