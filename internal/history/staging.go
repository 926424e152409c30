package history

import (
	"sync/atomic"
	"unsafe"

	"github.com/cantal-go/cantal/internal/history/chunkenc"
	"github.com/cantal-go/cantal/internal/series"
)

// The open segment is kept uncompressed in a staging, sparsely: only the series that have a
// point in the segment have a row, and a row holds only the chunks (runs of chunkScans scans) in
// which the series has points. A machine where thousands of processes come and go registers
// series that live for a few scans each; a dense table (every registered series × every scan of
// the segment) would cost 9 bytes per scan for every series seen in the last hour, dead or
// alive. Sparse, the staging costs about 9 bytes per point of the open segment (72-byte chunks of 8 scans) plus 4 bytes per
// registered series.

// chunkScans is the number of scans of a chunk, the unit in which a row's storage is allocated.
const chunkScans = 8

const (
	pageShift = 12
	pageLen   = 1 << pageShift
)

// paged is an array that grows by fixed pages, so that growing never moves an element: readers
// may hold on to an element while the writer grows the array. The writer (one goroutine) calls
// ensure, truncate and wget; readers call get.
type paged[T any] struct {
	dir  atomic.Pointer[[]*[pageLen]T] // published page directory
	w    []*[pageLen]T                 // the writer's copy of *dir
	pool *[]*[pageLen]T                // zeroed pages to grow from before allocating (nil: none); writer-owned
}

// get returns element i, or nil when i is beyond the array. Safe for concurrent use.
func (p *paged[T]) get(i int) *T {
	d := p.dir.Load()
	if d == nil || i>>pageShift >= len(*d) {
		return nil
	}
	return &(*d)[i>>pageShift][i&(pageLen-1)]
}

// wget returns element i, which must be below the size ensured. Writer only.
func (p *paged[T]) wget(i int) *T { return &p.w[i>>pageShift][i&(pageLen-1)] }

// ensure makes elements [0, n) exist. Writer only.
func (p *paged[T]) ensure(n int) {
	if n <= len(p.w)<<pageShift {
		return
	}
	w := append([]*[pageLen]T(nil), p.w...)
	for len(w)<<pageShift < n {
		if p.pool != nil && len(*p.pool) > 0 {
			k := len(*p.pool) - 1
			w = append(w, (*p.pool)[k])
			(*p.pool)[k] = nil
			*p.pool = (*p.pool)[:k]
			continue
		}
		w = append(w, new([pageLen]T))
	}
	p.w = w
	p.dir.Store(&w)
}

// truncate drops the pages beyond the first n elements. Writer only, and only while no reader
// can hold an element of the dropped pages.
func (p *paged[T]) truncate(n int) {
	k := (n + pageLen - 1) >> pageShift
	if k >= len(p.w) {
		return
	}
	w := append([]*[pageLen]T(nil), p.w[:k]...)
	p.w = w
	p.dir.Store(&w)
}

// clearPrefix zeroes elements [0, n). Writer only, with no reader holding any of them: plain
// stores, even for atomic elements, a fraction of the cost of one atomic store each.
func (p *paged[T]) clearPrefix(n int) {
	for _, pg := range p.w {
		if n <= 0 {
			return
		}
		clear(pg[:min(n, pageLen)])
		n -= pageLen
	}
}

// bytes returns the memory held by the allocated pages.
func (p *paged[T]) bytes(elemSize int) int64 {
	d := p.dir.Load()
	if d == nil {
		return 0
	}
	return int64(len(*d)) * pageLen * int64(elemSize)
}

// pagePool keeps the pages of a staging that stopped being the open one for the next stagings
// to grow into, instead of letting them go to the collector and allocating others: a segment
// of a machine with 80 000 live series fills ~50 MB of chunk pages. Pages are pooled zeroed as
// the staging's reset leaves them (no presence flag set, no slot or chunk assigned; a chunk's
// values are read only where its presence flag is set). Writer-owned.
type pagePool struct {
	chunks []*[pageLen]chunk
	ints   []*[pageLen]atomic.Int32
	ids    []ID    // a retired staging's ids array, emptied
	cur    []int32 // and its cur array, zeroed
}

// usePool makes st grow from p's pages, and take p's arrays (st must be new).
func (st *staging) usePool(p *pagePool) {
	st.chunks.pool, st.slotOf.pool, st.chunkOf.pool = &p.chunks, &p.ints, &p.ints
	st.pages = p
	if p.ids != nil {
		st.ids, p.ids = p.ids[:0], nil
	}
	if p.cur != nil {
		st.cur, p.cur = p.cur, nil
	}
}

