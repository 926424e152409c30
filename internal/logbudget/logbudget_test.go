package logbudget

import (
	"log/slog"
	"testing"
	"time"
)

// TestLogLimiterRefills: the budget refills at Rate a second.
func TestLogLimiterRefills(t *testing.T) {
	now := time.Unix(1000, 0)
	l := New(slog.New(slog.DiscardHandler), "lines")
	l.now = func() time.Time { return now }
	defer l.Stop()
	n := 0
	for range 100 {
		if l.Allow() {
			n++
		}
	}
	if n != Burst {
		t.Errorf("a burst of 100 lines let %d through; want %d", n, Burst)
	}
	now = now.Add(time.Second)
	n = 0
	for range 100 {
		if l.Allow() {
			n++
		}
	}
	if n != Rate {
		t.Errorf("a second later %d lines went through; want %d", n, Rate)
	}
}
