package metrics

import (
	"cmp"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// window keeps the recent values of one metric: libprocess' TimeSeries.
//
// Writers must not contend, so the history is split into shards, one per processor in
// practice: a writer takes a shard from a sync.Pool (which is per-P), locks it (uncontended
// unless two Ps hold the same shard, which happens only after the pool was cleared by a GC) and
// appends to its ring. Each shard keeps up to capacity values, so a metric updated from a single
// goroutine keeps its full capacity; a reader merges all shards and keeps the newest capacity
// values.
//
// Writers do not read the clock either, which costs more than the rest of an update: values are
// stamped with a coarse clock, now, refreshed by the first writer after a runtime timer marked
// it stale. The timer is armed only while values are being written, so an idle window costs
// nothing.
type window struct {
	dur      time.Duration
	res      time.Duration
	capacity int
	base     time.Time // monotonic origin of every stamp

	now   atomic.Int64 // coarse time since base, in ns
	stale atomic.Bool  // now must be refreshed before use
	timer *time.Timer  // sets stale once res has passed since the last refresh

	pool   sync.Pool // of *shard
	next   atomic.Uint32
	shards []shard
	// lastShard is 1 + the index of the shard written last by pushLast, 0 before any. It is
	// stored only when it changes, so a goroutine that keeps its shard pays one plain load.
	lastShard atomic.Int32
}

type entry struct {
	ts int64 // ns since base
	v  float64
}

type shard struct {
	mu   sync.Mutex
	ring []entry  // grows to capacity, then wraps
	pos  int      // next slot to overwrite once full
	last int64    // raw value of the last pushLast
	id   int32    // 1 + index in window.shards
	_    [64]byte // keep shards on separate cache lines
}

func newWindow(d time.Duration, capacity int) *window {
	res := min(max(d/100, time.Millisecond), time.Second)
	n := min(max(2*runtime.GOMAXPROCS(0), 2), 64)
	w := &window{dur: d, res: res, capacity: capacity, base: time.Now(), shards: make([]shard, n)}
	for i := range w.shards {
		w.shards[i].id = int32(i + 1)
	}
	w.stale.Store(true)
	w.timer = time.AfterFunc(time.Hour, func() { w.stale.Store(true) })
	w.timer.Stop()
	w.pool.New = func() any {
		i := w.next.Add(1) - 1
		return &w.shards[int(i%uint32(len(w.shards)))]
	}
	return w
}

// stamp returns the coarse current time, refreshing it when stale.
func (w *window) stamp() int64 {
	if !w.stale.Load() {
		return w.now.Load()
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
	s := w.pool.Get().(*shard)
	s.mu.Lock()
	s.add(w.capacity, entry{ts, v})
	s.mu.Unlock()
	w.pool.Put(s)
}

// pushLast is push for a Timer: it also remembers raw as the last value. Values pushed by one
// goroutine are ordered: the last one wins. Concurrent pushes are not ordered among
// themselves; one of them wins.
func (w *window) pushLast(v float64, raw int64) {
	ts := w.stamp()
	s := w.pool.Get().(*shard)
	s.mu.Lock()
	s.add(w.capacity, entry{ts, v})
	s.last = raw
	s.mu.Unlock()
	if w.lastShard.Load() != s.id {
		w.lastShard.Store(s.id)
	}
	w.pool.Put(s)
}

// last returns the raw value of the last pushLast, 0 if none.
func (w *window) last() int64 {
	id := w.lastShard.Load()
	if id == 0 {
		return 0
	}
	s := &w.shards[id-1]
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

func (s *shard) add(capacity int, e entry) {
	if len(s.ring) < capacity {
		s.ring = append(s.ring, e)
		return
	}
	s.ring[s.pos] = e
	s.pos++
	if s.pos == len(s.ring) {
		s.pos = 0
	}
}

// values returns a copy of the values within the window, at most capacity of them (the newest),
// in no particular order.
func (w *window) values() []float64 {
	cutoff := int64(time.Since(w.base) - w.dur)
	type ranked struct {
		entry
		rank int // 0 for the newest of its shard
	}
	var es []ranked
	for i := range w.shards {
		s := &w.shards[i]
		s.mu.Lock()
		// Newest first: ring[pos-1] down to ring[0], then ring[len-1] down to ring[pos].
		n := len(s.ring)
		for r := range n {
			e := s.ring[((s.pos-1-r)%n+n)%n]
			if e.ts >= cutoff {
				es = append(es, ranked{e, r})
			}
		}
		s.mu.Unlock()
	}
	if len(es) > w.capacity {
		// Newest stamps first; within one clock step, shards' newest values first, so the
		// latest value of every shard survives truncation.
		slices.SortFunc(es, func(a, b ranked) int {
			return cmp.Or(cmp.Compare(b.ts, a.ts), cmp.Compare(a.rank, b.rank))
		})
		es = es[:w.capacity]
	}
	vs := make([]float64, len(es))
	for i, e := range es {
		vs[i] = e.v
	}
	return vs
}

// statistics computes Statistics over the window; a nil window has none.
func (w *window) statistics() (Statistics, bool) {
	if w == nil {
		return Statistics{}, false
	}
	vs := w.values()
	return statisticsOfSorted(sortValues(vs))
}
