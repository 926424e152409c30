package ingest

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	commonv1 "go.opentelemetry.io/proto/otlp/common/v1"
	metricsv1 "go.opentelemetry.io/proto/otlp/metrics/v1"
	resourcev1 "go.opentelemetry.io/proto/otlp/resource/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/cantal-go/cantal/internal/series"
)

func strAttr(k, v string) *commonv1.KeyValue {
	return &commonv1.KeyValue{Key: k, Value: &commonv1.AnyValue{Value: &commonv1.AnyValue_StringValue{StringValue: v}}}
}

const (
	cumulative = metricsv1.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE
	deltaTemp  = metricsv1.AggregationTemporality_AGGREGATION_TEMPORALITY_DELTA
)

// otlpRequest makes a request of one resource (service svc) with the metrics ms, at tsNs.
func otlpRequest(ms ...*metricsv1.Metric) *metricsv1.MetricsData {
	return &metricsv1.MetricsData{ResourceMetrics: []*metricsv1.ResourceMetrics{{
		Resource: &resourcev1.Resource{Attributes: []*commonv1.KeyValue{
			strAttr("service.name", "svc"), strAttr("service.instance.id", "i-1"),
			strAttr("telemetry.sdk.language", "go"), strAttr("host.name", "h1"),
		}},
		ScopeMetrics: []*metricsv1.ScopeMetrics{{Metrics: ms}},
	}}}
}

func intSum(name string, temp metricsv1.AggregationTemporality, mono bool, tsNs uint64, v int64, attrs ...*commonv1.KeyValue) *metricsv1.Metric {
	return &metricsv1.Metric{Name: name, Data: &metricsv1.Metric_Sum{Sum: &metricsv1.Sum{
		AggregationTemporality: temp, IsMonotonic: mono,
		DataPoints: []*metricsv1.NumberDataPoint{{TimeUnixNano: tsNs, Attributes: attrs, Value: &metricsv1.NumberDataPoint_AsInt{AsInt: v}}},
	}}}
}

func gauge(name string, tsNs uint64, v float64) *metricsv1.Metric {
	return &metricsv1.Metric{Name: name, Data: &metricsv1.Metric_Gauge{Gauge: &metricsv1.Gauge{
		DataPoints: []*metricsv1.NumberDataPoint{{TimeUnixNano: tsNs, Value: &metricsv1.NumberDataPoint_AsDouble{AsDouble: v}}},
	}}}
}

// latencyHist is a histogram point of the values 1..100 repeated k times (cumulative: k rounds).
func latencyHist(tsNs uint64, k uint64, temp metricsv1.AggregationTemporality) *metricsv1.Metric {
	mn, mx := 1.0, 100.0
	return &metricsv1.Metric{Name: "lat", Data: &metricsv1.Metric_Histogram{Histogram: &metricsv1.Histogram{
		AggregationTemporality: temp,
		DataPoints: []*metricsv1.HistogramDataPoint{{TimeUnixNano: tsNs, Count: 100 * k, Sum: ptr(5050 * float64(k)), Min: &mn, Max: &mx,
			ExplicitBounds: []float64{10, 25, 50, 75, 100}, BucketCounts: []uint64{10 * k, 15 * k, 25 * k, 25 * k, 25 * k, 0}}},
	}}}
}

func postOTLP(t *testing.T, h http.Handler, md *metricsv1.MetricsData, asJSON, gz bool) *httptest.ResponseRecorder {
	t.Helper()
	var body []byte
	var err error
	ct := "application/x-protobuf"
	if asJSON {
		ct = "application/json"
		body, err = protojson.Marshal(md)
	} else {
		body, err = proto.Marshal(md)
	}
	if err != nil {
		t.Fatal(err)
	}
	hdr := map[string]string{"Content-Type": ct}
	if gz {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		zw.Write(body)
		zw.Close()
		body = b.Bytes()
		hdr["Content-Encoding"] = "gzip"
	}
	r := httptest.NewRequest(http.MethodPost, "/v1/metrics", bytes.NewReader(body))
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// partialSuccess decodes an ExportMetricsServiceResponse (protobuf) by its field numbers.
func partialSuccess(t *testing.T, b []byte) (rejected int64, msg string) {
	t.Helper()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || num != 1 || typ != protowire.BytesType {
			t.Fatalf("response %x: not an ExportMetricsServiceResponse", b)
		}
		ps, m := protowire.ConsumeBytes(b[n:])
		b = b[n+m:]
		for len(ps) > 0 {
			num, typ, n := protowire.ConsumeTag(ps)
			ps = ps[n:]
			switch {
			case num == 1 && typ == protowire.VarintType:
				v, m := protowire.ConsumeVarint(ps)
				rejected, ps = int64(v), ps[m:]
			case num == 2 && typ == protowire.BytesType:
				v, m := protowire.ConsumeString(ps)
				msg, ps = v, ps[m:]
			default:
				t.Fatalf("partial_success field %d type %d", num, typ)
			}
		}
	}
	return rejected, msg
}

