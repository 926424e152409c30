package metrics

import (
	"context"
	"errors"
	"fmt"
	"math"
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
	Days                     // "_days"
	Weeks                    // "_weeks"
)

// The suffixes are stout's Duration units (Nanoseconds::units() "ns" … Weeks::units() "weeks").
var unitSuffix = [...]string{"_ns", "_us", "_ms", "_secs", "_mins", "_hrs", "_days", "_weeks"}
var unitSize = [...]time.Duration{time.Nanosecond, time.Microsecond, time.Millisecond, time.Second, time.Minute, time.Hour, 24 * time.Hour, 7 * 24 * time.Hour}

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

// errNoValue is the Snapshot error of a Timer that has recorded nothing yet.
var errNoValue = errors.New("no value")

// noValue is Timer.last before the first duration.
const noValue = math.MinInt64

// Timer measures durations (libprocess' Timer). Its value is the last measured duration, in its
// unit; before the first measurement it has none and is absent from snapshots. A duration is
// measured with Start and Stop under a key, so one Timer can time any number of concurrent
// events; with Time around a function; or recorded directly with Observe.
//
// All methods are safe for concurrent use. Start and Stop take a mutex protecting the running
// keys; Observe without a window is one atomic store, with a window it also appends to the
// history.
type Timer struct {
	last  atomic.Int64 // ns, without a window (with one, the window keeps it); noValue before any
	w     *window
	unit  Unit
	name  string
	clock func() int64 // tests: replaces time.Now

	mu      sync.Mutex
	running map[string]time.Time
}

// NewTimer returns a timer reporting in unit. Its name is name plus the unit's suffix. It is not
// reported until added to a Registry.
func NewTimer(name string, unit Unit, opts ...Option) *Timer {
	unit = unit.valid()
	o := buildOptions(opts)
	t := &Timer{name: name + unit.Suffix(), unit: unit, w: newWindowFor(o), clock: o.clock}
	t.last.Store(noValue)
	if t.w != nil {
		t.w.last.Store(noValue)
	}
	return t
}

// Name implements Metric; it ends with the unit's suffix.
func (t *Timer) Name() string { return t.name }

// Unit returns the unit the timer reports in.
func (t *Timer) Unit() Unit { return t.unit }

// Start starts timing the event key. Starting a key that is already running restarts it.
func (t *Timer) Start(key string) {
	now := t.now()
	t.mu.Lock()
	if t.running == nil {
		t.running = make(map[string]time.Time)
	}
	t.running[key] = now
	t.mu.Unlock()
}

// Stop stops timing the event key, records its duration and returns it with true. As in
// libprocess, stopping a key that is not running (never started, or already stopped) is not an
// error; it records nothing and returns 0, false. (libprocess would record the time since the
// epoch, or since the first start again.)
func (t *Timer) Stop(key string) (time.Duration, bool) {
	now := t.now()
	t.mu.Lock()
	start, ok := t.running[key]
	if ok {
		delete(t.running, key)
	}
	t.mu.Unlock()
	if !ok {
		return 0, false
	}
	d := now.Sub(start)
	t.Observe(d)
	return d, true
}

// Time calls f, records how long it took and returns that duration.
func (t *Timer) Time(f func()) time.Duration {
	start := t.now()
	f()
	var d time.Duration
	if t.clock == nil {
		d = time.Since(start) // reads only the monotonic clock
	} else {
		d = t.now().Sub(start)
	}
	t.Observe(d)
	return d
}

func (t *Timer) now() time.Time {
	if t.clock != nil {
		return time.Unix(0, t.clock())
	}
	return time.Now()
}

// Observe records a duration measured elsewhere.
func (t *Timer) Observe(d time.Duration) {
	if d == noValue {
		d++
	}
	if t.w == nil {
		t.last.Store(int64(d))
		return
	}
	t.w.pushLast(float64(d)/float64(t.unit.Duration()), int64(d))
}

// Value returns the last recorded duration, zero before any. Among durations recorded
// concurrently, any one may be the last.
func (t *Timer) Value() time.Duration {
	d, _ := t.Last()
	return d
}

// Last returns the last recorded duration and true, or 0 and false before any.
func (t *Timer) Last() (time.Duration, bool) {
	var d int64
	if t.w == nil {
		d = t.last.Load()
	} else {
		d = t.w.last.Load()
	}
	if d == noValue {
		return 0, false
	}
	return time.Duration(d), true
}

// Snapshot implements Metric: the last duration in the timer's unit. Before the first one it
// fails, so that the timer is absent from snapshots, as in libprocess.
func (t *Timer) Snapshot(context.Context) (float64, error) {
	d, ok := t.Last()
	if !ok {
		return 0, fmt.Errorf("timer %q: %w", t.name, errNoValue)
	}
	return float64(d) / float64(t.unit.Duration()), nil
}

// Statistics implements Metric: over the recorded durations, in the timer's unit.
func (t *Timer) Statistics() (Statistics, bool) { return t.w.statistics() }
