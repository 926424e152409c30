// Package gcpace collects garbage when the heap has grown by a set fraction of the live heap,
// as GOGC does, but without the collection the Go runtime forces every two minutes.
//
// A long-running process whose heap is large, long-lived and full of pointers, and that makes
// little garbage, pays mostly for that forced collection. The agent at 100k series is one: its
// series table is about a million small objects that every collection marks (about 80 ms of CPU
// each time), while its heap grows by a quarter in tens of minutes. Forced every two minutes,
// collections cost it over a millisecond of CPU per 2-second scan, 6 % of its scan cost.
//
// The runtime forces no collection when GOGC is off; it then collects only to stay under its
// soft memory limit (debug.SetMemoryLimit). A Pacer turns GOGC off and, after every collection,
// sets the limit to the memory the runtime holds besides heap objects and free memory plus
// (1+growth) times the live heap (see Limit), so that the next collection comes when the heap
// objects have grown by growth times the live heap, as with GOGC=100×growth, and free memory is
// released rather than kept beside a grown heap.
//
// The growth adapts to the garbage made: a collection that comes less than MinGap after the
// previous one doubles it, up to MaxGrowth (GOGC=50), and one that comes more than 4×MinGap
// after halves it back towards the growth Start was given. A process that makes little
// garbage keeps a small heap; one that makes much (the agent under heavy process churn, whose
// short-lived processes' series come and go every scan) trades up to half a live heap's worth of
// memory for collections no more often than every MinGap or so, each of which marks the whole
// live heap.
//
// # After a spike
//
// A limit set while the heap was briefly large (a burst of large requests) stays large: with
// GOGC off nothing collects until the heap objects grow to it, so the memory of the spike's
// garbage would be kept for as long as the process runs quietly (2.4 GB of heap five minutes
// after one such burst, issue 31 N9). So a collection that finds the live heap more than
// SpikeFactor times the settled one plus SpikeSlack schedules a collection of its own Recheck later, which also returns the free
// memory to the operating system (debug.FreeOSMemory). If that one still finds the heap large,
// the spike goes on: another follows at twice the delay, at most MaxRecheck apart; after
// MaxRechecks of them the heap is taken as grown for good and settles there. The settled heap
// follows the live heap down at once, and up only that way: the collections during a spike come
// every few tens of percent of growth, so none of them alone looks like a spike. A process whose
// heap stays within twice its settled size pays nothing; a spike, or a heap that doubles for
// good, costs up to MaxRechecks collections.
package gcpace

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"
)

// MinGap and MaxGrowth bound the adaptation of the growth (see the package documentation).
const (
	MinGap    = 20 * time.Second
	MaxGrowth = 0.5
)

// adapt returns the growth to use after a collection that came gap after the previous one,
// with growth in use and base the growth asked for at Start.
func adapt(base, growth float64, gap time.Duration) float64 {
	switch {
	case gap < MinGap:
		return min(growth*2, max(MaxGrowth, base))
	case gap > 4*MinGap:
		return max(growth/2, base)
	}
	return growth
}

// Spike handling (see "After a spike" in the package documentation).
const (
	SpikeFactor = 2
	SpikeSlack  = 32 << 20
	Recheck     = 10 * time.Second
	MaxRecheck  = time.Minute
	MaxRechecks = 6
)

// MinHeadroom is the least growth a Pacer allows over the memory in use when it sets a limit:
// small heaps are not collected more often than this much allocation.
const MinHeadroom = 4 << 20

// resettle is how long after a collection the Pacer sets the limit again: right after a
// collection the heap is not swept yet and its dead objects still count as objects, so the first
// limit may be Limit's floor rather than its target; once swept, the target.
const resettle = time.Second

// The runtime/metrics samples a Pacer reads, in this order.
var sampleNames = [...]string{
	"/gc/heap/live:bytes",
	"/memory/classes/total:bytes",
	"/memory/classes/heap/released:bytes",
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/free:bytes",
}

// Mem is what a limit is computed from (see Limit).
type Mem struct {
	Live    uint64 // the heap marked live by the latest collection
	Mapped  uint64 // memory the runtime holds and has not released: what the limit bounds
	Objects uint64 // heap objects, live or not collected yet
	Free    uint64 // free heap memory not released yet, which the runtime reuses or releases
}

// Limit returns the memory limit under which the runtime collects when the heap objects reach
// (1+growth)×Live. The runtime's own heap goal under a limit is the limit minus the memory that
// is neither heap objects nor free (Mapped-Free-Objects), less 3 % of headroom; so the limit is
// that memory plus (1+growth)×Live plus the headroom, and the runtime releases free memory
// rather than let the total pass it. The growth is at least MinHeadroom. Right after a
// collection, with much free memory, that limit could be so far below Mapped that the runtime
// would collect again at once: the limit is never below Mapped-Free/2+MinHeadroom.
func Limit(m Mem, growth float64) int64 {
	objects := min(m.Objects, m.Mapped)
	free := min(m.Free, m.Mapped-objects)
	other := m.Mapped - objects - free
	target := m.Live + max(uint64(growth*float64(m.Live)), MinHeadroom)
	l := other + target*100/97
	l = max(l, m.Mapped-free/2+MinHeadroom)
	return int64(min(l, 1<<62))
}

