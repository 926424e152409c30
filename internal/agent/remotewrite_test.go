package agent

import (
	"bytes"
	"log/slog"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/export"
	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/promname"
	"github.com/cantal-go/cantal/internal/remotewrite"
	"github.com/cantal-go/cantal/internal/series"
	"github.com/cantal-go/cantal/internal/statedir"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

func TestRemoteWriteFlags(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "rw.yml")
	os.WriteFile(file, []byte("remote_write:\n  - url: https://mimir.example/api/v1/push\n    external_labels: {dc: a}\n"), 0o600)
	cfg, err := ParseFlags("cantal-agent", []string{"--remote-write", "http://a:9090/api/v1/write",
		"--remote-write", "http://b:8428/api/v1/write", "--remote-write-config", file, "--state-dir", dir,
		"--listen", "0.0.0.0:9100", "--node-name", "n1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	state, err := statedir.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer state.Close()
	a := &Agent{cfg: cfg, log: slog.New(slog.DiscardHandler), hist: history.New(history.Options{Retention: time.Hour}), state: state}
	if err := a.openRemoteWrite(); err != nil {
		t.Fatal(err)
	}
	if len(a.endpoints()) != 3 {
		t.Fatalf("%d endpoints; want 3", len(a.endpoints()))
	}
	st := a.remoteWriteStatus()
	if st[0].URL != "http://a:9090/api/v1/write" || st[2].Name != "mimir.example" {
		t.Errorf("status %+v", st)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--remote-write", "ftp://x/"}, "http"},
		{[]string{"--remote-write", "http://x/w", "--remote-write", "http://x/w"}, "twice"},
		{[]string{"--remote-write-config", filepath.Join(dir, "missing.yml")}, "--remote-write-config"},
	} {
		cfg, err := ParseFlags("cantal-agent", append(tc.args, "--state-dir", ""), nil)
		if err != nil {
			t.Fatal(err)
		}
		a := &Agent{cfg: cfg, log: slog.New(slog.DiscardHandler), hist: history.New(history.Options{})}
		if err := a.openRemoteWrite(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v; want an error about %q", tc.args, err, tc.want)
		}
	}
}

func TestListenPort(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:22682":            "22682",
		"unix:/run/c.sock,[::]:9100": "9100",
		"unix:/run/c.sock":           "22682",
		"127.0.0.1:0":                "22682",
	} {
		if got := listenPort(in); got != want {
			t.Errorf("listenPort(%q) = %q; want %q", in, got, want)
		}
	}
}

// TestPromNamer: remote write names a series as /metrics does (internal/promname).
func TestPromNamer(t *testing.T) {
	n := promNamer(promname.Options{})
	got := n(series.Labels{"metric": "cpu.idle_ms", "cpu": "0"}, series.Counter)
	if len(got) != 1 || got[0].Name != "node_cpu_seconds_total" || got[0].Scale != 0.001 || len(got[0].Labels) != 2 ||
		got[0].Labels[0] != (remotewrite.Label{Name: "cpu", Value: "0"}) || got[0].Labels[1] != (remotewrite.Label{Name: "mode", Value: "idle"}) {
		t.Errorf("cpu.idle_ms{cpu=0} = %+v; want node_cpu_seconds_total{cpu=0,mode=idle} ×0.001", got)
	}
	if got := n(series.Labels{"metric": "app.state"}, series.State); len(got) != 0 {
		t.Errorf("a state series is sent as %+v; it has no history", got)
	}
	got = n(series.Labels{"metric": "requests.number", "pid": "7"}, series.Counter)
	if len(got) != 1 || got[0].Name != "requests_number_total" {
		t.Errorf("application counter named %+v", got)
	}
}

// TestRemoteWriteSendsWhatMetricsShows: at the same scan, remote write sends exactly the series
// /metrics writes (names, labels, values) for the machine's, cgroups' and containers' series:
// a container's cgroup series under its cantal_cgroup_* name and its cAdvisor name
// (container_cpu_usage_seconds_total{id,image,name}, kubelet's container, pod and namespace for a
// Kubernetes container), a service's cgroup under its cantal_cgroup_* name only.
func TestRemoteWriteSendsWhatMetricsShows(t *testing.T) {
	const id = "ae12be5e3f80a914197473db58500c6867bfa52ae0ba2bbed86a67dba24e661d"
	podman := series.Labels{"cgroup": "libpod_parent.libpod-" + id, "container": "web-1", "image": "localhost/shop:1", "container_id": id[:12]}
	kube := series.Labels{"cgroup": "kubepods.burstable.pod9e8d7c6b." + id, "container": "nginx", "image": "docker.io/library/nginx:1.27",
		"container_id": id[:12], "pod": "web-0", "namespace": "shop"}
	service := series.Labels{"cgroup": "system.nginx"}
	with := func(base series.Labels, kv ...string) series.Labels {
		l := series.Labels{}
		for k, v := range base {
			l[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			l[kv[i]] = kv[i+1]
		}
		return l
	}
	var samples []series.Sample
	for _, base := range []series.Labels{podman, kube, service} {
		for _, m := range []struct {
			metric string
			kind   series.Kind
			v      uint64
			kv     []string
		}{
			{"cgroup.cpu.usage_ms", series.Counter, 2345, nil},
			{"cgroup.cpu.throttled_ms", series.Counter, 1250, nil},
			{"cgroup.cpu.throttled_periods", series.Counter, 40, nil},
			{"cgroup.memory.working_set", series.Level, 9 << 20, nil},
			{"cgroup.memory.anon", series.Level, 8 << 20, nil},
			{"cgroup.memory.oom_kill", series.Counter, 3, nil},
			{"cgroup.io.read_bytes", series.Counter, 4096, []string{"device", "vda"}},
			{"cgroup.net.rx.bytes", series.Counter, 12345, []string{"interface", "eth0"}},
			{"cgroup.pressure.cpu.some_ms", series.Counter, 2500, nil},
		} {
			samples = append(samples, series.Sample{Labels: with(base, append([]string{"metric", m.metric}, m.kv...)...), Kind: m.kind, Bits: m.v, TS: 1})
		}
	}
	samples = append(samples, series.Sample{Labels: series.Labels{"metric": "cpu.idle_ms", "cpu": "0"}, Kind: series.Counter, Bits: 123456, TS: 1})

	// /metrics, parsed.
	e := export.Prom{Options: export.Options{Mapper: promname.New(promname.Options{})}}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(e.Append(nil, samples, export.FormatText)))
	if err != nil {
		t.Fatal(err)
	}
	metrics := map[string]float64{}
	for name, f := range fams {
		for _, m := range f.Metric {
			k := name + "{"
			for _, l := range m.Label { // sorted by name
				k += l.GetName() + "=" + strconv.Quote(l.GetValue()) + ","
			}
			switch {
			case m.Counter != nil:
				metrics[k] = m.Counter.GetValue()
			case m.Gauge != nil:
				metrics[k] = m.Gauge.GetValue()
			case m.Untyped != nil:
				metrics[k] = m.Untyped.GetValue()
			}
		}
	}
	// Remote write's names for the same samples.
	n := promNamer(promname.Options{})
	sent := map[string]float64{}
	for _, s := range samples {
		for _, nm := range n(s.Labels, s.Kind) {
			ls := slices.Clone(nm.Labels)
			slices.SortFunc(ls, func(a, b remotewrite.Label) int { return strings.Compare(a.Name, b.Name) })
			k := nm.Name + "{"
			for _, l := range ls {
				if l.Value != "" { // an empty label is no label, for Prometheus and for the sender
					k += l.Name + "=" + strconv.Quote(l.Value) + ","
				}
			}
			sent[k] = series.ToFloat(s.Kind, s.Bits) * nm.Scale
		}
	}
	for k, v := range metrics {
		got, ok := sent[k]
		if !ok {
			t.Errorf("/metrics has %s, remote write does not send it", k)
		} else if math.Abs(got-v) > 1e-9*math.Max(1, math.Abs(v)) {
			t.Errorf("%s: /metrics %v, remote write %v", k, v, got)
		}
	}
	for k := range sent {
		if _, ok := metrics[k]; !ok {
			t.Errorf("remote write sends %s, /metrics does not have it", k)
		}
	}
	cadv := `container_cpu_usage_seconds_total{id="/libpod_parent/libpod-` + id + `",image="localhost/shop:1",name="web-1",`
	k8s := `container_cpu_usage_seconds_total{container="nginx",id="/kubepods/burstable/pod9e8d7c6b/` + id + `",image="docker.io/library/nginx:1.27",name="` + id[:12] + `",namespace="shop",pod="web-0",`
	if math.Abs(sent[cadv]-2.345) > 1e-9 || math.Abs(sent[k8s]-2.345) > 1e-9 {
		t.Errorf("remote write sends %s = %v and %s = %v; want 2.345 each (have %v)", cadv, sent[cadv], k8s, sent[k8s], slices.Sorted(maps.Keys(sent)))
	}
}
