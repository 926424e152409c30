package metrics

import (
	"context"
	"time"
)

// Metric is anything a Registry can report. The package's Counter, Gauge, GaugeFunc and Timer
// implement it; applications may implement their own. Implementations must be safe for
// concurrent use.
type Metric interface {
	// Name returns the metric's name, the key of its value in a snapshot. It never changes.
	Name() string
	// Snapshot returns the current value. It should return promptly when ctx is done; an error
	// leaves the metric out of the snapshot.
	Snapshot(ctx context.Context) (float64, error)
	// Statistics returns statistics over the metric's window, and false when the metric keeps
	// no window or fewer than two values are in it.
	Statistics() (Statistics, bool)
}

// DefaultCapacity is the number of values a window keeps when WithWindow is given a capacity
// of zero or less (libprocess' TIME_SERIES_CAPACITY).
const DefaultCapacity = 1000

// Option configures a metric at construction.
type Option func(*options)

type options struct {
	window   time.Duration
	capacity int
	timeout  time.Duration
	clock    func() int64 // tests: the window's clock, in ns
}

// WithWindow makes the metric keep a history of its values, as libprocess' TimeSeries does, and
// compute Statistics over it. d of zero or less means no window. A capacity of zero or less
// means DefaultCapacity; less than 3 means 3.
//
// Each new value drops the values older than d before it (and only then: a metric that stops
// changing keeps its statistics). Beyond capacity values, the older half of the history is
// thinned: each new value drops one of its values, every other one in turn, so recent values
// are kept at full granularity and older ones at a coarser one, still covering the window.
//
// Values are timestamped with a coarse clock whose resolution is d/100, clamped to [1ms, 1s]:
// a value may leave the window up to one resolution step early.
func WithWindow(d time.Duration, capacity int) Option {
	return func(o *options) {
		o.window = d
		o.capacity = capacity
	}
}

// WithTimeout bounds each evaluation of a GaugeFunc to d, on top of the snapshot's own
// deadline: the function's ctx is done after d, and a Registry stops waiting for it then.
// Other metrics ignore it.
func WithTimeout(d time.Duration) Option {
	return func(o *options) { o.timeout = d }
}

func buildOptions(opts []Option) options {
	var o options
	for _, f := range opts {
		if f != nil {
			f(&o)
		}
	}
	if o.capacity <= 0 {
		o.capacity = DefaultCapacity
	}
	return o
}

// newWindowFor returns the window the options ask for, or nil.
func newWindowFor(o options) *window {
	if o.window <= 0 {
		return nil
	}
	return newWindow(o.window, o.capacity, o.clock)
}
