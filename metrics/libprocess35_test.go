package metrics

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// libprocess' Statistics: p25 and p75 interpolated at p·(n−1) like the other percentiles, and
// left out of the snapshot as libprocess leaves them out.
func TestStatisticsHaveP25AndP75(t *testing.T) {
	for _, c := range []struct {
		values   []float64
		p25, p75 float64
	}{
		{[]float64{10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0}, 2.5, 7.5},
		{[]float64{4, 1, 3, 2}, 1.75, 3.25},
	} {
		s, ok := NewStatistics(c.values)
		if !ok || s.P25 != c.p25 || s.P75 != c.p75 {
			t.Errorf("NewStatistics(%v): p25 %v p75 %v; want %v %v", c.values, s.P25, s.P75, c.p25, c.p75)
		}
	}
	r := NewRegistry(WithoutRateLimit())
	g := NewGauge("g", WithWindow(time.Hour, 0))
	g.Set(1)
	g.Set(2)
	r.Add(g)
	snap := r.Snapshot(context.Background())
	if _, ok := snap["g/p50"]; !ok {
		t.Fatalf("snapshot %v has no g/p50", snap)
	}
	for _, k := range []string{"g/p25", "g/p75"} {
		if _, ok := snap[k]; ok {
			t.Errorf("snapshot has %s; libprocess reports no p25/p75", k)
		}
	}
}

// stout's Days and Weeks durations: a Timer names them _days and _weeks.
func TestTimerDaysAndWeeksUnits(t *testing.T) {
	for _, c := range []struct {
		unit Unit
		name string
		d    time.Duration
		want float64
	}{
		{Days, "t_days", 36 * time.Hour, 1.5},
		{Weeks, "t_weeks", 14 * 24 * time.Hour, 2},
	} {
		tm := NewTimer("t", c.unit)
		tm.Observe(c.d)
		v, err := tm.Snapshot(context.Background())
		if tm.Name() != c.name || err != nil || v != c.want {
			t.Errorf("Timer in %v: %s = %v (%v); want %s = %v", c.unit, tm.Name(), v, err, c.name, c.want)
		}
	}
}

// The snapshot body as libprocess' http::OK(jsonify(map<string, double>), jsonp) writes it,
// byte for byte: sorted keys, no spaces, no trailing newline, "/" escaped as \/, every value a
// double as stout writes it ("%#.15g", trailing zeros trimmed, a final "." completed to ".0").
// The one deliberate difference: exponent forms keep their exponent's zeros (stout writes 1e20
// as 1.00000000000000e+2).
func TestSnapshotBodyIsLibprocessBytes(t *testing.T) {
	r := NewRegistry(WithoutRateLimit())
	for name, v := range map[string]float64{
		"a/int": 42, "b/tenth": 0.1, "c/neg": -3, "d/third": 1.0 / 3, "e/big": 1e10,
		"f/e15": 1.5e15, "g/e20": 1e20, "h/small": 1e-5, "i/zero": 0, "j\"q": 9.9,
	} {
		g := NewGauge(name)
		g.Set(v)
		if err := r.Add(g); err != nil {
			t.Fatal(err)
		}
	}
	want := `{"a\/int":42.0,"b\/tenth":0.1,"c\/neg":-3.0,"d\/third":0.333333333333333,` +
		`"e\/big":10000000000.0,"f\/e15":1.50000000000000e+15,"g\/e20":1.00000000000000e+20,` +
		`"h\/small":1.00000000000000e-05,"i\/zero":0.0,"j\"q":9.9}`
	rec := get(r, "/metrics/snapshot")
	if got := rec.Body.String(); got != want {
		t.Errorf("body\n got %s\nwant %s", got, want)
	}
	if rec.Header().Get("Content-Length") != "213" || len(want) != 213 {
		t.Errorf("Content-Length %s; want %d", rec.Header().Get("Content-Length"), len(want))
	}
	rec = get(r, "/metrics/snapshot?jsonp=cb")
	if got := rec.Body.String(); got != "cb("+want+");" {
		t.Errorf("JSONP body %q; want cb(...); with no newline", got)
	}
}

// libprocess' routes answer every method: POST to the snapshot endpoint gets the snapshot.
func TestSnapshotAnswersPOST(t *testing.T) {
	r := NewRegistry(WithoutRateLimit())
	c := NewCounter("c")
	c.Inc()
	r.Add(c)
	for _, method := range []string{"POST", "PUT", "DELETE"} {
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, httptest.NewRequest(method, "/metrics/snapshot?jsonp=cb", strings.NewReader("x")))
		if rec.Code != http.StatusOK || rec.Body.String() != `cb({"c":1.0});` {
			t.Errorf("%s: %d %q; want 200 cb({\"c\":1.0});", method, rec.Code, rec.Body)
		}
	}
}

// Without ?timeout= libprocess waits for pulled gauges without bound (Duration::max): the
// gauge's context has no deadline (before: cut at 10 s). With ?timeout= it has one, and
// timeout=0secs does not wait at all.
func TestSnapshotWithoutTimeoutWaitsForSlowGauges(t *testing.T) {
	r := NewRegistry(WithoutRateLimit())
	r.Add(NewGaugeFunc("deadline", func(ctx context.Context) (float64, error) {
		if _, ok := ctx.Deadline(); ok {
			return 1, nil
		}
		return 0, nil
	}))
	if snap := decodeSnapshot(t, get(r, "/metrics/snapshot")); snap["deadline"] != 0 {
		t.Errorf("without ?timeout=: the gauge had a deadline; libprocess waits without bound")
	}
	if snap := decodeSnapshot(t, get(r, "/metrics/snapshot?timeout=1mins")); snap["deadline"] != 1 {
		t.Errorf("with ?timeout=1mins: the gauge had no deadline")
	}
	if snap := decodeSnapshot(t, get(r, "/metrics/snapshot?timeout=0secs")); len(snap) != 0 {
		t.Errorf("with ?timeout=0secs: %v; want the gauge not waited for", snap)
	}
	// The client going away still ends the wait.
	block := NewRegistry(WithoutRateLimit())
	block.Add(NewGaugeFunc("slow", func(ctx context.Context) (float64, error) {
		<-ctx.Done()
		return 0, ctx.Err()
	}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		block.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil).WithContext(ctx))
	}()
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a snapshot whose client went away is still waiting")
	}
}

// Deliberate difference from libprocess' TimeSeries, which keys values by time: two values set
// at the same time are both kept (libprocess: the second replaces the first), and a value
// stamped before the newest is stamped as the newest (libprocess: inserted at its time). The
// window's clock is coarse (the window/100, at least 1 ms), so values a busy metric sets within
// one tick share a stamp; keeping one would drop most of them.
func TestWindowKeepsSameTimeValuesAndStampsLateOnesNewest(t *testing.T) {
	s := newSeries(100, 10)
	s.set(entry{ts: 5, v: 1}, 5)
	s.set(entry{ts: 5, v: 2}, 5)
	s.set(entry{ts: 3, v: 3}, 5) // late: stamped 5
	if s.len() != 3 {
		t.Fatalf("%d values; want 3 (same-time values kept)", s.len())
	}
	for i := range 3 {
		if e := s.at(i); e.ts != 5 || e.v != float64(i+1) {
			t.Errorf("value %d = %+v; want %v stamped 5", i, e, i+1)
		}
	}
	// All three leave the window together once it has passed their common stamp.
	s.set(entry{ts: 105, v: 4}, 105)
	if s.len() != 1 || s.at(0).v != 4 {
		t.Errorf("after the window: %d values; want only the newest", s.len())
	}
}
