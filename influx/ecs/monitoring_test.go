package ecs

// The tests named TestECS_* are the expectations of ECS's common/monitoring (its
// monitoring_test.go where it has them, ported; its code where it has not) that package
// influx does otherwise on purpose. The Run/Stop tests share the package state: none is
// parallel.

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// ECS takes percentile p as the sample at index ⌊n·p/100⌋ of the sorted reservoir.
func TestECS_PercentileIndexRule(t *testing.T) {
	url, _ := start(t, 0, "/metrics")
	m := NewMetric("lat", time.Unix(100, 5))
	for i := 10; i >= 1; i-- {
		m.SetFieldInt64("a", int64(i))
		SendHistogrammable(&m)
	}
	want := "lat a_mean=5.5,a_median=6,a_min=1,a_p10=2,a_p30=4,a_p70=8,a_p90=10,a_max=10,a_count=10u,a_poolsize=10u 100000000000\n"
	if got := get(t, url+"/metrics"); got != want {
		t.Errorf("1..10:\n got %q\nwant %q (influx's default: median 5.5, p10 1.9, p90 9.1)", got, want)
	}

	// The index is computed in float64 as ECS does: 58·0.01·50 = 28.999…, index 28.
	h := NewMetricsReservoirSampling()
	for i := 1; i <= 58; i++ {
		m.SetFieldFloat64("a", float64(i))
		h.AddMetric(&m)
	}
	if got := h.GetMetrics()[0].GetFields()["a_median"]; got != 29.0 {
		t.Errorf("median of 1..58 = %v; want 29 (index 28)", got)
	}
}

// ECS writes f_count and f_poolsize as unsigned integers; floats there make an InfluxDB that
// holds ECS data answer "field type conflict".
func TestECS_CountIsUnsigned(t *testing.T) {
	url, _ := start(t, 0, "/metrics")
	m := NewMetric("lat", time.Unix(100, 0))
	for i := range 10 {
		m.SetFieldFloat64("a", float64(i))
		SendHistogrammable(&m)
	}
	ls, err := decode([]byte(get(t, url+"/metrics")))
	if err != nil || len(ls) != 1 {
		t.Fatalf("decode: %v, %d lines", err, len(ls))
	}
	for k, want := range map[string]string{"a_count": "10u", "a_poolsize": "10u", "a_mean": "4.5", "a_max": "9"} {
		if got := ls[0].fields[k]; got != want {
			t.Errorf("%s=%s; want %s", k, got, want)
		}
	}
}

