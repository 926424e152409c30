package promstore

import (
	"context"
	"log/slog"
	"math"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"

	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/registry"
	"github.com/cantal-go/cantal/internal/series"
)

// fill writes n scans 2 s apart from t0 into a new registry: per-CPU user time counters
// (cpu 0 at 500 ms/s, cpu 1 at 250 ms/s, with a reset of cpu 1 at scan 10), the 1-minute
// load and an application's float; it returns the registry and its store.
func fill(t testing.TB, t0 int64, n int) (*registry.Registry, *history.Store) {
	t.Helper()
	hist := history.New(history.Options{})
	reg := registry.New(hist, time.Hour, nil)
	cpu0 := reg.Series(series.Labels{"metric": "cpu.user_ms", "cpu": "0"}, series.Counter)
	cpu1 := reg.Series(series.Labels{"metric": "cpu.user_ms", "cpu": "1"}, series.Counter)
	load := reg.Series(series.Labels{"metric": "system.load_avg_1min"}, series.Float)
	app := reg.Series(series.Labels{"metric": "requests.active", "appname": "web"}, series.Level)
	var c1 uint64
	for i := range n {
		reg.Begin(t0 + int64(i)*2000)
		reg.Put(cpu0, uint64(i)*1000)
		if i == 10 {
			c1 = 0
		}
		reg.Put(cpu1, c1)
		c1 += 500
		reg.Put(load, math.Float64bits(float64(i)/10))
		reg.Put(app, uint64(int64(-i)))
		reg.Commit()
	}
	return reg, hist
}

func engine() *promql.Engine {
	return promql.NewEngine(promql.EngineOpts{MaxSamples: 1e6, Timeout: time.Minute, LookbackDelta: 5 * time.Minute})
}

func instant(t *testing.T, q *Storage, expr string, at int64) promql.Vector {
	t.Helper()
	qry, err := engine().NewInstantQuery(context.Background(), q, nil, expr, time.UnixMilli(at))
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	res := qry.Exec(context.Background())
	if res.Err != nil {
		t.Fatalf("%s: %v", expr, res.Err)
	}
	v, err := res.Vector()
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return v
}

// TestEngineReadsRegistry evaluates PromQL over a registry's series, named and scaled as
// /metrics names them, with instance and node labels, counters with their reset.
func TestEngineReadsRegistry(t *testing.T) {
	const t0 = 1_700_000_000_000
	reg, hist := fill(t, t0, 30)
	st := New(hist, RegistryCatalog(reg), Options{Instance: "n1:22682", Node: "n1"})
	end := int64(t0 + 29*2000)

	v := instant(t, st, `rate(node_cpu_seconds_total{mode="user"}[20s])`, end)
	if len(v) != 2 {
		t.Fatalf("rate: %d series, want 2: %v", len(v), v)
	}
	want := map[string]float64{"0": 0.5, "1": 0.25}
	for _, s := range v {
		cpu := s.Metric.Get("cpu")
		if math.Abs(s.F-want[cpu]) > 1e-9 {
			t.Errorf("rate cpu %s = %v, want %v", cpu, s.F, want[cpu])
		}
		if s.Metric.Get("instance") != "n1:22682" || s.Metric.Get("node") != "n1" {
			t.Errorf("labels %v lack instance/node", s.Metric)
		}
	}
	// Across cpu 1's reset (scan 10) increase() counts from 0 again: 500 ms per scan, over
	// scans 5..15, is 5 s of CPU time, never negative.
	at := int64(t0 + 15*2000)
	v = instant(t, st, `increase(node_cpu_seconds_total{cpu="1"}[20s])`, at)
	if len(v) != 1 || v[0].F <= 0 {
		t.Fatalf("increase across reset: %v", v)
	}
	v = instant(t, st, `node_load1`, end)
	if len(v) != 1 || math.Abs(v[0].F-2.9) > 1e-12 || v[0].T != end {
		t.Fatalf("node_load1 = %v, want 2.9 at %d", v, end)
	}
	v = instant(t, st, `{__name__=~"requests_active"}`, end)
	if len(v) != 1 || v[0].F != -29 || v[0].Metric.Get("appname") != "web" {
		t.Fatalf("application level = %v, want -29", v)
	}
	// Before the first scan nothing is there.
	if v = instant(t, st, `node_load1`, t0-1); len(v) != 0 {
		t.Fatalf("before the first scan: %v", v)
	}
}