func TestOTLPMapping(t *testing.T) {
	for _, asJSON := range []bool{false, true} {
		t.Run(map[bool]string{false: "protobuf", true: "json"}[asJSON], func(t *testing.T) {
			a := newKeepRig(t)
			h := a.push.OTLPHandler()
			a.scan()
			ns := func() uint64 { return uint64(a.clk.t.UnixNano()) + 500e6 } // between two scans
			base := series.Labels{"appname": "svc", "instance": "i-1", "host.name": "h1"}
			lab := func(metric string, extra ...string) series.Labels {
				l := pl(base.Clone())
				l["metric"] = metric
				for i := 0; i < len(extra); i += 2 {
					l[extra[i]] = extra[i+1]
				}
				return l
			}
			md := otlpRequest(
				intSum("reqs", cumulative, true, ns(), 10, strAttr("route", "/a")),
				intSum("dreqs", deltaTemp, true, ns(), 4),
				intSum("inflight", cumulative, false, ns(), -3),
				gauge("temp", ns(), 22.5),
				latencyHist(ns(), 1, cumulative),
				intSum("bad", metricsv1.AggregationTemporality_AGGREGATION_TEMPORALITY_UNSPECIFIED, true, ns(), 1),
				intSum("reserved", cumulative, true, ns(), 1, strAttr("metric", "x")),
			)
			w := postOTLP(t, h, md, asJSON, !asJSON)
			if w.Code != http.StatusOK {
				t.Fatalf("POST = %d %s", w.Code, w.Body)
			}
			var rejected int64
			var msg string
			if asJSON {
				var resp struct {
					PartialSuccess struct {
						RejectedDataPoints int64 `json:"rejectedDataPoints,string"`
						ErrorMessage       string
					}
				}
				if err := jsonUnmarshal(w.Body.Bytes(), &resp); err != nil {
					t.Fatalf("answer %s: %v", w.Body, err)
				}
				rejected, msg = resp.PartialSuccess.RejectedDataPoints, resp.PartialSuccess.ErrorMessage
			} else {
				rejected, msg = partialSuccess(t, w.Body.Bytes())
			}
			if rejected != 2 || !strings.Contains(msg, "unspecified aggregation temporality") || !strings.Contains(msg, `"metric" is reserved`) {
				t.Errorf("partial success %d %q; want 2 rejected with their reasons", rejected, msg)
			}
			a.scan()
			t1 := a.ts
			// A second export: cumulative values grow, the delta sum adds up, the histogram's
			// new observations are all in (75, 100].
			md2 := otlpRequest(
				intSum("reqs", cumulative, true, ns(), 15, strAttr("route", "/a")),
				intSum("dreqs", deltaTemp, true, ns(), 6),
				&metricsv1.Metric{Name: "lat", Data: &metricsv1.Metric_Histogram{Histogram: &metricsv1.Histogram{
					AggregationTemporality: cumulative,
					DataPoints: []*metricsv1.HistogramDataPoint{{TimeUnixNano: ns(), Count: 110, Sum: ptr(5050.0 + 900),
						ExplicitBounds: []float64{10, 25, 50, 75, 100}, BucketCounts: []uint64{10, 15, 25, 25, 35, 0}}},
				}}},
			)
			if w := postOTLP(t, h, md2, asJSON, false); w.Code != http.StatusOK || w.Body.Len() > 2 {
				t.Fatalf("POST = %d %s; want 200 and an empty answer", w.Code, w.Body)
			}
			a.scan()
			t2 := a.ts
			a.scan()
			checkSeries := func(l series.Labels, kind series.Kind, want ...float64) {
				t.Helper()
				pts := a.points(l)
				var got []float64
				for _, p := range pts {
					got = append(got, series.ToFloat(kind, p.Bits))
				}
				if len(got) != len(want) {
					t.Errorf("%v: %v; want %v", l, got, want)
					return
				}
				for i := range got {
					if math.Abs(got[i]-want[i]) > 1e-9 || pts[i].TS != []int64{t1, t2}[i] {
						t.Errorf("%v: %v at %v; want %v at %d, %d", l, got, pts, want, t1, t2)
						return
					}
				}
			}
			checkSeries(lab("reqs", "route", "/a"), series.Counter, 10, 15)
			checkSeries(lab("dreqs"), series.Counter, 4, 10)
			checkSeries(lab("inflight"), series.Level, -3)
			checkSeries(lab("temp"), series.Float, 22.5)
			checkSeries(lab("lat.count"), series.Counter, 100, 110)
			checkSeries(lab("lat.sum"), series.Float, 5050, 5950)
			checkSeries(lab("lat.p50"), series.Float, 50, 87.5)
			checkSeries(lab("lat.p90"), series.Float, 90, 97.5)
			checkSeries(lab("lat.p99"), series.Float, 99, 99.75)
			id, kind, ok := a.hist.Lookup(lab("reqs", "route", "/a").Key())
			if !ok || kind != series.Counter {
				t.Errorf("reqs: %v %v; want a counter", id, kind)
			}
		})
	}
}