// ECS keeps one reservoir per field and writes one line per field: two fields over two
// seconds are four lines (influx: two). Ported from ECS's TestMetricsHistogramObject.
func TestECS_OneLinePerHistogramField(t *testing.T) {
	metricsHisto := NewMetricsReservoirSampling()
	r := rand.New(rand.NewSource(42))
	tags1 := TagsType{Tag{"tag1", "1"}, Tag{"tag2", "2"}}
	for i := 0; i != 2000; i++ {
		for _, sec := range []int64{10, 15} {
			m := Metric{name: "test", tags: tags1, timestamp: time.Unix(sec, r.Int63n(999999999))}
			m.SetFieldInt64("val1", int64(r.Int31n(100)))
			m.SetFieldInt64("val2", int64(r.Int31n(100)))
			metricsHisto.AddMetric(&m)
		}
	}
	metrics := metricsHisto.GetMetrics()
	if len(metrics) != 4 {
		t.Fatalf("received wrong number of histogram metrics, expected 4, got %d", len(metrics))
	}
	for _, metric := range metrics {
		if len(metric.fields) != 10 {
			t.Errorf("%d fields; want the 10 of one field", len(metric.fields))
		}
		for name, value := range metric.GetFields() {
			for suffix, want := range map[string]float64{"mean": 50, "median": 50, "p10": 10, "p30": 30, "p70": 70, "p90": 90} {
				if strings.HasSuffix(name, "_"+suffix) && math.Abs(value.(float64)-want) > 10 {
					t.Errorf("%s = %v; want %v±10", name, value, want)
				}
			}
			if strings.HasSuffix(name, "_count") && value.(uint64) != 2000 {
				t.Errorf("%s = %v; want 2000", name, value)
			}
			if strings.HasSuffix(name, "_poolsize") && value.(uint64) != 1000 {
				t.Errorf("%s = %v; want 1000", name, value)
			}
		}
	}
	metricsHisto.Clear()
	if m := metricsHisto.GetMetrics(); len(m) != 0 {
		t.Errorf("histogram metrics should be empty after clearing, but we got histogram metrics: %+v", m)
	}

	// On the wire, byte for byte.
	url, _ := start(t, 0, "/metrics")
	m := NewMetric("batch", time.Unix(7, 0))
	m.AddTag("topic", "t")
	m.SetFieldUInt64("bytes", 100)
	m.SetFieldInt64("ms", 3)
	SendHistogrammable(&m)
	m.timestamp = time.Unix(8, 0)
	SendHistogrammable(&m)
	want := "batch,topic=t bytes_mean=100,bytes_median=100,bytes_min=100,bytes_p10=100,bytes_p30=100,bytes_p70=100,bytes_p90=100,bytes_max=100,bytes_count=1u,bytes_poolsize=1u 7000000000\n" +
		"batch,topic=t ms_mean=3,ms_median=3,ms_min=3,ms_p10=3,ms_p30=3,ms_p70=3,ms_p90=3,ms_max=3,ms_count=1u,ms_poolsize=1u 7000000000\n" +
		"batch,topic=t bytes_mean=100,bytes_median=100,bytes_min=100,bytes_p10=100,bytes_p30=100,bytes_p70=100,bytes_p90=100,bytes_max=100,bytes_count=1u,bytes_poolsize=1u 8000000000\n" +
		"batch,topic=t ms_mean=3,ms_median=3,ms_min=3,ms_p10=3,ms_p30=3,ms_p70=3,ms_p90=3,ms_max=3,ms_count=1u,ms_poolsize=1u 8000000000\n"
	if got := get(t, url+"/metrics"); got != want {
		t.Errorf("scrape:\n%s\nwant:\n%s", got, want)
	}
}

// ECS stores a metric without fields (its TestSendingSingleMetric and TestExportingMetrics).
func TestECS_EmptySendStored(t *testing.T) {
	url, _ := start(t, 0, "/metrics")
	metric := &Metric{name: "test"}
	Send(metric)
	sums, _ := stored(t)
	if len(sums) != 1 || sums[0].name != "test" || len(sums[0].fields) != 0 {
		t.Fatalf("stored %+v; want the one empty metric test", sums)
	}
	metrics.mu.Lock()
	metricsToExport := metrics.agg.drain()
	metrics.mu.Unlock()
	if len(metricsToExport) != 1 || metricsToExport[0].name != "test" {
		t.Errorf("exported %+v; want the one metric test", metricsToExport)
	}

	// Stored, it joins the bucket a later send fills; alone, it cannot be written, and like
	// ECS's, the scrape holding it writes nothing at all.
	e := NewMetric("m", time.Unix(5, 1))
	e.AddTag("k", "v")
	Send(&e)
	f := NewMetric("m", time.Unix(5, 2))
	f.AddTag("k", "v")
	f.SetFieldInt64("x", 2)
	Send(&f)
	if got, want := get(t, url+"/metrics"), "m,k=v x=2i 5000000000\n"; got != want {
		t.Errorf("empty then full: %q; want %q", got, want)
	}
	Send(&e)
	Send(&f)
	g := NewMetric("other", time.Unix(5, 0))
	Send(&g)
	if got := get(t, url+"/metrics"); got != "" {
		t.Errorf("a scrape holding a field-less bucket = %q; want nothing, as ECS", got)
	}
	if got := get(t, url+"/metrics"); got != "" {
		t.Errorf("after the failed scrape: %q; want nothing (its metrics are gone, as in ECS)", got)
	}
}

