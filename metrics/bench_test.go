package metrics

import (
	"testing"
	"time"
)

func BenchmarkCounterInc(b *testing.B) {
	c := NewCounter("c")
	b.ReportAllocs()
	for b.Loop() {
		c.Inc()
	}
}

func BenchmarkCounterIncParallel(b *testing.B) {
	c := NewCounter("c")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			c.Inc()
		}
	})
}

func BenchmarkCounterIncWindow(b *testing.B) {
	c := NewCounter("c", WithWindow(time.Minute, 1000))
	b.ReportAllocs()
	for b.Loop() {
		c.Inc()
	}
}

func BenchmarkCounterIncWindowParallel(b *testing.B) {
	c := NewCounter("c", WithWindow(time.Minute, 1000))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			c.Inc()
		}
	})
}

func BenchmarkTimerObserve(b *testing.B) {
	t := NewTimer("t", Milliseconds)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		t.Observe(time.Duration(i & 1023))
	}
}

func BenchmarkTimerObserveWindow(b *testing.B) {
	t := NewTimer("t", Milliseconds, WithWindow(time.Minute, 1000))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		t.Observe(time.Duration(i & 1023))
	}
}

func BenchmarkTimerObserveWindowParallel(b *testing.B) {
	t := NewTimer("t", Milliseconds, WithWindow(time.Minute, 1000))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			i++
			t.Observe(time.Duration(i & 1023))
		}
	})
}

func BenchmarkTimerStartStop(b *testing.B) {
	t := NewTimer("t", Milliseconds, WithWindow(time.Minute, 1000))
	b.ReportAllocs()
	for b.Loop() {
		t.Start("k")
		if _, ok := t.Stop("k"); !ok {
			b.Fatal("not running")
		}
	}
}

func BenchmarkTimerTime(b *testing.B) {
	t := NewTimer("t", Milliseconds, WithWindow(time.Minute, 1000))
	f := func() {}
	b.ReportAllocs()
	for b.Loop() {
		t.Time(f)
	}
}

// BenchmarkStatistics computes statistics over a full window of 1000 values.
func BenchmarkStatistics(b *testing.B) {
	t := NewTimer("t", Milliseconds, WithWindow(time.Minute, 1000))
	for i := range 1000 {
		t.Observe(time.Duration(i) * time.Millisecond)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := t.Statistics(); !ok {
			b.Fatal("no statistics")
		}
	}
}
