package history

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"

	"github.com/cantal-go/cantal/internal/history/chunkenc"
	"github.com/cantal-go/cantal/internal/series"
)

// The files of a snapshot directory (format version 2; see Saver for why it is split so). All
// integers are uvarints unless noted, varint = zigzag; crc = CRC-32C (Castagnoli) of every byte
// before it in the file, 4 bytes little-endian.
//
// A segment file seg-<first scan time>.hseg holds one closed segment exactly as the store keeps
// it, written once:
//
//	"CANTALS\x00" version(2) body crc
//
// where a segment body is
//
//	scan count, first time varint, time deltas (each ≥ 1),
//	index length, index (Store's uvarint entries: u even = a block of u/2 bytes for the next
//	  ID, u odd = u/2+1 IDs without a block, never across a group of 64 IDs),
//	data length, data (the blocks, in ID order)
//
// Blocks are indexed by store ID; a block may hold points of an earlier holder of the ID, which
// the series table's born time filters out, as in memory.
//
// The series table is a base file keys-<gen>.hkb and a log keys-<gen>.hkl (version 3; version 2
// is read too, and a table loaded from it is rewritten whole by the next save):
//
//	base: "CANTALK\x00" version(3) count, per series in increasing ID order: ID minus the
//	      previous ID plus one (the first: the ID), then a front-coded key record; crc
//	log:  "CANTALL\x00" version byte(3), then batches: payload length, payload, crc of the
//	      payload alone; a payload is records 'f' ID front-coded-key-record (ID now holds this
//	      series) and 'd' ID (ID is free)
//
// A front-coded key record is kind byte, born varint, p, s, middle length, middle: the key is
// the first p bytes of the previous record's key (in the file, or in the batch; the first
// record's previous key is ""), the middle, and the last s bytes of the previous key, with
// p + s at most the previous key's length and no key sharing any byte longer than frontMax.
// A process's series are registered together and get neighbouring IDs, so consecutive keys
// differ in their metric name: ~15 bytes a series instead of ~110. Version 2 wrote the whole
// key (kind byte, born varint, key length, key; 's' records in the log).
//
// The head, HEAD, names everything else:
//
//	"CANTALD\x00" version(2) block scans, keys generation, base size, base crc, log length,
//	segment count, per segment: first time varint, file size, file crc (its trailer);
//	open flag byte (1: followed by the open segment's committed scans as a segment body); crc
const (
	headMagic  = "CANTALD\x00"
	segMagic   = "CANTALS\x00"
	baseMagic  = "CANTALK\x00"
	logMagic   = "CANTALL\x00"
	dirVersion = 2
	// keysVersion is the series table's (base and log) format: 3 front-codes the keys.
	keysVersion = 3

	logHeaderLen = len(logMagic) + 1

	recSet   = 's' // version 2 logs
	recFront = 'f' // version 3 logs
	recDel   = 'd'

	// frontMax is the longest key that shares bytes with the previous one (longer keys are
	// written whole), so that a record can never make the reader build more than that from a
	// few bytes of input.
	frontMax = 1024
)

// maxDirFile bounds the size of any file of a snapshot directory the loader reads (they are
// held in memory).
const maxDirFile = 4 << 30

func appendCRC(b []byte, data ...[]byte) []byte {
	var c uint32
	for _, d := range data {
		c = crc32.Update(c, castagnoli, d)
	}
	return binary.LittleEndian.AppendUint32(b, c)
}

// checkCRC verifies b's trailer and returns the bytes before it.
func checkCRC(b []byte, what string) ([]byte, uint32, error) {
	if len(b) < 4 {
		return nil, 0, fmt.Errorf("%w: %s: %d bytes", ErrCorrupt, what, len(b))
	}
	body := b[:len(b)-4]
	want := binary.LittleEndian.Uint32(b[len(b)-4:])
	if got := crc32.Checksum(body, castagnoli); got != want {
		return nil, 0, fmt.Errorf("%w: %s: checksum %08x, want %08x (truncated or damaged)", ErrCorrupt, what, got, want)
	}
	return body, want, nil
}