func TestBucketQuantile(t *testing.T) {
	// Exponential, scale 0: (1,2] has 2, (2,4] has 2; the zero bucket 1.
	dp := &metricsv1.ExponentialHistogramDataPoint{Scale: 0, ZeroCount: 1,
		Positive: &metricsv1.ExponentialHistogramDataPoint_Buckets{Offset: 0, BucketCounts: []uint64{2, 2}}}
	bs, err := exponentialBuckets(dp)
	if err != nil {
		t.Fatal(err)
	}
	want := []bucket{{0, 0, 1}, {1, 2, 2}, {2, 4, 2}}
	if len(bs) != len(want) {
		t.Fatalf("buckets %v; want %v", bs, want)
	}
	for i := range bs {
		if bs[i] != want[i] {
			t.Errorf("bucket %d = %v; want %v", i, bs[i], want[i])
		}
	}
	inf := math.Inf(1)
	for _, c := range []struct {
		q, want float64
	}{{0.1, 0}, {0.2, 0}, {0.5, 1.75}, {0.6, 2}, {0.8, 3}, {1, 4}} {
		if v := bucketQuantile(bs, 5, c.q, -inf, inf); math.Abs(v-c.want) > 1e-9 {
			t.Errorf("q%v = %v; want %v", c.q, v, c.want)
		}
	}
	// Open ends without min and max: 0 below a positive first bound, the last bound above.
	ex := []bucket{{math.Inf(-1), 10, 4}, {10, math.Inf(1), 4}}
	if v := bucketQuantile(ex, 8, 0.25, -inf, inf); v != 5 {
		t.Errorf("q0.25 = %v; want 5", v)
	}
	if v := bucketQuantile(ex, 8, 0.99, -inf, inf); v != 10 {
		t.Errorf("q0.99 = %v; want 10 (the last bound)", v)
	}
	if v := bucketQuantile(ex, 8, 0.75, -inf, 30); v != 20 {
		t.Errorf("q0.75 with max 30 = %v; want 20", v)
	}
}

func TestOTLPHandlerErrors(t *testing.T) {
	p, _ := newTestPush(Config{MaxBodyBytes: 1000})
	h := p.OTLPHandler()
	do := func(method, ct, enc string, body []byte) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, "/v1/metrics", bytes.NewReader(body))
		r.Header.Set("Content-Type", ct)
		if enc != "" {
			r.Header.Set("Content-Encoding", enc)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	var bomb bytes.Buffer
	zw := gzip.NewWriter(&bomb)
	zw.Write(make([]byte, 1<<20))
	zw.Close()
	for _, c := range []struct {
		name, method, ct, enc string
		body                  []byte
		code                  int
	}{
		{"GET", http.MethodGet, "application/x-protobuf", "", nil, 405},
		{"text", http.MethodPost, "text/plain", "", []byte("x"), 415},
		{"brotli", http.MethodPost, "application/x-protobuf", "br", []byte("x"), 415},
		{"garbage", http.MethodPost, "application/x-protobuf", "", []byte{0xff, 0xff, 0xff}, 400},
		{"bad json", http.MethodPost, "application/json", "", []byte(`{"resourceMetrics":[{`), 400},
		{"large", http.MethodPost, "application/x-protobuf", "", make([]byte, 2000), 413},
		{"gzip bomb", http.MethodPost, "application/x-protobuf", "gzip", bomb.Bytes(), 413},
		{"empty", http.MethodPost, "application/x-protobuf", "", nil, 200},
	} {
		if w := do(c.method, c.ct, c.enc, c.body); w.Code != c.code {
			t.Errorf("%s: %d %q; want %d", c.name, w.Code, w.Body, c.code)
		}
	}
}

