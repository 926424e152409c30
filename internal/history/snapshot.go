package history

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/cantal-go/cantal/internal/history/chunkenc"
	"github.com/cantal-go/cantal/internal/series"
)

// Snapshot format, version 1 (all integers uvarint unless noted, varint = zigzag):
//
//	magic "CANTALH\x00"
//	version (1), block scans
//	series count, then per series: kind byte, born varint, key length, key bytes
//	segment count, then per segment: scan count (the last segment may be partial),
//	  first time varint, then time deltas (each ≥ 1), then per series: block length, block
//	crc32c (Castagnoli) of everything above, 4 bytes little-endian
//
// Series are numbered densely in the snapshot; IDs after loading may differ from before.
const (
	snapMagic   = "CANTALH\x00"
	snapVersion = 1
)

// ErrCorrupt wraps every error ReadSnapshot returns for a malformed, truncated or
// checksum-failing snapshot (as opposed to an I/O error while reading it).
var ErrCorrupt = errors.New("corrupt history snapshot")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// WriteSnapshot writes every series and point of s to w. It is a reader: safe to call from any
// goroutine while the writer appends, which it never holds up. The snapshot is consistent as of
// one moment (the latest committed scan when it starts).
func (s *Store) WriteSnapshot(w io.Writer) error {
	v := s.acquire()
	// The open segment's committed scans, compressed as a partial segment.
	// Load the committed count before the series table: every point below n then belongs to a
	// series in t (or to an older holder of its ID, filtered out by born).
	n := int(v.open.n.Load())
	t := s.metas.Load()
	table := make([]*meta, len(t.m))
	for i := range t.m {
		table[i] = t.m[i].Load()
	}
	// A staging holds up to graceScans scans beyond a segment (carried over at a close): its
	// first s.scans scans are then written as a full segment, the rest as the partial one.
	var full, partial *segment
	lo := 0
	if n >= s.scans {
		full = compressStagingRange(v.open, 0, s.scans, table, new(chunkenc.Encoder), new(segWriter))
		lo = s.scans
	}
	if n > lo { // at most s.scans scans: graceScans ≤ s.scans
		partial = compressStagingRange(v.open, lo, n, table, new(chunkenc.Encoder), new(segWriter))
	}
	s.release(v)

	type entry struct {
		id ID
		m  *meta
	}
	var live []entry
	for i, m := range table {
		if m != nil {
			live = append(live, entry{ID(i), m})
		}
	}
	segs := v.segs[:len(v.segs):len(v.segs)]
	if full != nil {
		segs = append(segs, full)
	}
	if partial != nil {
		segs = append(segs, partial)
	}

	h := crc32.New(castagnoli)
	bw := bufio.NewWriterSize(io.MultiWriter(w, h), 1<<16)
	var b []byte
	b = append(b, snapMagic...)
	b = binary.AppendUvarint(b, snapVersion)
	b = binary.AppendUvarint(b, uint64(s.scans))
	b = binary.AppendUvarint(b, uint64(len(live)))
	for _, e := range live {
		// Through the buffered writer a key at a time: one buffer of every key (megabytes at
		// 100k series) cost more in its growth than the rest of the snapshot.
		b = append(b, byte(e.m.kind))
		b = binary.AppendVarint(b, e.m.born)
		b = binary.AppendUvarint(b, uint64(len(e.m.key)))
		b = append(b, e.m.key...)
		if len(b) >= 1<<15 {
			if _, err := bw.Write(b); err != nil {
				return fmt.Errorf("write history snapshot: %w", err)
			}
			b = b[:0]
		}
	}
	b = binary.AppendUvarint(b, uint64(len(segs)))
	if _, err := bw.Write(b); err != nil {
		return fmt.Errorf("write history snapshot: %w", err)
	}
	var enc chunkenc.Encoder
	var d chunkenc.Decoded
	var vals [chunkenc.MaxScans]uint64
	var pres [chunkenc.MaxScans]uint8
	for _, g := range segs {
		b = b[:0]
		b = binary.AppendUvarint(b, uint64(len(g.ts)))
		b = binary.AppendVarint(b, g.ts[0])
		for j := 1; j < len(g.ts); j++ {
			b = binary.AppendUvarint(b, uint64(g.ts[j]-g.ts[j-1]))
		}
		it := segIter{g: g}
		for _, e := range live {
			blk := it.block(e.id)
			if len(blk) > 0 && g.ts[0] < e.m.born {
				// The block may hold points of an expired series that had this ID before:
				// keep only the points of the current one.
				orig := blk
				blk = nil
				if chunkenc.Decode(orig, len(g.ts), &d) == nil {
					clear(pres[:len(g.ts)])
					for k := 0; k < d.N; k++ {
						if j := d.Idx[k]; g.ts[j] >= e.m.born {
							vals[j], pres[j] = d.Val[k], 1
						}
					}
					blk = enc.Append(nil, e.m.kind, vals[:len(g.ts)], pres[:len(g.ts)], len(g.ts))
				}
			}
			b = binary.AppendUvarint(b, uint64(len(blk)))
			b = append(b, blk...)
		}
		if _, err := bw.Write(b); err != nil {
			return fmt.Errorf("write history snapshot: %w", err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write history snapshot: %w", err)
	}
	if _, err := w.Write(binary.LittleEndian.AppendUint32(nil, h.Sum32())); err != nil {
		return fmt.Errorf("write history snapshot: %w", err)
	}
	return nil
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

// snapReader parses a snapshot held in memory, never reading past its end.
type snapReader struct {
	b      []byte
	p      int
	err    error
	shared int // key bytes front-coded records took from their previous key (readFrontRec)
}

func (r *snapReader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: at byte %d: %s", ErrCorrupt, r.p, fmt.Sprintf(format, args...))
	}
}

func (r *snapReader) uvarint(what string) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b[r.p:])
	if n <= 0 {
		r.fail("bad %s", what)
		return 0
	}
	r.p += n
	return v
}