// recycle puts the pages of st, which no reader holds nor will (it has been retired), into its
// pool, keeping at most as many as st had (a pool never holds more than one segment's worth).
// st must not be used afterwards. Writer only.
func (st *staging) recycle() {
	if st.chunks.pool == nil {
		return
	}
	st.reset()
	pool, ints := st.chunks.pool, st.slotOf.pool
	for _, pg := range st.chunks.w {
		if len(*pool) >= len(st.chunks.w) {
			break
		}
		*pool = append(*pool, pg)
	}
	nints := len(st.slotOf.w) + len(st.chunkOf.w)
	for _, pgs := range [2][]*[pageLen]atomic.Int32{st.slotOf.w, st.chunkOf.w} {
		for _, pg := range pgs {
			if len(*ints) >= nints {
				break
			}
			*ints = append(*ints, pg)
		}
	}
	if st.pages != nil {
		clear(st.cur)
		st.pages.ids, st.pages.cur = st.ids[:0], st.cur
		st.ids, st.cur = nil, nil
	}
	st.chunks.w, st.slotOf.w, st.chunkOf.w = nil, nil, nil
	st.chunks.dir.Store(nil)
	st.slotOf.dir.Store(nil)
	st.chunkOf.dir.Store(nil)
}

// chunk holds one series' values of chunkScans consecutive scans.
type chunk struct {
	vals [chunkScans]uint64
	pres [chunkScans]uint8 // 1 when vals holds a point
}

// staging holds the open segment uncompressed. The writer fills scan j, then publishes it by
// storing n = j+1; readers read only scans below n. Slots and chunks are assigned by the writer
// during a scan and published with atomic stores; a reader that sees a slot or chunk of the
// uncommitted scan finds no point below n in it. A staging is recycled for a later segment only
// when no reader holds it (see Store.acquire).
type staging struct {
	gen     atomic.Uint64 // bumped when the staging stops being the open one
	readers atomic.Int64
	n       atomic.Int32 // committed scans
	scans   int
	cpr     int // chunks per row
	ts      []int64

	slotOf  paged[atomic.Int32] // by ID: 1 + the series' slot, 0: no point in this segment
	chunkOf paged[atomic.Int32] // by slot*cpr + q: 1 + the chunk of scans [q*chunkScans, +chunkScans)
	chunks  paged[chunk]

	// Writer-owned.
	ids     []ID // by slot: the series
	nchunks int
	// cur caches, by ID, 1 + the chunk of the chunk period curQ (0: none yet), so that Add in
	// the common case touches one int32 and the chunk. Chunks are allocated in the order of
	// the Adds, so a scan that adds series in the same order as the previous one (every
	// collector does) walks both arrays sequentially.
	cur  []int32
	curQ int
	// moved counts the chunks replaced by copies with late points (setLate): a Group that
	// remembered a run of chunks checks it.
	moved uint64
	pages *pagePool // where recycle leaves the pages and arrays (nil: none)
}

func newStaging(scans int) *staging {
	return &staging{scans: scans, cpr: (scans + chunkScans - 1) / chunkScans, ts: make([]int64, scans), curQ: -1}
}

// set stores bits as the value of id at scan j and reports whether it is a new point (not a
// second value for the same scan). Writer only.
func (st *staging) set(id ID, j int, bits uint64) bool {
	q := j / chunkScans
	if q != st.curQ {
		clear(st.cur)
		st.curQ = q
	}
	var ch *chunk
	if int(id) < len(st.cur) && st.cur[id] != 0 {
		ch = st.chunks.wget(int(st.cur[id]) - 1)
	} else {
		ch = st.newChunk(id, q)
	}
	k := j % chunkScans
	ch.vals[k] = bits
	if ch.pres[k] == 0 {
		ch.pres[k] = 1
		return true
	}
	return false
}