// ECS's TestSimpleStartStop and TestStartMultipleStop, then Run again on the same port: a
// second Run after Stop serves, and what was sent and not scraped before Stop, and what was
// sent while stopped, is in its first scrape (ECS keeps both).
func TestECS_SendsKeptAcrossStopAndRun(t *testing.T) {
	url, done := start(t, 0, "/random")
	_, p, _ := net.SplitHostPort(Addr())
	port, _ := strconv.Atoi(p)
	m := NewMetric("before", time.Unix(1, 0))
	m.SetFieldInt64("x", 1)
	Send(&m)
	Stop()
	Stop()
	if IsRunning() {
		t.Error("running after Stop")
	}
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		t.Errorf("Run returned %v; want http.ErrServerClosed, as ECS", err)
	}
	m.SetFieldInt64("x", 2)
	Send(&m) // stopped: kept for the next Run
	SendHistogrammable(&m)

	url2, _ := startKeeping(t, uint16(port), "/random")
	if url2 != url {
		t.Fatalf("second Run serves %s; want %s", url2, url)
	}
	want := "before x=3i 1000000000\n" +
		"before x_mean=2,x_median=2,x_min=2,x_p10=2,x_p30=2,x_p70=2,x_p90=2,x_max=2,x_count=1u,x_poolsize=1u 1000000000\n"
	if got := get(t, url2+"/random"); got != want {
		t.Errorf("first scrape after Stop and Run: %q; want %q", got, want)
	}
	if got := get(t, url2+"/random"); got != "" {
		t.Errorf("second scrape: %q; want nothing", got)
	}
}

// Sends before the first Run are kept for its first scrape, as in ECS.
func TestECS_SendsBeforeRunKept(t *testing.T) {
	resetStore()
	m := NewMetric("early", time.Unix(2, 0))
	m.SetFieldUInt64("n", 4)
	Send(&m)
	url, _ := startKeeping(t, 0, "/metrics")
	if got, want := get(t, url+"/metrics"), "early n=4u 2000000000\n"; got != want {
		t.Errorf("scrape = %q; want %q", got, want)
	}
}

