package metrics

import (
	"context"
	"errors"
	"math"
	"runtime"
	"sync"
	"testing"
	"time"
)

func TestCounterOperations(t *testing.T) {
	c := NewCounter("c")
	if got := c.Value(); got != 0 {
		t.Fatalf("new counter Value() = %d; want 0", got)
	}
	c.Inc()   // ++
	c.Inc()   // ++
	c.Dec()   // --
	c.Add(10) // += 10
	c.Sub(3)  // -= 3
	c.Add(-2) // += -2
	if got, want := c.Value(), int64(1+1-1+10-3-2); got != want {
		t.Errorf("Value() = %d; want %d", got, want)
	}
	v, err := c.Snapshot(context.Background())
	if err != nil || v != 6 {
		t.Errorf("Snapshot() = %v, %v; want 6, nil", v, err)
	}
	c.Reset()
	if got := c.Value(); got != 0 {
		t.Errorf("after Reset Value() = %d; want 0", got)
	}
	if _, ok := c.Statistics(); ok {
		t.Error("Statistics() without window reported ok")
	}
	if c.Name() != "c" {
		t.Errorf("Name() = %q; want c", c.Name())
	}
}

func TestCounterWindowStatistics(t *testing.T) {
	c := NewCounter("c", WithWindow(time.Hour, 0))
	if _, ok := c.Statistics(); ok {
		t.Error("Statistics() with only the initial 0 reported ok; want at least two values")
	}
	c.Inc()
	c.Inc()
	c.Add(2)
	c.Dec()
	// history: 0 (at construction) 1 2 4 3
	s, ok := c.Statistics()
	if !ok {
		t.Fatal("Statistics() not ok after four updates")
	}
	if s.Count != 5 || s.Min != 0 || s.Max != 4 || s.Mean != 2 || s.P50 != 2 {
		t.Errorf("Statistics() = %+v; want count 5 min 0 max 4 mean 2 p50 2", s)
	}
	c.Reset()
	if s, _ := c.Statistics(); s.Min != 0 || s.Count != 6 {
		t.Errorf("after Reset Statistics() = %+v; want a recorded 0 (count 6, min 0)", s)
	}
}

func TestGaugePush(t *testing.T) {
	g := NewGauge("g", WithWindow(time.Hour, 10))
	if g.Value() != 0 {
		t.Errorf("new gauge Value() = %v; want 0", g.Value())
	}
	g.Set(2.5)
	if got := g.Add(-1); got != 1.5 {
		t.Errorf("Add(-1) = %v; want 1.5", got)
	}
	if v, err := g.Snapshot(context.Background()); v != 1.5 || err != nil {
		t.Errorf("Snapshot() = %v, %v; want 1.5, nil", v, err)
	}
	s, ok := g.Statistics()
	if !ok || s.Count != 2 || s.Min != 1.5 || s.Max != 2.5 {
		t.Errorf("Statistics() = %+v, %v; want count 2 min 1.5 max 2.5", s, ok)
	}
}