func (r *snapReader) varint(what string) int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b[r.p:])
	if n <= 0 {
		r.fail("bad %s", what)
		return 0
	}
	r.p += n
	return v
}

// bytes returns the next n bytes, failing when fewer remain (so counts read from the input can
// never make the reader allocate more than the input's size).
func (r *snapReader) bytes(n uint64, what string) []byte {
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)-r.p) {
		r.fail("%s of %d bytes past the end", what, n)
		return nil
	}
	b := r.b[r.p : r.p+int(n)]
	r.p += int(n)
	return b
}

// count reads a count of items each taking at least minSize bytes, rejecting counts the rest of
// the input cannot hold.
func (r *snapReader) count(minSize int, what string) int {
	n := r.uvarint(what)
	if r.err == nil && n > uint64((len(r.b)-r.p)/minSize) {
		r.fail("%s %d too large for the input", what, n)
		return 0
	}
	return int(n)
}

// maxSnapshot bounds the size ReadSnapshot accepts (the input is held in memory).
const maxSnapshot = 16 << 30

// ReadSnapshot reads a snapshot written by WriteSnapshot into a new Store with options opt.
// Scans older than opt.Retention before opt.Now are dropped, with the series left without any
// point. Malformed input yields an error wrapping ErrCorrupt; memory use is bounded by the
// input's size.
func ReadSnapshot(r io.Reader, opt Options) (*Store, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxSnapshot+1))
	if err != nil {
		return nil, fmt.Errorf("read history snapshot: %w", err)
	}
	if len(b) > maxSnapshot {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrCorrupt, maxSnapshot)
	}
	return parseSnapshot(b, opt)
}