// Run right after Stop on the same port never fails: Stop returns only once Run's listener is
// closed, also when Stop comes between Run's listen and its Serve (before: "address already
// in use" about 2 times in 1000). 10 000 cycles on one port, each waiting until Run listens.
func TestECS_RunAfterStopSamePortNeverFails(t *testing.T) {
	resetStore()
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	port := uint16(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	cycles := 10000
	if testing.Short() {
		cycles = 1000
	}
	failures := 0
	var firstErr error
	fail := func(err error) {
		failures++
		if firstErr == nil {
			firstErr = err
		}
	}
	// The previous Run's result is read only after the next Run started, as a program that
	// restarts does not wait for it either: Stop alone must free the port.
	var prev chan error
	for i := 0; i < cycles; i++ {
		done := make(chan error, 1)
		go func() { done <- Run(port, "/metrics") }()
		running := WaitUntilRunning(5 * time.Second)
		if prev != nil {
			if err := <-prev; !errors.Is(err, http.ErrServerClosed) {
				fail(err)
			}
			prev = nil
		}
		if !running {
			select {
			case err := <-done:
				fail(err)
				continue
			case <-time.After(5 * time.Second):
				t.Fatalf("cycle %d: Run neither serves nor returns", i)
			}
		}
		Stop()
		prev = done
	}
	if prev != nil {
		if err := <-prev; !errors.Is(err, http.ErrServerClosed) {
			fail(err)
		}
	}
	if failures != 0 {
		t.Errorf("%d of %d Run/Stop cycles on port %d failed; first: %v", failures, cycles, port, firstErr)
	}
}

// While a Run serves, another returns nil at once, as ECS (influx: address already in use).
func TestECS_SecondRunWhileRunningReturnsNil(t *testing.T) {
	start(t, 0, "/metrics")
	_, p, _ := net.SplitHostPort(Addr())
	port, _ := strconv.Atoi(p)
	errc := make(chan error, 1)
	go func() { errc <- Run(uint16(port), "/metrics") }()
	select {
	case err := <-errc:
		if err != nil {
			t.Errorf("second Run = %v; want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("second Run blocks")
	}
	if !IsRunning() {
		t.Error("the second Run stopped the first")
	}
}

func TestECS_WaitUntilRunning(t *testing.T) {
	if WaitUntilRunning(20 * time.Millisecond) {
		t.Fatal("WaitUntilRunning before Run = true")
	}
	start(t, 0, "/metrics")
	if !WaitUntilRunning(0) {
		t.Error("WaitUntilRunning while running = false")
	}
	Stop()
	if WaitUntilRunning(20 * time.Millisecond) {
		t.Error("WaitUntilRunning after Stop = true")
	}
}

// A Run that cannot listen returns the error and leaves the package stopped.
func TestECS_ListenErrorLeavesStopped(t *testing.T) {
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	if err := Run(uint16(port), "/metrics"); err == nil || !strings.Contains(err.Error(), "address already in use") {
		t.Errorf("Run on a busy port = %v", err)
	}
	if IsRunning() {
		t.Error("running after a failed Run")
		Stop()
	}
}

// An endpoint net/http refuses (ECS's tests use "notimportant") serves nothing, as in ECS.
func TestECS_InvalidEndpointServesNothing(t *testing.T) {
	url, _ := start(t, 0, "notimportant")
	resp, err := http.Get(url + "/notimportant")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("status %d; want 404", resp.StatusCode)
	}
}

// ECS's TestHttpRun.
func TestECS_HttpRun(t *testing.T) {
	url, _ := start(t, 0, "/metrics")
	metric := Metric{name: "test"}
	metric.timestamp = time.Unix(10, 0)
	metric.AddTag("tag1", "42")
	metric.SetFieldInt64("value1", 11)
	Send(&metric)
	if got, want := get(t, url+"/metrics"), "test,tag1=42 value1=11i 10000000000\n"; got != want {
		t.Errorf("scrape %q; want %q", got, want)
	}
}

// A scrape empties the store: the next one has only what was sent since.
func TestECS_ResetOnScrape(t *testing.T) {
	url, _ := start(t, 0, "/metrics")
	m := NewMetric("m", time.Unix(1, 0))
	m.SetFieldInt64("x", 1)
	Send(&m)
	SendHistogrammable(&m)
	if got := lines(get(t, url+"/metrics")); len(got) != 2 {
		t.Fatalf("first scrape %q; want 2 lines", got)
	}
	if got := get(t, url+"/metrics"); got != "" {
		t.Errorf("second scrape %q; want nothing", got)
	}
	Send(&m)
	if got, want := get(t, url+"/metrics"), "m x=1i 1000000000\n"; got != want {
		t.Errorf("third scrape %q; want %q (a new bucket for the same second)", got, want)
	}
}

// ECS's TestMetricsFormat, byte for byte.
func TestECS_MetricsFormat(t *testing.T) {
	metric1 := Metric{name: "test", timestamp: time.Unix(10, 0)}
	metric1.AddTag("tag1", "42")
	metric1.SetFieldInt64("int64", 1)
	metric1.SetFieldUInt64("uint64", 2)
	metric1.SetFieldFloat64("float64", 3)
	metric2 := Metric{name: "test1", timestamp: time.Unix(10, 0)}
	metric2.AddTag("tag1", "43")
	metric2.SetFieldInt64("int64", 2)
	metric2.SetFieldUInt64("uint64", 3)
	metric2.SetFieldFloat64("float64", 4.5)
	var buf bytes.Buffer
	if err := Format(&buf, []Metric{metric1, metric2}); err != nil {
		t.Fatal(err)
	}
	want := "test,tag1=42 int64=1i,uint64=2u,float64=3 10000000000\ntest1,tag1=43 int64=2i,uint64=3u,float64=4.5 10000000000\n"
	if buf.String() != want {
		t.Errorf("Format:\n%s\nwant:\n%s", buf.String(), want)
	}
}

// Format is all or nothing, as ECS's: one line it cannot encode and nothing is written.
func TestECS_FormatAllOrNothing(t *testing.T) {
	good := NewMetric("good", time.Unix(1, 0))
	good.SetFieldInt64("x", 1)
	unsorted := NewMetric("bad", time.Unix(1, 0))
	unsorted.AddTag("b", "1")
	unsorted.AddTag("a", "1")
	unsorted.SetFieldInt64("x", 1)
	repeated := NewMetric("bad", time.Unix(1, 0))
	repeated.AddTag("a", "1")
	repeated.AddTag("a", "2")
	repeated.SetFieldInt64("x", 1)
	nan := NewMetric("bad", time.Unix(1, 0))
	nan.SetFieldFloat64("x", math.NaN())
	for name, bad := range map[string]Metric{"unsorted tags": unsorted, "repeated tag": repeated,
		"no field": NewMetric("bad", time.Unix(1, 0)), "empty name": NewMetric("", time.Unix(1, 0)), "NaN": nan} {
		var buf bytes.Buffer
		if err := Format(&buf, []Metric{good, bad, good}); err == nil || buf.Len() != 0 {
			t.Errorf("%s: Format wrote %q, err %v; want nothing and an error", name, buf.String(), err)
		}
	}
	var buf bytes.Buffer
	if err := Format(&buf, nil); err != nil || buf.Len() != 0 {
		t.Errorf("Format(nil) = %q, %v", buf.String(), err)
	}
}

// ECS hashes tags in their order: the same tags in another order are another bucket (and,
// keys out of order, a line that cannot be written).
func TestECS_TagOrderMatters(t *testing.T) {
	url, _ := start(t, 0, "/metrics")
	ab := NewMetric("m", time.Unix(1, 0))
	ab.AddTag("a", "1")
	ab.AddTag("b", "2")
	ab.SetFieldInt64("x", 1)
	ba := NewMetric("m", time.Unix(1, 0))
	ba.AddTag("b", "2")
	ba.AddTag("a", "1")
	ba.SetFieldInt64("x", 1)
	Send(&ab)
	Send(&ba)
	if sums, _ := stored(t); len(sums) != 2 {
		t.Errorf("%d buckets; want 2", len(sums))
	}
	if got := get(t, url+"/metrics"); got != "" {
		t.Errorf("scrape %q; want nothing (b,a cannot be written, so ECS writes nothing)", got)
	}
	Send(&ab)
	Send(&ab)
	if got, want := get(t, url+"/metrics"), "m,a=1,b=2 x=2i 1000000000\n"; got != want {
		t.Errorf("scrape %q; want %q", got, want)
	}
}

// ECS hashes names without separators: tag a=bc and ab=c share its bucket. Here they do not.
func TestECS_HashCollisionKeptApart(t *testing.T) {
	agg := NewMetricsAggregate()
	for _, kv := range [][2]string{{"a", "bc"}, {"ab", "c"}} {
		m := NewMetric("m", time.Unix(1, 0))
		m.AddTag(kv[0], kv[1])
		m.SetFieldInt64("x", 1)
		agg.AddMetric(&m)
	}
	if n := len(agg.GetMetrics()); n != 2 {
		t.Errorf("%d buckets; want 2", n)
	}
}

// The aggregation example of the ECS design document, byte for byte.
func TestECS_AggregationExample(t *testing.T) {
	url, _ := start(t, 0, "/metrics")
	for _, l := range []struct {
		name   string
		tags   []string
		fields []string
		ts     int64
	}{
		{"notaggregated", []string{"tag1", "val1"}, []string{"fields1"}, 1000000123},
		{"aggregated", []string{"tag1", "val1"}, []string{"fields1"}, 1000000001},
		{"aggregated", []string{"tag1", "val1"}, []string{"fields1"}, 1000000021},
		{"aggregated", []string{"tag1", "val1"}, []string{"fields1", "fields2"}, 1000000021},
		{"aggregated", []string{"tag1", "val1", "tag2", "val2"}, []string{"fields1"}, 1000030021},
		{"aggregated", []string{"tag1", "val1"}, []string{"fields1"}, 2000000021},
	} {
		m := NewMetric(l.name, time.Unix(0, l.ts))
		for i := 0; i < len(l.tags); i += 2 {
			m.AddTag(l.tags[i], l.tags[i+1])
		}
		for _, f := range l.fields {
			m.SetFieldInt64(f, 1)
		}
		if l.ts == 2000000021 {
			m.SetFieldInt64("fields1", 2)
		}
		Send(&m)
	}
	want := "notaggregated,tag1=val1 fields1=1i 1000000000\n" +
		"aggregated,tag1=val1 fields1=3i,fields2=1i 1000000000\n" +
		"aggregated,tag1=val1,tag2=val2 fields1=1i 1000000000\n" +
		"aggregated,tag1=val1 fields1=2i 2000000000\n"
	if got := get(t, url+"/metrics"); got != want {
		t.Errorf("scrape:\n%s\nwant:\n%s", got, want)
	}
}

// ECS's TestMetricsObject.
func TestECS_MetricsObject(t *testing.T) {
	r := rand.New(rand.NewSource(42))
	tags1 := TagsType{Tag{"tag1", "1"}, Tag{"tag2", "2"}}
	metrics := NewMetricsAggregate()
	add := func(field string, sec int64) {
		m := Metric{name: "test", tags: tags1, timestamp: time.Unix(sec, r.Int63n(999999999))}
		m.SetFieldInt64(field, 1)
		metrics.AddMetric(&m)
	}
	for i := 0; i != 1000; i++ {
		add("val1", 10)
		add("val1", 11)
		add("val2", 11)
	}
	aggregated := metrics.GetMetrics()
	if len(aggregated) != 2 {
		t.Fatalf("%d buckets, want 2", len(aggregated))
	}
	var val1, val2 int64
	for _, m := range aggregated {
		if m.timestamp != time.Unix(10, 0) && m.timestamp != time.Unix(11, 0) {
			t.Errorf("bucket timestamp %v; want 10 or 11 s", m.timestamp)
		}
		fs := m.GetFields()
		val1 += fs["val1"].(int64)
		if v, ok := fs["val2"]; ok {
			val2 += v.(int64)
		}
	}
	if val1 != 2000 || val2 != 1000 {
		t.Errorf("val1 %d, val2 %d; want 2000, 1000", val1, val2)
	}
	metrics.Clear()
	if got := metrics.GetMetrics(); len(got) != 0 {
		t.Errorf("metrics object should be empty after clearing, but we got some metrics: %+v", got)
	}
}

// ECS's TestApproximateHistogram, on a reservoir of 1000 (ECS's size; its test uses 500).
func TestECS_ApproximateHistogram(t *testing.T) {
	h := NewMetricsReservoirSampling()
	stats := func() FieldsType {
		ms := h.GetMetrics()
		if len(ms) != 1 {
			t.Fatalf("%d metrics; want 1", len(ms))
		}
		return ms[0].GetFields()
	}
	m := NewMetric("test", time.Unix(1, 0))
	for _, c := range []struct{ n, count, pool uint64 }{{20, 20, 20}, {2000, 2000, 1000}} {
		m.SetFieldFloat64("v", 10)
		for range c.n {
			h.AddMetric(&m)
		}
		fs := stats()
		if fs["v_count"] != c.count || fs["v_poolsize"] != c.pool {
			t.Errorf("count %v, poolsize %v; want %d, %d", fs["v_count"], fs["v_poolsize"], c.count, c.pool)
		}
		for k, v := range fs {
			if f, ok := v.(float64); ok && f != 10 {
				t.Errorf("%s = %v; want 10", k, f)
			}
		}
		h.Clear()
	}
	for range 10000 {
		m.SetFieldFloat64("v", float64(rand.Int63n(100)))
		h.AddMetric(&m)
	}
	fs := stats()
	for k, want := range map[string]float64{"v_mean": 50, "v_median": 50, "v_min": 0, "v_p10": 10, "v_p30": 30, "v_p70": 70, "v_p90": 90, "v_max": 100} {
		if got := fs[k].(float64); math.Abs(got-want) > 10 {
			t.Errorf("%s = %v; want %v±10", k, got, want)
		}
	}
	if fs["v_count"] != uint64(10000) || fs["v_poolsize"] != uint64(1000) {
		t.Errorf("count %v, poolsize %v", fs["v_count"], fs["v_poolsize"])
	}
}

func measureFunc(metric *Metric) {
	defer Timer(metric, Millisecond)()
	defer Timer(metric, Nanosecond)()
	time.Sleep(100 * time.Millisecond)
}

// ECS's TestTimers, and the sending timers.
func TestECS_Timers(t *testing.T) {
	metric := NewMetric("test")
	measureFunc(&metric)
	fields := metric.GetFields()
	if fields["execution_time_ms"].(int64) < 100 {
		t.Error("wrong milliseconds")
	}
	if fields["execution_time_ns"].(int64) < 100000000 {
		t.Error("wrong nanoseconds")
	}

	url, _ := start(t, 0, "/metrics")
	single := NewMetric("single", time.Unix(3, 0))
	TimerSendSingle(&single, Millisecond)()
	hist := NewMetric("hist", time.Unix(3, 0))
	TimerSendHist(&hist, Nanoseconds)()
	old := NewMetric("old", time.Unix(3, 0))
	TimerSend(&old, Milliseconds)()
	TimerMS(&old)()
	TimerNS(&old)()
	Timer(&old, TimeResolution(7))() // unknown: sets nothing
	if fs := old.GetFields(); len(fs) != 2 {
		t.Errorf("old timers set %v; want execution_time_ms and _ns", fs)
	}
	got := get(t, url+"/metrics")
	for _, want := range []string{"single execution_time_ms=0i 3000000000\n", "hist execution_time_ns_mean=", "old execution_time_ms_mean=0,"} {
		if !strings.Contains(got, want) {
			t.Errorf("scrape %q lacks %q", got, want)
		}
	}
}

// NewMetric takes both forms ECS has had.
func TestECS_NewMetricForms(t *testing.T) {
	m := NewMetric("a", time.Unix(1, 0))
	m.SetFieldInt64("x", 1)
	if got, _ := formatOne(m); got != "a x=1i 1000000000\n" {
		t.Errorf("NewMetric(name, ts): %q", got)
	}
	before := time.Now()
	n := NewMetric("b")
	if len(n.tags) != 1 || n.tags[0] != (Tag{"subsystem", "ECS"}) || n.timestamp.Before(before) {
		t.Errorf("NewMetric(name) = %+v; want now and subsystem=ECS", n)
	}
	if d := NewDefaultMetric("c", time.Unix(2, 0)); d.name != "c" || len(d.tags) != 0 || d.timestamp != time.Unix(2, 0) {
		t.Errorf("NewDefaultMetric = %+v", d)
	}
}

func formatOne(m Metric) (string, error) {
	var buf bytes.Buffer
	err := Format(&buf, []Metric{m})
	return buf.String(), err
}

// A zero timestamp is ECS's year-1 bucket, written without a timestamp.
func TestECS_ZeroTimestampWrittenAsNone(t *testing.T) {
	url, _ := start(t, 0, "/metrics")
	m := Metric{name: "z"}
	m.SetFieldInt64("x", 1)
	Send(&m)
	Send(&m)
	if got, want := get(t, url+"/metrics"), "z x=2i\n"; got != want {
		t.Errorf("scrape %q; want %q", got, want)
	}
}

func TestECS_SendWhileStoppedDiscarded(t *testing.T) {
	m := NewMetric("m", time.Unix(1, 0))
	m.SetFieldInt64("x", 1)
	Send(&m)
	SendHistogrammable(&m)
	url, _ := start(t, 0, "/metrics")
	if got := get(t, url+"/metrics"); got != "" {
		t.Errorf("scrape %q; want nothing", got)
	}
}

// ECS queues into a channel of 100000 and drops what overflows; here nothing is dropped,
// whatever the rate.
func TestECS_NoDropsUnderTightLoop(t *testing.T) {
	url, _ := start(t, 0, "/metrics")
	const goroutines, n = 8, 50000
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			m := NewMetric("tight", time.Unix(1, 0))
			m.SetFieldInt64("n", 1)
			h := NewMetric("tighth", time.Unix(1, 0))
			h.SetFieldInt64("v", 1)
			for range n {
				Send(&m)
				SendHistogrammable(&h)
			}
		})
	}
	wg.Wait()
	got := get(t, url+"/metrics")
	for _, want := range []string{fmt.Sprintf("tight n=%di ", goroutines*n), fmt.Sprintf("v_count=%du,", goroutines*n)} {
		if !strings.Contains(got, want) {
			t.Errorf("scrape %q lacks %q", got, want)
		}
	}
}

