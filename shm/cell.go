package shm

import (
	"sync/atomic"
	"unsafe"
)

// cell is the storage of an 8-byte metric. Before Start, p is nil and the value lives in pre,
// guarded by the collection's mutex; Start copies pre into the mapping and sets p with that
// mutex held, so an update either happens under the mutex before the switch or atomically on
// the mapping after it, and none is lost. A cell without a collection (the zero value of a
// metric) keeps its value in pre forever, updated atomically.
type cell struct {
	// p is the *uint64 in the mapping, nil before Start. It is an unsafe.Pointer used with
	// atomic.LoadPointer rather than an atomic.Pointer because that keeps Counter.Inc within
	// the inliner's budget.
	p    unsafe.Pointer
	coll *Collection
	pre  uint64
}

// ptr returns the mapped word, or nil before Start.
func (c *cell) ptr() *uint64 { return (*uint64)(atomic.LoadPointer(&c.p)) }

// setPtr switches the cell to the mapped word p. The collection's mutex is held.
func (c *cell) setPtr(p *uint64) { atomic.StorePointer(&c.p, unsafe.Pointer(p)) }

// slow runs f on the pre-start storage under the collection's mutex, or on the mapping if
// Start switched the cell meanwhile.
func (c *cell) slow(f func(p *uint64)) {
	if c.coll == nil {
		f(&c.pre)
		return
	}
	c.coll.mu.Lock()
	p := c.ptr()
	if p == nil {
		p = &c.pre
	}
	f(p)
	c.coll.mu.Unlock()
}

func (c *cell) add(n uint64) {
	if p := c.ptr(); p != nil {
		atomic.AddUint64(p, n)
		return
	}
	c.addSlow(n)
}

// addSlow is add before Start. It is kept out of line so that the callers' fast paths inline.
//
//go:noinline
func (c *cell) addSlow(n uint64) { c.slow(func(p *uint64) { atomic.AddUint64(p, n) }) }

// incSlow is addSlow(1), without an argument so that Counter.Inc inlines.
//
//go:noinline
func (c *cell) incSlow() { c.addSlow(1) }

func (c *cell) store(v uint64) {
	if p := c.ptr(); p != nil {
		atomic.StoreUint64(p, v)
		return
	}
	c.slow(func(p *uint64) { atomic.StoreUint64(p, v) })
}

func (c *cell) load() uint64 {
	if p := c.ptr(); p != nil {
		return atomic.LoadUint64(p)
	}
	var v uint64
	c.slow(func(p *uint64) { v = atomic.LoadUint64(p) })
	return v
}

// update applies f atomically (a compare-and-swap loop).
func (c *cell) update(f func(uint64) uint64) {
	do := func(p *uint64) {
		for {
			old := atomic.LoadUint64(p)
			if atomic.CompareAndSwapUint64(p, old, f(old)) {
				return
			}
		}
	}
	if p := c.ptr(); p != nil {
		do(p)
		return
	}
	c.slow(do)
}