func TestGaugeFunc(t *testing.T) {
	n := 0.0
	g := NewGaugeFunc("pull", func(context.Context) (float64, error) { n++; return n, nil }, WithWindow(time.Hour, 0))
	for want := 1.0; want <= 3; want++ {
		if v, err := g.Snapshot(context.Background()); v != want || err != nil {
			t.Errorf("Snapshot() = %v, %v; want %v, nil", v, err, want)
		}
	}
	if s, ok := g.Statistics(); !ok || s.Count != 3 || s.Max != 3 {
		t.Errorf("Statistics() = %+v, %v; want the three evaluations", s, ok)
	}

	boom := errors.New("boom")
	cases := []struct {
		name string
		f    func(context.Context) (float64, error)
		want error
	}{
		{"error", func(context.Context) (float64, error) { return 0, boom }, boom},
		{"nil", nil, errNoFunc},
		{"nan", func(context.Context) (float64, error) { return math.NaN(), nil }, nil},
		{"inf", func(context.Context) (float64, error) { return math.Inf(-1), nil }, nil},
		{"panic", func(context.Context) (float64, error) { panic("oops") }, nil},
	}
	for _, c := range cases {
		_, err := NewGaugeFunc(c.name, c.f).Snapshot(context.Background())
		if err == nil {
			t.Errorf("%s: Snapshot() succeeded; want error", c.name)
		} else if c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("%s: Snapshot() = %v; want wrapping %v", c.name, err, c.want)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := g.Snapshot(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Snapshot(cancelled) = %v; want context.Canceled", err)
	}
}

func TestTimerStartStop(t *testing.T) {
	tm := NewTimer("op", Milliseconds)
	if tm.Name() != "op_ms" {
		t.Errorf("Name() = %q; want op_ms", tm.Name())
	}
	if tm.Value() != 0 {
		t.Errorf("Value() before any stop = %v; want 0", tm.Value())
	}
	if d, ok := tm.Stop("a"); ok || d != 0 {
		t.Errorf("Stop before Start = %v, %v; want 0, false", d, ok)
	}
	if _, ok := tm.Last(); ok {
		t.Error("Stop before Start recorded a duration")
	}
	tm.Start("a")
	tm.Start("b")
	if tm.Value() != 0 {
		t.Errorf("Value() after start, before stop = %v; want 0", tm.Value())
	}
	if _, err := tm.Snapshot(context.Background()); !errors.Is(err, errNoValue) {
		t.Errorf("Snapshot() before the first stop = %v; want errNoValue", err)
	}
	time.Sleep(2 * time.Millisecond)
	db, ok := tm.Stop("b")
	if !ok || db < 2*time.Millisecond {
		t.Fatalf("Stop(b) = %v, %v; want ≥ 2ms", db, ok)
	}
	if tm.Value() != db {
		t.Errorf("Value() = %v; want the last stopped delta %v", tm.Value(), db)
	}
	time.Sleep(time.Millisecond)
	da, ok := tm.Stop("a")
	if !ok || da <= db {
		t.Fatalf("Stop(a) = %v, %v; want > %v (started earlier, stopped later)", da, ok, db)
	}
	if tm.Value() != da {
		t.Errorf("Value() = %v; want %v", tm.Value(), da)
	}
	if d, ok := tm.Stop("a"); ok || d != 0 {
		t.Errorf("second Stop(a) = %v, %v; want 0, false", d, ok)
	}
	if tm.Value() != da {
		t.Errorf("Value() after a second Stop = %v; want still %v", tm.Value(), da)
	}
	v, err := tm.Snapshot(context.Background())
	if want := float64(da) / float64(time.Millisecond); v != want || err != nil {
		t.Errorf("Snapshot() = %v, %v; want %v ms", v, err, want)
	}
}

func TestTimerUnitsAndTime(t *testing.T) {
	for u, suffix := range map[Unit]string{Nanoseconds: "_ns", Microseconds: "_us", Milliseconds: "_ms", Seconds: "_secs", Minutes: "_mins", Hours: "_hrs", Unit(99): "_ms"} {
		if got := NewTimer("t", u).Name(); got != "t"+suffix {
			t.Errorf("NewTimer(t, %d).Name() = %q; want %q", u, got, "t"+suffix)
		}
	}
	tm := NewTimer("t", Microseconds, WithWindow(time.Hour, 100))
	d := tm.Time(func() { time.Sleep(time.Millisecond) })
	if d < time.Millisecond || tm.Value() != d {
		t.Errorf("Time() = %v, Value() = %v; want equal and ≥ 1ms", d, tm.Value())
	}
	tm.Observe(3 * time.Millisecond)
	s, ok := tm.Statistics()
	first := float64(d) / float64(time.Microsecond)
	if !ok || s.Count != 2 || s.Min != min(first, 3000) || s.Max != max(first, 3000) {
		t.Errorf("Statistics() = %+v, %v; want 2 values, %v us and 3000 us", s, ok, first)
	}
	if v, _ := tm.Snapshot(context.Background()); v != 3000 {
		t.Errorf("Snapshot() = %v; want 3000 (us)", v)
	}
}

func TestStatistics(t *testing.T) {
	if _, ok := NewStatistics(nil); ok {
		t.Error("NewStatistics(empty) ok; want false")
	}
	if _, ok := NewStatistics([]float64{1}); ok {
		t.Error("NewStatistics(one value) ok; want false (libprocess needs two)")
	}
	vs := make([]float64, 100)
	for i := range vs {
		vs[i] = float64(100 - i) // 100..1, unsorted input
	}
	s, ok := NewStatistics(vs)
	if !ok {
		t.Fatal("NewStatistics(1..100) not ok")
	}
	want := Statistics{Count: 100, Min: 1, Max: 100, Mean: 50.5, P50: 50.5, P90: 90.1, P95: 95.05, P99: 99.01, P999: 99.901, P9999: 99.9901}
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"count", float64(s.Count), float64(want.Count)}, {"min", s.Min, want.Min}, {"max", s.Max, want.Max},
		{"mean", s.Mean, want.Mean}, {"p50", s.P50, want.P50}, {"p90", s.P90, want.P90},
		{"p95", s.P95, want.P95}, {"p99", s.P99, want.P99}, {"p999", s.P999, want.P999},
		{"p9999", s.P9999, want.P9999},
	} {
		if math.Abs(c.got-c.want) > 1e-9 {
			t.Errorf("%s = %v; want %v", c.name, c.got, c.want)
		}
	}
	if vs[0] != 100 {
		t.Error("NewStatistics modified its input")
	}
	s, _ = NewStatistics([]float64{2, math.NaN(), 4})
	if s.Count != 2 || s.P50 != 3 {
		t.Errorf("NewStatistics(2, NaN, 4) = %+v; want NaN ignored, p50 3", s)
	}
}

