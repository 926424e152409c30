package ingest

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"

	metricsv1 "go.opentelemetry.io/proto/otlp/metrics/v1"
	"golang.org/x/sync/semaphore"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// repeatField is n copies of field num (bytes type) holding sub.
func repeatField(n int, num protowire.Number, sub []byte) []byte {
	var one []byte
	one = protowire.AppendTag(one, num, protowire.BytesType)
	one = protowire.AppendBytes(one, sub)
	return bytes.Repeat(one, n)
}

// nest wraps b in the fields nums, innermost last: nest(b, 1, 2) is field 1 {field 2 {b}}.
func nest(b []byte, nums ...protowire.Number) []byte {
	for i := len(nums) - 1; i >= 0; i-- {
		b = repeatField(1, nums[i], b)
	}
	return b
}

// amplifyingBodies are bodies whose decoded form is much larger than they are (finding N3 of
// issue 31), each about n bytes, with an ordinary request for comparison.
func amplifyingBodies(n int) map[string]struct {
	body   []byte
	asJSON bool
} {
	packed := bytes.Repeat([]byte{1}, n)
	var bounds []byte
	for range n / 9 {
		bounds = protowire.AppendTag(bounds, 7, protowire.Fixed64Type) // explicit_bounds, unpacked
		bounds = protowire.AppendFixed64(bounds, 0)
	}
	var unknown []byte
	for range n / 2 {
		unknown = protowire.AppendTag(unknown, 99, protowire.VarintType)
		unknown = protowire.AppendVarint(unknown, 0)
	}
	var ordinary []*metricsv1.Metric
	for i := range n / 200 {
		ordinary = append(ordinary, intSum(fmt.Sprintf("m%d", i%50), cumulative, true, 1, int64(i), strAttr("route", fmt.Sprintf("/r%d", i)), strAttr("code", "200")))
	}
	ord, _ := proto.Marshal(otlpRequest(ordinary...))
	ordJSON, _ := protojson.Marshal(otlpRequest(ordinary...))
	type body = struct {
		body   []byte
		asJSON bool
	}
	// metrics (1) > scope_metrics (2) > metrics (2) > histogram (9) > data_points (1)
	histPoint := func(b []byte) []byte { return nest(b, 1, 2, 2, 9) }
	return map[string]body{
		"empty resource metrics":    {repeatField(n/2, 1, nil), false},
		"empty histogram points":    {histPoint(repeatField(n/2, 1, nil)), false},
		"empty attributes":          {nest(repeatField(n/2, 1, nil), 1, 1), false}, // resource > attributes
		"attribute values":          {nest(repeatField(n/4, 1, repeatField(1, 2, nil)), 1, 1), false},
		"packed bucket counts":      {histPoint(repeatField(1, 1, repeatField(1, 6, packed))), false},
		"unpacked bounds":           {histPoint(repeatField(1, 1, bounds)), false},
		"unknown fields":            {nest(repeatField(1, 1, unknown), 1), false},
		"unknown in each message":   {repeatField(n/4, 1, protowire.AppendVarint(protowire.AppendTag(nil, 99, protowire.VarintType), 0)), false},
		"ordinary":                  {ord, false},
		"JSON empty objects":        {[]byte(`{"resourceMetrics":[` + strings.Repeat(`{},`, n/3) + `{}]}`), true},
		"JSON empty points":         {[]byte(`{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"histogram":{"dataPoints":[` + strings.Repeat(`{},`, n/3) + `{}]}}]}]}]}`), true},
		"JSON bucket counts":        {[]byte(`{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"histogram":{"dataPoints":[{"bucketCounts":[` + strings.Repeat(`1,`, n/2) + `1]}]}}]}]}]}`), true},
		"JSON string bucket counts": {[]byte(`{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"histogram":{"dataPoints":[{"bucketCounts":[` + strings.Repeat(`"1",`, n/4) + `"1"]}]}}]}]}]}`), true},
		"JSON ordinary":             {ordJSON, true},
	}
}

// MeasureOTLP's estimate is at least what decoding allocates, for adversarial bodies (many
// empty sub-messages, packed and unpacked scalars, unknown fields, in protobuf and JSON) as
// for ordinary ones: charging the estimate to the body budget bounds the memory decoding takes.
// (N3)
func TestOTLPCostCoversDecoding(t *testing.T) {
	for name, c := range amplifyingBodies(costBodySize()) {
		t.Run(name, func(t *testing.T) {
			cost, err := MeasureOTLP(c.body, c.asJSON, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			md, err := DecodeOTLP(c.body, c.asJSON)
			runtime.ReadMemStats(&after)
			if err != nil {
				t.Fatal(err)
			}
			alloc := int64(after.TotalAlloc - before.TotalAlloc)
			t.Logf("%d bytes: %d sub-messages, estimate %d, allocated %d (%.1f× the body)", len(c.body), cost.Messages, cost.Bytes, alloc, float64(alloc)/float64(len(c.body)))
			if alloc > cost.Bytes {
				t.Errorf("decoding allocated %d bytes; estimate %d", alloc, cost.Bytes)
			}
			if n := countMessages(md.ProtoReflect()); n > cost.Messages {
				t.Errorf("decoded %d sub-messages; counted %d", n, cost.Messages)
			}
		})
	}
}

// countMessages returns the sub-messages of m, recursively.
func countMessages(m protoreflect.Message) int {
	n := 0
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Kind() != protoreflect.MessageKind {
			return true
		}
		if fd.IsList() {
			l := v.List()
			for i := range l.Len() {
				n += 1 + countMessages(l.Get(i).Message())
			}
			return true
		}
		n += 1 + countMessages(v.Message())
		return true
	})
	return n
}