func ptr[T any](v T) *T { return &v }

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// FuzzOTLP decodes arbitrary bodies as OTLP metrics (protobuf or JSON) and applies what decodes:
// no panic, the budgets hold (checkPush), every data point is accounted for once, and the
// answer is a well-formed ExportMetricsServiceResponse.
func FuzzOTLP(f *testing.F) {
	ts := uint64(1700000000e9)
	for _, md := range []*metricsv1.MetricsData{
		otlpRequest(intSum("reqs", cumulative, true, ts, 10, strAttr("route", "/a")), gauge("temp", ts, 22.5), latencyHist(ts, 1, cumulative)),
		otlpRequest(intSum("d", deltaTemp, false, 0, -4), latencyHist(ts, 2, deltaTemp)),
		otlpRequest(&metricsv1.Metric{Name: "e", Data: &metricsv1.Metric_ExponentialHistogram{ExponentialHistogram: &metricsv1.ExponentialHistogram{
			AggregationTemporality: deltaTemp,
			DataPoints: []*metricsv1.ExponentialHistogramDataPoint{{Count: 5, Scale: 3, ZeroCount: 1,
				Positive: &metricsv1.ExponentialHistogramDataPoint_Buckets{Offset: -2, BucketCounts: []uint64{1, 2}},
				Negative: &metricsv1.ExponentialHistogramDataPoint_Buckets{Offset: 1, BucketCounts: []uint64{1}}}},
		}}}, &metricsv1.Metric{Name: "s", Data: &metricsv1.Metric_Summary{Summary: &metricsv1.Summary{
			DataPoints: []*metricsv1.SummaryDataPoint{{Count: 3, Sum: 6, QuantileValues: []*metricsv1.SummaryDataPoint_ValueAtQuantile{{Quantile: 0.5, Value: 2}}}},
		}}}),
	} {
		b, _ := proto.Marshal(md)
		f.Add(b, false)
		j, _ := protojson.Marshal(md)
		f.Add(j, true)
	}
	f.Add([]byte(`{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"name":"x","gauge":{"dataPoints":[{"asInt":"3"}]}}]}]}]}`), true)
	f.Add(repeatField(100, 1, nil), false)
	f.Add([]byte(`{"resourceMetrics":[{},{},{"scopeMetrics":[{"metrics":[{"histogram":{"dataPoints":[{"bucketCounts":[1,"2"]}]}}]}]}]}`), true)
	f.Fuzz(func(t *testing.T, body []byte, asJSON bool) {
		p, _ := newTestPush(Config{MaxSeries: 100, MaxBytes: 64 << 10, MaxLabels: 8, MaxOTLPMessages: 64, MaxBodyBytes: 1 << 16})
		// With the size caps in place (N3): the handler answers within its codes, and what the
		// walk lets through decodes to no more sub-messages than it counted.
		ct := "application/x-protobuf"
		if asJSON {
			ct = "application/json"
		}
		r := httptest.NewRequest(http.MethodPost, "/v1/metrics", bytes.NewReader(body))
		r.Header.Set("Content-Type", ct)
		w := httptest.NewRecorder()
		p.OTLPHandler().ServeHTTP(w, r)
		if w.Code != 200 && w.Code != 400 && w.Code != 413 {
			t.Fatalf("POST = %d %q", w.Code, w.Body)
		}
		checkPush(t, p)
		cost, merr := MeasureOTLP(body, asJSON, 64, 1<<16)
		md, err := DecodeOTLP(body, asJSON)
		if merr == nil && err == nil {
			if n := countMessages(md.ProtoReflect()); n > cost.Messages {
				t.Fatalf("decoded %d sub-messages; the walk counted %d", n, cost.Messages)
			}
		}
		if err != nil {
			if len(err.Error()) > 300 {
				t.Errorf("error of %d bytes", len(err.Error()))
			}
			return
		}
		n := 0
		for _, rm := range md.GetResourceMetrics() {
			for _, sm := range rm.GetScopeMetrics() {
				for _, m := range sm.GetMetrics() {
					n += countPoints(m)
				}
			}
		}
		res := p.ApplyOTLP(md)
		if res.Accepted+res.Rejected > n {
			t.Errorf("%d accepted + %d rejected of %d data points", res.Accepted, res.Rejected, n)
		}
		rej, _ := partialSuccess(t, appendExportResponse(nil, false, res.Rejected, res.Message()))
		if rej != int64(res.Rejected) {
			t.Errorf("answer says %d rejected; want %d", rej, res.Rejected)
		}
		checkPush(t, p)
	})
}

// A data point with a flood of attributes is refused at the label limit, early.
func TestOTLPManyAttributes(t *testing.T) {
	p, _ := newTestPush(Config{})
	var attrs []*commonv1.KeyValue
	for i := range 200000 {
		attrs = append(attrs, strAttr(fmt.Sprintf("k%d", i), "v"))
	}
	res := p.ApplyOTLP(otlpRequest(intSum("x", cumulative, true, 0, 1, attrs...)))
	if res.Rejected != 1 || !strings.Contains(res.Message(), "exceed the limit") {
		t.Errorf("ApplyOTLP = %+v; want the point refused for its labels", res)
	}
}