// appendSegHeader appends a segment body up to its index: the caller writes g.lens, the data
// length and g.data after it (they can be megabytes, and are not copied).
func appendSegHeader(b []byte, g *segment) []byte {
	b = binary.AppendUvarint(b, uint64(len(g.ts)))
	b = binary.AppendVarint(b, g.ts[0])
	for j := 1; j < len(g.ts); j++ {
		b = binary.AppendUvarint(b, uint64(g.ts[j]-g.ts[j-1]))
	}
	b = binary.AppendUvarint(b, uint64(len(g.lens)))
	return b
}

// segParse is what parseSegBody reports about each block with points, for the caller to learn
// every ID's newest point. It may be called for blocks of a segment that turns out corrupt
// further on: the caller must keep what it learns aside until the parse succeeds.
type segParse func(id ID, ts []int64, d *chunkenc.Decoded)

// parseSegBody reads a segment body of 1 to maxScans scans (exactly maxScans when full) and
// checks every block decodes. The segment's slices alias r's input. each, if not nil, is
// called with every block.
func parseSegBody(r *snapReader, maxScans int, full bool, each segParse) *segment {
	n := r.uvarint("scan count")
	if r.err != nil {
		return nil
	}
	if n == 0 || n > uint64(maxScans) || (full && n != uint64(maxScans)) || n > uint64(len(r.b)-r.p) {
		r.fail("%d scans in a segment of %d", n, maxScans)
		return nil
	}
	g := &segment{ts: make([]int64, n)}
	g.ts[0] = r.varint("time")
	for j := 1; j < int(n) && r.err == nil; j++ {
		dt := r.uvarint("time delta")
		if dt == 0 || dt > 1<<62 || g.ts[j-1] > g.ts[j-1]+int64(dt) {
			r.fail("bad time delta %d", dt)
		}
		g.ts[j] = g.ts[j-1] + int64(dt)
	}
	g.lens = r.bytes(r.uvarint("index length"), "index")
	g.data = r.bytes(r.uvarint("data length"), "data")
	if r.err != nil {
		return nil
	}
	// Walk the index: rebuild the group offsets and check every block.
	var d chunkenc.Decoded
	p, off, k, run := 0, 0, 0, 0
	for p < len(g.lens) || run > 0 {
		if k%idGroup == 0 && run == 0 {
			if k/idGroup >= MaxSeries/idGroup {
				r.fail("more than %d IDs", MaxSeries)
				return nil
			}
			g.chk = append(g.chk, uint32(off))
			g.lensOff = append(g.lensOff, uint32(p))
		}
		if run > 0 {
			k += run
			run = 0
			continue
		}
		u, m := binary.Uvarint(g.lens[p:])
		if m <= 0 {
			r.fail("bad index entry at %d", p)
			return nil
		}
		p += m
		if u&1 == 1 {
			if u>>1 >= uint64(idGroup-k%idGroup) {
				r.fail("run of %d IDs from ID %d crosses a group", u>>1+1, k)
				return nil
			}
			run = int(u>>1) + 1
			continue
		}
		l := u >> 1
		if l == 0 || l > uint64(len(g.data)-off) {
			r.fail("block of %d bytes at ID %d", l, k)
			return nil
		}
		if err := chunkenc.Decode(g.data[off:off+int(l)], int(n), &d); err != nil {
			r.fail("block of ID %d: %v", k, err)
			return nil
		}
		g.points += d.N
		if each != nil && d.N > 0 {
			each(ID(k), g.ts, &d)
		}
		off += int(l)
		k++
	}
	if off != len(g.data) {
		r.fail("%d data bytes not indexed", len(g.data)-off)
		return nil
	}
	return g
}

// keyRec is one series of the table as stored.
type keyRec struct {
	id ID
	m  *meta
}

