package metrics

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Unit is the unit a Timer reports in. Its suffix is appended to the timer's name, as
// libprocess does: a Timer named "latency" in Milliseconds is reported as "latency_ms".
type Unit uint8

// The units, with their name suffixes.
const (
	Nanoseconds  Unit = iota // "_ns"
	Microseconds             // "_us"
	Milliseconds             // "_ms"
	Seconds                  // "_secs"
	Minutes                  // "_mins"
	Hours                    // "_hrs"
)

var unitSuffix = [...]string{"_ns", "_us", "_ms", "_secs", "_mins", "_hrs"}
var unitSize = [...]time.Duration{time.Nanosecond, time.Microsecond, time.Millisecond, time.Second, time.Minute, time.Hour}

// Suffix returns the unit's name suffix, such as "_ms". An unknown unit is Milliseconds.
func (u Unit) Suffix() string { return unitSuffix[u.valid()] }

// Duration returns the length of one unit. An unknown unit is Milliseconds.
func (u Unit) Duration() time.Duration { return unitSize[u.valid()] }

func (u Unit) valid() Unit {
	if int(u) >= len(unitSuffix) {
		return Milliseconds
	}
	return u
}

// ErrNotStarted is returned by Timer.Stop for a key that was not started (or already stopped).
var ErrNotStarted = errors.New("timer not started")

// Timer measures durations (libprocess' Timer). Its value is the last measured duration, in its
// unit, and zero before the first measurement. A duration is measured with Start and Stop under
// a key, so one Timer can time any number of concurrent events; with Time around a function;
// or recorded directly with Observe.
//
// All methods are safe for concurrent use. Start and Stop take a mutex protecting the running
// keys; Observe without a window is one atomic store, with a window an append to a
// per-processor shard of the history (which also keeps the last duration).
type Timer struct {
	last atomic.Int64 // ns; without a window (with one, the window keeps it)
	w    *window
	unit Unit
	name string

	mu      sync.Mutex
	running map[string]time.Time
}

// NewTimer returns a timer reporting in unit. Its name is name plus the unit's suffix. It is not
// reported until added to a Registry.
func NewTimer(name string, unit Unit, opts ...Option) *Timer {
	unit = unit.valid()
	return &Timer{name: name + unit.Suffix(), unit: unit, w: newWindowFor(buildOptions(opts))}
}

// Name implements Metric; it ends with the unit's suffix.
func (t *Timer) Name() string { return t.name }

// Unit returns the unit the timer reports in.
func (t *Timer) Unit() Unit { return t.unit }

// Start starts timing the event key. Starting a key that is already running restarts it.
func (t *Timer) Start(key string) {
	now := time.Now()
	t.mu.Lock()
	if t.running == nil {
		t.running = make(map[string]time.Time)
	}
	t.running[key] = now
	t.mu.Unlock()
}

// Stop stops timing the event key, records its duration and returns it. Stopping a key that
// is not running returns an error wrapping ErrNotStarted and records nothing.
func (t *Timer) Stop(key string) (time.Duration, error) {
	now := time.Now()
	t.mu.Lock()
	start, ok := t.running[key]
	if ok {
		delete(t.running, key)
	}
	t.mu.Unlock()
	if !ok {
		return 0, fmt.Errorf("timer %q: stop %q: %w", t.name, key, ErrNotStarted)
	}
	d := now.Sub(start)
	t.Observe(d)
	return d, nil
}

// Time calls f, records how long it took and returns that duration.
func (t *Timer) Time(f func()) time.Duration {
	start := time.Now()
	f()
	d := time.Since(start)
	t.Observe(d)
	return d
}

// Observe records a duration measured elsewhere.
func (t *Timer) Observe(d time.Duration) {
	if t.w == nil {
		t.last.Store(int64(d))
		return
	}
	t.w.pushLast(float64(d)/float64(t.unit.Duration()), int64(d))
}

// Value returns the last recorded duration, zero before any. Among durations recorded
// concurrently, any one may be the last.
func (t *Timer) Value() time.Duration {
	if t.w == nil {
		return time.Duration(t.last.Load())
	}
	return time.Duration(t.w.last())
}

// Snapshot implements Metric: the last duration in the timer's unit. It never fails.
func (t *Timer) Snapshot(context.Context) (float64, error) {
	return float64(t.Value()) / float64(t.unit.Duration()), nil
}

// Statistics implements Metric: over the recorded durations, in the timer's unit.
func (t *Timer) Statistics() (Statistics, bool) { return t.w.statistics() }
