package registry

import (
	"log/slog"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/series"
	"golang.org/x/sys/unix"
)

// BenchmarkScan measures the steady-state cost of one point on the scanner's path, as the agent
// writes the applications' metrics: 1000 groups (applications) × 100 series (60 % counters, 30 %
// levels, 10 % floats, as in BenchmarkFullHour), the groups in a new random order every scan (the
// apps collector walks a map), each group's points written together, then Commit; one op is one
// segment (64 scans), so segment compression is included in its share.
//
// Sub-benchmarks: api=put calls Sink.Put per point through the series.Sink interface; api=batch
// writes each group with one PutBatch. cache=warm runs the scans back to back; cache=cold writes
// 1 MiB of a 64 MiB buffer before each group, as the ~5 system calls and the file read that
// precede a group's points in the agent push the registry's and the history's lines out of L1/L2
// (and, over a scan, out of L3). Only the registry's time is counted in ns/point and ms/scan
// (the eviction is not). The machines this runs on are shared, so that neighbours do not count:
// a group's time is its wall time, except that one over 4 times the scan's median (the scan was
// preempted) counts as the median; Begin and Commit count the scanning thread's CPU time.
// commit-ms/scan is the part of it in Commit (segment compression every
// 64 scans included); allocs/scan counts every allocation of the scans.
//
//	go test -run '^$' -bench Scan -benchtime 2x ./internal/registry/
func BenchmarkScan(b *testing.B) {
	for _, api := range []string{"put", "batch"} {
		for _, cache := range []string{"warm", "cold"} {
			b.Run("api="+api+"/cache="+cache, func(b *testing.B) {
				runtime.LockOSThread() // for threadCPU
				defer runtime.UnlockOSThread()
				sb := newScanBench(b, 1000, 100)
				for range 2 * history.DefaultBlockScans { // warm up: buffers at steady-state size
					sb.scan(api == "batch", false)
				}
				runtime.GC()
				var m0, m1 runtime.MemStats
				runtime.ReadMemStats(&m0)
				b.ReportAllocs()
				b.ResetTimer()
				var busy, commit time.Duration
				for range b.N {
					for range history.DefaultBlockScans {
						p, c := sb.scan(api == "batch", cache == "cold")
						busy += p + c
						commit += c
					}
				}
				b.StopTimer()
				runtime.ReadMemStats(&m1)
				scans := float64(b.N * history.DefaultBlockScans)
				b.ReportMetric(float64(busy.Nanoseconds())/scans/float64(sb.points), "ns/point")
				b.ReportMetric(float64(busy.Nanoseconds())/scans/1e6, "ms/scan")
				b.ReportMetric(float64(commit.Nanoseconds())/scans/1e6, "commit-ms/scan")
				b.ReportMetric(float64(m1.Mallocs-m0.Mallocs)/scans, "allocs/scan")
				b.ReportMetric(float64(m1.TotalAlloc-m0.TotalAlloc)/scans, "B/scan")
				if v := sb.r.View(); v.Live != sb.points {
					b.Fatalf("View.Live = %d after a scan; want %d", v.Live, sb.points)
				}
			})
		}
	}
}

type scanBench struct {
	r      *Registry
	sink   series.Sink // r, called through the interface as collectors do
	groups []*series.Batch
	vals   [][]uint64
	order  []int
	rng    *rand.Rand
	ts     int64
	points int
	evict  []byte
	evOff  int
	// The wall time of each group's points in the current scan.
	windows []time.Duration
}

func newScanBench(b *testing.B, groups, perGroup int) *scanBench {
	b.Helper()
	h := history.New(history.Options{Retention: time.Hour, Interval: 2 * time.Second})
	r := New(h, time.Hour, slog.New(slog.DiscardHandler))
	sb := &scanBench{r: r, sink: r, rng: rand.New(rand.NewPCG(1, 2)), ts: 1_700_000_000_000,
		points: groups * perGroup, evict: make([]byte, 64<<20)}
	for g := range groups {
		app := series.Labels{"pid": strconv.Itoa(1000 + g), "process": "worker", "appname": "app" + strconv.Itoa(g%50)}
		refs := make([]*series.Ref, perGroup)
		for m := range refs {
			l := app.Clone()
			l["metric"] = "app.metric." + strconv.Itoa(m)
			kind := series.Counter
			switch {
			case m >= perGroup*9/10:
				kind = series.Float
			case m >= perGroup*6/10:
				kind = series.Level
			}
			refs[m] = r.Series(l, kind)
		}
		sb.groups = append(sb.groups, &series.Batch{Refs: refs})
		sb.vals = append(sb.vals, make([]uint64, perGroup))
		sb.order = append(sb.order, g)
	}
	return sb
}

// scan writes one scan and returns the time spent in the registry: in Begin and the Puts, and
// in Commit.
func (sb *scanBench) scan(batch, cold bool) (puts, commit time.Duration) {
	sb.rng.Shuffle(len(sb.order), func(i, j int) { sb.order[i], sb.order[j] = sb.order[j], sb.order[i] })
	sb.ts += 2000
	t0 := threadCPU()
	sb.r.Begin(sb.ts)
	busy := threadCPU() - t0
	sb.windows = sb.windows[:0]
	for _, g := range sb.order {
		grp, vals := sb.groups[g], sb.vals[g]
		for m := range vals {
			switch {
			case m >= len(vals)*9/10:
				vals[m] = math.Float64bits(float64(sb.rng.IntN(10000)) / 100)
			case m >= len(vals)*6/10:
				vals[m] = uint64(int64(vals[m]) + int64(sb.rng.IntN(5)) - 2)
			case m%5 != 0:
				vals[m] += uint64(10*m + sb.rng.IntN(3))
			}
		}
		if cold {
			sb.evictCaches()
		}
		t := time.Now()
		if batch {
			sb.r.PutBatch(grp, vals)
		} else {
			for i, ref := range grp.Refs {
				sb.sink.Put(ref, vals[i])
			}
		}
		sb.windows = append(sb.windows, time.Since(t))
	}
	busy += sumUnpreempted(sb.windows)
	t := threadCPU()
	sb.r.Commit()
	return busy, threadCPU() - t
}

// sumUnpreempted returns the sum of ws, each capped to 4 times their median. It sorts ws.
func sumUnpreempted(ws []time.Duration) time.Duration {
	if len(ws) == 0 {
		return 0
	}
	slices.Sort(ws)
	limit := 4 * ws[len(ws)/2]
	var sum time.Duration
	for _, w := range ws {
		if w > limit {
			w = ws[len(ws)/2]
		}
		sum += w
	}
	return sum
}

// threadCPU returns the CPU time used by the calling thread (the benchmark locks its goroutine
// to one).
func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		panic(err) // Linux has had the clock since 2.6.12
	}
	return time.Duration(ts.Nano())
}

// evictCaches writes one byte per cache line of the next MiB of the eviction buffer.
func (sb *scanBench) evictCaches() {
	const window = 1 << 20
	if sb.evOff+window > len(sb.evict) {
		sb.evOff = 0
	}
	buf := sb.evict[sb.evOff : sb.evOff+window]
	for i := 0; i < len(buf); i += 64 {
		buf[i]++
	}
	sb.evOff += window
}