// readKeyRec reads a version 2 key record: kind byte, born varint, key length, key.
func readKeyRec(r *snapReader) *meta {
	kb := r.bytes(1, "kind")
	born := r.varint("born")
	key := r.bytes(r.uvarint("key length"), "key")
	if r.err != nil {
		return nil
	}
	k := series.Kind(kb[0])
	if k != series.Counter && k != series.Level && k != series.Float {
		r.fail("kind %d", k)
		return nil
	}
	return &meta{key: string(key), kind: k, born: born}
}

// appendFrontRec appends m's front-coded key record, prev being the previous record's key.
func appendFrontRec(b []byte, m *meta, prev string) []byte {
	b = append(b, byte(m.kind))
	b = binary.AppendVarint(b, m.born)
	key := m.key
	p, s := 0, 0
	if len(key) <= frontMax {
		n := min(len(key), len(prev))
		for p < n && key[p] == prev[p] {
			p++
		}
		for s < n-p && key[len(key)-1-s] == prev[len(prev)-1-s] {
			s++
		}
	}
	b = binary.AppendUvarint(b, uint64(p))
	b = binary.AppendUvarint(b, uint64(s))
	b = binary.AppendUvarint(b, uint64(len(key)-p-s))
	return append(b, key[p:len(key)-s]...)
}

// readFrontRec reads what appendFrontRec wrote, prev being the previous record's key.
func readFrontRec(r *snapReader, prev string) *meta {
	kb := r.bytes(1, "kind")
	born := r.varint("born")
	p := r.uvarint("shared prefix")
	s := r.uvarint("shared suffix")
	mid := r.bytes(r.uvarint("key length"), "key")
	if r.err != nil {
		return nil
	}
	if p > uint64(len(prev)) || s > uint64(len(prev))-p {
		r.fail("key shares %d+%d bytes of a %d-byte key", p, s, len(prev))
		return nil
	}
	n := int(p) + int(s) + len(mid)
	if p+s > 0 && n > frontMax {
		r.fail("a shared %d-byte key", n)
		return nil
	}
	// What the keys share is bounded by the input too: real tables share ~8 bytes per byte.
	if r.shared += int(p + s); r.shared > 64*len(r.b)+64*frontMax {
		r.fail("keys sharing %d bytes", r.shared)
		return nil
	}
	k := series.Kind(kb[0])
	if k != series.Counter && k != series.Level && k != series.Float {
		r.fail("kind %d", k)
		return nil
	}
	var key strings.Builder
	key.Grow(n)
	key.WriteString(prev[:p])
	key.Write(mid)
	key.WriteString(prev[len(prev)-int(s):])
	return &meta{key: key.String(), kind: k, born: born}
}

func readID(r *snapReader) ID {
	id := r.uvarint("series ID")
	if r.err == nil && id >= MaxSeries {
		r.fail("series ID %d", id)
	}
	return ID(id)
}

// encodeBase returns the base file of a series table (nil entries are free IDs).
func encodeBase(table []*meta) []byte {
	size := 64
	for _, m := range table {
		if m != nil {
			size += 16 + len(m.key)/4
		}
	}
	return appendBase(make([]byte, 0, size), table)
}

// appendBase appends the base file of a series table to b (nil entries are free IDs).
func appendBase(b []byte, table []*meta) []byte {
	n := 0
	for _, m := range table {
		if m != nil {
			n++
		}
	}
	start := len(b)
	b = append(b, baseMagic...)
	b = binary.AppendUvarint(b, keysVersion)
	b = binary.AppendUvarint(b, uint64(n))
	next := 0
	prev := ""
	for id, m := range table {
		if m == nil {
			continue
		}
		b = binary.AppendUvarint(b, uint64(id-next))
		next = id + 1
		b = appendFrontRec(b, m, prev)
		prev = m.key
	}
	return appendCRC(b, b[start:])
}

