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
