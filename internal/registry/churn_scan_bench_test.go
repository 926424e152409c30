package registry

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/series"
	"github.com/cantal-go/cantal/internal/testsupport/cputime"
)

// BenchmarkChurnScan measures one scan (one op) of issue 22's churn at the registry and history
// level, in its steady state: 10 000 live processes × 8 series, 500 processes started and 500
// gone per scan (250 a second at 2 s, each living 20 scans), each process registering its eight
// series at its second scan (labels built as the process scanner builds them: metric, pid,
// process, cgroup) and writing them every scan after, into a registry with the agent's default
// --max-series (500 000) over a history with the agent's options (1 h retention, 8 grace scans).
//
// The state is warmed up once, before the first timed scan, with 1900 scans: the series limit is
// reached after ~125 scans and from then on every ~6th scan evicts 25 000 dead processes'
// series; after 1800 scans the history holds its full hour and its oldest segments expire at
// each close (every 64 scans). The timed scans continue from there, so use -benchtime Nx with N
// a multiple of 64 (each segment close counted once per 64 scans). Reported per scan: ns/op
// (wall), B/op and allocs/op, cpu-ms/scan (the process's user+system time, GC workers on the
// other core included), gc-share (the GC's share of the runtime's CPU estimates,
// runtime/metrics /cpu/classes/gc/total over gc + user: estimates that count runnable time, so
// only a ratio), gcs/scan, and at the end fullgc-cpu-ms (the process CPU time of one forced
// collection of the state, median of 3: what each of the agent's collections costs it to mark
// the registry and history), the heap in use after it and the registry's series.
//
//	go test -run '^$' -bench ChurnScan -benchtime 640x -count 3 ./internal/registry/
//
// CHURN_WARM=n sets the warm-up scans (default 1900; with -short 300).
func BenchmarkChurnScan(b *testing.B) {
	warm := 1900
	if testing.Short() {
		warm = 300
	}
	if s := os.Getenv("CHURN_WARM"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			b.Fatalf("CHURN_WARM=%q: %v", s, err)
		}
		warm = n
	}
	var c *churn // built and warmed once, on the first call of the sub-benchmark
	b.Run("procs=10000/new=500", func(b *testing.B) {
		if c == nil {
			c = newChurn(10000, 500)
			for range warm {
				c.scan()
			}
		}
		runtime.GC()
		gc0, user0, n0 := gcStats()
		cpu0 := cputime.Process()
		ev0 := c.r.View().Evicted
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			c.scan()
		}
		b.StopTimer()
		cpu := cputime.Process() - cpu0
		gc1, user1, n1 := gcStats()
		scans := float64(b.N)
		b.ReportMetric(float64(cpu.Nanoseconds())/scans/1e6, "cpu-ms/scan")
		reportCollections(b, scans, gc1-gc0, user1-user0, n1-n0)
		b.ReportMetric(float64(c.r.View().Evicted-ev0)/scans, "evicted/scan")
		if f := os.Getenv("CHURN_HEAPPROFILE"); f != "" { // go tool pprof -sample_index=inuse_space
			if err := writeHeapProfile(f); err != nil {
				b.Fatal(err)
			}
		}
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap-MiB")
		b.ReportMetric(float64(c.r.View().Len()), "series")
		if v, want := c.r.View(), (c.procs-c.births)*churnPerProc; v.Live != want {
			b.Fatalf("View.Live = %d after a scan; want %d (every process's series but the new ones')", v.Live, want)
		}
	})
}

