package history

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cantal-go/cantal/internal/history/chunkenc"
	"github.com/cantal-go/cantal/internal/series"
)

// Defaults of Options.
const (
	DefaultRetention  = time.Hour
	DefaultInterval   = 2 * time.Second
	DefaultBlockScans = 64
	// MaxSeries bounds the number of live series; it keeps every segment's data under 4 GiB.
	MaxSeries = 1 << 20
)

// MaxBlockScans is the largest number of scans one segment may span: one block of the codec
// (chunkenc.MaxScans).
const MaxBlockScans = chunkenc.MaxScans

// Options configure a Store. The zero value means the defaults.
type Options struct {
	// Retention is how long points are kept (default 1h). Expire drops a segment only when
	// its newest point is older than Retention, so a query for the last Retention always
	// returns every point of it.
	Retention time.Duration
	// Interval is the expected time between scans (default 2s). It is a sizing hint.
	Interval time.Duration
	// BlockScans is the number of scans per segment (default 64, at most MaxBlockScans). A
	// segment's values are kept uncompressed until it is full, then compressed into one block
	// per series; larger segments compress better and cost more uncompressed memory
	// (9 bytes per series per scan).
	BlockScans int
	// GraceScans is how many of its newest scans a segment leaves in the open staging when it
	// closes (carried over into the next one, the segment still holding BlockScans scans), so
	// that a late point (AddAt) finds at least that many committed scans to go to even right
	// after a close. At most 8, BlockScans and MaxBlockScans-BlockScans; default 0. Snapshots
	// written with it load with any value (a longer open segment is closed on load).
	GraceScans int
	// Now is the clock used when loading a snapshot to drop data older than Retention
	// (default time.Now). The writer's own expiry uses the scans' timestamps instead.
	Now func() time.Time
}

