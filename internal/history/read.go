package history

import (
	"sort"

	"github.com/cantal-go/cantal/internal/history/chunkenc"
)

// acquire returns the current view with its open staging pinned: the writer will not recycle
// the staging until release. It never blocks.
func (s *Store) acquire() *view {
	for {
		v := s.view.Load()
		v.open.readers.Add(1)
		if v.open.gen.Load() == v.gen {
			return v
		}
		// The staging was retired between the two loads; a newer view exists.
		v.open.readers.Add(-1)
	}
}

func (s *Store) release(v *view) { v.open.readers.Add(-1) }

// born returns the time before which points of id belong to an earlier series with the same ID.
func (s *Store) born(id ID) (int64, bool) {
	m := s.meta(id)
	if m == nil {
		return 0, false
	}
	return m.born, true
}

// openPoints appends the committed points of id in the open staging with from ≤ ts ≤ to.
func openPoints(st *staging, id ID, from, to int64, dst []Point) []Point {
	n := int(st.n.Load())
	var vals [chunkenc.MaxScans]uint64
	var pres [chunkenc.MaxScans]uint8
	if !st.row(id, n, &vals, &pres) {
		return dst
	}
	for j := 0; j < n; j++ {
		if pres[j] != 0 && st.ts[j] >= from && st.ts[j] <= to {
			dst = append(dst, Point{st.ts[j], vals[j]})
		}
	}
	return dst
}

// Range calls fn with every point of series id whose time is in [fromMs, toMs], oldest first,
// until fn returns false. Only existing points are passed: a scan without a value of this series
// is a missing timestamp. fn may be slow; it does not hold up the writer. Safe for concurrent
// use.
func (s *Store) Range(id ID, fromMs, toMs int64, fn func(tsMs int64, bits uint64) bool) {
	if fromMs > toMs {
		return
	}
	v := s.acquire()
	born, ok := s.born(id)
	if !ok {
		s.release(v)
		return
	}
	fromMs = max(fromMs, born)
	var buf [chunkenc.MaxScans]Point
	tail := openPoints(v.open, id, fromMs, toMs, buf[:0])
	s.release(v)

	segs := v.segs
	i := sort.Search(len(segs), func(i int) bool { return segs[i].last() >= fromMs })
	var d chunkenc.Decoded
	for ; i < len(segs) && segs[i].first() <= toMs; i++ {
		g := segs[i]
		if chunkenc.Decode(g.block(id), len(g.ts), &d) != nil {
			continue // blocks are validated when made or loaded; unreachable
		}
		for k := 0; k < d.N; k++ {
			ts := g.ts[d.Idx[k]]
			if ts < fromMs || ts > toMs {
				continue
			}
			if !fn(ts, d.Val[k]) {
				return
			}
		}
	}
	for _, p := range tail {
		if !fn(p.TS, p.Bits) {
			return
		}
	}
}

// Last appends to dst the latest n points of series id, oldest first, and returns the extended
// slice. It decodes only the newest blocks it needs. Safe for concurrent use.
func (s *Store) Last(id ID, n int, dst []Point) []Point {
	if n <= 0 {
		return dst
	}
	v := s.acquire()
	born, ok := s.born(id)
	if !ok {
		s.release(v)
		return dst
	}
	start := len(dst)
	// Collect newest first, then reverse.
	dst = v.open.last(id, int(v.open.n.Load()), n, born, dst)
	s.release(v)
	var d chunkenc.Decoded
	for i := len(v.segs) - 1; i >= 0 && len(dst)-start < n; i-- {
		g := v.segs[i]
		if g.last() < born {
			break
		}
		if chunkenc.Decode(g.block(id), len(g.ts), &d) != nil {
			continue
		}
		for k := d.N - 1; k >= 0 && len(dst)-start < n; k-- {
			ts := g.ts[d.Idx[k]]
			if ts < born {
				break
			}
			dst = append(dst, Point{ts, d.Val[k]})
		}
	}
	out := dst[start:]
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return dst
}

// Latest returns the newest point of series id. For a series reported in recent scans it reads
// only the open segment or the newest block (a series silent for longer walks back block by
// block until it finds a point). Safe for concurrent use.
func (s *Store) Latest(id ID) (Point, bool) {
	var buf [1]Point
	p := s.Last(id, 1, buf[:0])
	if len(p) == 0 {
		return Point{}, false
	}
	return p[0], true
}
