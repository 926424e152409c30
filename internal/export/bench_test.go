package export

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
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

// BenchmarkPromHandler100k serves 100k series through the handler: with no Visible, with a
// Visible that returns nil (a caller who sees every process: the agent's hot path), and with a
// filter hiding half the processes.
func BenchmarkPromHandler100k(b *testing.B) {
	samples := benchSamples(100000)
	source := func() []series.Sample { return samples }
	half := func(l series.Labels) bool { return l["pid"] == "" || l["pid"][len(l["pid"])-1]%2 == 0 }
	for _, bc := range []struct {
		name string
		vis  func(context.Context) func(series.Labels) bool
	}{
		{"none", nil},
		{"all", func(context.Context) func(series.Labels) bool { return nil }},
		{"half", func(context.Context) func(series.Labels) bool { return half }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			h := PrometheusHandler(source, Options{Visible: bc.vis})
			r := httptest.NewRequest("GET", "/metrics", nil)
			b.ReportAllocs()
			for b.Loop() {
				h.ServeHTTP(discard{}, r)
			}
		})
	}
}

type discard struct{}

func (discard) Header() http.Header         { return http.Header{} }
func (discard) Write(b []byte) (int, error) { return len(b), nil }
func (discard) WriteHeader(int)             {}
