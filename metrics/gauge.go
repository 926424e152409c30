package metrics

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"
)

// Gauge is a float64 level that the application pushes with Set and Add (libprocess'
// PushGauge). Its snapshot value is the last level set, zero before any.
//
// All methods are safe for concurrent use. Set is one atomic store, Add a compare-and-swap loop;
// with a window, the new level is also appended to the history. (libprocess' PushGauge keeps
// no history; unlike a Counter's, a Gauge's history does not start with its initial zero.)
type Gauge struct {
	bits atomic.Uint64
	w    *window
	name string
}

// NewGauge returns a gauge at zero. It is not reported until added to a Registry.
func NewGauge(name string, opts ...Option) *Gauge {
	return &Gauge{name: name, w: newWindowFor(buildOptions(opts))}
}

// Name implements Metric.
func (g *Gauge) Name() string { return g.name }

// Set sets the level to v.
func (g *Gauge) Set(v float64) {
	g.bits.Store(math.Float64bits(v))
	if g.w != nil {
		g.w.push(v)
	}
}

// Add adds d (which may be negative) to the level and returns the new level.
func (g *Gauge) Add(d float64) float64 {
	for {
		old := g.bits.Load()
		v := math.Float64frombits(old) + d
		if g.bits.CompareAndSwap(old, math.Float64bits(v)) {
			if g.w != nil {
				g.w.push(v)
			}
			return v
		}
	}
}

// Value returns the current level.
func (g *Gauge) Value() float64 { return math.Float64frombits(g.bits.Load()) }

// Snapshot implements Metric. It never fails.
func (g *Gauge) Snapshot(context.Context) (float64, error) { return g.Value(), nil }

// Statistics implements Metric.
func (g *Gauge) Statistics() (Statistics, bool) { return g.w.statistics() }

// GaugeFunc is a gauge whose level is pulled from a function each time the metric is
// snapshotted (libprocess' PullGauge), for values that are cheaper to compute on demand than to
// maintain: queue lengths, cache sizes, anything read from another component.
//
// The function is called from the snapshotting goroutine, possibly concurrently with itself,
// and must honour ctx: a Registry stops waiting for it when the snapshot's timeout expires and
// leaves the metric out. A function that returns an error, NaN or an infinity makes the metric
// absent from that snapshot. With a window, every successful evaluation is appended to the
// history.
type GaugeFunc struct {
	f       func(context.Context) (float64, error)
	w       *window
	timeout time.Duration
	name    string
}

// NewGaugeFunc returns a gauge evaluating f. It is not reported until added to a Registry.
// Options: WithWindow, WithTimeout.
func NewGaugeFunc(name string, f func(ctx context.Context) (float64, error), opts ...Option) *GaugeFunc {
	o := buildOptions(opts)
	return &GaugeFunc{name: name, f: f, w: newWindowFor(o), timeout: o.timeout}
}

// Name implements Metric.
func (g *GaugeFunc) Name() string { return g.name }

// errNoFunc is returned by a GaugeFunc built with a nil function.
var errNoFunc = errors.New("gauge has no function")

// Snapshot implements Metric: it calls the function. A panic in the function is recovered and
// returned as an error.
func (g *GaugeFunc) Snapshot(ctx context.Context) (v float64, err error) {
	if g.f == nil {
		return 0, fmt.Errorf("gauge %q: %w", g.name, errNoFunc)
	}
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("gauge %q: %w", g.name, err)
	}
	if g.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, g.timeout)
		defer cancel()
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("gauge %q: function panicked: %v", g.name, p)
		}
	}()
	v, err = g.f(ctx)
	if err != nil {
		return 0, fmt.Errorf("gauge %q: %w", g.name, err)
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("gauge %q: non-finite value %v", g.name, v)
	}
	if g.w != nil {
		g.w.push(v)
	}
	return v, nil
}

// Statistics implements Metric.
func (g *GaugeFunc) Statistics() (Statistics, bool) { return g.w.statistics() }
