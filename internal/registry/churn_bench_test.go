package registry

import (
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/series"
)

// BenchmarkChurnHour writes one hour of scans (1800 × 2 s) of a machine where 10000 processes
// live 30 to 90 s each and are replaced as they exit (about 170 new processes per second), each
// with the eight per-process series the process scanner registers (labels metric, pid, process,
// cgroup). It reports the scanner-side cost per scan (registration, points, expiry) and the heap
// holding the hour: the issue asks that 10k short-lived processes neither stall the scan nor
// grow the agent's memory without bound. The registry has the agent's default series limit
// (--max-series 500000): without it the hour would hold about 5 million series.
//
//	go test -run '^$' -bench ChurnHour -benchtime 1x ./internal/registry/
func BenchmarkChurnHour(b *testing.B) {
	const procs, perProc = 10000, 8
	scans := 1800
	if testing.Short() {
		scans = 200
	}
	names := [perProc]string{"process.cpu.user_ms", "process.cpu.system_ms", "process.memory.rss", "process.memory.vsz", "process.memory.swap", "process.threads", "process.io.read_bytes", "process.io.write_bytes"}
	kinds := [perProc]series.Kind{series.Counter, series.Counter, series.Level, series.Level, series.Level, series.Level, series.Counter, series.Counter}
	type proc struct {
		refs  [perProc]*series.Ref
		vals  [perProc]uint64
		death int
	}
	for range b.N {
		h := history.New(history.Options{Retention: time.Hour, Interval: 2 * time.Second})
		r := New(h, time.Hour, slog.New(slog.DiscardHandler))
		r.SetMaxSeries(500_000) // the agent's default --max-series
		rng := rand.New(rand.NewPCG(1, 2))
		nextPID := 1000
		born := 0
		spawn := func(scan int) *proc {
			p := &proc{death: scan + 15 + rng.IntN(31)}
			pid := strconv.Itoa(nextPID)
			nextPID++
			born++
			for m := range perProc {
				p.refs[m] = r.Series(series.Labels{"metric": names[m], "pid": pid, "process": "worker", "cgroup": "system/job" + strconv.Itoa(nextPID%20)}, kinds[m])
			}
			return p
		}
		ps := make([]*proc, procs)
		for i := range ps {
			ps[i] = spawn(-rng.IntN(45))
			ps[i].death = rng.IntN(45)
		}
		start := time.Now().Add(-time.Hour).UnixMilli()
		var worst time.Duration
		b.ResetTimer()
		for s := range scans {
			t0 := time.Now()
			r.Begin(start + int64(s)*2000)
			for i, p := range ps {
				if p.death <= s {
					p = spawn(s)
					ps[i] = p
				}
				p.vals[0] += uint64(rng.IntN(20))
				p.vals[1] += uint64(rng.IntN(5))
				p.vals[2] = 1<<20 + uint64(rng.IntN(1<<12))
				p.vals[3] = 1 << 24
				p.vals[6] += 4096 * uint64(rng.IntN(3))
				for m := range perProc {
					r.Put(p.refs[m], p.vals[m])
				}
			}
			r.Commit()
			worst = max(worst, time.Since(t0))
		}
		reportHour(b, scans)
		st := h.Stats()
		b.ReportMetric(float64(st.Series), "series")
		b.ReportMetric(float64(r.View().Evicted), "evicted")
		b.ReportMetric(float64(born)/float64(scans)/2, "procs-born-per-s")
		b.ReportMetric(float64(st.CompressedBytes+st.StagingBytes)/(1<<20), "history-MiB")
		b.ReportMetric(float64(worst.Nanoseconds())/1e6, "worst-ms/scan")
		if f := os.Getenv("CHURN_HEAPPROFILE"); f != "" { // where the heap goes: go tool pprof -sample_index=inuse_space
			if err := writeHeapProfile(f); err != nil {
				b.Fatal(err)
			}
		}
		runtime.KeepAlive(r)
	}
}

func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
