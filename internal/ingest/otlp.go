package ingest

import (
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"

	commonv1 "go.opentelemetry.io/proto/otlp/common/v1"
	metricsv1 "go.opentelemetry.io/proto/otlp/metrics/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/cantal-go/cantal/internal/series"
)

// OTLP metrics ingest (OTLP/HTTP, POST /v1/metrics).
//
// The request is an ExportMetricsServiceRequest in protobuf (Content-Type
// application/x-protobuf) or in the OTLP/JSON encoding (application/json), optionally gzip
// compressed. It is decoded with the OpenTelemetry protobuf module
// (go.opentelemetry.io/proto/otlp) as metrics/v1.MetricsData, whose wire and JSON forms are
// those of the request (field 1, resource_metrics, in both); the collector/metrics/v1 package,
// which holds the request type, also holds the gRPC service and gateway and would link gRPC
// into the agent for one message. The answer, ExportMetricsServiceResponse, is two fields
// written with protowire (or JSON); tests decode it with the collector package's own type.
//
// Mapping (each series labelled as /write's are, source="push" included):
//   - labels: the resource's attributes, service.name as "appname" and service.instance.id as
//     "instance" (telemetry.sdk.* left out: the same on every series of an SDK, they would
//     only fill the label budget), then the data point's attributes (a data point's attribute
//     wins over a resource's of the same name); "metric" is the metric's name. Non-string
//     values are written as text (arrays and maps as OTLP/JSON);
//   - monotonic sums: counters (integer sums; a double sum, which the agent's integer
//     counters cannot hold, is a float series); non-monotonic sums and gauges: levels
//     (integers) or floats. A delta sum is added to a running total kept with the series, so
//     it is stored as the cumulative value (starting from 0 when the series is first seen or
//     after it expired, which rates read as a counter reset);
//   - histograms and exponential histograms: <name>.count (counter) and <name>.sum (float),
//     cumulative as sums are, and <name>.p50, .p90, .p99 (floats) estimated from the buckets
//     of the interval: a cumulative point's buckets minus the previous point's (when the
//     buckets are the same and no count went down; otherwise the point's own), a delta point's
//     own. The rank q×count is found in the cumulative bucket counts and interpolated linearly
//     within its bucket; the open ends of the first and last buckets are the point's min and
//     max when it has them (else 0 or the first bound, and the last bound), and the estimate
//     is kept within [min, max]. An interval without observations has no quantile points.
//     Exponential buckets are turned into their bounds (base = 2^(2^-scale)), the zero
//     bucket spanning ±zero_threshold. At most maxOTLPBuckets buckets per point;
//   - summaries: <name>.count, <name>.sum and <name>.p<100q> from their quantile values;
//   - each data point at its own time_unix_nano (0: the time it arrived), kept as sent like
//     /write's points; a point flagged "no recorded value" is skipped (a gap).
//
// A data point that cannot be stored (over a budget or a label limit, a kind conflict, a time
// too old or too far ahead, a sum of unspecified temporality) is counted in the answer's
// partial_success.rejected_data_points with the reasons of the first ones in error_message;
// the others are stored.

// maxOTLPBuckets bounds the buckets of one histogram data point; maxSummaryQuantiles the
// quantiles of a summary point kept (the rest are ignored).
const (
	maxOTLPBuckets      = 4096
	maxSummaryQuantiles = 16
)

// otlpQuantiles are the quantiles estimated for histograms.
var otlpQuantiles = [...]struct {
	q    float64
	name string
}{{0.5, "p50"}, {0.9, "p90"}, {0.99, "p99"}}

// otlpState is what an OTLP series keeps between data points: a delta sum's running total and,
// on a histogram's count series, the previous point's buckets.
type otlpState struct {
	total     uint64 // bits of the running total of a delta sum
	hist      []bucket
	histBytes int64 // charged to the byte budget
}

