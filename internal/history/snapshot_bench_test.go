package history

import (
	"strconv"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/series"
	"github.com/cantal-go/cantal/internal/testsupport/cputime"
)

// benchHour is the load held for a full hour: 100k series (keys like the agent's) of
// 2 s scans, 28 closed segments and a half-full open one.
type benchHour struct {
	s    *Store
	ids  []ID
	keys int // keys made so far
	ts   int64
	j    int
}

const benchSeries = 100_000

func newBenchHour() *benchHour {
	h := &benchHour{s: New(Options{}), ts: 1_700_000_000_000}
	for range benchSeries {
		h.ids = append(h.ids, h.newSeries())
	}
	h.scans(28*DefaultBlockScans + DefaultBlockScans/2)
	return h
}

// newSeries registers the next key: 100 metrics of process after process.
func (h *benchHour) newSeries() ID {
	i := h.keys
	h.keys++
	key := `{"appname":"app` + strconv.Itoa(i/100%50) + `","metric":"app.metric.` + strconv.Itoa(i%100) + `","pid":"` + strconv.Itoa(1000+i/100) + `","process":"worker"}`
	id, err := h.s.Series(key, series.Counter)
	if err != nil {
		panic(err)
	}
	return id
}

// scans appends n scans of every series, expiring as the agent does.
func (h *benchHour) scans(n int) {
	for range n {
		h.s.Begin(h.ts)
		for i, id := range h.ids {
			h.s.Add(id, uint64(h.j*(i%7)))
		}
		h.s.Commit()
		h.s.Expire()
		h.ts += 2000
		h.j++
	}
}

// churn replaces n series by new ones (n/100 processes restarted), as the registry's
// --max-series bound does: the old ones are dropped.
func (h *benchHour) churn(n int) {
	for k := range n {
		i := (h.keys + k) % len(h.ids)
		h.s.Drop(h.ids[i])
		h.ids[i] = h.newSeries()
	}
}

// BenchmarkSave measures the agent's periodic save into a snapshot directory at the full hour:
// each op is one minute of scans (30, not timed), then one Saver.Save (timed, fsyncs included).
// churn is the number of series replaced per minute (dropped, and new ones registered).
// first-save-bytes is the one-time full write of a directory that has no snapshot yet.
func BenchmarkSave(b *testing.B) {
	for _, churn := range []int{0, 1000} {
		b.Run("churn="+strconv.Itoa(churn), func(b *testing.B) {
			h := newBenchHour()
			sv := NewSaver(b.TempDir(), h.s)
			first, err := sv.Save()
			if err != nil {
				b.Fatal(err)
			}
			var cpu, bytes int64
			segs := 0
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				h.churn(churn)
				h.scans(30)
				b.StartTimer()
				c := cputime.Process()
				st, err := sv.Save()
				cpu += int64(cputime.Process() - c)
				if err != nil {
					b.Fatal(err)
				}
				bytes += st.Bytes
				segs += st.Segments
			}
			b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/save")
			b.ReportMetric(float64(bytes)/float64(b.N), "bytes-written/save")
			b.ReportMetric(float64(segs)/float64(b.N), "segments/save")
			b.ReportMetric(float64(first.Bytes), "first-save-bytes")
		})
	}
}

// BenchmarkLoadDir loads the full hour from a snapshot directory, as the agent does at start.
func BenchmarkLoadDir(b *testing.B) {
	h := newBenchHour()
	dir := b.TempDir()
	if _, err := NewSaver(dir, h.s).Save(); err != nil {
		b.Fatal(err)
	}
	now := func() time.Time { return time.UnixMilli(h.ts) }
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cputime.Process()
	for range b.N {
		s, _, err := LoadDir(dir, "", Options{Now: now})
		if err != nil {
			b.Fatal(err)
		}
		if s.Stats().Series != benchSeries {
			b.Fatalf("loaded %+v", s.Stats())
		}
	}
	reportCPU(b, cpu, b.N, "cpu-ns/load")
}
