package shm

import "sync/atomic"

// Integer is a signed level ("level 8 signed"): a value that goes up and down, like a queue
// length or the bytes in a pool. Make it with Collection.Integer. Its methods are safe for
// concurrent use and, after Start, lock-free. The zero value is a working level that is not
// published.
type Integer struct{ cell cell }

// Set sets the level to v.
func (l *Integer) Set(v int64) { l.cell.store(uint64(v)) }

// Add adds d (which may be negative).
func (l *Integer) Add(d int64) {
	if p := atomic.LoadPointer(&l.cell.p); p != nil {
		atomic.AddUint64((*uint64)(p), uint64(d))
	} else {
		l.cell.addSlow(uint64(d))
	}
}

// Sub subtracts d.
func (l *Integer) Sub(d int64) { l.Add(-d) }

// Get returns the current level.
func (l *Integer) Get() int64 { return int64(l.cell.load()) }
