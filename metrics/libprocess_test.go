package metrics

// Tests of the libprocess semantics this package imitates, one per expectation, ported from
// 3rdparty/libprocess/src/tests/metrics_tests.cpp and timeseries_tests.cpp where those have
// them. libprocess pauses and advances its clock; these tests inject a fake one, so that none
// depends on how fast the machine runs.

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cantal-go/cantal/shm"
)

// fakeClock is a clock that moves only when told to.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
	// created receives a value each time a timer is created: a test waits on it to know that
	// a goroutine is now waiting for the clock.
	created chan struct{}
}

type fakeTimer struct {
	at      time.Time
	c       chan time.Time
	stopped bool
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Unix(1_000_000, 0), created: make(chan struct{}, 100)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) nanos() int64 { return c.Now().UnixNano() }

func (c *fakeClock) NewTimer(d time.Duration) (<-chan time.Time, func() bool) {
	c.mu.Lock()
	t := &fakeTimer{at: c.now.Add(d), c: make(chan time.Time, 1)}
	c.timers = append(c.timers, t)
	c.mu.Unlock()
	c.created <- struct{}{}
	return t.c, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		was := !t.stopped
		t.stopped = true
		return was
	}
}

// Advance moves the clock forward by d and fires the timers due.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	c.timers = slices.DeleteFunc(c.timers, func(t *fakeTimer) bool {
		if t.stopped {
			return true
		}
		if !t.at.After(c.now) {
			t.stopped = true
			t.c <- c.now
			return true
		}
		return false
	})
}

// withClock makes a metric read clk instead of the real clock.
func withClock(clk *fakeClock) Option {
	return func(o *options) { o.clock = clk.nanos }
}

// withRegistryClock makes a Registry's rate limit read clk instead of the real clock.
func withRegistryClock(clk *fakeClock) RegistryOption {
	return func(o *registryOptions) { o.clock = clk }
}

// timeSeriesWindow is libprocess' TIME_SERIES_WINDOW.
const timeSeriesWindow = 2 * 7 * 24 * time.Hour

// get serves one request and returns the recorder.
func get(h http.Handler, target string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", target, nil))
	return rec
}

func decodeSnapshot(t *testing.T, rec *httptest.ResponseRecorder) map[string]float64 {
	t.Helper()
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	var m map[string]float64
	if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
		t.Fatalf("decode %s: %v", rec.Body, err)
	}
	return m
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*max(1, math.Abs(b)) }

