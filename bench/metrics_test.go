package bench

// Peer comparison for package metrics: counters and histogram-style observation against
// prometheus/client_golang and VictoriaMetrics/metrics, in one run.
//
//	cd bench && go test -run '^$' -bench 'Counter|Observe' -benchtime 1s -count 5 .
//
// Every case of a group runs in the same process so the ratios are meaningful. The G1/G2
// variants run b.RunParallel with runtime.GOMAXPROCS set to 1 or 2 and SetParallelism(1), i.e.
// exactly 1 or 2 goroutines observing the same metric; ns/op is wall time divided by the total
// number of observations across goroutines.

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	vm "github.com/VictoriaMetrics/metrics"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cantal-go/cantal/metrics"
)

func BenchmarkCounterInc(b *testing.B) {
	b.Run("atomic", func(b *testing.B) {
		b.ReportAllocs()
		var n atomic.Int64
		for b.Loop() {
			n.Add(1)
		}
	})
	b.Run("cantal", func(b *testing.B) {
		b.ReportAllocs()
		c := metrics.NewCounter("c")
		for b.Loop() {
			c.Inc()
		}
	})
	b.Run("client_golang", func(b *testing.B) {
		b.ReportAllocs()
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: "c"})
		for b.Loop() {
			c.Inc()
		}
	})
	b.Run("victoriametrics", func(b *testing.B) {
		b.ReportAllocs()
		c := vm.NewSet().NewCounter("c")
		for b.Loop() {
			c.Inc()
		}
	})
}

// parallel runs observe from exactly procs goroutines.
func parallel(b *testing.B, procs int, observe func(i int)) {
	b.Helper()
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
	b.ReportAllocs()
	b.SetParallelism(1)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			observe(i)
			i++
		}
	})
}

func BenchmarkObserve(b *testing.B) {
	dur := func(i int) time.Duration { return time.Duration(i&1023) * time.Microsecond }
	for _, procs := range []int{1, 2} {
		g := "G" + string(rune('0'+procs))
		b.Run(g+"/cantal_timer_window", func(b *testing.B) {
			t := metrics.NewTimer("t", metrics.Milliseconds, metrics.WithWindow(time.Minute, 1000))
			parallel(b, procs, func(i int) { t.Observe(dur(i)) })
		})
		b.Run(g+"/cantal_timer", func(b *testing.B) {
			t := metrics.NewTimer("t", metrics.Milliseconds)
			parallel(b, procs, func(i int) { t.Observe(dur(i)) })
		})
		b.Run(g+"/client_golang_histogram", func(b *testing.B) {
			h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "h", Buckets: prometheus.DefBuckets})
			parallel(b, procs, func(i int) { h.Observe(dur(i).Seconds()) })
		})
		b.Run(g+"/victoriametrics_histogram", func(b *testing.B) {
			h := vm.NewSet().NewHistogram("h")
			parallel(b, procs, func(i int) { h.Update(dur(i).Seconds()) })
		})
	}
}

// BenchmarkTimeFunc compares timing a function, clock reads included.
func BenchmarkTimeFunc(b *testing.B) {
	f := func() {}
	b.Run("cantal_timer_window", func(b *testing.B) {
		b.ReportAllocs()
		t := metrics.NewTimer("t", metrics.Milliseconds, metrics.WithWindow(time.Minute, 1000))
		for b.Loop() {
			t.Time(f)
		}
	})
	b.Run("client_golang_histogram", func(b *testing.B) {
		b.ReportAllocs()
		h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "h", Buckets: prometheus.DefBuckets})
		for b.Loop() {
			t := prometheus.NewTimer(h)
			f()
			t.ObserveDuration()
		}
	})
	b.Run("victoriametrics_histogram", func(b *testing.B) {
		b.ReportAllocs()
		h := vm.NewSet().NewHistogram("h")
		for b.Loop() {
			start := time.Now()
			f()
			h.UpdateDuration(start)
		}
	})
}
