package metrics

import (
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
)

func seriesValues(s *series) []float64 { return s.appendValues(nil) }

func ints(vs ...float64) []float64 { return vs }

// TimeSeries.truncate from libprocess' timeseries_tests.cpp.
func TestSeriesTruncate(t *testing.T) {
	sec := int64(time.Second)
	// Simple truncation first. libprocess' clock is paused at now = 0.
	now := int64(0)
	s := newSeries(10*sec, 10)
	for i := range int64(10) {
		s.set(entry{i * sec, float64(i)}, now)
	}
	if got := seriesValues(&s); !slices.Equal(got, ints(0, 1, 2, 3, 4, 5, 6, 7, 8, 9)) {
		t.Fatalf("filled: %v", got)
	}
	// Cause the first 6 values to be truncated from the window.
	now += (10 + 6) * sec
	s.set(entry{10 * sec, 10}, now)
	if got := seriesValues(&s); !slices.Equal(got, ints(7, 8, 9, 10)) {
		t.Fatalf("after truncation: %v; want 7 8 9 10", got)
	}

	// Now truncation in the face of sparsification.
	now = 0
	s = newSeries(10*sec, 10)
	check := func(what string, want ...float64) {
		t.Helper()
		if got := seriesValues(&s); !slices.Equal(got, want) {
			t.Fatalf("%s: %v; want %v", what, got, want)
		}
	}
	for i := range int64(10) {
		s.set(entry{i * sec, float64(i)}, now)
	}
	check("filled", 0, 1, 2, 3, 4, 5, 6, 7, 8, 9)
	// Move the sparsification candidate forward.
	s.set(entry{10 * sec, 10}, now)
	check("set 10", 0, 2, 3, 4, 5, 6, 7, 8, 9, 10)
	s.set(entry{11 * sec, 11}, now)
	check("set 11", 0, 2, 4, 5, 6, 7, 8, 9, 10, 11)
	s.set(entry{12 * sec, 12}, now)
	check("set 12", 0, 2, 4, 6, 7, 8, 9, 10, 11, 12)
	// The next candidate is 7: truncate excluding it and ensure sparsification proceeds.
	now += (10 + 2) * sec
	s.truncate(now)
	check("truncate at 12s", 4, 6, 7, 8, 9, 10, 11, 12)
	s.set(entry{13 * sec, 13}, now)
	s.set(entry{14 * sec, 14}, now)
	check("back to capacity", 4, 6, 7, 8, 9, 10, 11, 12, 13, 14)
	s.set(entry{15 * sec, 15}, now)
	check("set 15 removes 7", 4, 6, 8, 9, 10, 11, 12, 13, 14, 15)
	// Truncate into the next candidate, 9: sparsification starts over.
	now += 7 * sec
	s.truncate(now)
	check("truncate at 19s", 10, 11, 12, 13, 14, 15)
	for i := int64(16); i <= 19; i++ {
		s.set(entry{i * sec, float64(i)}, now)
	}
	check("back to capacity again", 10, 11, 12, 13, 14, 15, 16, 17, 18, 19)
	s.set(entry{20 * sec, 20}, now)
	check("sparsified from the beginning", 10, 12, 13, 14, 15, 16, 17, 18, 19, 20)
}

// refSeries is TimeSeries written as plainly as possible, to check series against.
type refSeries struct {
	window   int64
	capacity int
	vs       []entry
	index    int // -1: none
}

func (r *refSeries) set(e entry, now int64) {
	if len(r.vs) > 0 && e.ts < r.vs[len(r.vs)-1].ts {
		e.ts = r.vs[len(r.vs)-1].ts
	}
	r.vs = append(r.vs, e)
	r.truncate(now)
	for len(r.vs) > r.capacity {
		if r.index < 0 || r.index > len(r.vs)/2 {
			r.index = 1
		}
		r.vs = slices.Delete(r.vs, r.index, r.index+1)
		r.index++
	}
}

func (r *refSeries) truncate(now int64) {
	m := 0
	for m < len(r.vs) && r.vs[m].ts <= now-r.window {
		m++
	}
	if len(r.vs) <= 1 || m == len(r.vs) || m == 0 {
		return
	}
	if r.index >= 0 && m < r.index {
		r.index -= m
	} else {
		r.index = -1
	}
	r.vs = slices.Delete(r.vs, 0, m)
}

// TestSeriesMatchesReference drives series and refSeries with random values, steps of time and
// truncations, over capacities around the minimum and larger ones.
func TestSeriesMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, capacity := range []int{1, 3, 4, 5, 10, 17, 100} {
		for _, window := range []int64{5, 50, 1000, 1 << 62} {
			s := newSeries(window, capacity)
			r := refSeries{window: window, capacity: max(capacity, minCapacity), index: -1}
			now := int64(0)
			for i := range 20_000 {
				switch k := rng.IntN(100); {
				case k < 2:
					now += rng.Int64N(2*min(window, 1<<39) + 1)
					s.truncate(now)
					r.truncate(now)
				default:
					if k < 60 {
						now += rng.Int64N(3)
					}
					ts := now - rng.Int64N(2) // now and then older than the newest
					e := entry{ts, float64(i)}
					s.set(e, now)
					r.set(e, now)
				}
				want := make([]float64, len(r.vs))
				for j, e := range r.vs {
					want[j] = e.v
				}
				if got := seriesValues(&s); !slices.Equal(got, want) {
					t.Fatalf("capacity %d window %d, step %d: %v; want %v", capacity, window, i, got, want)
				}
				if s.len() > max(capacity, minCapacity) {
					t.Fatalf("capacity %d: %d values", capacity, s.len())
				}
			}
			if c := max(capacity, minCapacity); cap(s.buf) > 4*(c+1) {
				t.Errorf("capacity %d window %d: buffer of %d values", capacity, window, cap(s.buf))
			}
		}
	}
}

// TestWindowStagedValuesKeepOrder pushes while the series is locked, so that every value is
// staged, and checks they enter the series in the order they were pushed.
func TestWindowStagedValuesKeepOrder(t *testing.T) {
	w := newWindow(time.Hour, 1000, nil)
	w.push(-1)
	w.mu.Lock()
	for i := range stageLimit - 1 { // fewer than a stage holds: nobody waits for w.mu
		w.push(float64(i))
	}
	w.mu.Unlock()
	w.push(stageLimit - 1) // drains the staged values first
	want := []float64{-1}
	for i := range stageLimit {
		want = append(want, float64(i))
	}
	if got := w.values(); !slices.Equal(got, want) {
		t.Errorf("values = %v; want %v", got, want)
	}
}

// TestWindowConcurrentOrder checks that each goroutine's values reach the series in the order it
// pushed them, whether they went straight in or were staged, and that none is lost.
func TestWindowConcurrentOrder(t *testing.T) {
	const goroutines, n = 6, 5000
	w := newWindow(time.Hour, goroutines*n+1, nil)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range n {
				w.push(float64(g*n + i))
				if i%500 == 0 {
					runtime.Gosched()
				}
			}
		})
	}
	wg.Go(func() {
		for range 100 {
			w.values()
		}
	})
	wg.Wait()
	vs := w.values()
	t.Logf("%d of %d values were staged", w.seq.Load(), goroutines*n)
	if len(vs) != goroutines*n {
		t.Fatalf("%d values; want %d", len(vs), goroutines*n)
	}
	last := make([]float64, goroutines)
	for g := range last {
		last[g] = -1
	}
	for _, v := range vs {
		g := int(v) / n
		if v <= last[g] {
			t.Fatalf("goroutine %d: %v after %v", g, v, last[g])
		}
		last[g] = v
	}
}