// BenchmarkChurnScanSave is BenchmarkChurnScan with the history as the agent keeps it
// (--snapshot-interval 1m at --interval 2s: segments of 30 scans, 8 carried over at a close) and
// its snapshot saved into a directory right after each scan that closed a segment, as the
// agent's saveLoop does (history.Saver.Save: the segment's file, the series table's changes,
// HEAD with the open segment's carried-over scans, fsyncs). The state is warmed up the same way
// (saves included), so that the series table holds ~490 000 series and the timed saves include
// the table's log appends and compactions in their steady proportion. One op = one scan;
// save-cpu-ms/scan is the process CPU time spent in Save (on the scanning goroutine here, a
// goroutine of its own in the agent) divided by all the scans; use -benchtime Nx with N a
// multiple of 30.
//
//	go test -run '^$' -bench ChurnScanSave -benchtime 600x -count 3 ./internal/registry/
func BenchmarkChurnScanSave(b *testing.B) {
	warm := 1900
	if testing.Short() {
		warm = 300
	}
	if s := os.Getenv("CHURN_WARM"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			b.Fatalf("CHURN_WARM=%q: %v", s, err)
		}
		warm = n
	}
	var c *churn
	var sv *history.Saver
	var closed int64
	var saves int
	var saveCPU time.Duration
	var saveBytes int64
	scan := func(tb testing.TB) {
		c.scan()
		h := c.r.History()
		if n := h.Closed(); n != closed {
			closed = n
			t := cputime.Process()
			st, err := sv.Save()
			saveCPU += cputime.Process() - t
			if err != nil {
				tb.Fatal(err)
			}
			saves++
			saveBytes += st.Bytes
		}
	}
	b.Run("procs=10000/new=500", func(b *testing.B) {
		if c == nil {
			c = newChurnOpts(10000, 500, history.Options{Retention: time.Hour, Interval: 2 * time.Second, BlockScans: 30, GraceScans: 8})
			dir, err := os.MkdirTemp("", "churnsave")
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { os.RemoveAll(dir) })
			sv = history.NewSaver(dir, c.r.History())
			for range warm {
				scan(b)
			}
		}
		runtime.GC()
		gc0, user0, n0 := gcStats()
		cpu0 := cputime.Process()
		saves, saveCPU, saveBytes = 0, 0, 0
		b.ReportAllocs()
		b.ResetTimer()
		// Labelled, so that a -cpuprofile can be narrowed to the timed scans: -tagfocus phase=timed.
		pprof.Do(context.Background(), pprof.Labels("phase", "timed"), func(context.Context) {
			for range b.N {
				scan(b)
			}
		})
		b.StopTimer()
		cpu := cputime.Process() - cpu0
		gc1, user1, n1 := gcStats()
		scans := float64(b.N)
		b.ReportMetric(float64(cpu.Nanoseconds())/scans/1e6, "cpu-ms/scan")
		b.ReportMetric(float64(saveCPU.Nanoseconds())/scans/1e6, "save-cpu-ms/scan")
		if saves > 0 {
			b.ReportMetric(float64(saveBytes)/float64(saves), "bytes/save")
		}
		reportCollections(b, scans, gc1-gc0, user1-user0, n1-n0)
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap-MiB")
		b.ReportMetric(float64(c.r.View().Len()), "series")
	})
}

// reportCollections reports the collector's share over the timed scans (gc and user: the
// runtime's CPU estimates over them, cycles: the collections) and what one collection of the
// warm heap costs: the agent collects as often as all of its allocations make it, and each time
// marks what the registry and the history hold (median of 3).
func reportCollections(b *testing.B, scans, gc, user float64, cycles uint64) {
	if gc > 0 {
		b.ReportMetric(gc/(gc+user), "gc-share")
	}
	b.ReportMetric(float64(cycles)/scans, "gcs/scan")
	var gcCPU []time.Duration
	for range 3 {
		t := cputime.Process()
		runtime.GC()
		gcCPU = append(gcCPU, cputime.Process()-t)
	}
	slices.Sort(gcCPU)
	b.ReportMetric(float64(gcCPU[1].Nanoseconds())/1e6, "fullgc-cpu-ms")
}

