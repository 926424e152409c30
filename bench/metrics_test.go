package bench

// Peer comparison for package metrics: counters and histogram-style observation against
// prometheus/client_golang and VictoriaMetrics/metrics, in one run.
//
//	cd bench && go test -run '^$' -bench '^(BenchmarkCounterInc|BenchmarkObserve|BenchmarkTimeFunc|BenchmarkPaired)$' -count 3 .
//
// Every case of a group runs in the same process. The G1/G2 variants run b.RunParallel with
// runtime.GOMAXPROCS set to 1 or 2 and SetParallelism(1), i.e. exactly 1 or 2 goroutines
// observing the same metric; ns/op is wall time divided by the total number of observations
// across goroutines.
//
// On a shared, loaded machine separate sub-benchmarks drift apart by more than the 10% being
// measured, so BenchmarkPaired interleaves the contenders in short rounds (chunks of 2^16
// operations, 2^18 with 2 goroutines, alternating) and reports for each the median round's ns/op and its ratio to
// the baseline: the same load affects all of them alike. It also reports CPU time per
// operation (thread CPU clocks), which other processes' load does not inflate.

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	vm "github.com/VictoriaMetrics/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"

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

// contender is one implementation measured by paired: op performs operation i.
type contender struct {
	name string
	op   func(i int)
}

// paired measures the contenders in alternating rounds of chunk operations split across procs
// goroutines, for b.N rounds (at least 51), and reports each one's median round as wall-clock
// ns/op and as cpu-ns/op, with their ratios to the first contender. (The median, not the
// fastest round: with 2 goroutines the fastest round can be one where the scheduler ran them
// one after the other, uncontended.)
func paired(b *testing.B, procs int, cs []contender) {
	b.Helper()
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
	chunk := 1 << 16 // ~0.5 ms: many short rounds alternate finely with the machine's load
	if procs > 1 {
		chunk = 1 << 18 // long enough for both goroutines to be running at once
	}
	// One round: wall time, and CPU time summed over the goroutines, each measured with its
	// thread's CPU clock (the goroutine is locked to its thread meanwhile). CPU time does not
	// count the time other processes held the CPU, so it stays meaningful on a loaded machine;
	// contention (cache-line transfers) still shows in it, as stalled cycles.
	run := func(c contender) (wall, cpu time.Duration) {
		var ready, done sync.WaitGroup
		start := make(chan struct{})
		cpus := make([]time.Duration, procs)
		for g := range procs {
			ready.Add(1)
			done.Go(func() {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				ready.Done()
				<-start // all goroutines are running before the clock starts
				t0 := threadCPU()
				for i := g; i < chunk; i += procs {
					c.op(i)
				}
				cpus[g] = threadCPU() - t0
			})
		}
		ready.Wait()
		t0 := time.Now()
		close(start)
		done.Wait()
		wall = time.Since(t0)
		for _, d := range cpus {
			cpu += d
		}
		return wall, cpu
	}
	for _, c := range cs { // warm up: fill windows, grow rings
		run(c)
	}
	b.ResetTimer()
	walls := make([][]time.Duration, len(cs))
	cpus := make([][]time.Duration, len(cs))
	for r := 0; r < b.N || r < 51; r++ {
		for k, c := range cs {
			w, cpu := run(c)
			walls[k] = append(walls[k], w)
			cpus[k] = append(cpus[k], cpu)
		}
	}
	b.StopTimer()
	median := func(ds []time.Duration) float64 {
		slices.Sort(ds)
		return float64(ds[len(ds)/2]) / float64(chunk)
	}
	wall0, cpu0 := median(walls[0]), median(cpus[0])
	for k, c := range cs {
		w, cpu := median(walls[k]), median(cpus[k])
		b.ReportMetric(w, c.name+"-ns/op")
		b.ReportMetric(cpu, c.name+"-cpu-ns/op")
		if k > 0 {
			b.ReportMetric(w/wall0, c.name+"/"+cs[0].name)
			b.ReportMetric(cpu/cpu0, c.name+"/"+cs[0].name+"-cpu")
		}
	}
	b.ReportMetric(0, "ns/op") // the per-contender metrics above are the result
}

// threadCPU returns the CPU time of the calling thread.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		panic(err) // Linux has had this clock since 2.6.12
	}
	return time.Duration(ts.Nano())
}

func BenchmarkPaired(b *testing.B) {
	b.Run("CounterInc", func(b *testing.B) {
		var n atomic.Int64
		c := metrics.NewCounter("c")
		pc := prometheus.NewCounter(prometheus.CounterOpts{Name: "c"})
		vc := vm.NewSet().NewCounter("c")
		paired(b, 1, []contender{
			{"atomic", func(int) { n.Add(1) }},
			{"cantal", func(int) { c.Inc() }},
			{"client_golang", func(int) { pc.Inc() }},
			{"victoriametrics", func(int) { vc.Inc() }},
		})
	})
	dur := func(i int) time.Duration { return time.Duration(i&1023) * time.Microsecond }
	for _, procs := range []int{1, 2} {
		b.Run(fmt.Sprintf("ObserveG%d", procs), func(b *testing.B) {
			h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "h", Buckets: prometheus.DefBuckets})
			tw := metrics.NewTimer("t", metrics.Milliseconds, metrics.WithWindow(time.Minute, 1000))
			t := metrics.NewTimer("t", metrics.Milliseconds)
			vh := vm.NewSet().NewHistogram("h")
			paired(b, procs, []contender{
				{"client_golang", func(i int) { h.Observe(dur(i).Seconds()) }},
				{"cantal_window", func(i int) { tw.Observe(dur(i)) }},
				{"cantal", func(i int) { t.Observe(dur(i)) }},
				{"victoriametrics", func(i int) { vh.Update(dur(i).Seconds()) }},
			})
		})
	}
}