// parseBase reads a base file into a table by ID.
func parseBase(b []byte) ([]*meta, error) {
	body, _, err := checkCRC(b, "series table")
	if err != nil {
		return nil, err
	}
	if len(body) < len(baseMagic) || string(body[:len(baseMagic)]) != baseMagic {
		return nil, fmt.Errorf("%w: not a series table", ErrCorrupt)
	}
	r := &snapReader{b: body, p: len(baseMagic)}
	v := r.uvarint("version")
	if r.err == nil && v != keysVersion && v != 2 {
		return nil, fmt.Errorf("%w: series table version %d, want %d", ErrCorrupt, v, keysVersion)
	}
	n := r.count(4, "series count")
	var table []*meta
	next := uint64(0)
	prev := ""
	for i := 0; i < n && r.err == nil; i++ {
		id := next + r.uvarint("series ID")
		if r.err == nil && id >= MaxSeries {
			r.fail("series ID %d", id)
		}
		var m *meta
		if v == 2 {
			m = readKeyRec(r)
		} else {
			m = readFrontRec(r, prev)
		}
		if r.err != nil {
			break
		}
		prev = m.key
		table = growTable(table, ID(id))
		table[id] = m
		next = id + 1
	}
	if r.err == nil && r.p != len(body) {
		r.fail("%d trailing bytes", len(body)-r.p)
	}
	if r.err != nil {
		return nil, fmt.Errorf("series table: %w", r.err)
	}
	return table, nil
}

// growTable makes table long enough to hold id.
func growTable(table []*meta, id ID) []*meta {
	if int(id) < len(table) {
		return table
	}
	return append(table, make([]*meta, int(id)+1-len(table))...)
}

// appendLogBatch appends to b a log batch of the records turning table old into table cur
// (nil entries are free IDs), and reports whether there was any.
func appendLogBatch(b []byte, old, cur []*meta) ([]byte, bool) {
	start := len(b)
	// Reserve the length (rewritten below): a batch is at most a few MB, so 5 bytes do.
	b = append(b, 0, 0, 0, 0, 0)
	recs := len(b)
	prev := ""
	for id := 0; id < max(len(old), len(cur)); id++ {
		var o, c *meta
		if id < len(old) {
			o = old[id]
		}
		if id < len(cur) {
			c = cur[id]
		}
		if o == c {
			continue
		}
		if c == nil {
			b = append(b, recDel)
			b = binary.AppendUvarint(b, uint64(id))
			continue
		}
		b = append(b, recFront)
		b = binary.AppendUvarint(b, uint64(id))
		b = appendFrontRec(b, c, prev)
		prev = c.key
	}
	if len(b) == recs {
		return b[:start], false
	}
	payload := b[recs:]
	var l [binary.MaxVarintLen64]byte
	ln := binary.PutUvarint(l[:], uint64(len(payload)))
	// Move the payload right after its length.
	copy(b[start+ln:], payload)
	copy(b[start:], l[:ln])
	b = b[:start+ln+len(payload)]
	return appendCRC(b, b[start+ln:]), true
}

func logHeader() []byte { return append([]byte(logMagic), keysVersion) }