func TestWindowExpires(t *testing.T) {
	clk := newFakeClock()
	g := NewGauge("g", WithWindow(10*time.Second, 0), withClock(clk))
	for i := range 10 { // at 0s, 1s, … 9s
		g.Set(float64(i))
		clk.Advance(time.Second)
	}
	clk.Advance(6 * time.Second)
	g.Set(10) // at 16s: the values at or before 6s leave
	s, ok := g.Statistics()
	if !ok || s.Count != 4 || s.Min != 7 || s.Max != 10 {
		t.Errorf("Statistics() = %+v, %v; want 7, 8, 9, 10", s, ok)
	}
	clk.Advance(time.Hour)
	g.Set(11) // everything else is too old now
	g.Set(12)
	if s, ok := g.Statistics(); !ok || s.Count != 2 || s.Min != 11 {
		t.Errorf("Statistics() = %+v, %v; want only the two fresh values", s, ok)
	}
}

func TestWindowCapacity(t *testing.T) {
	g := NewGauge("g", WithWindow(time.Hour, 10))
	for i := 1; i <= 1000; i++ {
		g.Set(float64(i))
	}
	s, ok := g.Statistics()
	if !ok || s.Count != 10 {
		t.Fatalf("Statistics() = %+v, %v; want exactly 10 values (capacity)", s, ok)
	}
	// Thinning keeps the oldest value and the newest.
	if s.Min != 1 || s.Max != 1000 {
		t.Errorf("Statistics() = %+v; want the oldest value 1 and the newest 1000 kept", s)
	}
}

func TestConcurrentUpdates(t *testing.T) {
	const goroutines, n = 8, 2000
	c := NewCounter("c", WithWindow(time.Minute, 100))
	plain := NewCounter("p")
	g := NewGauge("g")
	tm := NewTimer("t", Microseconds, WithWindow(time.Minute, 100))
	r := NewRegistry()
	for _, m := range []Metric{c, plain, g, tm} {
		if err := r.Add(m); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for i := range goroutines {
		wg.Go(func() {
			key := string(rune('a' + i))
			for j := range n {
				c.Inc()
				plain.Add(2)
				plain.Dec()
				g.Add(1)
				tm.Start(key)
				if _, ok := tm.Stop(key); !ok {
					t.Errorf("Stop(%q) after Start: not running", key)
					return
				}
				tm.Observe(time.Duration(j) * time.Microsecond)
			}
		})
	}
	wg.Go(func() {
		for range 50 {
			r.Snapshot(context.Background())
			tm.Value()
		}
	})
	wg.Wait()
	if got := c.Value(); got != goroutines*n {
		t.Errorf("counter = %d; want %d", got, goroutines*n)
	}
	if got := plain.Value(); got != goroutines*n {
		t.Errorf("plain counter = %d; want %d", got, goroutines*n)
	}
	if got := g.Value(); got != goroutines*n {
		t.Errorf("gauge = %v; want %d", got, goroutines*n)
	}
	s, ok := tm.Statistics()
	if !ok || s.Count != 100 {
		t.Errorf("timer Statistics() = %+v, %v; want 100 values (capacity)", s, ok)
	}
}

// TestTimerWindowValueIsLast checks that a windowed Timer's Value is the last duration a
// goroutine recorded, even though values are spread over per-processor shards.
func TestTimerWindowValueIsLast(t *testing.T) {
	tm := NewTimer("t", Nanoseconds, WithWindow(time.Hour, 10))
	if tm.Value() != 0 {
		t.Fatalf("Value() before any = %v; want 0", tm.Value())
	}
	for i := 1; i <= 2000; i++ {
		tm.Observe(time.Duration(i))
		if i%100 == 0 {
			runtime.Gosched() // invite a move to another P, hence another shard
		}
		if got := tm.Value(); got != time.Duration(i) {
			t.Fatalf("after Observe(%d): Value() = %d", i, got)
		}
	}
}
