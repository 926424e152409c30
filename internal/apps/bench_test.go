package apps

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/procscan"
	"github.com/cantal-go/cantal/internal/registry"
	"github.com/cantal-go/cantal/internal/testsupport/cputime"
)

// BenchmarkCollect1000x100 reads 1000 applications' files of 100 metrics each (100k series) into
// the registry and history, as a scan does in steady state. cpu-ns/op is the process's user+system
// CPU time per scan (the system calls dominate: three per application).
//
//	go test -run '^$' -bench Collect1000 ./internal/apps/
func BenchmarkCollect1000x100(b *testing.B) {
	const apps, metrics = 1000, 100
	dir := b.TempDir()
	procs := make(table, apps)
	for a := range apps {
		// Labels like the load generator's: every application's series are its own (the
		// processes share one pid here).
		var meta strings.Builder
		for i := range metrics {
			fmt.Fprintf(&meta, "counter 8: {\"metric\": \"app.metric.%d\", \"app\": \"load%d\", \"unit\": \"requests\"}\n", i, a)
		}
		base := filepath.Join(dir, fmt.Sprint("app", a))
		os.WriteFile(base+".values", make([]byte, 8*metrics), 0o644)
		os.WriteFile(base+".meta", []byte(meta.String()), 0o644)
		procs[a] = procscan.Process{PID: os.Getpid(), UID: os.Getuid(), Name: "bench", CantalPath: base}
	}
	h := history.New(history.Options{})
	reg := registry.New(h, time.Hour, slog.New(slog.DiscardHandler))
	c := New(procs, Options{})
	ts := time.Now().UnixMilli()
	scan := func() {
		reg.Begin(ts)
		ts += 2000
		if err := c.Collect(context.Background(), reg); err != nil {
			b.Fatal(err)
		}
		reg.Commit()
	}
	scan() // registers every series
	if c.Count() != apps || reg.View().Len() != apps*metrics {
		b.Fatalf("read %d applications, %d series; want %d, %d", c.Count(), reg.View().Len(), apps, apps*metrics)
	}
	cpu0 := cputime.Process()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		scan()
	}
	b.StopTimer()
	cpu := (cputime.Process() - cpu0) / time.Duration(b.N)
	b.ReportMetric(float64(cpu.Nanoseconds()), "cpu-ns/op")
	b.ReportMetric(float64(cpu.Nanoseconds())/(apps*metrics), "cpu-ns/value")
	// What the collector and the registry hold, and what a full collection of it costs (the
	// agent's forced collection every 2 minutes marks all of it).
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	gc0 := cputime.Process()
	runtime.GC()
	b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap-MiB")
	b.ReportMetric(float64((cputime.Process()-gc0).Microseconds())/1000, "gc-cpu-ms")
	runtime.KeepAlive(c)
	runtime.KeepAlive(reg)
}
