package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cantal-go/cantal/shm"
)

// Mirror publishes a Registry in Cantal shared-memory files (package shm) so that the node's
// cantal-agent, which discovers them through the application's CANTAL_PATH, records them
// without ever calling into the application.
//
// Every value of the registry's snapshot becomes one entry labelled {"metric": KEY}: a Counter
// is a "level 8 signed" (it can go down, so it is not a Cantal counter), every other value and
// every statistic ("name/p99", ..., with "name/mean" if the registry was built WithMean) a
// "level 8 float". A metric with a window always publishes its statistics entries; while fewer
// than two values are in the window, while a gauge fails and before a timer's first duration,
// the float is NaN. When metrics are added to or removed from the registry, the next
// Update publishes a new layout (new files replace the old ones atomically).
//
// A Mirror's methods are safe for concurrent use; Updates are serialised.
type Mirror struct {
	reg *Registry
	opt shm.Options

	mu     sync.Mutex
	coll   *shm.Collection
	layout []mirrorKey
	ints   map[string]*shm.Integer
	floats map[string]*shm.Float
	closed bool
}

type mirrorKey struct {
	key   string
	isInt bool
}

// NewMirror returns a Mirror of reg publishing at opt.Path (CANTAL_PATH if empty). Nothing is
// written before the first Update.
func NewMirror(reg *Registry, opt shm.Options) *Mirror {
	return &Mirror{reg: reg, opt: opt}
}

// errMirrorClosed is returned by Update after Close.
var errMirrorClosed = errors.New("mirror closed")

// windowed is implemented by the package's metrics to tell whether they keep a window.
type windowed interface{ hasWindow() bool }

func (c *Counter) hasWindow() bool   { return c.w != nil }
func (g *Gauge) hasWindow() bool     { return g.w != nil }
func (g *GaugeFunc) hasWindow() bool { return g.w != nil }
func (t *Timer) hasWindow() bool     { return t.w != nil }

// Update takes a snapshot of the registry (bounded by ctx, as Registry.Snapshot) and writes it
// to the files, first (re)creating them if the set of metrics changed. It returns an error if
// the files cannot be created; the previous files, if any, then stay in place.
func (m *Mirror) Update(ctx context.Context) error {
	ms := m.reg.Metrics()
	statSuffixes := m.reg.statSuffixes()
	var layout []mirrorKey
	for _, met := range ms {
		_, isCounter := met.(*Counter)
		layout = append(layout, mirrorKey{met.Name(), isCounter})
		w, ok := met.(windowed)
		if ok && w.hasWindow() || !ok && m.hadStats(met.Name()) {
			for _, s := range statSuffixes {
				layout = append(layout, mirrorKey{met.Name() + s, false})
			}
		}
	}
	snap := m.reg.Snapshot(ctx)
	// A custom metric's statistics are published from the first time it has some.
	for _, met := range ms {
		if _, ok := met.(windowed); !ok {
			if _, has := snap[met.Name()+"/count"]; has && !m.hadStats(met.Name()) {
				for _, s := range statSuffixes {
					layout = append(layout, mirrorKey{met.Name() + s, false})
				}
			}
		}
	}
	slices.SortFunc(layout, func(a, b mirrorKey) int { return strings.Compare(a.key, b.key) })
	// A metric named like another's statistic ("x/count") would repeat a label set.
	layout = slices.CompactFunc(layout, func(a, b mirrorKey) bool { return a.key == b.key })

	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return fmt.Errorf("mirror update: %w", errMirrorClosed)
	}
	if m.coll == nil || !slices.Equal(layout, m.layout) {
		if err := m.relayout(layout); err != nil {
			return err
		}
	}
	for _, met := range ms {
		if c, ok := met.(*Counter); ok {
			m.ints[c.Name()].Set(c.Value())
		}
	}
	for k, f := range m.floats {
		v, ok := snap[k]
		if !ok {
			v = math.NaN()
		}
		f.Set(v)
	}
	return nil
}

// hadStats reports whether the current layout has statistics entries for name.
func (m *Mirror) hadStats(name string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.floats[name+"/count"]
	return ok
}

// relayout starts a collection for layout and retires the previous one. m.mu is held.
func (m *Mirror) relayout(layout []mirrorKey) error {
	if len(layout) == 0 {
		m.retire()
		return nil
	}
	coll := shm.NewCollection(m.opt)
	ints := make(map[string]*shm.Integer)
	floats := make(map[string]*shm.Float)
	for _, k := range layout {
		labels := map[string]string{"metric": k.key}
		var err error
		if k.isInt {
			ints[k.key], err = coll.Integer(labels)
		} else {
			floats[k.key], err = coll.Float(labels)
		}
		if err != nil {
			coll.Close()
			return fmt.Errorf("mirror %q: %w", k.key, err)
		}
	}
	if err := coll.Start(); err != nil {
		coll.Close()
		return fmt.Errorf("mirror: %w", err)
	}
	// The new files replaced the old ones; closing the old collection leaves them alone.
	m.retire()
	m.coll, m.layout, m.ints, m.floats = coll, layout, ints, floats
	return nil
}

func (m *Mirror) retire() {
	if m.coll != nil {
		if err := m.coll.Close(); err != nil {
			slog.Warn("metrics: mirror: close previous files", "err", err)
		}
	}
	m.coll, m.layout, m.ints, m.floats = nil, nil, nil, nil
}

// Path returns the base path of the files, "" before the first successful Update.
func (m *Mirror) Path() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.coll == nil {
		return ""
	}
	return m.coll.Path()
}

// Run calls Update every interval, each bounded by the interval, until ctx is done; then it
// closes the mirror (removing the files) and returns nil. Update errors are logged with slog
// and retried at the next interval.
func (m *Mirror) Run(ctx context.Context, interval time.Duration) error {
	if interval <= 0 {
		return fmt.Errorf("mirror run: interval %v: must be positive", interval)
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		uctx, cancel := context.WithTimeout(ctx, interval)
		if err := m.Update(uctx); err != nil && ctx.Err() == nil {
			slog.Warn("metrics: mirror update failed", "err", err)
		}
		cancel()
		select {
		case <-ctx.Done():
			return m.Close()
		case <-t.C:
		}
	}
}

// Close removes the files. Later Updates fail. Close is idempotent.
func (m *Mirror) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	var err error
	if m.coll != nil {
		err = m.coll.Close()
	}
	m.coll, m.layout, m.ints, m.floats = nil, nil, nil, nil
	if err != nil {
		return fmt.Errorf("mirror close: %w", err)
	}
	return nil
}