// bucket is one histogram bucket: n observations in (lo, hi].
type bucket struct {
	lo, hi float64
	n      uint64
}

// DecodeOTLP decodes an OTLP/HTTP metrics request body: protobuf, or OTLP/JSON when json is set.
func DecodeOTLP(body []byte, json bool) (*metricsv1.MetricsData, error) {
	md := &metricsv1.MetricsData{}
	var err error
	if json {
		err = protojson.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(body, md)
	} else {
		err = proto.Unmarshal(body, md)
	}
	if err != nil {
		return nil, fmt.Errorf("decode OTLP metrics: %s", cutString(err.Error(), maxReason))
	}
	return md, nil
}

// OTLPHandler returns the OTLP/HTTP metrics endpoint (mount it on POST /v1/metrics). Answers:
// 200 with an ExportMetricsServiceResponse in the request's encoding (partial_success set when
// data points were refused); 400 with a google.rpc.Status for a body that does not decode; 413
// for a body over Config.MaxBodyBytes (compressed or not), one whose decoded form would hold
// more than Config.MaxOTLPMessages sub-messages or Config.MaxOTLPPoints data points or take
// more than Config.MaxBodyBytes of memory (see otlpcost.go), with the limit crossed in the
// message; 503 with Retry-After when the decompressed or decoded body does not fit in what is
// left of Config.Bodies; 415 for another Content-Type or
// Content-Encoding (a request without Content-Type is taken as protobuf, OTLP's default); 405
// for a method other than POST.
func (p *Push) OTLPHandler() http.Handler {
	return http.HandlerFunc(p.serveOTLP)
}

func (p *Push) serveOTLP(w http.ResponseWriter, r *http.Request) {
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	asJSON := ct == "application/json"
	fail := func(code int, msg string) {
		writeStatus(w, code, asJSON, msg)
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		fail(http.StatusMethodNotAllowed, "method "+r.Method+" not allowed: use POST")
		return
	}
	if ct != "application/x-protobuf" && ct != "application/protobuf" && ct != "" && !asJSON { // none: protobuf
		fail(http.StatusUnsupportedMediaType, fmt.Sprintf("unsupported Content-Type %s (want application/x-protobuf or application/json)", quote(ct)))
		return
	}
	limit := p.cfg.MaxBodyBytes
	tooLarge := func(msg string) {
		p.mu.Lock()
		p.stats.OTLPTooLarge++
		p.mu.Unlock()
		fail(http.StatusRequestEntityTooLarge, msg)
	}
	busy := func() {
		w.Header().Set("Retry-After", "1")
		fail(http.StatusServiceUnavailable, "busy: too many request bodies in flight; retry")
	}
	bodyTooLarge := fmt.Sprintf("body exceeds the limit of %d bytes", limit)
	if r.ContentLength > limit {
		tooLarge(bodyTooLarge)
		return
	}
	var src io.Reader = http.MaxBytesReader(w, r.Body, limit)
	switch enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
	case "gzip":
		zr, err := gzip.NewReader(src)
		if err != nil {
			if isTooLarge(err) {
				tooLarge(bodyTooLarge)
				return
			}
			fail(http.StatusBadRequest, "invalid gzip body: "+cutString(err.Error(), maxReason))
			return
		}
		defer zr.Close()
		// A gzip bomb costs the limit, not its size, and the decompressed body is taken from
		// the shared body budget as it grows.
		br := &budgetReader{r: &limitReader{r: zr, left: limit}, b: p.cfg.Bodies}
		defer br.release()
		src = br
	default:
		fail(http.StatusUnsupportedMediaType, fmt.Sprintf("unsupported Content-Encoding %s (want gzip or none)", quote(enc)))
		return
	}
	body, err := io.ReadAll(src)
	if err != nil {
		switch {
		case isTooLarge(err):
			tooLarge(bodyTooLarge)
		case errors.Is(err, errBudget):
			busy()
		default:
			fail(http.StatusBadRequest, "read body: "+cutString(err.Error(), maxReason))
		}
		return
	}
	// Bounded decoding (N3): the body's decoded form is measured before it is made, refused
	// over the limits and taken from the body budget while it is held.
	cost, err := MeasureOTLP(body, asJSON, p.cfg.MaxOTLPMessages, limit)
	if err == nil && p.cfg.Bodies != nil {
		if !p.cfg.Bodies.TryAcquire(cost.Bytes) {
			busy()
			return
		}
		defer p.cfg.Bodies.Release(cost.Bytes)
	}
	var md *metricsv1.MetricsData
	if err == nil {
		md, err = DecodeOTLP(body, asJSON)
	}
	body = nil
	if err == nil {
		if n := requestPoints(md); n > p.cfg.MaxOTLPPoints {
			err = fmt.Errorf("%w: %d data points exceed the limit of %d per request", errOTLPTooLarge, n, p.cfg.MaxOTLPPoints)
		}
	}
	if errors.Is(err, errOTLPTooLarge) {
		tooLarge(err.Error())
		return
	}
	if err != nil {
		p.mu.Lock()
		p.stats.OTLPRequests++
		p.mu.Unlock()
		fail(http.StatusBadRequest, err.Error())
		return
	}
	res := p.ApplyOTLP(md)
	w.Header().Set("Content-Type", "application/x-protobuf")
	if asJSON {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(appendExportResponse(nil, asJSON, res.Rejected, res.Message()))
}

