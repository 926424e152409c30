package metrics

import (
	"cmp"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// window keeps the recent values of one metric in a series (libprocess' TimeSeries) guarded by
// a mutex, as libprocess guards it with a spin lock.
//
// Writers must not queue behind each other, so a writer that finds the mutex taken does not
// wait for it: it stages its value in one of a few side buffers, picked at random, and returns.
// Whoever takes the mutex next (a writer or a reader) first moves the staged values into the
// series in the order they were staged (a sequence number taken when staging orders them). A
// goroutine's values therefore reach the series in the order it pushed them, and the series is
// exactly libprocess' for values pushed one after the other; values pushed concurrently enter
// it in some order. Staging costs a shared atomic add, and is taken only under contention.
//
// Writers do not read the clock either, which costs more than the rest of an update: values are
// stamped with a coarse clock, now, refreshed by the first writer after a runtime timer marked
// it stale. The timer is armed only while values are being written, so an idle window costs
// nothing.
type window struct {
	res  time.Duration
	base time.Time // monotonic origin of every stamp

	now   atomic.Int64 // coarse time since base, in ns
	stale atomic.Bool  // now must be refreshed before use
	timer *time.Timer  // sets stale once res has passed since the last refresh
	clock func() int64 // tests: replaces the coarse clock (stale is then never cleared)

	mu      sync.Mutex
	last    atomic.Int64 // raw value of the last pushLast; next to mu, whose cache line a writer holds
	s       series       // guarded by mu
	scratch []staged     // guarded by mu
	spare   [][]staged   // guarded by mu: a buffer for each stage, swapped with its own

	pending    atomic.Bool // values may be staged
	seq        atomic.Uint64
	stagesOnce sync.Once
	stages     []stage
}

type staged struct {
	seq uint64
	entry
}

type stage struct {
	mu  sync.Mutex
	buf []staged
	_   [64]byte // keep stages on separate cache lines
}

// stageLimit is the number of values a stage holds before its writer waits for the mutex and
// moves them into the series.
const stageLimit = 64

func newWindow(d time.Duration, capacity int, clock func() int64) *window {
	res := min(max(d/100, time.Millisecond), time.Second)
	w := &window{res: res, base: time.Now(), clock: clock, s: newSeries(int64(d), capacity)}
	w.stale.Store(true)
	if clock == nil {
		w.timer = time.AfterFunc(time.Hour, func() { w.stale.Store(true) })
		w.timer.Stop()
	}
	return w
}

// stamp returns the coarse current time, refreshing it when stale.
func (w *window) stamp() int64 {
	if !w.stale.Load() {
		return w.now.Load()
	}
	if w.clock != nil {
		return w.clock()
	}
	ts := int64(time.Since(w.base))
	w.now.Store(ts)
	if w.stale.CompareAndSwap(true, false) {
		w.timer.Reset(w.res)
	}
	return ts
}

// push appends v to the history.
func (w *window) push(v float64) {
	ts := w.stamp()
	if w.mu.TryLock() {
		if w.pending.Load() {
			w.drainLocked()
		}
		w.s.set(entry{ts, v}, ts)
		w.mu.Unlock()
		return
	}
	w.stage(entry{ts, v})
}

// pushLast is push for a Timer: it also stores raw as the last value.
func (w *window) pushLast(v float64, raw int64) {
	ts := w.stamp()
	if w.mu.TryLock() {
		if w.pending.Load() {
			w.drainLocked()
		}
		w.s.set(entry{ts, v}, ts)
		w.last.Store(raw)
		w.mu.Unlock()
		return
	}
	w.last.Store(raw)
	w.stage(entry{ts, v})
}

// stage sets e aside for the next holder of w.mu.
func (w *window) stage(e entry) {
	w.stagesOnce.Do(func() {
		w.stages = make([]stage, min(max(2*runtime.GOMAXPROCS(0), 4), 32))
	})
	seq := w.seq.Add(1)
	st := &w.stages[rand.N(len(w.stages))]
	st.mu.Lock()
	st.buf = append(st.buf, staged{seq, e})
	full := len(st.buf) >= stageLimit
	st.mu.Unlock()
	if !w.pending.Load() {
		w.pending.Store(true)
	}
	if full {
		w.mu.Lock()
		w.drainLocked()
		w.mu.Unlock()
	}
}

// drainLocked moves the staged values into the series, in the order they were staged. w.mu is
// held.
//
// It holds every stage's lock at once while it collects them: a goroutine that staged a value
// in one stage and its next value in another cannot have the second collected without the
// first.
func (w *window) drainLocked() {
	w.pending.Store(false)
	if w.spare == nil {
		w.spare = make([][]staged, len(w.stages))
	}
	for i := range w.stages {
		w.stages[i].mu.Lock()
	}
	for i := range w.stages {
		st := &w.stages[i]
		st.buf, w.spare[i] = w.spare[i][:0], st.buf
	}
	for i := range w.stages {
		w.stages[i].mu.Unlock()
	}
	all := w.scratch[:0]
	for _, b := range w.spare {
		all = append(all, b...)
	}
	bySeq := func(a, b staged) int { return cmp.Compare(a.seq, b.seq) }
	if !slices.IsSortedFunc(all, bySeq) {
		slices.SortFunc(all, bySeq)
	}
	for _, e := range all {
		w.s.set(e.entry, e.ts)
	}
	w.scratch = all[:0]
}

// values returns a copy of the values in the window, oldest first.
func (w *window) values() []float64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pending.Load() {
		w.drainLocked()
	}
	return w.s.appendValues(make([]float64, 0, w.s.len()))
}

// statistics computes Statistics over the window; a nil window has none.
func (w *window) statistics() (Statistics, bool) {
	if w == nil {
		return Statistics{}, false
	}
	return statisticsOfSorted(sortValues(w.values()))
}