// MetricsTest.Statistics and MetricsTest.SnapshotStatistics: a windowed counter records its
// initial 0, so ten increments leave eleven values, 0 to 10.
func TestLibprocess_WindowedCounterInitialZero(t *testing.T) {
	clk := newFakeClock()
	counter := NewCounter("test/counter", WithWindow(timeSeriesWindow, 0), withClock(clk))
	r := NewRegistry(withRegistryClock(clk))
	if err := r.Add(counter); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		clk.Advance(time.Second)
		counter.Inc()
	}
	s, ok := counter.Statistics()
	if !ok {
		t.Fatal("Statistics() = none; want some")
	}
	if s.Count != 11 {
		t.Errorf("count = %d; want 11", s.Count)
	}
	want := map[string]float64{
		"test/counter":       10,
		"test/counter/count": 11,
		"test/counter/min":   0,
		"test/counter/max":   10,
		"test/counter/p50":   5,
		"test/counter/p90":   9,
		"test/counter/p95":   9.5,
		"test/counter/p99":   9.9,
		"test/counter/p999":  9.99,
		"test/counter/p9999": 9.999,
	}
	for k, v := range map[string]float64{
		"/min": s.Min, "/max": s.Max, "/p50": s.P50, "/p90": s.P90, "/p95": s.P95,
		"/p99": s.P99, "/p999": s.P999, "/p9999": s.P9999,
	} {
		if !near(v, want["test/counter"+k]) {
			t.Errorf("statistics %s = %v; want %v", k, v, want["test/counter"+k])
		}
	}
	got := decodeSnapshot(t, get(r, "/metrics/snapshot"))
	for k, v := range want {
		if g, ok := got[k]; !ok || !near(g, v) {
			t.Errorf("snapshot[%q] = %v (present %v); want %v", k, g, ok, v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("snapshot = %v; want exactly %v", got, want)
	}

	// Without a window nothing is recorded, not even the 0.
	if _, ok := NewCounter("plain").Statistics(); ok {
		t.Error("a counter without a window has statistics")
	}
}

// MetricsTest.Timer: "It is not an error to stop a timer that hasn't been started", nor "a
// timer that has already been stopped".
func TestLibprocess_StopIdempotent(t *testing.T) {
	clk := newFakeClock()
	timer := NewTimer("test/timer", Nanoseconds, withClock(clk))
	if timer.Name() != "test/timer_ns" {
		t.Errorf("Name() = %q; want test/timer_ns", timer.Name())
	}
	r := NewRegistry()
	if err := r.Add(timer); err != nil {
		t.Fatal(err)
	}

	timer.Stop("") // not started: not an error, nothing recorded
	if _, ok := timer.Last(); ok {
		t.Error("Stop before Start recorded a duration")
	}

	// Time a no-op.
	timer.Start("")
	clk.Advance(time.Microsecond)
	if d, ok := timer.Stop(""); !ok || d != time.Microsecond {
		t.Errorf("Stop() = %v, %v; want 1µs, true", d, ok)
	}
	v, err := timer.Snapshot(context.Background())
	if err != nil || v != float64(time.Microsecond.Nanoseconds()) {
		t.Errorf("value = %v, %v; want 1000 (ns)", v, err)
	}

	timer.Stop("") // already stopped: not an error either
	if v, err := timer.Snapshot(context.Background()); err != nil || v != 1000 {
		t.Errorf("value after a second Stop = %v, %v; want still 1000", v, err)
	}
	if err := r.Remove(timer); err != nil {
		t.Fatal(err)
	}
}

// MetricsTest.Timer and MetricsTest.AsyncTimer: a timer's value fails ("No value") until its
// first stop, so the snapshot leaves it out; a duration of zero is a value.
func TestLibprocess_TimerAbsentUntilStop(t *testing.T) {
	clk := newFakeClock()
	timer := NewTimer("test/timer", Microseconds, withClock(clk))
	windowed := NewTimer("test/windowed", Milliseconds, WithWindow(time.Minute, 0), withClock(clk))
	r := NewRegistry(WithoutRateLimit())
	for _, m := range []Metric{timer, windowed} {
		if err := r.Add(m); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := timer.Snapshot(context.Background()); !errors.Is(err, errNoValue) {
		t.Errorf("value before the first stop = %v; want a failure", err)
	}
	timer.Start("k")
	if got := r.Snapshot(context.Background()); len(got) != 0 {
		t.Errorf("snapshot before any stop = %v; want {}", got)
	}
	timer.Stop("k") // zero time on the fake clock
	windowed.Time(func() { clk.Advance(3 * time.Millisecond) })
	got := decodeSnapshot(t, get(r, "/metrics/snapshot"))
	if v, ok := got["test/timer_us"]; !ok || v != 0 {
		t.Errorf("snapshot[test/timer_us] = %v (present %v); want 0", v, ok)
	}
	if v, ok := got["test/windowed_ms"]; !ok || v != 3 {
		t.Errorf("snapshot[test/windowed_ms] = %v (present %v); want 3", v, ok)
	}
	if len(got) != 2 {
		t.Errorf("snapshot = %v; want the two values (one duration: no statistics)", got)
	}
}

// metrics::remove(metric) removes by metric.name(): any object with that name will do.
func TestLibprocess_RemoveByName(t *testing.T) {
	r := NewRegistry(WithoutRateLimit())
	added := NewCounter("test/counter")
	added.Add(3)
	if err := r.Add(added); err != nil {
		t.Fatal(err)
	}
	if err := r.Add(NewGauge("test/counter")); !errors.Is(err, ErrDuplicate) {
		t.Errorf("Add(same name) = %v; want ErrDuplicate (\"was already added\")", err)
	}
	if err := r.Remove(NewCounter("test/counter")); err != nil {
		t.Fatalf("Remove(another counter of the same name) = %v; want nil", err)
	}
	if got := r.Snapshot(context.Background()); len(got) != 0 {
		t.Errorf("snapshot after remove = %v; want {}", got)
	}
	if err := r.Remove(added); !errors.Is(err, ErrNotRegistered) {
		t.Errorf("Remove(removed name) = %v; want ErrNotRegistered (\"not found\")", err)
	}
	// A gauge can stand for the counter too: only the name matters.
	if err := r.Add(added); err != nil {
		t.Fatal(err)
	}
	if err := r.Remove(NewGauge("test/counter")); err != nil {
		t.Errorf("Remove(a gauge of the same name) = %v; want nil", err)
	}
}

// http::OK(jsonify(snapshot), request.url.query.get("jsonp")): CALLBACK(JSON); as
// text/javascript, byte for byte: no newline after it, "/" in keys escaped as \/ (stout's
// StringWriter), doubles as "%#.15g" with trailing zeros trimmed and a final ".0" (42.0).
func TestLibprocess_JSONP(t *testing.T) {
	r := NewRegistry(WithoutRateLimit())
	c := NewCounter("test/counter")
	c.Add(42)
	if err := r.Add(c); err != nil {
		t.Fatal(err)
	}
	rec := get(r, "/metrics/snapshot?jsonp=handle.metrics_1")
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "text/javascript" {
		t.Errorf("Content-Type = %q; want text/javascript", ct)
	}
	if body, want := rec.Body.String(), `handle.metrics_1({"test\/counter":42.0});`; body != want {
		t.Errorf("body = %q; want %q", body, want)
	}
	// With the timeout parameter too.
	if body := get(r, "/?timeout=1secs&jsonp=cb").Body.String(); !strings.HasPrefix(body, "cb({") {
		t.Errorf("body = %q; want cb(...)", body)
	}
	// An empty callback is no callback.
	rec = get(r, "/?jsonp=")
	if ct := rec.Header().Get("Content-Type"); rec.Code != http.StatusOK || ct != "application/json" {
		t.Errorf("jsonp=: %d %q; want plain JSON", rec.Code, ct)
	}
	// A callback that is not a JavaScript name is refused rather than reflected.
	for _, cb := range []string{"alert(1);x", "a b", "1cb", "a..b", "a.", "<script>", strings.Repeat("a", 129)} {
		rec := get(r, "/?jsonp="+url.QueryEscape(cb))
		if rec.Code != http.StatusBadRequest || strings.Contains(rec.Header().Get("Content-Type"), "javascript") {
			t.Errorf("jsonp=%q: %d %q; want 400 JSON", cb, rec.Code, rec.Header().Get("Content-Type"))
		}
	}
	// WithoutJSONP: the parameter is ignored.
	off := NewRegistry(WithoutRateLimit(), WithoutJSONP())
	rec = get(off, "/?jsonp=cb")
	if rec.Header().Get("Content-Type") != "application/json" || rec.Body.String() != "{}" {
		t.Errorf("WithoutJSONP: %q %q; want plain {}", rec.Header().Get("Content-Type"), rec.Body)
	}
}

// MetricsProcess rate limits /metrics/snapshot with RateLimiter(2, Seconds(1)): permits half a
// second apart, a request that comes sooner waiting for its turn (it is not refused).
func TestLibprocess_SnapshotRateLimit(t *testing.T) {
	clk := newFakeClock()
	r := NewRegistry(withRegistryClock(clk))
	c := NewCounter("test/counter")
	if err := r.Add(c); err != nil {
		t.Fatal(err)
	}
	// The first request is served at once.
	if rec := get(r, "/metrics/snapshot"); rec.Code != http.StatusOK {
		t.Fatalf("first request: %d", rec.Code)
	}
	// A malformed request is refused at once and takes no turn.
	if rec := get(r, "/metrics/snapshot?timeout=foobar"); rec.Code != http.StatusBadRequest {
		t.Fatalf("timeout=foobar: %d; want 400", rec.Code)
	}

	// Two more at the same instant: they wait, in order, for 500ms and 1s.
	type result struct {
		n   int
		rec *httptest.ResponseRecorder
	}
	done := make(chan result, 2)
	for n := 2; n <= 3; n++ {
		go func() { done <- result{n, get(r, "/metrics/snapshot")} }()
		<-clk.created // request n now waits for the clock
	}
	select {
	case res := <-done:
		t.Fatalf("request %d answered (%d) before its turn", res.n, res.rec.Code)
	default:
	}
	c.Inc()
	clk.Advance(499 * time.Millisecond)
	select {
	case res := <-done:
		t.Fatalf("request %d answered after 499ms", res.n)
	default:
	}
	clk.Advance(time.Millisecond) // 500ms: the second request's turn
	res := <-done
	if res.n != 2 || res.rec.Code != http.StatusOK || decodeSnapshot(t, res.rec)["test/counter"] != 1 {
		t.Fatalf("at 500ms: request %d answered %d %s; want request 2, 200, the current snapshot", res.n, res.rec.Code, res.rec.Body)
	}
	select {
	case res := <-done:
		t.Fatalf("request %d answered at 500ms; want at 1s", res.n)
	default:
	}
	clk.Advance(500 * time.Millisecond)
	if res := <-done; res.n != 3 || res.rec.Code != http.StatusOK {
		t.Fatalf("at 1s: request %d answered %d; want request 3, 200", res.n, res.rec.Code)
	}

	// A request whose client leaves while it waits gives its turn back.
	ctx, cancel := context.WithCancel(context.Background())
	gone := make(chan int, 1)
	go func() {
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics/snapshot", nil).WithContext(ctx))
		gone <- rec.Code
	}()
	<-clk.created
	cancel()
	if code := <-gone; code != http.StatusServiceUnavailable {
		t.Errorf("request cancelled while waiting: %d; want 503", code)
	}
	clk.Advance(500 * time.Millisecond) // the cancelled request's turn, unused: the next one takes it
	go func() { done <- result{5, get(r, "/metrics/snapshot")} }()
	select {
	case res := <-done:
		if res.rec.Code != http.StatusOK {
			t.Errorf("request after a cancelled one: %d", res.rec.Code)
		}
	case <-clk.created:
		t.Error("the request after a cancelled one waits; want the cancelled one's turn")
		clk.Advance(time.Second)
		<-done
	}

	// WithRateLimit(10, time.Second): 100ms apart. WithoutRateLimit: never waits.
	fast := NewRegistry(WithRateLimit(10, time.Second), withRegistryClock(clk))
	get(fast, "/")
	go func() { done <- result{4, get(fast, "/")} }()
	<-clk.created
	clk.Advance(100 * time.Millisecond)
	if res := <-done; res.rec.Code != http.StatusOK {
		t.Errorf("WithRateLimit(10, 1s): %d", res.rec.Code)
	}
	free := NewRegistry(WithoutRateLimit(), withRegistryClock(clk))
	for range 5 {
		if rec := get(free, "/"); rec.Code != http.StatusOK {
			t.Errorf("WithoutRateLimit: %d", rec.Code)
		}
	}
	if n := len(clk.created); n != 0 {
		t.Errorf("WithoutRateLimit: %d requests waited", n)
	}
}

// TimeSeries truncates only when a value is set: Statistics::from reads whatever is there, so an
// idle metric keeps its statistics until its next value.
func TestLibprocess_IdleWindowKeepsStatistics(t *testing.T) {
	clk := newFakeClock()
	g := NewGauge("g", WithWindow(10*time.Second, 0), withClock(clk))
	tm := NewTimer("t", Milliseconds, WithWindow(10*time.Second, 0), withClock(clk))
	for i := 1; i <= 3; i++ {
		g.Set(float64(i))
		tm.Observe(time.Duration(i) * time.Millisecond)
		clk.Advance(time.Second)
	}
	clk.Advance(time.Hour) // idle for far longer than the window
	for _, m := range []Metric{g, tm} {
		s, ok := m.Statistics()
		if !ok || s.Count != 3 || s.Min != 1 || s.Max != 3 {
			t.Errorf("%s: Statistics() after an idle hour = %+v, %v; want 1, 2, 3", m.Name(), s, ok)
		}
	}
	g.Set(4) // the new value drops those older than the window before it
	g.Set(5)
	if s, ok := g.Statistics(); !ok || s.Count != 2 || s.Min != 4 {
		t.Errorf("Statistics() after new values = %+v, %v; want 4, 5", s, ok)
	}
	tm.Observe(time.Millisecond) // one value left: no statistics (libprocess needs two)
	if s, ok := tm.Statistics(); ok {
		t.Errorf("timer Statistics() with one value in the window = %+v; want none", s)
	}
}

// TimeSeries.sparsify: beyond capacity, every other value of the older half goes, in rounds.
func TestLibprocess_ThinsOlderHalf(t *testing.T) {
	clk := newFakeClock()
	g := NewGauge("g", WithWindow(time.Duration(math.MaxInt64), 10), withClock(clk))
	for i := range 10 {
		g.Set(float64(i))
		clk.Advance(time.Second)
	}
	if got, want := g.w.values(), seq(0, 1, 2, 3, 4, 5, 6, 7, 8, 9); !slices.Equal(got, want) {
		t.Fatalf("full: %v; want %v", got, want)
	}
	for i, want := range [][]float64{
		seq(0, 2, 3, 4, 5, 6, 7, 8, 9, 10),
		seq(0, 2, 4, 5, 6, 7, 8, 9, 10, 11),
		seq(0, 2, 4, 6, 7, 8, 9, 10, 11, 12),
		seq(0, 2, 4, 6, 8, 9, 10, 11, 12, 13),
		seq(0, 2, 4, 6, 8, 10, 11, 12, 13, 14),
		// A new round of sparsification, from the beginning again.
		seq(0, 4, 6, 8, 10, 11, 12, 13, 14, 15),
		seq(0, 4, 8, 10, 11, 12, 13, 14, 15, 16),
		seq(0, 4, 8, 11, 12, 13, 14, 15, 16, 17),
		seq(0, 4, 8, 11, 13, 14, 15, 16, 17, 18),
		seq(0, 4, 8, 11, 13, 15, 16, 17, 18, 19),
	} {
		g.Set(float64(10 + i))
		clk.Advance(time.Second)
		if got := g.w.values(); !slices.Equal(got, want) {
			t.Errorf("after set(%d): %v; want %v", 10+i, got, want)
		}
	}
	// The statistics are over what is left: the oldest value and the newest stay.
	if s, ok := g.Statistics(); !ok || s.Count != 10 || s.Min != 0 || s.Max != 19 {
		t.Errorf("Statistics() = %+v, %v; want count 10 min 0 max 19", s, ok)
	}

	// The same with the real (coarse) clock, many values stamped alike.
	c := NewCounter("c", WithWindow(time.Hour, 1000))
	for range 100_000 {
		c.Inc()
	}
	vs := c.w.values()
	if len(vs) != 1000 || vs[0] != 0 || vs[len(vs)-1] != 100_000 || !slices.IsSorted(vs) {
		t.Errorf("100000 increments, capacity 1000: %d values from %v to %v (sorted %v); want 1000 from 0 to 100000, in order",
			len(vs), vs[0], vs[len(vs)-1], slices.IsSorted(vs))
	}
	if newest := vs[len(vs)-500:]; newest[0] != 100_000-499 {
		t.Errorf("newer half starts at %v; want the last 500 increments kept at full granularity", newest[0])
	}
}

func seq(vs ...float64) []float64 { return vs }

// libprocess' snapshot has name/count, /min, /max, /p50, /p90, /p95, /p99, /p999, /p9999 and
// no /mean; WithMean adds it, to the snapshot and to a Mirror.
func TestLibprocess_NoMeanKey(t *testing.T) {
	newTimer := func() *Timer {
		tm := NewTimer("latency", Milliseconds, WithWindow(time.Hour, 0))
		tm.Observe(10 * time.Millisecond)
		tm.Observe(30 * time.Millisecond)
		return tm
	}
	plain := NewRegistry(WithoutRateLimit())
	if err := plain.Add(newTimer()); err != nil {
		t.Fatal(err)
	}
	got := decodeSnapshot(t, get(plain, "/"))
	var keys []string
	for k := range got {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	want := []string{"latency_ms", "latency_ms/count", "latency_ms/max", "latency_ms/min", "latency_ms/p50",
		"latency_ms/p90", "latency_ms/p95", "latency_ms/p99", "latency_ms/p999", "latency_ms/p9999"}
	if !slices.Equal(keys, want) {
		t.Errorf("snapshot keys = %v; want %v", keys, want)
	}

	withMean := NewRegistry(WithoutRateLimit(), WithMean())
	if err := withMean.Add(newTimer()); err != nil {
		t.Fatal(err)
	}
	if got := decodeSnapshot(t, get(withMean, "/")); got["latency_ms/mean"] != 20 || len(got) != 11 {
		t.Errorf("WithMean snapshot = %v; want latency_ms/mean 20 as an 11th key", got)
	}

	for _, c := range []struct {
		reg  *Registry
		mean bool
	}{{plain, false}, {withMean, true}} {
		base := filepath.Join(t.TempDir(), "app")
		mir := NewMirror(c.reg, shm.Options{Path: base})
		if err := mir.Update(context.Background()); err != nil {
			t.Fatal(err)
		}
		entries := readMirror(t, base)
		if _, ok := entries["latency_ms/mean"]; ok != c.mean {
			t.Errorf("mirror of a registry with mean %v: latency_ms/mean present %v (%v)", c.mean, ok, entries)
		}
		mir.Close()
	}
}
