package history

// AddBatch records bits[i] as the value of series ids[i] in the open scan for every i, in
// order, exactly as the same calls of Add would (unknown IDs and adds outside Begin/Commit are
// counted in Stats.DroppedAdds; a second value for a series in the same scan replaces the
// first), in one loop: a writer that has a group of values at once saves a call and the
// re-reading of the store's state per value. bits must be at least as long as ids. Writer
// goroutine only. It does not allocate, except when a series gets its first point of a chunk
// period and the staging grows.
func (s *Store) AddBatch(ids []ID, bits []uint64) {
	w := &s.w
	if !w.inScan {
		if len(ids) > 0 {
			s.dropped.Add(int64(len(ids)))
		}
		return
	}
	adds, dropped := w.st.setBatch(w.kinds, ids, bits[:len(ids)], w.j)
	w.adds += adds
	if dropped > 0 {
		s.dropped.Add(int64(dropped))
	}
}

// Group is a fixed list of series that a writer adds together at every scan, in the same order
// (a collector's group: an application's metrics). AddGroup writes their values as AddBatch
// would, and remembers where they went in the current chunk period: when a group's series got
// their chunks together (the common case: the first scan of a period allocates them in the
// order of the adds), the later scans of the period find the i-th series' chunk at the first
// one's plus i, with no lookup per series. Writer goroutine only. The zero Group is empty.
type Group struct {
	ids []ID
	st  *staging // the staging, generation and chunk period where c0 holds
	gen uint64
	q   int
	c0  int    // ids[i]'s chunk of period q is c0+i; -1: not known
	mv  uint64 // st.moved when c0 was found
}

// SetIDs makes ids (copied) the series of g.
func (g *Group) SetIDs(ids []ID) {
	g.ids = append(g.ids[:0], ids...)
	g.st = nil
}

// IDs returns the series of g; the caller must not modify them.
func (g *Group) IDs() []ID { return g.ids }

// AddGroup is AddBatch(g.IDs(), bits). bits must be at least as long as g.IDs().
func (s *Store) AddGroup(g *Group, bits []uint64) {
	w := &s.w
	if !w.inScan {
		if len(g.ids) > 0 {
			s.dropped.Add(int64(len(g.ids)))
		}
		return
	}
	st, q := w.st, w.j/chunkScans
	var adds, dropped int
	if g.st == st && g.gen == st.gen.Load() && g.q == q && g.mv == st.moved && g.c0 >= 0 {
		adds, dropped = st.setRun(w.kinds, g.ids, bits[:len(g.ids)], w.j, g.c0)
	} else {
		adds, dropped = st.setBatch(w.kinds, g.ids, bits[:len(g.ids)], w.j)
		g.st, g.gen, g.q, g.c0, g.mv = st, st.gen.Load(), q, st.run(g.ids), st.moved
	}
	w.adds += adds
	if dropped > 0 {
		s.dropped.Add(int64(dropped))
	}
}
