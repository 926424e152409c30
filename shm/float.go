package shm

import "math"

// Float is a floating-point level ("level 8 float"). Make it with Collection.Float. Its methods
// are safe for concurrent use and, after Start, lock-free (Add is a compare-and-swap loop). The
// zero value is a working level that is not published.
type Float struct{ cell cell }

// Set sets the level to v.
func (f *Float) Set(v float64) { f.cell.store(math.Float64bits(v)) }

// Add adds d.
func (f *Float) Add(d float64) {
	f.cell.update(func(old uint64) uint64 { return math.Float64bits(math.Float64frombits(old) + d) })
}

// Get returns the current level.
func (f *Float) Get() float64 { return math.Float64frombits(f.cell.load()) }