// applyLog applies the batches of a log (header included) to table and returns it.
func applyLog(table []*meta, b []byte) ([]*meta, error) {
	if len(b) < logHeaderLen || string(b[:len(logMagic)]) != logMagic || b[len(logMagic)] != keysVersion && b[len(logMagic)] != 2 {
		return nil, fmt.Errorf("%w: not a series log", ErrCorrupt)
	}
	set := byte(recFront)
	if b[len(logMagic)] == 2 {
		set = recSet
	}
	r := &snapReader{b: b, p: logHeaderLen}
	for r.p < len(b) && r.err == nil {
		n := r.uvarint("batch length")
		payload := r.bytes(n, "batch")
		sum := r.bytes(4, "batch checksum")
		if r.err != nil {
			break
		}
		if crc32.Checksum(payload, castagnoli) != binary.LittleEndian.Uint32(sum) {
			r.fail("batch checksum")
			break
		}
		pr := &snapReader{b: payload}
		prev := ""
		for pr.p < len(payload) && pr.err == nil {
			tag := pr.bytes(1, "record")
			if pr.err != nil {
				break
			}
			id := readID(pr)
			switch tag[0] {
			case set:
				var m *meta
				if set == recSet {
					m = readKeyRec(pr)
				} else {
					m = readFrontRec(pr, prev)
				}
				if pr.err == nil {
					table = growTable(table, id)
					table[id] = m
					prev = m.key
				}
			case recDel:
				if pr.err == nil && int(id) < len(table) {
					table[id] = nil
				}
			default:
				pr.fail("record tag %d", tag[0])
			}
		}
		if pr.err != nil {
			r.fail("batch: %v", pr.err)
		}
	}
	if r.err != nil {
		return nil, fmt.Errorf("series log: %w", r.err)
	}
	return table, nil
}

// headSeg is a segment file named by a head.
type headSeg struct {
	first int64
	size  int64
	crc   uint32
}

func (h headSeg) name() string { return fmt.Sprintf("seg-%d.hseg", h.first) }

// head is the parsed content of a HEAD file.
type head struct {
	scans    int
	gen      uint64
	baseSize int64
	baseCRC  uint32
	logLen   int64
	segs     []headSeg
	open     *segment // nil: no committed scan in the open segment
}

func keysBaseName(gen uint64) string { return fmt.Sprintf("keys-%d.hkb", gen) }
func keysLogName(gen uint64) string  { return fmt.Sprintf("keys-%d.hkl", gen) }

// encodeHead returns a HEAD file, in parts to write one after the other (the open segment's
// index and data are not copied).
func encodeHead(h *head) [][]byte {
	b := append([]byte(nil), headMagic...)
	b = binary.AppendUvarint(b, dirVersion)
	b = binary.AppendUvarint(b, uint64(h.scans))
	b = binary.AppendUvarint(b, h.gen)
	b = binary.AppendUvarint(b, uint64(h.baseSize))
	b = binary.AppendUvarint(b, uint64(h.baseCRC))
	b = binary.AppendUvarint(b, uint64(h.logLen))
	b = binary.AppendUvarint(b, uint64(len(h.segs)))
	for _, s := range h.segs {
		b = binary.AppendVarint(b, s.first)
		b = binary.AppendUvarint(b, uint64(s.size))
		b = binary.AppendUvarint(b, uint64(s.crc))
	}
	if h.open == nil {
		b = append(b, 0)
		return [][]byte{b, appendCRC(nil, b)}
	}
	b = append(b, 1)
	b = appendSegHeader(b, h.open)
	mid := binary.AppendUvarint(nil, uint64(len(h.open.data)))
	return [][]byte{b, h.open.lens, mid, h.open.data, appendCRC(nil, b, h.open.lens, mid, h.open.data)}
}