// TestVisibleFiltersSeries: a caller sees only the series its predicate allows, in queries
// and label lists alike.
func TestVisibleFiltersSeries(t *testing.T) {
	const t0 = 1_700_000_000_000
	reg, hist := fill(t, t0, 5)
	type key struct{}
	st := New(hist, RegistryCatalog(reg), Options{Visible: func(ctx context.Context) func(series.Labels) bool {
		if ctx.Value(key{}) == nil {
			return nil
		}
		return func(l series.Labels) bool { return l["appname"] == "" }
	}})
	end := int64(t0 + 4*2000)
	q, _ := st.Querier(t0, end)
	names := func(ctx context.Context) []string {
		vs, _, err := q.LabelValues(ctx, labels.MetricName, nil)
		if err != nil {
			t.Fatal(err)
		}
		return vs
	}
	all := names(context.Background())
	some := names(context.WithValue(context.Background(), key{}, true))
	if len(all) != 3 || len(some) != 2 {
		t.Fatalf("names: all %v, restricted %v", all, some)
	}
	for _, n := range some {
		if n == "requests_active" {
			t.Fatalf("hidden series listed: %v", some)
		}
	}
}

// TestContainerSeriesServedUnderBothNames: a container's cgroup series is served under its own
// name and as cAdvisor's container_* family, as /metrics and remote write give it, with each
// name's own unit; through the index (the registry's catalog) and the walk (the store's) alike,
// and after the container is forgotten under neither.
func TestContainerSeriesServedUnderBothNames(t *testing.T) {
	const t0 = 1_700_000_000_000
	const id = "28b5dec444b2e0c0ffee28b5dec444b2e0c0ffee28b5dec444b2e0c0ffee2801"
	hist := history.New(history.Options{})
	reg := registry.New(hist, time.Hour, slog.New(slog.DiscardHandler))
	reg.SetMaxSeries(2) // a scan leaving more forgets the series written longest ago
	cpu := reg.Series(series.Labels{"metric": "cgroup.cpu.usage_ms", "cgroup": "libpod_parent.libpod-" + id,
		"container": "web-1", "image": "localhost/shop:1", "container_id": id[:12]}, series.Counter)
	for i := range 30 {
		reg.Begin(t0 + int64(i)*2000)
		reg.Put(cpu, uint64(i)*1000) // 500 ms of CPU a second
		reg.Commit()
	}
	end := int64(t0 + 29*2000)
	for name, cat := range map[string]Catalog{"index": RegistryCatalog(reg), "walk": StoreCatalog(hist)} {
		st := New(hist, cat, Options{Node: "n1"})
		v := instant(t, st, `rate(container_cpu_usage_seconds_total{name="web-1"}[20s])`, end)
		if len(v) != 1 || math.Abs(v[0].F-0.5) > 1e-9 || v[0].Metric.Get("image") != "localhost/shop:1" ||
			v[0].Metric.Get("id") != "/libpod_parent/libpod-"+id || v[0].Metric.Get("node") != "n1" {
			t.Fatalf("%s: cAdvisor's rate = %v; want 0.5 CPU with its labels", name, v)
		}
		v = instant(t, st, `{container_id="`+id[:12]+`"}`, end)
		if len(v) != 1 || v[0].Metric.Get(labels.MetricName) == "container_cpu_usage_seconds_total" {
			t.Fatalf("%s: by the agent's own labels: %v; want its own series, not the twin (which has cAdvisor's labels)", name, v)
		}
		q, _ := st.Querier(t0, end)
		names, _, err := q.LabelValues(context.Background(), labels.MetricName, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(names) != 2 {
			t.Fatalf("%s: names %v; want the series' own and cAdvisor's", name, names)
		}
	}
	// Forgotten: the index lists it under neither name any more.
	st := New(hist, RegistryCatalog(reg), Options{})
	if v := instant(t, st, `container_cpu_usage_seconds_total`, end); len(v) != 1 {
		t.Fatalf("before it is forgotten: %v", v)
	}
	reg.Begin(end + 2000) // two other series: the container's is forgotten
	for _, m := range []string{"a", "b"} {
		reg.Put(reg.Series(series.Labels{"metric": m}, series.Level), 1)
	}
	reg.Commit()
	if v := instant(t, st, `container_cpu_usage_seconds_total`, end); len(v) != 0 {
		t.Fatalf("after it is forgotten: %v", v)
	}
}
