package ingest

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	commonv1 "go.opentelemetry.io/proto/otlp/common/v1"
	metricsv1 "go.opentelemetry.io/proto/otlp/metrics/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/cantal-go/cantal/internal/series"
	"github.com/cantal-go/cantal/internal/testsupport/cputime"
)

// benchSeries is the number of series each request of BenchmarkPushPaths updates.
const benchSeries = 2000

// pushBodies returns the same benchSeries gauge points (host, cpu labels) as a /write body,
// an OTLP protobuf body and an OTLP/JSON body.
func pushBodies(tsNs int64) (lp, pb, js []byte) {
	var b bytes.Buffer
	var dps []*metricsv1.NumberDataPoint
	for i := range benchSeries {
		v := float64(i) + 0.5
		fmt.Fprintf(&b, "cpu,host=node%d,cpu=cpu%d usage=%g %d\n", i%100, i/100, v, tsNs)
		dps = append(dps, &metricsv1.NumberDataPoint{TimeUnixNano: uint64(tsNs),
			Attributes: []*commonv1.KeyValue{strAttr("host", fmt.Sprintf("node%d", i%100)), strAttr("cpu", fmt.Sprintf("cpu%d", i/100))},
			Value:      &metricsv1.NumberDataPoint_AsDouble{AsDouble: v}})
	}
	md := &metricsv1.MetricsData{ResourceMetrics: []*metricsv1.ResourceMetrics{{ScopeMetrics: []*metricsv1.ScopeMetrics{{
		Metrics: []*metricsv1.Metric{{Name: "cpu.usage", Data: &metricsv1.Metric_Gauge{Gauge: &metricsv1.Gauge{DataPoints: dps}}}}}}}}}
	pb, _ = proto.Marshal(md)
	js, _ = protojson.Marshal(md)
	return b.Bytes(), pb, js
}

// BenchmarkPushPaths: the same benchSeries points per request through /write (line protocol),
// POST /v1/metrics with protobuf and with OTLP/JSON, side by side, each followed by the scan
// that stores them (Collect). Reports wall and CPU (getrusage) ns per point and body bytes per
// point.
func BenchmarkPushPaths(b *testing.B) {
	now := time.Unix(1700000000, 0)
	lp, pb, js := pushBodies(now.UnixNano())
	for _, c := range []struct {
		name, path, ct string
		body           []byte
		otlp           bool
	}{
		{"write", "/write", "text/plain", lp, false},
		{"otlp-protobuf", "/v1/metrics", "application/x-protobuf", pb, true},
		{"otlp-json", "/v1/metrics", "application/json", js, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			p := New(Config{Now: func() time.Time { return now }})
			h := p.WriteHandler()
			if c.otlp {
				h = p.OTLPHandler()
			}
			var sink series.Discard
			b.ReportAllocs()
			cpu0 := cputime.Process()
			for b.Loop() {
				r := httptest.NewRequest(http.MethodPost, c.path, bytes.NewReader(c.body))
				r.Header.Set("Content-Type", c.ct)
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				if w.Code/100 != 2 || c.otlp && w.Body.Len() > 2 && strings.Contains(w.Body.String(), "rejected") {
					b.Fatal(w.Code, w.Body)
				}
				p.Collect(b.Context(), &sink)
			}
			n := float64(b.N * benchSeries)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/point")
			b.ReportMetric(float64((cputime.Process()-cpu0).Nanoseconds())/n, "cpu-ns/point")
			b.ReportMetric(float64(len(c.body))/benchSeries, "B/point")
		})
	}
}

// BenchmarkMeasureOTLP is the cost of the bounded-decoding walk (N3) beside the decoding it
// guards, for the same benchSeries points in protobuf and OTLP/JSON.
func BenchmarkMeasureOTLP(b *testing.B) {
	_, pb, js := pushBodies(time.Unix(1700000000, 0).UnixNano())
	for _, c := range []struct {
		name   string
		body   []byte
		asJSON bool
	}{{"protobuf", pb, false}, {"json", js, true}} {
		b.Run(c.name+"/measure", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(c.body)))
			for b.Loop() {
				if _, err := MeasureOTLP(c.body, c.asJSON, 1<<18, 32<<20); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"/decode", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(c.body)))
			for b.Loop() {
				if _, err := DecodeOTLP(c.body, c.asJSON); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
