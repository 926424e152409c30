// Package scanmark is how the scans forget what they no longer find: what a scan keeps per
// name (an interface's series, a disk's, a process's state) embeds a Mark, each scan marks what
// it found with its generation number, and one Sweep at the end drops from the map whatever that
// scan did not mark. It replaces one hand-written "delete what was not seen" loop per map.
//
// A Mark and the map holding it belong to the scan goroutine that owns them; nothing here
// synchronises.
package scanmark

// Mark records the latest scan (a generation number, counted from 1) that saw the thing it is
// embedded in. The zero value was seen by no scan.
type Mark struct {
	gen uint64
}

// See marks the thing as seen by scan gen.
func (m *Mark) See(gen uint64) { m.gen = gen }

// Seen reports whether scan gen saw the thing.
func (m *Mark) Seen(gen uint64) bool { return m.gen == gen }

// Marked is what Sweep needs of a map's values: a pointer to a struct embedding a Mark.
type Marked interface {
	Seen(gen uint64) bool
}

// Sweep deletes from m every value that scan gen did not see, calling drop (when not nil)
// with each before it is deleted, to release what it holds (a kept file, a goroutine).
func Sweep[K comparable, V Marked](m map[K]V, gen uint64, drop func(K, V)) {
	for k, v := range m {
		if !v.Seen(gen) {
			if drop != nil {
				drop(k, v)
			}
			delete(m, k)
		}
	}
}
