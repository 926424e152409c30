package export

import (
	"math"
	"strconv"
	"testing"

	"github.com/cantal-go/cantal/internal/series"
)

// benchSamples returns n samples shaped like an agent's: 50 metric names over n/50 processes,
// three labels each, a mix of counters, levels and floats.
func benchSamples(n int) []series.Sample {
	s := make([]series.Sample, n)
	for i := range s {
		pid := strconv.Itoa(i / 50)
		l := series.Labels{"metric": "app.metric" + strconv.Itoa(i%50) + ".value", "pid": pid, "process": "proc" + strconv.Itoa(i/50%97), "cgroup": "/system.slice/unit" + pid + ".service"}
		switch i % 3 {
		case 0:
			s[i] = series.Sample{Labels: l, Kind: series.Counter, Bits: uint64(i) * 1000, TS: 1700000000000}
		case 1:
			s[i] = series.Sample{Labels: l, Kind: series.Level, Bits: uint64(i), TS: 1700000000000}
		default:
			s[i] = series.Sample{Labels: l, Kind: series.Float, Bits: math.Float64bits(float64(i) / 7), TS: 1700000000000}
		}
	}
	return s
}

// BenchmarkPromText100k encodes 100k series in the text format (the budget: 100 ms).
func BenchmarkPromText100k(b *testing.B) {
	samples := benchSamples(100000)
	var e Prom
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf = e.Append(buf[:0], samples, FormatText)
	}
	b.SetBytes(int64(len(buf)))
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/100k")
}

// BenchmarkPromOpenMetrics100k encodes 100k series as OpenMetrics.
func BenchmarkPromOpenMetrics100k(b *testing.B) {
	samples := benchSamples(100000)
	var e Prom
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf = e.Append(buf[:0], samples, FormatOpenMetrics)
	}
	b.SetBytes(int64(len(buf)))
}

// BenchmarkInflux100k encodes 100k series as line protocol.
func BenchmarkInflux100k(b *testing.B) {
	samples := benchSamples(100000)
	var e Influx
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		var err error
		buf, err = e.Append(buf[:0], samples)
		if err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(len(buf)))
}