// gcStats returns the runtime's estimates of the CPU seconds spent in the GC and in user code,
// and the completed GC cycles, so far. The estimates count the time the runtime's threads were
// running or runnable (so a loaded machine inflates both): only their ratio is reported.
func gcStats() (gcSeconds, userSeconds float64, cycles uint64) {
	s := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}, {Name: "/cpu/classes/user:cpu-seconds"}, {Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	return s[0].Value.Float64(), s[1].Value.Float64(), s[2].Value.Uint64()
}

const churnPerProc = 8

var (
	churnNames = [churnPerProc]string{"process.cpu.user_ms", "process.cpu.system_ms", "process.memory.rss", "process.memory.vsz", "process.memory.swap", "process.threads", "process.io.read_bytes", "process.io.write_bytes"}
	churnKinds = [churnPerProc]series.Kind{series.Counter, series.Counter, series.Level, series.Level, series.Level, series.Level, series.Counter, series.Counter}
	churnComms = [...]string{"cc1", "as", "ld", "sh", "make", "go", "compile", "link", "sleep", "python3", "node", "cargo", "rustc", "git", "sed", "awk", "grep", "cat", "bash", "test.bin"}
)

// churn is the state of BenchmarkChurnScan: a ring of processes, the new ones replacing the
// oldest.
type churn struct {
	r      *Registry
	sink   series.Sink // r, called through the interface as collectors do
	procs  int
	births int // per scan
	ring   []churnProc
	next   int // the ring position the next births start at
	pid    int
	ts     int64
	rng    *rand.Rand
}

type churnProc struct {
	pid    string
	comm   string
	cgroup string
	scans  int
	refs   [churnPerProc]*series.Ref
	vals   [churnPerProc]uint64
}

func newChurn(procs, births int) *churn {
	return newChurnOpts(procs, births, history.Options{Retention: time.Hour, Interval: 2 * time.Second, GraceScans: 8})
}

func newChurnOpts(procs, births int, opt history.Options) *churn {
	h := history.New(opt)
	r := New(h, time.Hour, slog.New(slog.DiscardHandler))
	r.SetMaxSeries(500_000) // the agent's default --max-series
	c := &churn{r: r, sink: r, procs: procs, births: births, ring: make([]churnProc, procs), pid: 1000,
		ts: 1_700_000_000_000, rng: rand.New(rand.NewPCG(1, 2))}
	for i := range c.ring {
		c.spawn(i)
		c.ring[i].scans = 1 // already seen once: registered at the first scan
	}
	return c
}

func (c *churn) spawn(i int) {
	c.pid++
	c.ring[i] = churnProc{
		pid:    strconv.Itoa(c.pid),
		comm:   churnComms[c.pid%len(churnComms)],
		cgroup: "system.slice/runner-" + strconv.Itoa(c.pid%20) + ".service",
	}
}

// scan replaces the births oldest processes by new ones and writes one scan.
func (c *churn) scan() {
	for k := range c.births {
		c.spawn((c.next + k) % c.procs)
	}
	c.next = (c.next + c.births) % c.procs
	c.ts += 2000
	c.r.Begin(c.ts)
	for i := range c.ring {
		p := &c.ring[i]
		p.scans++
		if p.scans < 2 {
			continue // a process's series start at its second scan, as the process scanner's
		}
		p.vals[0] += uint64(c.rng.IntN(20))
		p.vals[1] += uint64(c.rng.IntN(5))
		p.vals[2] = 1<<20 + uint64(c.rng.IntN(1<<12))
		p.vals[3] = 1 << 24
		p.vals[5] = 1
		p.vals[6] += 4096 * uint64(c.rng.IntN(3))
		for m := range churnPerProc {
			ref := p.refs[m]
			if ref == nil {
				ref = c.sink.Series(series.Labels{"metric": churnNames[m], "pid": p.pid, "process": p.comm, "cgroup": p.cgroup}, churnKinds[m])
				p.refs[m] = ref
			}
			c.sink.Put(ref, p.vals[m])
		}
	}
	c.r.Commit()
}