// Pacer paces the process's garbage collector (see the package documentation). It changes
// process-wide runtime settings: run at most one per process, owned by main. Its methods are
// safe for concurrent use; its work runs on the runtime's cleanup goroutine and a timer.
type Pacer struct {
	base      float64 // the growth asked for
	prevGC    int
	prevLimit int64

	mu      sync.Mutex
	samples []metrics.Sample
	stopped bool
	limit   int64
	sets    int
	growth  float64   // in use, see adapt
	lastGC  time.Time // when the latest collection was noticed

	live     uint64        // the live heap found by the latest collection (set)
	settled  uint64        // the live heap of the latest ordinary collection (not a spike's)
	recheck  time.Duration // first delay of a spike's collection (Recheck; tests shorten it)
	delay    time.Duration // the next one
	rechecks int           // spike collections since the heap last settled
	pending  *time.Timer   // a spike collection to come
	released int           // spike collections run, in all
}

// Start turns GOGC off, sets the memory limit for the heap as it is and keeps setting it after
// every collection until Stop. growth is the fraction of the live heap allowed to be allocated
// between collections (0.25 is GOGC=25); it must be positive.
func Start(growth float64) *Pacer { return start(growth, Recheck) }

func start(growth float64, recheck time.Duration) *Pacer {
	p := &Pacer{base: growth, growth: growth, lastGC: time.Now(), samples: make([]metrics.Sample, len(sampleNames)), recheck: recheck}
	for i, n := range sampleNames {
		p.samples[i].Name = n
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.prevLimit = debug.SetMemoryLimit(-1)
	p.set()
	p.prevGC = debug.SetGCPercent(-1)
	p.arm()
	return p
}

// Stop gives the runtime back the GOGC and memory limit it had before Start.
func (p *Pacer) Stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return
	}
	p.stopped = true
	if p.pending != nil {
		p.pending.Stop()
	}
	debug.SetGCPercent(p.prevGC)
	debug.SetMemoryLimit(p.prevLimit)
}

// Stats returns the limit last set and how many times one was set.
func (p *Pacer) Stats() (limit int64, sets int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.limit, p.sets
}

// Released returns how many collections the Pacer ran after spikes (see the package
// documentation).
func (p *Pacer) Released() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.released
}

// Growth returns the growth in use (see the package documentation).
func (p *Pacer) Growth() float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.growth
}

// sentinel is allocated for each collection to come; its cleanup runs after the collection.
// It is not tiny (16 bytes or more), so it is never batched with other objects.
type sentinel [32]byte

// arm registers the notification of the next collection. p.mu is held.
func (p *Pacer) arm() {
	runtime.AddCleanup(new(sentinel), (*Pacer).collected, p)
}

// collected runs after a collection: it sets the limit, again once the heap is swept, and
// waits for the next collection.
func (p *Pacer) collected() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return
	}
	now := time.Now()
	p.growth, p.lastGC = adapt(p.base, p.growth, now.Sub(p.lastGC)), now
	p.set()
	p.arm()
	p.spike()
	time.AfterFunc(resettle, p.update)
}

// spike follows the live heap after a collection and schedules a collection of its own when a
// spike left it large (see the package documentation). p.mu is held.
func (p *Pacer) spike() {
	switch {
	case p.settled == 0 || p.live <= p.settled:
		p.settled, p.rechecks, p.delay = p.live, 0, 0 // the heap shrank: it settles lower
		return
	case p.live <= p.settled*SpikeFactor+SpikeSlack:
		p.rechecks, p.delay = 0, 0 // ordinary
		return
	case p.rechecks >= MaxRechecks:
		p.settled, p.rechecks, p.delay = p.live, 0, 0 // grown for good
		return
	}
	if p.pending != nil {
		return // one to come already
	}
	if p.delay == 0 {
		p.delay = p.recheck
	}
	p.pending = time.AfterFunc(p.delay, p.release)
	p.delay = min(2*p.delay, MaxRecheck)
}

// release collects and returns free memory to the operating system; the collection's
// notification (collected) judges the heap it found.
func (p *Pacer) release() {
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return
	}
	p.pending = nil
	p.rechecks++
	p.released++
	p.mu.Unlock()
	debug.FreeOSMemory()
}

// update sets the limit from the heap as it is now.
func (p *Pacer) update() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.stopped {
		p.set()
	}
}

// set reads the heap and sets the limit. p.mu is held.
func (p *Pacer) set() {
	metrics.Read(p.samples)
	v := func(i int) uint64 {
		if p.samples[i].Value.Kind() != metrics.KindUint64 {
			return 0 // not in this Go release: treated as none
		}
		return p.samples[i].Value.Uint64()
	}
	total, released := v(1), v(2)
	p.live = v(0)
	m := Mem{Live: v(0), Mapped: total - min(released, total), Objects: v(3), Free: v(4)}
	p.limit = Limit(m, p.growth)
	debug.SetMemoryLimit(p.limit)
	p.sets++
}