func parseSnapshot(b []byte, opt Options) (*Store, error) {
	if len(b) < len(snapMagic)+4 || string(b[:len(snapMagic)]) != snapMagic {
		return nil, fmt.Errorf("%w: not a history snapshot", ErrCorrupt)
	}
	body := b[:len(b)-4]
	if got, want := crc32.Checksum(body, castagnoli), binary.LittleEndian.Uint32(b[len(b)-4:]); got != want {
		return nil, fmt.Errorf("%w: checksum %08x, want %08x (truncated or damaged)", ErrCorrupt, got, want)
	}
	r := &snapReader{b: body, p: len(snapMagic)}
	if v := r.uvarint("version"); r.err == nil && v != snapVersion {
		return nil, fmt.Errorf("%w: version %d, want %d", ErrCorrupt, v, snapVersion)
	}
	scans := r.uvarint("block scans")
	if r.err == nil && (scans == 0 || scans > MaxBlockScans) {
		r.fail("block scans %d", scans)
	}
	type sser struct {
		key  string
		kind series.Kind
		born int64
		last int64
		keep bool
	}
	nser := r.count(3, "series count")
	sers := make([]sser, 0, nser)
	seen := make(map[string]bool, nser)
	for i := 0; i < nser && r.err == nil; i++ {
		kb := r.bytes(1, "kind")
		if r.err != nil {
			break
		}
		k := series.Kind(kb[0])
		born := r.varint("born")
		key := string(r.bytes(r.uvarint("key length"), "key"))
		if r.err != nil {
			break
		}
		if k != series.Counter && k != series.Level && k != series.Float {
			r.fail("series %d: kind %d", i, k)
		}
		if seen[key] {
			r.fail("series %d: duplicate key %q", i, key)
		}
		seen[key] = true
		sers = append(sers, sser{key: key, kind: k, born: born, last: born})
	}
	type sseg struct {
		ts     []int64
		blocks [][]byte
	}
	nseg := r.count(1+len(sers), "segment count")
	segs := make([]sseg, 0, nseg)
	prev := int64(0)
	var d chunkenc.Decoded
	for i := 0; i < nseg && r.err == nil; i++ {
		n := r.uvarint("scan count")
		if r.err != nil {
			break
		}
		if n == 0 || n > scans || n > uint64(len(r.b)-r.p) {
			r.fail("segment %d: %d scans", i, n)
			break
		}
		if n < scans && i != nseg-1 {
			r.fail("segment %d: partial segment before the last", i)
			break
		}
		g := sseg{ts: make([]int64, n), blocks: make([][]byte, len(sers))}
		g.ts[0] = r.varint("time")
		if i > 0 && g.ts[0] <= prev {
			r.fail("segment %d: time goes back", i)
		}
		for j := 1; j < int(n) && r.err == nil; j++ {
			dt := r.uvarint("time delta")
			if dt == 0 || dt > 1<<62 || g.ts[j-1] > g.ts[j-1]+int64(dt) {
				r.fail("segment %d: bad time delta %d", i, dt)
			}
			g.ts[j] = g.ts[j-1] + int64(dt)
		}
		prev = g.ts[n-1]
		for k := range sers {
			blk := r.bytes(r.uvarint("block length"), "block")
			if r.err != nil {
				break
			}
			if err := chunkenc.Decode(blk, int(n), &d); err != nil {
				r.fail("segment %d series %d: %v", i, k, err)
				break
			}
			if d.N > 0 {
				if g.ts[d.Idx[0]] < sers[k].born {
					r.fail("segment %d series %d: point before the series was born", i, k)
					break
				}
				sers[k].last = max(sers[k].last, g.ts[d.Idx[d.N-1]])
			}
			g.blocks[k] = blk
		}
		segs = append(segs, g)
	}
	if r.err == nil && r.p != len(body) {
		r.fail("%d trailing bytes", len(body)-r.p)
	}
	if r.err != nil {
		return nil, r.err
	}

	// Build the store: drop stale segments, then the series left without a point.
	opt = opt.withDefaults()
	if opt.BlockScans != int(scans) {
		opt.BlockScans = int(scans) // blocks are laid out for the snapshot's segment size
	}
	s := New(opt)
	cutoff := opt.Now().UnixMilli() - opt.Retention.Milliseconds()
	first := 0
	for first < len(segs) && segs[first].ts[len(segs[first].ts)-1] < cutoff {
		first++
	}
	segs = segs[first:]
	oldest := cutoff
	if len(segs) > 0 {
		oldest = min(oldest, segs[0].ts[0])
	}
	ids := make([]ID, len(sers))
	for k := range sers {
		if sers[k].last < oldest {
			continue
		}
		id, err := s.register(sers[k].key, sers[k].kind, sers[k].born)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
		ids[k] = id
		sers[k].keep = true
		s.w.lastTS[id] = sers[k].last
	}
	var sw segWriter
	var closed []*segment
	for i, g := range segs {
		if len(g.ts) < int(scans) && i == len(segs)-1 {
			// The partial segment becomes the open staging.
			sw.reset()
			for k, blk := range g.blocks {
				if sers[k].keep {
					sw.add(blk)
				}
			}
			t := s.metas.Load()
			table := make([]*meta, len(t.m))
			for id := range t.m {
				table[id] = t.m[id].Load()
			}
			s.stagingPoints.Store(int64(fillStaging(s.w.st, sw.segment(g.ts), table)))
			s.w.j = len(g.ts)
			break
		}
		// Blocks in ID order; IDs were given in snapshot order to the kept series.
		sw.reset()
		for k, blk := range g.blocks {
			if !sers[k].keep {
				continue
			}
			sw.add(blk)
			_ = chunkenc.Decode(blk, len(g.ts), &d)
			sw.points += d.N
		}
		closed = append(closed, sw.segment(g.ts))
	}
	if len(segs) > 0 {
		last := segs[len(segs)-1].ts
		s.w.lastTS0 = last[len(last)-1]
	}
	s.view.Store(&view{segs: closed, open: s.w.st, gen: s.w.st.gen.Load()})
	return s, nil
}