// OTLPResult is what ApplyOTLP did with a request's data points.
type OTLPResult struct {
	Accepted int // data points stored
	Rejected int // data points refused
	Errors   []string
}

// Message returns the reasons of the first refused data points, for partial_success.
func (r *OTLPResult) Message() string {
	if r.Rejected == 0 {
		return ""
	}
	msg := strings.Join(r.Errors, "; ")
	if r.Rejected > len(r.Errors) {
		msg += fmt.Sprintf("; and %d more", r.Rejected-len(r.Errors))
	}
	return msg
}

func (r *OTLPResult) reject(what string, err error) {
	r.Rejected++
	if len(r.Errors) < maxListedErrors {
		r.Errors = append(r.Errors, what+": "+err.Error())
	}
}

// ApplyOTLP stores the data points of md (see the comment at the top of otlp.go for the
// mapping). Safe for concurrent use.
func (p *Push) ApplyOTLP(md *metricsv1.MetricsData) OTLPResult {
	var res OTLPResult
	req := &writeReq{now: p.cfg.Now().UnixNano(), from: math.MinInt64}
	if p.cfg.BackfillFrom != nil {
		req.from = p.cfg.BackfillFrom()
	}
	var base, tags []kv
	var pts []Point
	for _, rm := range md.GetResourceMetrics() {
		base = base[:0]
		var baseErr error
		for _, a := range rm.GetResource().GetAttributes() {
			k := a.GetKey()
			switch {
			case k == "service.name":
				k = "appname"
			case k == "service.instance.id":
				k = "instance"
			case strings.HasPrefix(k, "telemetry.sdk."):
				continue
			}
			base, baseErr = p.addTag(base, k, a.GetValue(), baseErr)
			if baseErr == nil && len(base)+2 > p.lr.maxLabels { // stop early: attributes are unbounded
				baseErr = p.rules().count(len(base))
			}
		}
		for _, sm := range rm.GetScopeMetrics() {
			for _, m := range sm.GetMetrics() {
				name := m.GetName()
				n := countPoints(m)
				if baseErr != nil {
					for range n {
						res.reject(quote(name), baseErr)
					}
					continue
				}
				if err := p.rules().metric(len(name) + len(".count")); err != nil || name == "" {
					if err == nil {
						err = errors.New("metric without a name")
					}
					for range n {
						res.reject(quote(name), err)
					}
					continue
				}
				p.applyMetric(m, base, &tags, &pts, req, &res)
			}
		}
	}
	p.mu.Lock()
	p.stats.OTLPRequests++
	p.stats.OTLPPoints += uint64(res.Accepted)
	p.stats.OTLPRejected += uint64(res.Rejected)
	p.mu.Unlock()
	return res
}

