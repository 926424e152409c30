package promstore

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"

	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/registry"
	"github.com/cantal-go/cantal/internal/series"
	"github.com/cantal-go/cantal/internal/testsupport/cputime"
)

// BenchmarkQueryRange is query_range over 1 h at a 2 s step (1800 steps) of
// sum(rate(app_requests_total[1m])) over n counters holding an hour of 2 s scans.
func BenchmarkQueryRange(b *testing.B) {
	for _, n := range []int{1, 100, 10000} {
		b.Run(fmt.Sprintf("series=%d", n), func(b *testing.B) {
			const t0 = 1_700_000_000_000
			hist := history.New(history.Options{})
			reg := registry.New(hist, time.Hour, nil)
			refs := make([]*series.Ref, n)
			for i := range refs {
				refs[i] = reg.Series(series.Labels{"metric": "requests", "appname": "app", "worker": fmt.Sprint(i)}, series.Counter)
			}
			const scans = 1800
			for j := range scans {
				reg.Begin(t0 + int64(j)*2000)
				for i, r := range refs {
					reg.Put(r, uint64(j*(i+1)))
				}
				reg.Commit()
			}
			st := New(hist, RegistryCatalog(reg), Options{Instance: "n:1", Node: "n"})
			ng := promql.NewEngine(promql.EngineOpts{MaxSamples: 1e9, Timeout: time.Hour, LookbackDelta: 5 * time.Minute})
			start, end := time.UnixMilli(t0), time.UnixMilli(t0+(scans-1)*2000)
			b.ReportAllocs()
			b.ResetTimer()
			cpu := cputime.Process()
			for b.Loop() {
				q, err := ng.NewRangeQuery(context.Background(), st, nil, `sum(rate(requests_total[1m]))`, start, end, 2*time.Second)
				if err != nil {
					b.Fatal(err)
				}
				res := q.Exec(context.Background())
				if res.Err != nil {
					b.Fatal(res.Err)
				}
				if m, _ := res.Matrix(); len(m) != 1 || len(m[0].Floats) < scans-40 {
					b.Fatalf("%d series", len(m))
				}
				q.Close()
			}
			// CPU beside wall time: the machine is shared, wall time measures the neighbours too.
			b.ReportMetric(float64((cputime.Process()-cpu).Microseconds())/1000/float64(b.N), "cpu-ms/op")
		})
	}
}

// BenchmarkSelectAmongMany is query_range over 1 h at a 2 s step of node_load1 held beside
// 10 000 series of other names: through the index (index=true) and by the walk of every
// series that was the only way before it (index=false).
func BenchmarkSelectAmongMany(b *testing.B) {
	const t0 = 1_700_000_000_000
	const scans = 1800
	reg, hist := manyOthers(b, t0, scans, 10000)
	ng := promql.NewEngine(promql.EngineOpts{MaxSamples: 1e9, Timeout: time.Hour, LookbackDelta: 5 * time.Minute})
	start, end := time.UnixMilli(t0), time.UnixMilli(t0+(scans-1)*2000)
	for _, indexed := range []bool{true, false} {
		b.Run(fmt.Sprintf("index=%v", indexed), func(b *testing.B) {
			var cat Catalog = RegistryCatalog(reg)
			if !indexed {
				cat = unversioned{cat}
			}
			st := New(hist, cat, Options{Instance: "n:1", Node: "n"})
			b.ReportAllocs()
			for b.Loop() {
				q, err := ng.NewRangeQuery(context.Background(), st, nil, `node_load1`, start, end, 2*time.Second)
				if err != nil {
					b.Fatal(err)
				}
				res := q.Exec(context.Background())
				if m, _ := res.Matrix(); res.Err != nil || len(m) != 1 {
					b.Fatalf("%v %v", res.Err, m)
				}
				q.Close()
			}
		})
	}
}

// BenchmarkIndexUnderChurn is the cost of bringing the index up to date after a scan under
// process churn: 100 000 series held (the registry bounded to them, SetMaxSeries), every scan
// registering 200 new ones (two processes' worth) and, every 25th scan or so, the registry
// forgetting the 5 000 written longest ago. Before the index was kept in place it was built
// anew from every series after each of these scans. The scans themselves are not timed.
func BenchmarkIndexUnderChurn(b *testing.B) {
	const t0 = 1_700_000_000_000
	const held, perScan = 100_000, 200
	hist := history.New(history.Options{})
	reg := registry.New(hist, time.Hour, slog.New(slog.DiscardHandler))
	reg.SetMaxSeries(held)
	next, ts := 0, int64(t0)
	scan := func(n int) {
		reg.Begin(ts)
		for range n {
			r := reg.Series(series.Labels{"metric": fmt.Sprintf("proc%d", next%50), "appname": "churn", "pid": fmt.Sprint(next / 100)}, series.Level)
			reg.Put(r, 1)
			next++
		}
		reg.Commit()
		ts += 2000
	}
	scan(held)
	st := New(hist, RegistryCatalog(reg), Options{Instance: "n:1", Node: "n"})
	st.currentIndex()
	ms := []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "pid", "7")}
	if x := st.currentIndex(); x != nil {
		x.candidates(ms) // a label's lists made, as a query on it would
	}
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		scan(perScan)
		b.StartTimer()
		st.currentIndex()
	}
}

// BenchmarkSelectWalk is one walk of 100 000 series for a selector, their names known: what
// each selector cost before the index.
func BenchmarkSelectWalk(b *testing.B) {
	const t0 = 1_700_000_000_000
	reg, hist := manyOthers(b, t0, 1, 100_000)
	walk := New(hist, unversioned{RegistryCatalog(reg)}, Options{Instance: "n:1", Node: "n"})
	ms := []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, labels.MetricName, "node_load1")}
	b.ReportAllocs()
	for b.Loop() {
		walk.each(context.Background(), t0, t0, false, ms, func(*named, Entry) {})
	}
}
