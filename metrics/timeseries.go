package metrics

// series is libprocess' TimeSeries<double>: the values of a window in time order, truncated to
// the window on every insertion and thinned to a capacity.
//
// Truncation (TimeSeries::truncate): when a value is set at time now, the values stamped at or
// before now−window are dropped, unless that would drop them all. Nothing is dropped between
// insertions, so an idle series keeps its values.
//
// Thinning (TimeSeries::sparsify): when a value takes the series beyond its capacity, one value
// of the older half is dropped: the second oldest at first, then, at each later insertion, the
// value after the next one, so that the older half loses every other value; when the candidate
// passes the middle of the series the next round starts again from the second oldest. Recent
// values are kept at full granularity, older ones at a coarser and coarser one:
//
//	capacity 10, after 0..9:  0 1 2 3 4 5 6 7 8 9
//	set 10:                   0 2 3 4 5 6 7 8 9 10
//	set 11:                   0 2 4 5 6 7 8 9 10 11
//	…
//	set 14:                   0 2 4 6 8 10 11 12 13 14
//	set 15 (new round):       0 4 6 8 10 11 12 13 14 15
//
// Unlike TimeSeries, which keeps one value per timestamp, values set at the same time are all
// kept (the window's clock is coarse), and a value stamped before the newest one is stamped as
// the newest (only concurrent updates do that).
//
// The values live in buf with at most one gap: buf[head:gapLo] then buf[gapHi:]. The gap is
// kept where the next thinning happens, so that dropping a value is O(1); moving it back to the
// start of a new round and compacting buf when it fills are amortised O(1) per insertion.
type series struct {
	window   int64 // ns
	capacity int

	buf          []entry
	head         int // physical index of the oldest value
	gapLo, gapHi int // the gap; gapLo == gapHi when there is none
	next         int // logical index of the next value to thin; -1 when a round must start
	last         int64
}

type entry struct {
	ts int64 // ns since the window's origin
	v  float64
}

// minCapacity is the least capacity thinning works with (libprocess' TimeSeries clamps to 3).
const minCapacity = 3

func newSeries(window int64, capacity int) series {
	return series{window: window, capacity: max(capacity, minCapacity), next: -1}
}

// len returns the number of values.
func (s *series) len() int { return s.gapLo - s.head + len(s.buf) - s.gapHi }

// at returns the i-th oldest value.
func (s *series) at(i int) entry {
	if p := s.gapLo - s.head; i < p {
		return s.buf[s.head+i]
	}
	return s.buf[s.gapHi+i-(s.gapLo-s.head)]
}

// set inserts e as the newest value, then truncates the series to the window ending at now
// and thins it to capacity (TimeSeries::set).
func (s *series) set(e entry, now int64) {
	if s.len() > 0 && e.ts < s.last {
		e.ts = s.last
	}
	s.last = e.ts
	s.append(e)
	s.truncate(now)
	s.sparsify()
}

func (s *series) append(e entry) {
	if len(s.buf) == cap(s.buf) {
		if live := s.len(); live > 0 && 2*(len(s.buf)-live) >= len(s.buf) {
			s.compact()
		}
	}
	if s.head == s.gapLo && s.gapLo != s.gapHi { // empty prefix: drop the gap
		s.head, s.gapLo = s.gapHi, s.gapHi
	}
	s.buf = append(s.buf, e)
}

// compact moves the values to the start of buf, closing the gap (which stays, empty, at the
// same logical index).
func (s *series) compact() {
	p := s.gapLo - s.head
	n := copy(s.buf, s.buf[s.head:s.gapLo])
	n += copy(s.buf[n:], s.buf[s.gapHi:])
	s.buf = s.buf[:n]
	s.head, s.gapLo, s.gapHi = 0, p, p
}

// truncate drops the values stamped at or before now−window, unless none would remain
// (TimeSeries::truncate).
func (s *series) truncate(now int64) {
	n := s.len()
	if n <= 1 {
		return
	}
	expired := now - s.window
	m := 0
	for m < n && s.at(m).ts <= expired {
		m++
	}
	if m == 0 || m == n {
		return
	}
	if s.next >= 0 && m < s.next {
		s.next -= m
	} else {
		s.next = -1
	}
	if p := s.gapLo - s.head; m < p {
		s.head += m
	} else {
		s.head = s.gapHi + m - p
		s.gapLo, s.gapHi = s.head, s.head
	}
}

// sparsify thins the series down to its capacity (TimeSeries::sparsify).
func (s *series) sparsify() {
	for n := s.len(); n > s.capacity; n-- {
		if s.next < 0 || s.next > n/2 {
			s.next = 1
		}
		if s.gapLo != s.gapHi && s.next == s.gapLo-s.head+1 {
			// The usual step: the gap is just before the value kept last time; keep it.
			s.buf[s.gapLo] = s.buf[s.gapHi]
			s.gapLo++
			s.gapHi++
		} else {
			s.moveGap(s.next)
		}
		s.gapHi++ // drop the value at logical index next
		s.next++  // and keep the one after it
	}
}

// moveGap moves the gap to just before the value at logical index k.
func (s *series) moveGap(k int) {
	p := s.gapLo - s.head
	if s.gapLo == s.gapHi { // the values are contiguous: buf[head:]
		s.gapLo, s.gapHi = s.head+k, s.head+k
		return
	}
	switch {
	case k < p: // values [k, p) move after the gap
		n := p - k
		copy(s.buf[s.gapHi-n:s.gapHi], s.buf[s.head+k:s.gapLo])
		s.gapLo -= n
		s.gapHi -= n
	case k > p: // values [p, k) move before it
		n := k - p
		copy(s.buf[s.gapLo:s.gapLo+n], s.buf[s.gapHi:s.gapHi+n])
		s.gapLo += n
		s.gapHi += n
	}
}

// appendValues appends the values, oldest first, to vs.
func (s *series) appendValues(vs []float64) []float64 {
	for _, e := range s.buf[s.head:s.gapLo] {
		vs = append(vs, e.v)
	}
	for _, e := range s.buf[s.gapHi:] {
		vs = append(vs, e.v)
	}
	return vs
}