// The OTLP handler refuses an amplifying body before decoding it, with the limit crossed in
// the answer, whether sent plain or gzip-compressed, and takes nothing from the body budget
// for good. (N3) The bodies are 8 MiB against a 32 MiB limit, 2 MiB against 8 MiB with
// -short (make test, under the race detector): the same amplification crosses the same limit.
func TestOTLPAmplifyingBodyRefused(t *testing.T) {
	size := 8 << 20
	if testing.Short() {
		size = 2 << 20
	}
	budget := semaphore.NewWeighted(int64(8 * size))
	p, _ := newTestPush(Config{MaxBodyBytes: int64(4 * size), Bodies: budget})
	h := p.OTLPHandler()
	for name, c := range amplifyingBodies(size) {
		if strings.Contains(name, "ordinary") || name == "packed bucket counts" { // not amplifying: 1× the body
			continue
		}
		for _, gz := range []bool{false, true} {
			body := c.body
			if gz {
				var b bytes.Buffer
				zw := gzip.NewWriter(&b)
				zw.Write(body)
				zw.Close()
				body = b.Bytes()
			}
			r := httptest.NewRequest(http.MethodPost, "/v1/metrics", bytes.NewReader(body))
			if gz {
				r.Header.Set("Content-Encoding", "gzip")
			}
			ct := "application/x-protobuf"
			if c.asJSON {
				ct = "application/json"
			}
			r.Header.Set("Content-Type", ct)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != http.StatusRequestEntityTooLarge || !strings.Contains(w.Body.String(), "the limit per request") {
				t.Errorf("%s (gzip %v): %d %.200q; want 413 naming the limit", name, gz, w.Code, w.Body)
			}
		}
	}
	if !budget.TryAcquire(int64(8 * size)) {
		t.Error("the body budget was not given back")
	}
}

// An ordinary request passes the limits and is stored; when the shared body budget cannot hold
// its decoded form it is answered 503 with Retry-After, and stored once there is room. (N3)
func TestOTLPDecodedChargedToBodyBudget(t *testing.T) {
	budget := semaphore.NewWeighted(64 << 20)
	p, _ := newTestPush(Config{Bodies: budget})
	h := p.OTLPHandler()
	body := amplifyingBodies(1 << 20)["ordinary"].body
	post := func() *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "/v1/metrics", bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/x-protobuf")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	budget.Acquire(t.Context(), 64<<20-1024) // other requests hold nearly all of it
	if w := post(); w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" {
		t.Errorf("budget used up: %d %q; want 503 with Retry-After", w.Code, w.Body)
	}
	budget.Release(64<<20 - 1024)
	if w := post(); w.Code != http.StatusOK {
		t.Errorf("budget free: %d %q; want 200", w.Code, w.Body)
	}
	if st := p.Stats(); st.OTLPPoints == 0 {
		t.Errorf("no point stored: %+v", st)
	}
}

// Concurrent amplifying requests are refused each, and the budget is whole afterwards.
func TestOTLPConcurrentAmplifying(t *testing.T) {
	budget := semaphore.NewWeighted(64 << 20)
	p, _ := newTestPush(Config{Bodies: budget})
	h := p.OTLPHandler()
	body := amplifyingBodies(4 << 20)["empty resource metrics"].body
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			r := httptest.NewRequest(http.MethodPost, "/v1/metrics", bytes.NewReader(body))
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != http.StatusRequestEntityTooLarge {
				t.Errorf("%d %q; want 413", w.Code, w.Body)
			}
		})
	}
	wg.Wait()
	if !budget.TryAcquire(64 << 20) {
		t.Error("the body budget was not given back")
	}
}

// An ordinary large batch, as an OpenTelemetry Collector sends by default (8192 data points,
// six attributes each), passes the decoding limits at their defaults and is stored. (N3: the
// limits refuse amplification, not ordinary traffic.)
func TestOTLPOrdinaryBatchPassesLimits(t *testing.T) {
	budget := semaphore.NewWeighted(64 << 20)
	p, _ := newTestPush(Config{Bodies: budget})
	var ms []*metricsv1.Metric
	for i := range 8192 {
		ms = append(ms, intSum(fmt.Sprintf("http.server.requests.%d", i%64), cumulative, true, 1700000000e9, int64(i),
			strAttr("http.route", fmt.Sprintf("/api/v1/items/%d", i)), strAttr("http.method", "GET"), strAttr("http.status_code", "200"),
			strAttr("net.host.name", "web-1.example.com"), strAttr("deployment.environment", "production"), strAttr("k8s.pod.name", "web-7d9f8c6b5-x2x9z")))
	}
	body, _ := proto.Marshal(otlpRequest(ms...))
	cost, err := MeasureOTLP(body, false, 0, 0)
	t.Logf("%d bytes, %d sub-messages, estimate %d MiB", len(body), cost.Messages, cost.Bytes>>20)
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodPost, "/v1/metrics", bytes.NewReader(body))
	w := httptest.NewRecorder()
	p.OTLPHandler().ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		t.Fatalf("%d %.300q; want 200", w.Code, w.Body)
	}
	if st := p.Stats(); st.OTLPPoints != 8192 {
		t.Errorf("%d points stored; want 8192", st.OTLPPoints)
	}
}

// costBodySize is the size of TestOTLPCostCoversDecoding's bodies: 256 KiB with -short (as
// `make test` runs it under the race detector), 1 MiB without (`make test-long`). Every body
// has the same shape at either size, a repetition of one sub-message or field, so the smaller
// drives the same decoding and the same estimate; the larger shows the estimate still covers
// the allocations when the fixed costs weigh less.
func costBodySize() int {
	if testing.Short() {
		return 1 << 18
	}
	return 1 << 20
}
