package bench

// Peer comparison for package shm's hot path: incrementing a counter, in one run.
//
//	cd bench && go test -run '^$' -bench 'ShmCounter' -benchtime 1s -count 5 .
//
// "shm" is shm.Counter.Inc on a started Collection (the counter lives in the mapped .values
// file); "atomic-same-mapping" is a bare atomic.AddUint64 on that same mapped word, the floor.
// The peers keep their counters in ordinary memory. Loops use b.N, not b.Loop, so that the
// calls are inlined as they are in real code. /parallel runs b.RunParallel on one shared
// counter.

import (
	"expvar"
	"path/filepath"
	"sync/atomic"
	"testing"
	"unsafe"

	vm "github.com/VictoriaMetrics/metrics"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cantal-go/cantal/shm"
)

// startedShmCounter returns a counter of a started collection and the address of its mapped
// word, found through the .values file layout: the only metric, at offset 0.
func startedShmCounter(b *testing.B) (*shm.Counter, *uint64) {
	b.Helper()
	c := shm.NewCollection(shm.Options{Path: filepath.Join(b.TempDir(), "app")})
	cnt := shm.Must(c.Counter(map[string]string{"metric": "requests"}))
	if err := c.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return cnt, mappedWord(b, cnt)
}

// mappedWord finds the mapped word of cnt: the first field of a started Counter is the pointer
// to it. Checked by incrementing through one and reading through the other.
func mappedWord(b *testing.B, cnt *shm.Counter) *uint64 {
	p := *(**uint64)(unsafe.Pointer(cnt))
	before := atomic.LoadUint64(p)
	cnt.Inc()
	if atomic.LoadUint64(p) != before+1 {
		b.Fatal("could not find the counter's mapped word")
	}
	return p
}

func BenchmarkShmCounterInc(b *testing.B) {
	b.Run("shm", func(b *testing.B) {
		cnt, _ := startedShmCounter(b)
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			cnt.Inc()
		}
	})
	b.Run("atomic-same-mapping", func(b *testing.B) {
		_, p := startedShmCounter(b)
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			atomic.AddUint64(p, 1)
		}
	})
	b.Run("prometheus.Counter", func(b *testing.B) {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: "requests"})
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			c.Inc()
		}
	})
	b.Run("prometheus.CounterVec.WithLabelValues", func(b *testing.B) {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "requests"}, []string{"handler"})
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			c.WithLabelValues("api").Inc()
		}
	})
	b.Run("expvar.Int", func(b *testing.B) {
		v := new(expvar.Int) // unpublished: Publish would collide across -count runs
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			v.Add(1)
		}
	})
	b.Run("VictoriaMetrics.Counter", func(b *testing.B) {
		c := vm.NewSet().NewCounter("requests")
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			c.Inc()
		}
	})
}

func BenchmarkShmCounterIncParallel(b *testing.B) {
	run := func(b *testing.B, inc func()) {
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				inc()
			}
		})
	}
	b.Run("shm", func(b *testing.B) {
		cnt, _ := startedShmCounter(b)
		run(b, cnt.Inc)
	})
	b.Run("atomic-same-mapping", func(b *testing.B) {
		_, p := startedShmCounter(b)
		run(b, func() { atomic.AddUint64(p, 1) })
	})
	b.Run("prometheus.Counter", func(b *testing.B) {
		run(b, prometheus.NewCounter(prometheus.CounterOpts{Name: "requests"}).Inc)
	})
	b.Run("prometheus.CounterVec.WithLabelValues", func(b *testing.B) {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "requests"}, []string{"handler"})
		run(b, func() { c.WithLabelValues("api").Inc() })
	})
	b.Run("expvar.Int", func(b *testing.B) {
		v := new(expvar.Int)
		run(b, func() { v.Add(1) })
	})
	b.Run("VictoriaMetrics.Counter", func(b *testing.B) {
		run(b, vm.NewSet().NewCounter("requests").Inc)
	})
}