func (o Options) withDefaults() Options {
	if o.Retention <= 0 {
		o.Retention = DefaultRetention
	}
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.BlockScans <= 0 {
		o.BlockScans = DefaultBlockScans
	}
	o.BlockScans = min(o.BlockScans, MaxBlockScans)
	o.GraceScans = graceScans(o.BlockScans, o.GraceScans)
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// ID is a series' number in a Store. IDs are dense, start at 0 and may be reused after Expire
// deletes a series; a reader holding an ID across Expire calls should check it with Lookup.
type ID uint32

// Point is one value of a series: the unix-ms time of its scan and its raw bits (uint64 of a
// counter, int64 of a level, float64 bits of a float).
type Point struct {
	TS   int64
	Bits uint64
}

// Rate returns the per-second rate of a counter between two of its points. It returns false
// when the counter went backwards (a reset: the rate across it is unknown, never negative) or
// when cur is not later than prev.
func Rate(prev, cur Point) (float64, bool) {
	if cur.TS <= prev.TS || cur.Bits < prev.Bits {
		return 0, false
	}
	return float64(cur.Bits-prev.Bits) * 1000 / float64(cur.TS-prev.TS), true
}

// metaSlab is how many metas the writer allocates at once (see writer.newMeta).
const metaSlab = 128

// newMeta returns a zero meta from the writer's current slab. A series' meta is its own heap
// object no more: under process churn hundreds of thousands of them (one per series of a dead
// process, kept until the series is dropped) each cost the collector an object to mark at every
// cycle. A meta is never reused, so readers holding one see it unchanged; a slab stays in
// memory while any of its metas does (at most metaSlab × 32 bytes for one long-lived series
// among short-lived ones).
func (w *writer) newMeta() *meta {
	if len(w.metaSlab) == 0 {
		w.metaSlab = make([]meta, metaSlab)
	}
	m := &w.metaSlab[0]
	w.metaSlab = w.metaSlab[1:]
	return m
}

// meta is the immutable description of a registered series.
type meta struct {
	key  string
	kind series.Kind
	born int64 // no point of this series is older; filters the points of a reused ID
}

type metaTable struct {
	m []atomic.Pointer[meta]
}

// segment is a closed, immutable run of scans: the timestamps and one compressed block per
// series. The index lists, in ID order, uvarint entries u: u even is a block of u/2 bytes,
// u odd is a run of u/2+1 series without points (runs do not cross a group of 64 IDs). The
// data and index offsets of every group of 64 IDs make a lookup a walk of at most 64 entries;
// the index costs about a byte per live series and nearly nothing for the others.
type segment struct {
	ts      []int64  // scan times, increasing
	lens    []byte   // the index entries
	chk     []uint32 // chk[g]: offset in data of the block of ID 64g
	lensOff []uint32 // lensOff[g]: offset in lens of the entry of ID 64g
	data    []byte
	points  int
}

const idGroup = 64

// block returns the block of id (nil: no points in this segment).
func (g *segment) block(id ID) []byte {
	it := segIter{g: g}
	return it.block(id)
}

// segIter returns the blocks of a segment for increasing IDs in one pass over its index.
type segIter struct {
	g         *segment
	p, off, k int // position in lens and data of the entry of ID k
	run       int // IDs left in the current run without points
}

// block returns the block of id, which must not be below the previous call's.
func (it *segIter) block(id ID) []byte {
	g := it.g
	gi := int(id) / idGroup
	if gi >= len(g.chk) {
		return nil // beyond the IDs the segment was built with
	}
	if gi > it.k/idGroup {
		// Jump to id's group.
		it.p, it.off, it.k, it.run = int(g.lensOff[gi]), int(g.chk[gi]), gi*idGroup, 0
	}
	for it.p < len(g.lens) || it.run > 0 {
		if it.run > 0 {
			n := min(it.run, int(id)-it.k+1)
			it.run -= n
			it.k += n
			if it.k > int(id) {
				return nil
			}
			continue
		}
		u, n := binary.Uvarint(g.lens[it.p:])
		if n <= 0 {
			return nil // unreachable: segments are built by segWriter
		}
		it.p += n
		if u&1 == 1 {
			it.run = int(u>>1) + 1
			continue
		}
		l := int(u >> 1)
		if l > len(g.data)-it.off {
			return nil // unreachable
		}
		blk := g.data[it.off : it.off+l]
		it.off += l
		it.k++
		if it.k-1 == int(id) {
			return blk
		}
	}
	return nil
}

func (g *segment) first() int64 { return g.ts[0] }
func (g *segment) last() int64  { return g.ts[len(g.ts)-1] }

func (g *segment) bytes() int {
	return len(g.data) + len(g.lens) + 4*len(g.chk) + 4*len(g.lensOff) + 8*len(g.ts)
}

// segWriter builds a segment, series by series in ID order. Its buffers are reused.
type segWriter struct {
	lens         []byte
	chk, lensOff []uint32
	data         []byte
	n            int // series added
	run          int // pending series without points
	points       int
}

func (sw *segWriter) reset() {
	sw.lens, sw.chk, sw.lensOff, sw.data = sw.lens[:0], sw.chk[:0], sw.lensOff[:0], sw.data[:0]
	sw.n, sw.run, sw.points = 0, 0, 0
}

// add appends the block of the next ID.
func (sw *segWriter) add(blk []byte) { sw.begin(); sw.data = append(sw.data, blk...); sw.end(len(blk)) }

// begin and end bracket a block appended to sw.data directly.
func (sw *segWriter) begin() {
	if sw.n%idGroup == 0 {
		sw.flushRun()
		sw.chk = append(sw.chk, uint32(len(sw.data)))
		sw.lensOff = append(sw.lensOff, uint32(len(sw.lens)))
	}
}

func (sw *segWriter) end(size int) {
	if size == 0 {
		sw.run++
	} else {
		sw.flushRun()
		sw.lens = binary.AppendUvarint(sw.lens, uint64(size)<<1)
	}
	sw.n++
}

func (sw *segWriter) flushRun() {
	if sw.run > 0 {
		sw.lens = binary.AppendUvarint(sw.lens, uint64(sw.run-1)<<1|1)
		sw.run = 0
	}
}

// segment returns the built segment with its own exactly sized copies of the buffers.
func (sw *segWriter) segment(ts []int64) *segment {
	sw.flushRun()
	return &segment{
		ts:      append([]int64(nil), ts...),
		lens:    append([]byte(nil), sw.lens...),
		chk:     append([]uint32(nil), sw.chk...),
		lensOff: append([]uint32(nil), sw.lensOff...),
		data:    append([]byte(nil), sw.data...),
		points:  sw.points,
	}
}

// view is what readers see: the closed segments, oldest first, and the open staging. Views are
// immutable; the writer publishes a new one when a segment closes or expires.
type view struct {
	segs []*segment
	open *staging
	gen  uint64 // open.gen when published
}

// Store keeps the recent history of numeric series in memory, compressed.
//
// Concurrency: exactly one goroutine, the writer, calls Series, Begin, Add, Commit, Expire and
// Newest.
// Any number of other goroutines may call Lookup, Each, Range, Last, Latest, Stats and
// Saver.Save at the same time. Readers never block the writer: they read
// immutable segments and the committed part of the open segment without locks, and the writer
// never waits for them (a staging buffer still in use by a reader is replaced, not waited for).
// The only lock the writer takes is around the key index when it registers or deletes a series,
// which readers hold for one map access.
type Store struct {
	opt   Options
	scans int // per segment
	cap   int // per staging: scans + Options.GraceScans

	onClose func(id ID, bytes int) // see OnClose; writer goroutine

	empty *staging // a staging without rows, open while a segment is being swapped

	view  atomic.Pointer[view]
	metas atomic.Pointer[metaTable]

	mu   sync.RWMutex // guards keys; written by the writer only
	keys keyIndex

	nseries       atomic.Int64
	stagingPoints atomic.Int64
	clamped       atomic.Int64
	dropped       atomic.Int64
	closed        atomic.Int64 // segments closed since New

	w writer
}

// writer is the state owned by the writer goroutine.
type writer struct {
	st      *staging
	kinds   []series.Kind // by ID; 0 marks a free ID
	lastTS  []int64       // by ID: newest point in a closed segment, or registration time
	free    []ID
	inScan  bool
	j       int   // scan index in the open segment
	ts      int64 // time of the open scan
	lastTS0 int64 // time of the latest committed scan
	adds    int
	enc     chunkenc.Encoder
	sw      segWriter
	retired []*staging
	pages   pagePool  // the pages of retired stagings, for the next ones
	late    []lateAdd // AddAt's points for committed scans of the open segment (late.go)
	// metaSlab holds the metas not yet handed out by newMeta.
	metaSlab []meta
}

// New returns an empty Store.
func New(opt Options) *Store {
	opt = opt.withDefaults()
	s := &Store{opt: opt, scans: opt.BlockScans, keys: newKeyIndex(), empty: newStaging(opt.BlockScans)}
	s.cap = s.scans + opt.GraceScans
	s.w.lastTS0 = math.MinInt64
	s.w.st = newStaging(s.cap)
	s.w.st.usePool(&s.w.pages)
	s.view.Store(&view{open: s.w.st, gen: s.w.st.gen.Load()})
	s.metas.Store(&metaTable{})
	return s
}

// Options returns the options s was made with, defaults filled in.
func (s *Store) Options() Options { return s.opt }

// Series returns the ID of the series with this key, registering it when new. A different kind
// for an existing key is an error; so is a kind that is not Counter, Level or Float. Writer
// goroutine only.
func (s *Store) Series(key string, kind series.Kind) (ID, error) {
	if id, ok := s.keys.find(key, s.metas.Load()); ok { // the writer is the only mutator of keys
		if k := s.w.kinds[id]; k != kind {
			return 0, fmt.Errorf("history: series %s is a %v, not a %v", key, k, kind)
		}
		return id, nil
	}
	return s.Register(key, kind)
}

// Register is Series for a key that the writer has just looked up (Lookup) and not found: it
// registers it without looking it up again. Writer goroutine only.
func (s *Store) Register(key string, kind series.Kind) (ID, error) {
	if kind != series.Counter && kind != series.Level && kind != series.Float {
		return 0, fmt.Errorf("history: series %s: kind %v has no history", key, kind)
	}
	born := s.w.lastTS0 + 1
	if s.w.inScan {
		born = s.w.ts
	}
	return s.register(key, kind, born)
}

func (s *Store) register(key string, kind series.Kind, born int64) (ID, error) {
	w := &s.w
	var id ID
	if n := len(w.free); n > 0 {
		id = w.free[n-1]
		w.free = w.free[:n-1]
	} else {
		if len(w.kinds) >= MaxSeries {
			return 0, fmt.Errorf("history: too many series (%d)", MaxSeries)
		}
		id = ID(len(w.kinds))
		w.kinds = append(w.kinds, 0)
		w.lastTS = append(w.lastTS, 0)
	}
	w.kinds[id] = kind
	w.lastTS[id] = born
	t := s.metas.Load()
	if int(id) >= len(t.m) {
		nt := &metaTable{m: make([]atomic.Pointer[meta], max(64, 2*len(t.m), int(id)+1))}
		for i := range t.m {
			nt.m[i].Store(t.m[i].Load())
		}
		t = nt
		s.metas.Store(t)
	}
	m := w.newMeta()
	m.key, m.kind, m.born = key, kind, born
	t.m[id].Store(m)
	s.mu.Lock()
	s.keys.insert(key, id)
	s.mu.Unlock()
	s.nseries.Add(1)
	return id, nil
}

// Lookup returns the ID and kind of the series with this key. Safe for concurrent use.
func (s *Store) Lookup(key string) (ID, series.Kind, bool) {
	s.mu.RLock()
	id, ok := s.keys.find(key, s.metas.Load())
	s.mu.RUnlock()
	if !ok {
		return 0, 0, false
	}
	m := s.meta(id)
	if m == nil || m.key != key {
		return 0, 0, false
	}
	return id, m.kind, true
}

func (s *Store) meta(id ID) *meta {
	t := s.metas.Load()
	if int(id) >= len(t.m) {
		return nil
	}
	return t.m[id].Load()
}

// Each calls fn for every live series until fn returns false. It takes no lock: series
// registered or deleted meanwhile may or may not be seen. Safe for concurrent use.
func (s *Store) Each(fn func(id ID, key string, kind series.Kind) bool) {
	t := s.metas.Load()
	for i := range t.m {
		if m := t.m[i].Load(); m != nil {
			if !fn(ID(i), m.key, m.kind) {
				return
			}
		}
	}
}

// Begin starts a scan at tsMs (unix ms). Scan times must increase; a time not after the
// previous scan's is moved to 1 ms after it (counted in Stats.ClampedScans) so that the time
// column stays ordered. A Begin without Commit discards the values added since the previous
// Begin. Writer goroutine only.
func (s *Store) Begin(tsMs int64) {
	w := &s.w
	if w.inScan {
		w.st.unset(w.j)
		clear(w.late)
		w.late = w.late[:0]
	}
	if tsMs <= w.lastTS0 {
		tsMs = w.lastTS0 + 1
		s.clamped.Add(1)
	}
	w.st.ts[w.j] = tsMs
	w.ts = tsMs
	w.inScan = true
	w.adds = 0
}

// Add records bits as the value of series id in the open scan. Adding to an unknown ID or
// outside Begin/Commit is ignored (counted in Stats.DroppedAdds); adding twice keeps the last
// value. Writer goroutine only. It does not allocate.
func (s *Store) Add(id ID, bits uint64) {
	w := &s.w
	if !w.inScan || int(id) >= len(w.kinds) || w.kinds[id] == 0 {
		s.dropped.Add(1)
		return
	}
	if w.st.set(id, w.j, bits) {
		w.adds++
	}
}

// Commit publishes the open scan to readers. Series not added in it have a gap at its time. When
// the open segment is full, Commit compresses it. Writer goroutine only.
func (s *Store) Commit() {
	w := &s.w
	if !w.inScan {
		return
	}
	w.inScan = false
	s.applyLate()
	w.st.n.Store(int32(w.j + 1))
	w.lastTS0 = w.ts
	s.stagingPoints.Add(int64(w.adds))
	w.j++
	if w.j == s.cap {
		s.closeSegment()
	}
}

// graceScans bounds Options.GraceScans: at most one chunk (8 scans), a segment's length and
// what MaxBlockScans leaves.
func graceScans(scans, want int) int {
	return max(0, min(want, chunkScans, scans, MaxBlockScans-scans))
}

// closeSegment compresses the first s.scans scans of the full open staging into a segment and
// opens the next staging with the newest graceScans scans carried over, published together:
// readers see every point in the segment or in the open staging, never neither nor both.
func (s *Store) closeSegment() {
	w := &s.w
	st := w.st
	n, carry := s.scans, w.j-s.scans
	var next *staging
	if carry > 0 {
		// The carried scans are copied into another staging, published with the segment.
		if next = s.sweep(); next == nil {
			next = newStaging(s.cap)
			next.usePool(&w.pages)
		}
		next.reset()
		copy(next.ts, st.ts[n:n+carry])
	}
	sw := &w.sw
	sw.reset()
	var vals [chunkenc.MaxScans]uint64
	var pres [chunkenc.MaxScans]uint8
	carried := 0
	for id := range w.kinds {
		sw.begin()
		start := len(sw.data)
		if k := w.kinds[id]; k != 0 && st.row(ID(id), n+carry, &vals, &pres) {
			sw.data = w.enc.Append(sw.data, k, vals[:n], pres[:n], n)
			for j := n - 1; j >= 0; j-- {
				if pres[j] != 0 {
					w.lastTS[id] = max(w.lastTS[id], st.ts[j])
					break
				}
			}
			for j := range carry { // all in next's first chunk period (carry ≤ chunkScans)
				if pres[n+j] != 0 && next.set(ID(id), j, vals[n+j]) {
					carried++
				}
			}
		}
		sw.end(len(sw.data) - start)
		if n := len(sw.data) - start; n > 0 && s.onClose != nil {
			s.onClose(ID(id), n)
		}
	}
	sw.points = int(s.stagingPoints.Load()) - carried
	seg := sw.segment(st.ts[:n])

	v := s.view.Load()
	segs := make([]*segment, len(v.segs)+1)
	copy(segs, v.segs)
	segs[len(v.segs)] = seg
	s.stagingPoints.Store(int64(carried))
	if carry > 0 {
		next.n.Store(int32(carry))
		s.view.Store(&view{segs: segs, open: next, gen: next.gen.Load()})
		st.gen.Add(1) // readers that acquire st from now on see the change and retry
		// st is not reused whole (two stagings would be held): its pages go to the pool that
		// next grows from, at once or, if a reader still holds it, from retired at a later
		// close.
		if st.readers.Load() != 0 {
			w.retired = append(w.retired, st)
		} else {
			st.recycle()
		}
	} else {
		// Every point of st is in seg now: publish that with an empty open segment, then
		// reuse st at once unless a reader still holds it (then take another buffer; never
		// wait).
		s.view.Store(&view{segs: segs, open: s.empty, gen: s.empty.gen.Load()})
		st.gen.Add(1) // readers that acquire st from now on see the change and retry
		next = s.sweep()
		if st.readers.Load() == 0 {
			next = st
		} else {
			w.retired = append(w.retired, st)
			if next == nil {
				next = newStaging(s.cap)
				next.usePool(&w.pages)
			}
		}
		next.reset()
		s.view.Store(&view{segs: segs, open: next, gen: next.gen.Load()})
	}
	w.st = next
	w.j = carry
	s.closed.Add(1)
}

// OnClose makes every segment close call fn with each series' block size in bytes (the
// compressed points it keeps until the segment expires), on the writer goroutine, before the
// segment is published. Set it before the first scan. Writer goroutine only.
func (s *Store) OnClose(fn func(id ID, bytes int)) { s.onClose = fn }

// Closed returns how many segments the Store has closed since it was made. Right after a close
// the open segment holds only the scans carried over (graceScans), so a Saver's Save costs
// little more than writing the new segment's
// file; a caller that saves then (see Saver) compresses nothing twice. Safe for any goroutine.
func (s *Store) Closed() int64 { return s.closed.Load() }

// sweep forgets the retired stagings that no reader holds any more and returns one of them,
// if any, for reuse; the pages of the others go to the pool.
func (s *Store) sweep() *staging {
	w := &s.w
	var reuse *staging
	k := 0
	for _, r := range w.retired {
		switch {
		case r.readers.Load() != 0:
			w.retired[k] = r
			k++
		case reuse == nil:
			reuse = r
		default:
			r.recycle()
		}
	}
	clear(w.retired[k:])
	w.retired = w.retired[:k]
	return reuse
}

// Expire drops the segments whose newest point is older than Retention before the latest scan,
// deletes the series left without any point and returns their keys. The IDs of deleted series
// may be reused by later registrations. Writer goroutine only.
func (s *Store) Expire() []string {
	var gone []string
	s.ExpireFunc(func(_ ID, key string) { gone = append(gone, key) })
	return gone
}

// ExpireFunc is Expire calling fn with the ID and key of each deleted series instead of
// returning the keys: the ID is free when fn is called, and reused by no registration before
// ExpireFunc returns. Writer goroutine only.
func (s *Store) ExpireFunc(fn func(id ID, key string)) {
	w := &s.w
	if w.lastTS0 == math.MinInt64 {
		return
	}
	cutoff := w.lastTS0 - s.opt.Retention.Milliseconds()
	v := s.view.Load()
	k := 0
	for k < len(v.segs) && v.segs[k].last() < cutoff {
		k++
	}
	if k == 0 {
		return
	}
	segs := append([]*segment(nil), v.segs[k:]...)
	s.view.Store(&view{segs: segs, open: v.open, gen: v.gen})
	oldest := w.lastTS0
	if len(segs) > 0 {
		oldest = segs[0].first()
	} else if w.st.n.Load() > 0 {
		oldest = w.st.ts[0]
	}
	t := s.metas.Load()
	for id, k := range w.kinds {
		if k == 0 || w.lastTS[id] >= oldest || s.hasOpenPoint(ID(id)) {
			continue
		}
		fn(ID(id), s.delete(t, ID(id)))
	}
}

// delete forgets series id and frees its ID. Points it left in closed segments stay until they
// expire, unreachable: a later holder of the ID is born after them.
func (s *Store) delete(t *metaTable, id ID) string {
	w := &s.w
	m := t.m[id].Load()
	t.m[id].Store(nil)
	w.kinds[id] = 0
	w.free = append(w.free, id)
	s.mu.Lock()
	s.keys.remove(m.key, id)
	s.mu.Unlock()
	s.nseries.Add(-1)
	return m.key
}

// Drop forgets series id and its points before they expire, for a caller that must bound the
// number of series; it reports whether id was a series. Readers see it gone at once. Writer
// goroutine only, between scans (not between Begin and Commit, where it does nothing).
func (s *Store) Drop(id ID) bool {
	w := &s.w
	if w.inScan || int(id) >= len(w.kinds) || w.kinds[id] == 0 {
		return false
	}
	s.delete(s.metas.Load(), id)
	return true
}

// Newest returns a time no point of series id is later than (for a series without points, a
// time before it was registered; 0 for an unknown ID): the newest point's time in a closed
// segment, or the open scan's when it has a point in the open segment. A caller indexing series
// by time uses it for the series of a loaded snapshot. Writer goroutine only; O(1).
func (s *Store) Newest(id ID) int64 {
	w := &s.w
	if int(id) >= len(w.kinds) || w.kinds[id] == 0 {
		return 0
	}
	if s.hasOpenPoint(id) {
		if w.inScan {
			return w.ts
		}
		return w.lastTS0
	}
	return w.lastTS[id]
}

// hasOpenPoint reports whether id has a point in the open segment (committed or not).
func (s *Store) hasOpenPoint(id ID) bool {
	n := s.w.j
	if s.w.inScan {
		n++
	}
	return s.w.st.hasPoint(id, n)
}

// Stats describes a Store's content and memory.
type Stats struct {
	Series          int   // live series
	Points          int64 // stored points
	Segments        int   // closed segments
	CompressedBytes int64 // closed segments: blocks, offsets and time columns
	StagingBytes    int64 // the open segment, uncompressed
	OldestMs        int64 // time of the oldest scan kept (0: none)
	LatestMs        int64 // time of the latest committed scan (0: none)
	ClampedScans    int64 // scans whose time had to be moved forward
	DroppedAdds     int64 // Adds ignored (unknown ID or outside a scan)
}

// Stats returns current statistics. Safe for concurrent use.
func (s *Store) Stats() Stats {
	v := s.view.Load()
	st := Stats{
		Series:       int(s.nseries.Load()),
		Points:       s.stagingPoints.Load(),
		Segments:     len(v.segs),
		StagingBytes: v.open.bytes(),
		ClampedScans: s.clamped.Load(),
		DroppedAdds:  s.dropped.Load(),
	}
	for _, g := range v.segs {
		st.Points += int64(g.points)
		st.CompressedBytes += int64(g.bytes())
	}
	if len(v.segs) > 0 {
		st.OldestMs = v.segs[0].first()
		st.LatestMs = v.segs[len(v.segs)-1].last()
	}
	o := s.acquire()
	if n := int(o.open.n.Load()); n > 0 {
		if st.OldestMs == 0 {
			st.OldestMs = o.open.ts[0]
		}
		st.LatestMs = o.open.ts[n-1]
	}
	s.release(o)
	return st
}