// requestPoints returns the number of data points of md.
func requestPoints(md *metricsv1.MetricsData) int {
	n := 0
	for _, rm := range md.GetResourceMetrics() {
		for _, sm := range rm.GetScopeMetrics() {
			for _, m := range sm.GetMetrics() {
				n += countPoints(m)
			}
		}
	}
	return n
}

// countPoints returns the number of data points of m.
func countPoints(m *metricsv1.Metric) int {
	switch {
	case m.GetGauge() != nil:
		return len(m.GetGauge().GetDataPoints())
	case m.GetSum() != nil:
		return len(m.GetSum().GetDataPoints())
	case m.GetHistogram() != nil:
		return len(m.GetHistogram().GetDataPoints())
	case m.GetExponentialHistogram() != nil:
		return len(m.GetExponentialHistogram().GetDataPoints())
	case m.GetSummary() != nil:
		return len(m.GetSummary().GetDataPoints())
	}
	return 0
}

// addTag appends the label k=v (v as text) to tags, checking it as a /write tag; the first
// error is kept in err.
func (p *Push) addTag(tags []kv, k string, v *commonv1.AnyValue, err error) ([]kv, error) {
	val := anyText(v)
	if k == "metric" {
		return tags, cmpErr(err, errors.New(`attribute "metric" is reserved for the metric's name`))
	}
	keep, e := tagRule(p.rules(), k, val)
	if e != nil {
		return tags, cmpErr(err, e)
	}
	if keep {
		tags = append(tags, kv{k, val})
	}
	return tags, err
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// anyText returns an attribute value as a label value.
func anyText(v *commonv1.AnyValue) string {
	switch x := v.GetValue().(type) {
	case nil:
		return ""
	case *commonv1.AnyValue_StringValue:
		return x.StringValue
	case *commonv1.AnyValue_BoolValue:
		return strconv.FormatBool(x.BoolValue)
	case *commonv1.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	case *commonv1.AnyValue_DoubleValue:
		return strconv.FormatFloat(x.DoubleValue, 'g', -1, 64)
	}
	b, err := protojson.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}

// labelsOf makes the sorted tags of a data point: base, then attrs (winning over base).
func (p *Push) labelsOf(dst []kv, base []kv, attrs []*commonv1.KeyValue) ([]kv, error) {
	dst = append(dst[:0], base...)
	var err error
	for _, a := range attrs {
		k := a.GetKey()
		dst = slices.DeleteFunc(dst, func(t kv) bool { return t.k == k })
		dst, err = p.addTag(dst, k, a.GetValue(), err)
		if err == nil && len(dst)+2 > p.lr.maxLabels {
			err = p.rules().count(len(dst)) // stop early: a point's attributes are unbounded
		}
		if err != nil {
			return dst, err
		}
	}
	if err != nil {
		return dst, err
	}
	sortTags(dst)
	return dst, p.rules().count(len(dst))
}

// pointTime returns a data point's time in unix ms, or now for 0.
func pointTime(ns uint64, now int64) int64 {
	if ns == 0 || ns > math.MaxInt64 {
		return now / 1e6
	}
	return int64(ns / 1e6)
}

const flagNoValue = uint32(metricsv1.DataPointFlags_DATA_POINT_FLAGS_NO_RECORDED_VALUE_MASK)

// applyMetric stores the data points of one metric.
func (p *Push) applyMetric(m *metricsv1.Metric, base []kv, tags *[]kv, pts *[]Point, req *writeReq, res *OTLPResult) {
	name := m.GetName()
	what := quote(name)
	store := func(points []Point) {
		p.mu.Lock()
		err := p.applyLine(points, req, req.now)
		if err == nil && len(points) > 0 && points[0].hist != nil {
			p.keepHist(points[0])
		}
		var ref errRefused
		if errors.As(err, &ref) {
			p.stats.Refused++
		}
		p.mu.Unlock()
		clear(points)
		if err != nil {
			res.reject(what, err)
			return
		}
		res.Accepted++
	}
	number := func(dps []*metricsv1.NumberDataPoint, monotonic, delta bool) {
		for _, dp := range dps {
			if dp.GetFlags()&flagNoValue != 0 {
				continue
			}
			t, err := p.labelsOf(*tags, base, dp.GetAttributes())
			*tags = t
			if err != nil {
				res.reject(what, err)
				continue
			}
			pt := Point{Metric: name, Tags: slices.Clone(t), TS: pointTime(dp.GetTimeUnixNano(), req.now), acc: delta}
			switch v := dp.GetValue().(type) {
			case *metricsv1.NumberDataPoint_AsInt:
				pt.Kind, pt.Bits = series.Level, uint64(v.AsInt)
				if monotonic {
					if v.AsInt < 0 {
						res.reject(what, fmt.Errorf("negative value %d of a monotonic sum", v.AsInt))
						continue
					}
					pt.Kind = series.Counter
				}
			case *metricsv1.NumberDataPoint_AsDouble:
				pt.Kind, pt.Bits = series.Float, math.Float64bits(v.AsDouble)
			default:
				res.reject(what, errors.New("data point without a value"))
				continue
			}
			*pts = append((*pts)[:0], pt)
			store(*pts)
		}
	}
	switch {
	case m.GetGauge() != nil:
		number(m.GetGauge().GetDataPoints(), false, false)
	case m.GetSum() != nil:
		s := m.GetSum()
		tmp := s.GetAggregationTemporality()
		if tmp == metricsv1.AggregationTemporality_AGGREGATION_TEMPORALITY_UNSPECIFIED {
			for range s.GetDataPoints() {
				res.reject(what, errors.New("sum of unspecified aggregation temporality"))
			}
			return
		}
		number(s.GetDataPoints(), s.GetIsMonotonic(), tmp == metricsv1.AggregationTemporality_AGGREGATION_TEMPORALITY_DELTA)
	case m.GetHistogram() != nil:
		h := m.GetHistogram()
		delta := h.GetAggregationTemporality() == metricsv1.AggregationTemporality_AGGREGATION_TEMPORALITY_DELTA
		for _, dp := range h.GetDataPoints() {
			if dp.GetFlags()&flagNoValue != 0 {
				continue
			}
			bs, err := explicitBuckets(dp)
			p.histPoint(name, base, tags, pts, req, res, dp.GetAttributes(), dp.GetTimeUnixNano(), dp.GetCount(), dp.Sum, dp.Min, dp.Max, bs, err, delta, store)
		}
	case m.GetExponentialHistogram() != nil:
		h := m.GetExponentialHistogram()
		delta := h.GetAggregationTemporality() == metricsv1.AggregationTemporality_AGGREGATION_TEMPORALITY_DELTA
		for _, dp := range h.GetDataPoints() {
			if dp.GetFlags()&flagNoValue != 0 {
				continue
			}
			bs, err := exponentialBuckets(dp)
			p.histPoint(name, base, tags, pts, req, res, dp.GetAttributes(), dp.GetTimeUnixNano(), dp.GetCount(), dp.Sum, dp.Min, dp.Max, bs, err, delta, store)
		}
	case m.GetSummary() != nil:
		for _, dp := range m.GetSummary().GetDataPoints() {
			if dp.GetFlags()&flagNoValue != 0 {
				continue
			}
			t, err := p.labelsOf(*tags, base, dp.GetAttributes())
			*tags = t
			if err != nil {
				res.reject(what, err)
				continue
			}
			ts := pointTime(dp.GetTimeUnixNano(), req.now)
			t = slices.Clone(t)
			*pts = append((*pts)[:0],
				Point{Metric: name + ".count", Tags: t, TS: ts, Kind: series.Counter, Bits: dp.GetCount()},
				Point{Metric: name + ".sum", Tags: t, TS: ts, Kind: series.Float, Bits: math.Float64bits(dp.GetSum())})
			for _, qv := range dp.GetQuantileValues() {
				if len(*pts) >= 2+maxSummaryQuantiles {
					break
				}
				*pts = append(*pts, Point{Metric: name + "." + quantileName(qv.GetQuantile()), Tags: t, TS: ts, Kind: series.Float, Bits: math.Float64bits(qv.GetValue())})
			}
			store(*pts)
		}
	}
}

// quantileName names the series of quantile q: p50, p99, p99_9.
func quantileName(q float64) string {
	s := strconv.FormatFloat(q*100, 'f', -1, 64)
	return "p" + strings.ReplaceAll(s, ".", "_")
}

// histPoint stores the count, sum and quantile series of one histogram data point.
func (p *Push) histPoint(name string, base []kv, tags *[]kv, pts *[]Point, req *writeReq, res *OTLPResult,
	attrs []*commonv1.KeyValue, tns, count uint64, sum, mn, mx *float64, bs []bucket, bErr error, delta bool, store func([]Point)) {
	what := quote(name)
	if bErr != nil {
		res.reject(what, bErr)
		return
	}
	t, err := p.labelsOf(*tags, base, attrs)
	*tags = t
	if err != nil {
		res.reject(what, err)
		return
	}
	t = slices.Clone(t)
	ts := pointTime(tns, req.now)
	lo, hi := math.Inf(-1), math.Inf(1)
	if mn != nil {
		lo = *mn
	}
	if mx != nil {
		hi = *mx
	}
	// The interval's buckets: a cumulative point's minus the previous one's.
	p.mu.Lock()
	interval := bs
	if !delta {
		p.keyBuf = appendKey(p.keyBuf[:0], 'l', name+".count", t)
		if e, ok := p.entries[string(p.keyBuf)]; ok && e.otlp != nil {
			if d, ok := diffBuckets(bs, e.otlp.hist); ok {
				interval = d
			}
		}
	}
	p.mu.Unlock()
	*pts = append((*pts)[:0], Point{Metric: name + ".count", Tags: t, TS: ts, Kind: series.Counter, Bits: count, acc: delta, hist: bs, histDelta: delta})
	if sum != nil { // optional: a histogram of values of both signs may have none
		*pts = append(*pts, Point{Metric: name + ".sum", Tags: t, TS: ts, Kind: series.Float, Bits: math.Float64bits(*sum), acc: delta})
	}
	var n uint64
	for _, b := range interval {
		n += b.n
	}
	if n > 0 {
		for _, q := range otlpQuantiles {
			v := bucketQuantile(interval, n, q.q, lo, hi)
			*pts = append(*pts, Point{Metric: name + "." + q.name, Tags: t, TS: ts, Kind: series.Float, Bits: math.Float64bits(v)})
		}
	}
	store(*pts)
}

// keepHist keeps the buckets of a cumulative histogram point on its count series, for the next
// point's interval. Called with p.mu held, after pt was stored.
func (p *Push) keepHist(pt Point) {
	if pt.histDelta {
		return
	}
	p.keyBuf = appendKey(p.keyBuf[:0], 'l', pt.Metric, pt.Tags)
	e, ok := p.entries[string(p.keyBuf)]
	if !ok {
		return
	}
	if e.otlp == nil {
		e.otlp = &otlpState{}
	}
	cost := int64(len(pt.hist)) * 24
	if d := cost - e.otlp.histBytes; p.bytes+d > p.cfg.MaxBytes && d > 0 {
		e.otlp.hist = nil // over the budget: the next point's quantiles use its own buckets
		cost = 0
	} else {
		e.otlp.hist = append(e.otlp.hist[:0], pt.hist...)
	}
	d := cost - e.otlp.histBytes
	e.otlp.histBytes = cost
	e.cost += d
	p.bytes += d
}

// diffBuckets returns cur minus prev when both have the same buckets and no count went down.
func diffBuckets(cur, prev []bucket) ([]bucket, bool) {
	if len(cur) != len(prev) || len(cur) == 0 {
		return nil, false
	}
	out := make([]bucket, len(cur))
	for i := range cur {
		if cur[i].lo != prev[i].lo || cur[i].hi != prev[i].hi || cur[i].n < prev[i].n {
			return nil, false
		}
		out[i] = bucket{cur[i].lo, cur[i].hi, cur[i].n - prev[i].n}
	}
	return out, true
}

// explicitBuckets turns an explicit-bounds histogram point into buckets; the open ends are
// ±Inf (bucketQuantile closes them).
func explicitBuckets(dp *metricsv1.HistogramDataPoint) ([]bucket, error) {
	bounds, counts := dp.GetExplicitBounds(), dp.GetBucketCounts()
	if len(counts) == 0 {
		return nil, nil // count and sum only
	}
	if len(counts) != len(bounds)+1 {
		return nil, fmt.Errorf("histogram with %d bucket counts for %d bounds (want bounds+1)", len(counts), len(bounds))
	}
	if len(counts) > maxOTLPBuckets {
		return nil, fmt.Errorf("histogram with %d buckets exceeds the limit of %d", len(counts), maxOTLPBuckets)
	}
	bs := make([]bucket, len(counts))
	lo := math.Inf(-1)
	for i, n := range counts {
		hi := math.Inf(1)
		if i < len(bounds) {
			hi = bounds[i]
			if math.IsNaN(hi) || hi <= lo {
				return nil, errors.New("histogram bounds not increasing")
			}
		}
		bs[i] = bucket{lo, hi, n}
		lo = hi
	}
	return bs, nil
}

// exponentialBuckets turns an exponential histogram point into buckets in increasing order:
// bucket index i of scale s covers (base^i, base^(i+1)] with base = 2^(2^-s), mirrored for the
// negative ones; the zero bucket spans [-zero_threshold, zero_threshold].
func exponentialBuckets(dp *metricsv1.ExponentialHistogramDataPoint) ([]bucket, error) {
	pos, neg := dp.GetPositive(), dp.GetNegative()
	np, nn := len(pos.GetBucketCounts()), len(neg.GetBucketCounts())
	if np+nn+1 > maxOTLPBuckets {
		return nil, fmt.Errorf("exponential histogram with %d buckets exceeds the limit of %d", np+nn+1, maxOTLPBuckets)
	}
	scale := dp.GetScale()
	if scale < -10 || scale > 20 {
		return nil, fmt.Errorf("exponential histogram scale %d out of [-10, 20]", scale)
	}
	bound := func(i int64) float64 { return math.Exp2(float64(i) * math.Exp2(-float64(scale))) }
	zt := math.Abs(dp.GetZeroThreshold())
	bs := make([]bucket, 0, np+nn+1)
	for k := nn - 1; k >= 0; k-- {
		i := int64(neg.GetOffset()) + int64(k)
		bs = append(bs, bucket{-bound(i + 1), -bound(i), neg.GetBucketCounts()[k]})
	}
	bs = append(bs, bucket{-zt, zt, dp.GetZeroCount()})
	for k := range np {
		i := int64(pos.GetOffset()) + int64(k)
		bs = append(bs, bucket{bound(i), bound(i + 1), pos.GetBucketCounts()[k]})
	}
	return bs, nil
}

// bucketQuantile estimates the q-quantile of the n observations in bs (increasing buckets):
// the rank q×n is found in the cumulative counts and interpolated linearly within its bucket.
// An open end of a bucket is closed by lo or hi (the observed min and max; ±Inf when unknown:
// then 0 or the bucket's finite bound below, the finite bound above), and the estimate is
// kept within [lo, hi].
func bucketQuantile(bs []bucket, n uint64, q, lo, hi float64) float64 {
	rank := q * float64(n)
	var cum float64
	var v float64
	for i, b := range bs {
		if b.n == 0 {
			continue
		}
		if cum+float64(b.n) < rank && i < len(bs)-1 {
			cum += float64(b.n)
			continue
		}
		l, h := b.lo, b.hi
		if math.IsInf(l, -1) {
			l = lo
			if math.IsInf(l, -1) {
				l = min(0, h)
			}
		}
		if math.IsInf(h, 1) {
			h = hi
			if math.IsInf(h, 1) {
				h = l
			}
		}
		frac := min(max((rank-cum)/float64(b.n), 0), 1)
		v = l + (h-l)*frac
		break
	}
	if !math.IsInf(lo, -1) {
		v = max(v, lo)
	}
	if !math.IsInf(hi, 1) {
		v = min(v, hi)
	}
	return v
}

// accumulate adds a delta point's value to e's running total and returns the total's bits.
func (e *entry) accumulate(kind series.Kind, bits uint64) uint64 {
	if e.otlp == nil {
		e.otlp = &otlpState{}
	}
	t := e.otlp.total
	switch kind {
	case series.Counter:
		s := t + bits
		if s < t {
			s = math.MaxUint64
		}
		t = s
	case series.Level:
		t = uint64(int64(t) + int64(bits))
	default:
		t = math.Float64bits(math.Float64frombits(t) + math.Float64frombits(bits))
	}
	e.otlp.total = t
	return t
}

// appendExportResponse appends an ExportMetricsServiceResponse: {partial_success:
// {rejected_data_points, error_message}} when rejected > 0, else empty.
func appendExportResponse(b []byte, asJSON bool, rejected int, msg string) []byte {
	if asJSON {
		if rejected == 0 {
			return append(b, "{}"...)
		}
		b = append(b, `{"partialSuccess":{"rejectedDataPoints":"`...)
		b = strconv.AppendInt(b, int64(rejected), 10)
		b = append(b, `","errorMessage":`...)
		b = series.AppendJSONString(b, msg)
		return append(b, "}}"...)
	}
	if rejected == 0 {
		return b
	}
	var ps []byte
	ps = protowire.AppendTag(ps, 1, protowire.VarintType)
	ps = protowire.AppendVarint(ps, uint64(rejected))
	if msg != "" {
		ps = protowire.AppendTag(ps, 2, protowire.BytesType)
		ps = protowire.AppendString(ps, msg)
	}
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	return protowire.AppendBytes(b, ps)
}

// writeStatus answers an error as OTLP/HTTP asks: a google.rpc.Status {code, message}, in
// protobuf or JSON.
func writeStatus(w http.ResponseWriter, code int, asJSON bool, msg string) {
	rpcCode := uint64(3) // INVALID_ARGUMENT
	switch code {
	case http.StatusRequestEntityTooLarge:
		rpcCode = 8 // RESOURCE_EXHAUSTED
	case http.StatusMethodNotAllowed, http.StatusUnsupportedMediaType:
		rpcCode = 12 // UNIMPLEMENTED
	}
	var b []byte
	if asJSON {
		w.Header().Set("Content-Type", "application/json")
		b = append(b, `{"code":`...)
		b = strconv.AppendUint(b, rpcCode, 10)
		b = append(b, `,"message":`...)
		b = series.AppendJSONString(b, msg)
		b = append(b, '}')
	} else {
		w.Header().Set("Content-Type", "application/x-protobuf")
		b = protowire.AppendTag(b, 1, protowire.VarintType)
		b = protowire.AppendVarint(b, rpcCode)
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendString(b, msg)
	}
	w.WriteHeader(code)
	_, _ = w.Write(b)
}
