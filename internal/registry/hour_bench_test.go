package registry

import (
	"log/slog"
	"math"
	"math/rand/v2"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/series"
)

// BenchmarkFullHour writes one hour of scans (1800 × 2 s) of 1000 applications × 100 metrics
// (60 % counters at steady rates with idle ones, 30 % integer levels in a random walk, 10 %
// floats with two decimals) through the registry into the history, and reports the heap that
// holds it: the memory target is RSS ≤ 300 MB with the full hour of 100k series.
//
//	go test -run '^$' -bench FullHour -benchtime 1x ./internal/registry/
func BenchmarkFullHour(b *testing.B) {
	const apps, metrics = 1000, 100
	scans := 1800
	if testing.Short() {
		scans = 300
	}
	for range b.N {
		h := history.New(history.Options{Retention: time.Hour, Interval: 2 * time.Second})
		r := New(h, time.Hour, slog.New(slog.DiscardHandler))
		refs := make([]*series.Ref, 0, apps*metrics)
		for a := range apps {
			app := series.Labels{"pid": strconv.Itoa(1000 + a), "process": "worker", "appname": "app" + strconv.Itoa(a%50)}
			for m := range metrics {
				l := app.Clone()
				l["metric"] = "app.metric." + strconv.Itoa(m)
				kind := series.Counter
				switch {
				case m >= 90:
					kind = series.Float
				case m >= 60:
					kind = series.Level
				}
				refs = append(refs, r.Series(l, kind))
			}
		}
		rng := rand.New(rand.NewPCG(1, 2))
		vals := make([]uint64, len(refs))
		start := time.Now().Add(-time.Hour).UnixMilli()
		b.ResetTimer()
		for s := range scans {
			r.Begin(start + int64(s)*2000)
			for i, ref := range refs {
				m := i % metrics
				switch {
				case m >= 90:
					vals[i] = math.Float64bits(float64(rng.IntN(10000)) / 100)
				case m >= 60:
					vals[i] = uint64(int64(vals[i]) + int64(rng.IntN(5)) - 2)
				case m%5 != 0:
					vals[i] += uint64(10*m + rng.IntN(3))
				}
				r.Put(ref, vals[i])
			}
			r.Commit()
		}
		ms := reportHour(b, scans)
		st := h.Stats()
		b.ReportMetric(float64(ms.Sys)/(1<<20), "sys-MiB")
		b.ReportMetric(float64(st.CompressedBytes+st.StagingBytes)/float64(len(refs)), "history-B/series-hour")
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(scans)/float64(len(refs)), "ns/sample")
		runtime.KeepAlive(r)
	}
}

// reportHour ends a benchmark that wrote scans scans: it stops the timer, collects garbage and
// reports the heap in use (what holds the history) and the time per scan. It returns the memory
// statistics it read.
func reportHour(b *testing.B, scans int) runtime.MemStats {
	b.StopTimer()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap-MiB")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(scans)/1e6, "ms/scan")
	return ms
}
