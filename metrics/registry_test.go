package metrics

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"
)

// snapshotJSON fetches the registry's JSON over HTTP and decodes it.
func snapshotJSON(t *testing.T, h http.Handler, query string) map[string]float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics/snapshot"+query, nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET %s: status %d: %s", query, rec.Code, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q; want application/json", ct)
	}
	var m map[string]float64
	if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
		t.Fatalf("decode %s: %v", rec.Body, err)
	}
	return m
}

func TestRegistryJSONLifecycle(t *testing.T) {
	r := NewRegistry(WithoutRateLimit())
	c := NewCounter("requests")
	c.Add(42)
	if got := snapshotJSON(t, r, ""); len(got) != 0 {
		t.Errorf("before add: %v; want {}", got)
	}
	if err := r.Add(c); err != nil {
		t.Fatal(err)
	}
	if got := snapshotJSON(t, r, ""); len(got) != 1 || got["requests"] != 42 {
		t.Errorf("after add: %v; want {requests: 42}", got)
	}
	if err := r.Remove(c); err != nil {
		t.Fatal(err)
	}
	if got := snapshotJSON(t, r, ""); len(got) != 0 {
		t.Errorf("after remove: %v; want {}", got)
	}

	// After "destruction" without remove: the application drops its reference but the
	// registry still holds the metric, which keeps being reported.
	func() {
		tmp := NewCounter("orphan")
		tmp.Inc()
		if err := r.Add(tmp); err != nil {
			t.Fatal(err)
		}
	}()
	runtime.GC()
	if got := snapshotJSON(t, r, ""); got["orphan"] != 1 {
		t.Errorf("after destruction without remove: %v; want orphan still reported", got)
	}
	// After destruction with remove: gone.
	for _, m := range r.Metrics() {
		if err := r.Remove(m); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	if got := snapshotJSON(t, r, ""); len(got) != 0 {
		t.Errorf("after destruction with remove: %v; want {}", got)
	}
}

func TestRegistryAddRemoveErrors(t *testing.T) {
	var r Registry // zero value is usable
	a, b := NewCounter("x"), NewGauge("x")
	if err := r.Add(a); err != nil {
		t.Fatal(err)
	}
	if err := r.Add(b); !errors.Is(err, ErrDuplicate) {
		t.Errorf("Add(duplicate) = %v; want ErrDuplicate", err)
	}
	if err := r.Add(a); !errors.Is(err, ErrDuplicate) {
		t.Errorf("Add(same metric twice) = %v; want ErrDuplicate", err)
	}
	for _, name := range []string{"", "a\nb", "x\x7f"} {
		if err := r.Add(NewCounter(name)); !errors.Is(err, ErrInvalidName) {
			t.Errorf("Add(%q) = %v; want ErrInvalidName", name, err)
		}
	}
	if err := r.Add(nil); err == nil {
		t.Error("Add(nil) succeeded")
	}
	if err := r.Remove(nil); err == nil {
		t.Error("Remove(nil) succeeded")
	}
	if err := r.Remove(a); err != nil {
		t.Errorf("Remove(a) = %v", err)
	}
	if err := r.Remove(a); !errors.Is(err, ErrNotRegistered) {
		t.Errorf("Remove twice = %v; want ErrNotRegistered", err)
	}
}

func TestRegistrySnapshotContent(t *testing.T) {
	r := NewRegistry(WithoutRateLimit())
	tm := NewTimer("latency", Milliseconds, WithWindow(time.Hour, 0))
	for _, ms := range []int{10, 20, 30, 40} {
		tm.Observe(time.Duration(ms) * time.Millisecond)
	}
	g := NewGauge("level", WithWindow(time.Hour, 0))
	g.Set(7) // one value: no statistics yet
	failing := NewGaugeFunc("failing", func(context.Context) (float64, error) { return 0, errors.New("down") })
	pulled := NewGaugeFunc("pulled", func(context.Context) (float64, error) { return 3, nil })
	for _, m := range []Metric{tm, g, failing, pulled} {
		if err := r.Add(m); err != nil {
			t.Fatal(err)
		}
	}
	got := snapshotJSON(t, r, "")
	want := map[string]float64{
		"latency_ms": 40, "latency_ms/count": 4, "latency_ms/min": 10, "latency_ms/max": 40,
		"latency_ms/p50": 25, "latency_ms/p90": 37, "latency_ms/p95": 38.5,
		"latency_ms/p99": 39.7, "latency_ms/p999": 39.97, "latency_ms/p9999": 39.997,
		"level": 7, "pulled": 3,
	}
	if len(got) != len(want) {
		t.Errorf("snapshot has %d keys %v; want %d", len(got), got, len(want))
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g-v > 1e-9 || v-g > 1e-9 {
			t.Errorf("snapshot[%q] = %v (present %v); want %v", k, g, ok, v)
		}
	}
	if _, ok := got["failing"]; ok {
		t.Error("a failed gauge was reported; want it left out")
	}
}

func TestRegistryTimeout(t *testing.T) {
	r := NewRegistry(WithoutRateLimit())
	release := make(chan struct{})
	defer close(release)
	slow := NewGaugeFunc("slow", func(ctx context.Context) (float64, error) {
		select {
		case <-release:
			return 1, nil
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	})
	stubborn := NewGaugeFunc("stubborn", func(context.Context) (float64, error) {
		<-release // ignores ctx
		return 1, nil
	})
	fast := NewGaugeFunc("fast", func(context.Context) (float64, error) { return 2, nil })
	for _, m := range []Metric{slow, stubborn, fast, NewCounter("c")} {
		if err := r.Add(m); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	got := snapshotJSON(t, r, "?timeout=500ms")
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("snapshot with timeout=500ms took %v", el)
	}
	if len(got) != 2 || got["fast"] != 2 || got["c"] != 0 {
		t.Errorf("snapshot = %v; want only fast and c (slow ones left out)", got)
	}
	r.Timeout = 300 * time.Millisecond
	if got := snapshotJSON(t, r, ""); len(got) != 2 {
		t.Errorf("snapshot with Registry.Timeout = %v; want only fast and c", got)
	}
}

func TestRegistryHTTPErrors(t *testing.T) {
	r := NewRegistry()
	for _, c := range []struct {
		method, target string
		code           int
	}{
		{"GET", "/?timeout=soon", http.StatusBadRequest},
		{"GET", "/?timeout=-1s", http.StatusBadRequest},
	} {
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, httptest.NewRequest(c.method, c.target, nil))
		if rec.Code != c.code {
			t.Errorf("%s %s: status %d; want %d", c.method, c.target, rec.Code, c.code)
		}
		var e struct{ Error string }
		if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error == "" {
			t.Errorf("%s %s: body %q; want a JSON error", c.method, c.target, rec.Body)
		}
	}
}

func TestParseTimeout(t *testing.T) {
	for s, want := range map[string]time.Duration{
		"1.5s": 1500 * time.Millisecond, "250ms": 250 * time.Millisecond, "5secs": 5 * time.Second,
		"1mins": time.Minute, "2hrs": 2 * time.Hour, "1days": 24 * time.Hour, "1weeks": 7 * 24 * time.Hour,
		"0.5secs": 500 * time.Millisecond, "10ns": 10, "0": 0,
	} {
		got, err := ParseTimeout(s)
		if err != nil || got != want {
			t.Errorf("ParseTimeout(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	for _, s := range []string{"", "secs", "-1secs", "1e3secs", "1..2secs", "5parsecs", "-5s", "99999999999weeks"} {
		if d, err := ParseTimeout(s); err == nil {
			t.Errorf("ParseTimeout(%q) = %v; want error", s, d)
		} else if !strings.Contains(err.Error(), "parse timeout") {
			t.Errorf("ParseTimeout(%q) error %q; want it to say what failed", s, err)
		}
	}
}

func FuzzParseTimeout(f *testing.F) {
	for _, s := range []string{"1.5s", "5secs", "1mins", "2hrs", "", "-1s", "1..2secs", "99999999999weeks"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseTimeout(s)
		if err == nil && d < 0 {
			t.Errorf("ParseTimeout(%q) = %v; want non-negative", s, d)
		}
	})
}

func FuzzHandler(f *testing.F) {
	f.Add("timeout=1s")
	f.Add("timeout=5secs&timeout=x")
	f.Add("%zz")
	f.Add("jsonp=cb")
	f.Add("jsonp=a.b$_1&timeout=1s")
	f.Add("jsonp=alert(1)")
	f.Add("jsonp=")
	r := NewRegistry(WithoutRateLimit())
	r.Add(NewCounter("c"))
	f.Fuzz(func(t *testing.T, query string) {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/", nil)
		req.URL.RawQuery = query
		r.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK && rec.Code != http.StatusBadRequest {
			t.Errorf("query %q: status %d", query, rec.Code)
		}
		body := rec.Body.Bytes()
		if ct := rec.Header().Get("Content-Type"); ct == "text/javascript" {
			// CALLBACK(JSON); with a callback that passed validCallback
			open := strings.IndexByte(rec.Body.String(), '(')
			if open < 0 || !validCallback(string(body[:open])) || !strings.HasSuffix(rec.Body.String(), ");") {
				t.Fatalf("query %q: malformed JSONP %q", query, body)
			}
			body = body[open+1 : len(body)-2]
		}
		if !json.Valid(body) {
			t.Errorf("query %q: invalid JSON %q", query, rec.Body)
		}
	})
}

func TestGaugeFuncTimeout(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	stubborn := NewGaugeFunc("stubborn", func(context.Context) (float64, error) {
		<-release // ignores ctx
		return 1, nil
	}, WithTimeout(100*time.Millisecond))
	polite := NewGaugeFunc("polite", func(ctx context.Context) (float64, error) {
		<-ctx.Done()
		return 0, ctx.Err()
	}, WithTimeout(100*time.Millisecond))
	if _, err := polite.Snapshot(context.Background()); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Snapshot() of a gauge past its timeout = %v; want DeadlineExceeded", err)
	}
	r := NewRegistry()
	for _, m := range []Metric{stubborn, polite, NewCounter("c")} {
		if err := r.Add(m); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	got := r.Snapshot(context.Background()) // no deadline of its own
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("Snapshot took %v; want about the gauges' 100ms timeout", el)
	}
	if len(got) != 1 {
		t.Errorf("Snapshot() = %v; want only c", got)
	}
}

func FuzzValidCallback(f *testing.F) {
	for _, s := range []string{"cb", "a.b", "$", "_x1", "jQuery123_456", "", ".", "a.", ".a", "1a", "a-b", "a(b)", "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !validCallback(s) {
			return
		}
		// Only what cannot leave a JavaScript call expression: names and dots, starting with
		// a name, never two dots in a row, never ending with one.
		if len(s) == 0 || len(s) > maxCallbackLen || s[0] == '.' || s[len(s)-1] == '.' || strings.Contains(s, "..") {
			t.Fatalf("validCallback(%q) = true", s)
		}
		for _, c := range []byte(s) {
			if !(c == '.' || c == '_' || c == '$' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
				t.Fatalf("validCallback(%q) = true with byte %q", s, c)
			}
		}
		for _, part := range strings.Split(s, ".") {
			if part[0] >= '0' && part[0] <= '9' {
				t.Fatalf("validCallback(%q) = true with a name starting with a digit", s)
			}
		}
	})
}