// setBatch is set(ids[i], j, bits[i]) for every i whose kinds[ids[i]] is not 0 (a registered
// series); it returns the number of new points and of the IDs skipped. Writer only.
//
// This is the loop every point of a scan goes through: per point it reads the kind and the
// chunk cache of the ID (arrays walked in order when the IDs are consecutive, as a collector's
// are) and writes the value and the presence flag into the chunk (chunks are allocated in the
// order of the first scan of their period, so a group's are walked in order too). Nothing in
// it is atomic: the chunk was published when it was made, and readers read values only below
// the committed count.
//
// (Chunk pages transposed into tiles of 8 chunks × 8 scans, so that a group's 100 points
// write 13 cache lines rather than ~113, were tried: no faster on BenchmarkScan, cold caches
// included, since the hardware prefetches a group's run of chunks; and reading rows, as
// Commit does for a whole segment, was twice as slow.)
func (st *staging) setBatch(kinds []series.Kind, ids []ID, bits []uint64, j int) (adds, dropped int) {
	q, k := j/chunkScans, uint(j)%chunkScans
	if q != st.curQ {
		clear(st.cur)
		st.curQ = q
	}
	cur, pages := st.cur, st.chunks.w
	bits = bits[:len(ids)]
	for n, id := range ids {
		if int(id) >= len(kinds) || kinds[id] == 0 {
			dropped++
			continue
		}
		var ch *chunk
		if int(id) < len(cur) && cur[id] != 0 {
			c := int(cur[id]) - 1
			ch = &pages[c>>pageShift][c&(pageLen-1)]
		} else {
			ch = st.newChunk(id, q)
			cur, pages = st.cur, st.chunks.w
		}
		ch.vals[k] = bits[n]
		if ch.pres[k] == 0 {
			ch.pres[k] = 1
			adds++
		}
	}
	return adds, dropped
}

// setRun is setBatch for IDs whose chunks of the current period (j's) are c0, c0+1, ... in
// order (see run). Writer only.
func (st *staging) setRun(kinds []series.Kind, ids []ID, bits []uint64, j, c0 int) (adds, dropped int) {
	k := uint(j) % chunkScans
	pages := st.chunks.w
	bits = bits[:len(ids)]
	for n, id := range ids {
		if int(id) >= len(kinds) || kinds[id] == 0 {
			dropped++
			continue
		}
		c := c0 + n
		ch := &pages[c>>pageShift][c&(pageLen-1)]
		ch.vals[k] = bits[n]
		if ch.pres[k] == 0 {
			ch.pres[k] = 1
			adds++
		}
	}
	return adds, dropped
}

// run returns c0 when the chunks of ids in the current chunk period are c0, c0+1, ... in
// order, and -1 otherwise (an ID without a chunk, an ID twice). A chunk, once given, stays
// until the staging is reset for another segment. Writer only.
func (st *staging) run(ids []ID) int {
	if len(ids) == 0 || int(ids[0]) >= len(st.cur) {
		return -1
	}
	c0 := int(st.cur[ids[0]]) - 1
	if c0 < 0 {
		return -1
	}
	for n, id := range ids {
		if int(id) >= len(st.cur) || int(st.cur[id])-1 != c0+n {
			return -1
		}
	}
	return c0
}

// newChunk returns id's chunk q, giving id a slot and the chunk when needed. Writer only.
func (st *staging) newChunk(id ID, q int) *chunk {
	st.slotOf.ensure(int(id) + 1)
	sp := st.slotOf.wget(int(id))
	slot := int(sp.Load()) - 1
	if slot < 0 {
		slot = len(st.ids)
		st.ids = append(st.ids, id)
		st.chunkOf.ensure((slot + 1) * st.cpr)
		sp.Store(int32(slot + 1))
	}
	cp := st.chunkOf.wget(slot*st.cpr + q)
	c := int(cp.Load()) - 1
	if c < 0 {
		c = st.nchunks
		st.nchunks++
		st.chunks.ensure(st.nchunks)
		cp.Store(int32(c + 1))
	}
	if int(id) >= len(st.cur) {
		st.cur = append(st.cur, make([]int32, int(id)+1-len(st.cur))...)
	}
	st.cur[id] = int32(c + 1)
	return st.chunks.wget(c)
}

// unset forgets every value of scan j (a scan begun again without a commit). Writer only.
func (st *staging) unset(j int) {
	q := j / chunkScans
	for slot := range st.ids {
		if c := int(st.chunkOf.wget(slot*st.cpr+q).Load()) - 1; c >= 0 {
			st.chunks.wget(c).pres[j%chunkScans] = 0
		}
	}
}

// row copies the values and presence flags of id's first n scans into vals and pres and reports
// whether id has a slot (it may still have no point). pres is cleared where there is no point.
// Safe for concurrent use for n up to the committed count; the writer may use any n.
func (st *staging) row(id ID, n int, vals *[chunkenc.MaxScans]uint64, pres *[chunkenc.MaxScans]uint8) bool {
	slot := st.slot(id)
	if slot < 0 {
		return false
	}
	for q := 0; q*chunkScans < n; q++ {
		lo, hi := q*chunkScans, min(n, (q+1)*chunkScans)
		ch := st.chunk(slot, q)
		if ch == nil {
			clear(pres[lo:hi])
			continue
		}
		copy(pres[lo:hi], ch.pres[:hi-lo])
		copy(vals[lo:hi], ch.vals[:hi-lo])
	}
	return true
}

