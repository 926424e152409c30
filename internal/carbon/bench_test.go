package carbon

import (
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/series"
	"github.com/cantal-go/cantal/internal/testsupport/cputime"
)

// histSource is a Source over a history.Store, as the agent's (which walks the registry's view
// instead of parsing keys).
type histSource struct {
	h      *history.Store
	labels []series.Labels
	kinds  []series.Kind
	pts    []history.Point
}

func (s *histSource) Span() (int64, int64) {
	st := s.h.Stats()
	return st.OldestMs, st.LatestMs
}

func (s *histSource) Points(from, to int64, fn func(series.Labels, series.Kind, []history.Point) bool) {
	for id := range s.labels {
		s.pts = s.pts[:0]
		s.h.Range(history.ID(id), from, to, func(ts int64, bits uint64) bool {
			s.pts = append(s.pts, history.Point{TS: ts, Bits: bits})
			return true
		})
		if len(s.pts) > 0 && !fn(s.labels[id], s.kinds[id], s.pts) {
			return
		}
	}
}

// benchHistory holds n series (process-like: metric, pid, process) over scans 2 s apart.
func benchHistory(b *testing.B, n, scans int) *histSource {
	b.Helper()
	h := history.New(history.Options{Retention: time.Hour, Interval: 2 * time.Second})
	src := &histSource{h: h}
	for i := range n {
		l := series.Labels{"metric": "process.cpu.user_ms", "pid": fmt.Sprint(1000 + i), "process": "worker"}
		id, err := h.Series(l.Key(), series.Counter)
		if err != nil || int(id) != i {
			b.Fatalf("Series = %d, %v", id, err)
		}
		src.labels, src.kinds = append(src.labels, l), append(src.kinds, series.Counter)
	}
	for j := range scans {
		h.Begin(1_700_000_000_000 + int64(j)*2000)
		for i := range n {
			h.Add(history.ID(i), uint64(i*j*10))
		}
		h.Commit()
	}
	return src
}

// BenchmarkResend is the CPU time of a resend round (process CPU time, not wall time), per
// point sent: 1000 series × 30 scans (a
// minute of backlog), read from the compressed history and formatted; side by side with
// BenchmarkLatest, the cost per point of formatting the latest values only (the output before
// it read history).
func BenchmarkResend(b *testing.B) {
	src := benchHistory(b, 1000, 30)
	oldest, newest := src.Span()
	c := &Client{Prefix: "node1."}
	var buf []byte
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cputime.Process()
	for range b.N {
		buf = c.appendWindow(buf[:0], src, oldest, newest)
	}
	cpu := cputime.Process() - cpu0
	b.StopTimer()
	points := 1000 * 30
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*points), "cpu-ns/point")
	b.ReportMetric(float64(len(buf))/float64(points), "bytes/point")
	io.Discard.Write(buf)
}

func BenchmarkLatest(b *testing.B) {
	samples := make([]series.Sample, 1000)
	for i := range samples {
		samples[i] = series.Sample{Labels: series.Labels{"metric": "process.cpu.user_ms", "pid": fmt.Sprint(1000 + i), "process": "worker"},
			Kind: series.Counter, Bits: uint64(i * 290), TS: 1_700_000_058_000}
	}
	c := &Client{Prefix: "node1."}
	var buf []byte
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cputime.Process()
	for range b.N {
		buf = c.AppendLines(buf[:0], samples)
	}
	cpu := cputime.Process() - cpu0
	b.StopTimer()
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*len(samples)), "cpu-ns/point")
	b.ReportMetric(float64(len(buf))/float64(len(samples)), "bytes/point")
}
