package metrics

import (
	"context"
	"sync/atomic"
)

// Counter is an int64 that goes up and down by explicit amounts (libprocess' Counter). Its
// snapshot value is the current count.
//
// All methods are safe for concurrent use. Without a window every update is one atomic add;
// with one, the new count is also appended to the history, which starts with the initial 0
// (as in libprocess: ten increments leave eleven values, 0 to 10).
type Counter struct {
	v    atomic.Int64
	w    *window
	name string
}

// NewCounter returns a counter at zero; with a window, the zero is its first value. It is not
// reported until added to a Registry.
func NewCounter(name string, opts ...Option) *Counter {
	c := &Counter{name: name, w: newWindowFor(buildOptions(opts))}
	if c.w != nil {
		c.w.push(0)
	}
	return c
}

// Name implements Metric.
func (c *Counter) Name() string { return c.name }

// Inc adds one.
func (c *Counter) Inc() {
	v := c.v.Add(1)
	if c.w != nil {
		c.w.push(float64(v))
	}
}

// Dec subtracts one.
func (c *Counter) Dec() {
	v := c.v.Add(-1)
	if c.w != nil {
		c.w.push(float64(v))
	}
}

// Add adds n (which may be negative).
func (c *Counter) Add(n int64) {
	v := c.v.Add(n)
	if c.w != nil {
		c.w.push(float64(v))
	}
}

// Sub subtracts n.
func (c *Counter) Sub(n int64) { c.Add(-n) }

// Reset sets the counter to zero. The history, if any, records the zero.
func (c *Counter) Reset() {
	c.v.Store(0)
	if c.w != nil {
		c.w.push(0)
	}
}

// Value returns the current count.
func (c *Counter) Value() int64 { return c.v.Load() }

// Snapshot implements Metric: the count as a float64. It never fails.
func (c *Counter) Snapshot(context.Context) (float64, error) { return float64(c.v.Load()), nil }

// Statistics implements Metric.
func (c *Counter) Statistics() (Statistics, bool) { return c.w.statistics() }