// Send copies the metric: reusing it afterwards changes nothing stored (in ECS it does, as
// the stored bucket shares the sent metric's field map).
func TestECS_MetricReusableAfterSend(t *testing.T) {
	url, _ := start(t, 0, "/metrics")
	m := NewMetric("r", time.Unix(1, 0))
	m.SetFieldInt64("x", 1)
	for range 3 {
		Send(&m)
	}
	m.SetFieldInt64("x", 100)
	m.AddTag("late", "tag")
	if got, want := get(t, url+"/metrics"), "r x=3i 1000000000\n"; got != want {
		t.Errorf("scrape %q; want %q", got, want)
	}
}

// Where ECS panics (a field changing type in a bucket; NaN or ±Inf), the metric is discarded
// and the rest is kept.
func TestECS_UnencodableSendsDiscarded(t *testing.T) {
	url, _ := start(t, 0, "/metrics")
	m := NewMetric("d", time.Unix(1, 0))
	m.SetFieldInt64("x", 1)
	Send(&m)
	conflict := NewMetric("d", time.Unix(1, 0))
	conflict.SetFieldInt64("y", 1)
	conflict.SetFieldFloat64("x", 1)
	Send(&conflict)
	for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		bad := NewMetric("d", time.Unix(1, 0))
		bad.SetFieldFloat64("f", v)
		Send(&bad)
		SendHistogrammable(&bad)
	}
	huge := NewMetric("h", time.Unix(1, 0))
	huge.SetFieldFloat64("f", math.MaxFloat64)
	Send(&huge)
	Send(&huge)
	SendHistogrammable(&huge)
	SendHistogrammable(&huge)
	got := get(t, url+"/metrics")
	want := "d x=1i 1000000000\nh f=1.7976931348623157e+308 1000000000\n" +
		"h f_mean=1.7976931348623157e+308,f_median=1.7976931348623157e+308,f_min=1.7976931348623157e+308,f_p10=1.7976931348623157e+308," +
		"f_p30=1.7976931348623157e+308,f_p70=1.7976931348623157e+308,f_p90=1.7976931348623157e+308,f_max=1.7976931348623157e+308,f_count=2u,f_poolsize=2u 1000000000\n"
	if got != want {
		t.Errorf("scrape:\n%s\nwant:\n%s", got, want)
	}
}

func TestECS_GetFieldsAndMergeFields(t *testing.T) {
	a := NewMetric("m", time.Unix(1, 0))
	a.SetFieldInt64("i", math.MaxInt64)
	a.SetFieldUInt64("u", 1)
	b := NewMetric("m", time.Unix(1, 0))
	b.SetFieldInt64("i", 1)
	b.SetFieldFloat64("u", 2) // another type: left as it is (ECS panics)
	b.SetFieldFloat64("f", 0.5)
	a.MergeFields(&b)
	fs := a.GetFields()
	if fs["i"] != int64(math.MinInt64) || fs["u"] != uint64(1) || fs["f"] != 0.5 || len(fs) != 3 {
		t.Errorf("merged fields %v", fs)
	}
}
