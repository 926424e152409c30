package shm

import "sync/atomic"

// Counter is an ever-growing uint64 ("counter 8"): the number of requests, the total time spent
// in them. Make it with Collection.Counter. Its methods are safe for concurrent use; after
// Start, Inc and Add are a single atomic add on the shared memory, without allocation or lock.
// The zero value is a working counter that is not published.
type Counter struct{ cell cell }

// Inc adds 1.
func (c *Counter) Inc() {
	if p := atomic.LoadPointer(&c.cell.p); p != nil {
		atomic.AddUint64((*uint64)(p), 1)
	} else {
		c.cell.incSlow()
	}
}

// Add adds n.
func (c *Counter) Add(n uint64) {
	if p := atomic.LoadPointer(&c.cell.p); p != nil {
		atomic.AddUint64((*uint64)(p), n)
	} else {
		c.cell.addSlow(n)
	}
}

// Get returns the current value.
func (c *Counter) Get() uint64 { return c.cell.load() }