// slot returns id's slot, or -1. Safe for concurrent use.
func (st *staging) slot(id ID) int {
	sp := st.slotOf.get(int(id))
	if sp == nil {
		return -1
	}
	return int(sp.Load()) - 1
}

// chunk returns the chunk q of slot, or nil. Safe for concurrent use.
func (st *staging) chunk(slot, q int) *chunk {
	cp := st.chunkOf.get(slot*st.cpr + q)
	if cp == nil {
		return nil
	}
	c := int(cp.Load()) - 1
	if c < 0 {
		return nil
	}
	return st.chunks.get(c)
}

// last appends to dst, newest first, up to want points of id among the first n scans whose time
// is at least born. Like row.
func (st *staging) last(id ID, n, want int, born int64, dst []Point) []Point {
	slot := st.slot(id)
	if slot < 0 || want <= 0 {
		return dst
	}
	got := 0
	for q := (n - 1) / chunkScans; q >= 0 && n > 0; q-- {
		ch := st.chunk(slot, q)
		if ch == nil {
			continue
		}
		for j := min(n, (q+1)*chunkScans) - 1; j >= q*chunkScans; j-- {
			if ch.pres[j-q*chunkScans] == 0 || st.ts[j] < born {
				continue
			}
			dst = append(dst, Point{st.ts[j], ch.vals[j-q*chunkScans]})
			if got++; got == want {
				return dst
			}
		}
	}
	return dst
}

// hasPoint reports whether id has a point in the first n scans. Like row.
func (st *staging) hasPoint(id ID, n int) bool {
	var vals [chunkenc.MaxScans]uint64
	var pres [chunkenc.MaxScans]uint8
	if !st.row(id, n, &vals, &pres) {
		return false
	}
	for _, p := range pres[:n] {
		if p != 0 {
			return true
		}
	}
	return false
}

// reset empties the staging for reuse as a new open segment, releasing the pages beyond what
// twice the last segment used. Writer only, with no reader holding st.
func (st *staging) reset() {
	for _, id := range st.ids {
		st.slotOf.wget(int(id)).Store(0)
	}
	st.chunkOf.clearPrefix(len(st.ids) * st.cpr)
	for c := range st.nchunks {
		st.chunks.wget(c).pres = [chunkScans]uint8{}
	}
	st.chunks.truncate(2 * st.nchunks)
	st.chunkOf.truncate(2 * len(st.ids) * st.cpr)
	if cap(st.ids) > 4*len(st.ids)+1024 {
		st.ids = nil // a burst is over: let its memory go
	}
	st.ids = st.ids[:0]
	st.nchunks = 0
	st.curQ = -1 // the next set clears cur
	st.n.Store(0)
}

// bytes returns the memory the staging holds.
func (st *staging) bytes() int64 {
	return int64(8*len(st.ts)) + st.slotOf.bytes(4) + st.chunkOf.bytes(4) + st.chunks.bytes(int(unsafe.Sizeof(chunk{})))
}

// compressStaging compresses the first n committed scans of st (pinned by the caller) for the
// series of table (by ID; nil: none), without the points older than their series' born time.
// The segment returned shares its index and data with sw, which must not be reset while it is
// in use; enc and sw are scratch that a caller may keep for the next call.
func compressStaging(st *staging, n int, table []*meta, enc *chunkenc.Encoder, sw *segWriter) *segment {
	return compressStagingRange(st, 0, n, table, enc, sw)
}

// compressStagingRange is compressStaging of the committed scans [lo, hi) of st.
func compressStagingRange(st *staging, lo, hi int, table []*meta, enc *chunkenc.Encoder, sw *segWriter) *segment {
	var vals [chunkenc.MaxScans]uint64
	var pres [chunkenc.MaxScans]uint8
	sw.reset()
	n := hi - lo
	for id, m := range table {
		sw.begin()
		start := len(sw.data)
		if m == nil || !st.row(ID(id), hi, &vals, &pres) {
			sw.end(0)
			continue
		}
		for j := lo; j < hi; j++ {
			if st.ts[j] < m.born {
				pres[j] = 0
			}
		}
		sw.data = enc.Append(sw.data, m.kind, vals[lo:hi], pres[lo:hi], n)
		sw.end(len(sw.data) - start)
	}
	sw.flushRun()
	return &segment{
		ts:      append([]int64(nil), st.ts[lo:hi]...),
		lens:    sw.lens,
		chk:     sw.chk,
		lensOff: sw.lensOff,
		data:    sw.data,
		points:  sw.points,
	}
}