// parseHead reads a HEAD file. each is called with the blocks of the open segment.
func parseHead(b []byte, each segParse) (*head, error) {
	body, _, err := checkCRC(b, "head")
	if err != nil {
		return nil, err
	}
	if len(body) < len(headMagic) || string(body[:len(headMagic)]) != headMagic {
		return nil, fmt.Errorf("%w: not a history snapshot head", ErrCorrupt)
	}
	r := &snapReader{b: body, p: len(headMagic)}
	if v := r.uvarint("version"); r.err == nil && v != dirVersion {
		return nil, fmt.Errorf("%w: head version %d, want %d", ErrCorrupt, v, dirVersion)
	}
	h := &head{}
	scans := r.uvarint("block scans")
	if r.err == nil && (scans == 0 || scans > MaxBlockScans) {
		r.fail("block scans %d", scans)
	}
	h.scans = int(scans)
	h.gen = r.uvarint("keys generation")
	h.baseSize = int64(min(r.uvarint("base size"), maxDirFile+1))
	crc := r.uvarint("base checksum")
	h.logLen = int64(min(r.uvarint("log length"), maxDirFile+1))
	if r.err == nil && (crc > 1<<32-1 || h.gen == 0 || h.baseSize > maxDirFile || h.logLen > maxDirFile || h.logLen < int64(logHeaderLen)) {
		r.fail("bad series table reference")
	}
	h.baseCRC = uint32(crc)
	nseg := r.count(3, "segment count")
	for i := 0; i < nseg && r.err == nil; i++ {
		s := headSeg{first: r.varint("segment time")}
		size, sum := r.uvarint("segment size"), r.uvarint("segment checksum")
		if r.err != nil {
			break
		}
		if size > maxDirFile || sum > 1<<32-1 {
			r.fail("segment %d: size %d, checksum %d", i, size, sum)
			break
		}
		if i > 0 && s.first <= h.segs[i-1].first {
			r.fail("segment %d: time goes back", i)
			break
		}
		s.size, s.crc = int64(size), uint32(sum)
		h.segs = append(h.segs, s)
	}
	flag := r.bytes(1, "open flag")
	if r.err == nil {
		switch flag[0] {
		case 0:
		case 1:
			// Up to a full staging: the segment's scans and those a close carries over.
			h.open = parseSegBody(r, h.scans+graceScans(h.scans, chunkScans), false, each)
			if r.err == nil && len(h.open.ts) > h.scans+graceScans(h.scans, chunkScans) {
				r.fail("open segment of %d scans", len(h.open.ts))
			}
			if r.err == nil && len(h.segs) > 0 && h.open.ts[0] <= h.segs[len(h.segs)-1].first {
				r.fail("open segment before the last closed one")
			}
		default:
			r.fail("open flag %d", flag[0])
		}
	}
	if r.err == nil && r.p != len(body) {
		r.fail("%d trailing bytes", len(body)-r.p)
	}
	if r.err != nil {
		return nil, fmt.Errorf("head: %w", r.err)
	}
	return h, nil
}

// segFileParts returns the segment file of g, in parts to write one after the other, and its
// entry in a HEAD (but the size, which the writer counts).
func segFileParts(g *segment) ([][]byte, headSeg) {
	hdr := append([]byte(segMagic), dirVersion)
	hdr = appendSegHeader(hdr, g)
	mid := binary.AppendUvarint(nil, uint64(len(g.data)))
	trailer := appendCRC(nil, hdr, g.lens, mid, g.data)
	return [][]byte{hdr, g.lens, mid, g.data, trailer}, headSeg{first: g.first(), crc: binary.LittleEndian.Uint32(trailer)}
}

// parseSegFile reads a segment file of scans scans.
func parseSegFile(b []byte, scans int, each segParse) (*segment, uint32, error) {
	body, sum, err := checkCRC(b, "segment")
	if err != nil {
		return nil, 0, err
	}
	if len(body) < len(segMagic) || string(body[:len(segMagic)]) != segMagic {
		return nil, 0, fmt.Errorf("%w: not a history segment", ErrCorrupt)
	}
	r := &snapReader{b: body, p: len(segMagic)}
	if v := r.uvarint("version"); r.err == nil && v != dirVersion {
		return nil, 0, fmt.Errorf("%w: segment version %d, want %d", ErrCorrupt, v, dirVersion)
	}
	g := parseSegBody(r, scans, true, each)
	if r.err == nil && r.p != len(body) {
		r.fail("%d trailing bytes", len(body)-r.p)
	}
	if r.err != nil {
		return nil, 0, fmt.Errorf("segment: %w", r.err)
	}
	return g, sum, nil
}

// ErrCorrupt wraps every error LoadDir returns about a malformed, truncated or
// checksum-failing snapshot file (as opposed to an I/O error while reading it).
var ErrCorrupt = errors.New("corrupt history snapshot")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

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
