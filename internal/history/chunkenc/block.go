package chunkenc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"

	"github.com/cantal-go/cantal/internal/series"
)

// MaxScans is the largest number of scans one block may span (history: one segment).
const MaxScans = 256

// A block holds the points of one series over the scans of one segment. An empty block (zero
// bytes) has no point. Otherwise:
//
//	byte 0: presence (bits 0-1) | transform << 2 (bits 2-4); bits 5-7 are zero
//	presence 0: every scan of the segment has a point
//	presence 1: uvarint start, uvarint count: the scans [start, start+count) have points
//	presence 2: ceil(scans/8) bytes of bitmap, bit j (LSB first) set when scan j has a point
//	transform 0: the values are integers (raw bits, wrapping arithmetic)
//	transform 1: float64 values that are all integral, stored as int64
//	transform 2: one byte d (1..maxDecimals), then float64 values v = m / 10^d stored as int64 m
//	transform 3: float64 bits, XOR-compressed (Gorilla style)
//
// Integer sequences (transforms 0-2) are: zigzag varint of the first value, then (when there is
// more than one point) a byte order | offset<<2 | zeroFlag<<3 | twoWidths<<4:
//
//	order 0: every value equals the first; nothing follows
//	order 1: residuals are deltas; order 2: residuals are deltas of deltas, preceded by the
//	         zigzag varint of the first delta
//	then zigzag varint base, byte w2, [byte w1 when twoWidths], and the residuals packed in bits:
//	u = zigzag(r-base) (offset 0) or uint64(r-base) (offset 1), each written as
//	  zeroFlag: '0' for u == 0, else '1' and then
//	  twoWidths: '0' + u in w1 bits when it fits, else '1' + u in w2 bits; otherwise u in w2 bits.
const (
	presAll    = 0
	presRange  = 1
	presBitmap = 2

	tfInt     = 0
	tfIntegal = 1
	tfDecimal = 2
	tfXOR     = 3

	maxDecimals = 6
)

var pow10 = [...]float64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15}

// ErrCorrupt wraps every block decoding failure.
var ErrCorrupt = errors.New("corrupt block")

// Encoder compresses blocks. Its scratch space is reused, so encoding allocates nothing once the
// output buffer has grown. An Encoder is owned by one goroutine.
type Encoder struct {
	xs  [MaxScans]uint64
	res [MaxScans]uint64
	ms  [MaxScans]uint64
	w   bitWriter
}

// Append appends the block of the points (vals[j], present[j]) for j < scans to dst. A block
// without points appends nothing.
func (e *Encoder) Append(dst []byte, kind series.Kind, vals []uint64, present []uint8, scans int) []byte {
	m := 0
	first, last := -1, -1
	for j := 0; j < scans; j++ {
		if present[j] != 0 {
			e.xs[m] = vals[j]
			m++
			if first < 0 {
				first = j
			}
			last = j
		}
	}
	if m == 0 {
		return dst
	}
	xs := e.xs[:m]
	pres := byte(presAll)
	switch {
	case m == scans:
	case last-first+1 == m:
		pres = presRange
	default:
		pres = presBitmap
	}
	hdr := len(dst)
	dst = append(dst, pres)
	switch pres {
	case presRange:
		dst = binary.AppendUvarint(dst, uint64(first))
		dst = binary.AppendUvarint(dst, uint64(m))
	case presBitmap:
		for b := 0; b < scans; b += 8 {
			var x byte
			for k := 0; k < 8 && b+k < scans; k++ {
				if present[b+k] != 0 {
					x |= 1 << k
				}
			}
			dst = append(dst, x)
		}
	}
	if kind != series.Float || allEqual(xs) {
		return e.appendInts(dst, xs)
	}
	if d, ok := e.decimals(xs); ok {
		ms := e.ms[:m]
		if d == 0 {
			dst[hdr] |= tfIntegal << 2
		} else {
			dst[hdr] |= tfDecimal << 2
			dst = append(dst, byte(d))
		}
		return e.appendInts(dst, ms)
	}
	dst[hdr] |= tfXOR << 2
	return e.appendXOR(dst, xs)
}

func allEqual(xs []uint64) bool {
	for _, x := range xs[1:] {
		if x != xs[0] {
			return false
		}
	}
	return true
}

// decimals finds the fewest decimal digits d such that every value is exactly m/10^d for an
// integer |m| ≤ 2^53, filling e.ms with the m's.
func (e *Encoder) decimals(xs []uint64) (int, bool) {
	const limit = 1 << 53
next:
	for d := 0; d <= maxDecimals; d++ {
		p := pow10[d]
		for i, x := range xs {
			v := math.Float64frombits(x)
			r := math.Round(v * p)
			if !(r >= -limit && r <= limit) { // also rejects NaN
				continue next
			}
			mi := int64(r)
			var back float64
			if d == 0 {
				back = float64(mi)
			} else {
				back = float64(mi) / p
			}
			if math.Float64bits(back) != x {
				continue next
			}
			e.ms[i] = uint64(mi)
		}
		return d, true
	}
	return 0, false
}

func zigzag(v int64) uint64   { return uint64(v<<1) ^ uint64(v>>63) }
func unzigzag(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) }

// packing describes how residuals are written.
type packing struct {
	zero, two bool
	w1, w2    uint
	bits      int
}

// bestPacking returns the cheapest packing of us.
func bestPacking(us []uint64) packing {
	var hist [65]int
	for _, u := range us {
		hist[bits.Len64(u)]++
	}
	w2 := uint(64)
	for w2 > 0 && hist[w2] == 0 {
		w2--
	}
	n := len(us)
	z := hist[0]
	best := packing{w2: w2, bits: n * int(w2)}
	if c := z + (n-z)*(1+int(w2)); c < best.bits {
		best = packing{zero: true, w2: w2, bits: c}
	}
	// Two widths: values of bit length ≤ w1 take the short form.
	le := 0 // values with bit length ≤ w1, zeros included
	for w1 := uint(0); w1 < w2; w1++ {
		le += hist[w1]
		if c := le*(1+int(w1)) + (n-le)*(1+int(w2)); c < best.bits {
			best = packing{two: true, w1: w1, w2: w2, bits: c}
		}
		if w1 > 0 {
			if c := z + (le-z)*(2+int(w1)) + (n-le)*(2+int(w2)); c < best.bits {
				best = packing{zero: true, two: true, w1: w1, w2: w2, bits: c}
			}
		}
	}
	return best
}

// appendInts appends the integer sequence xs (len ≥ 1).
func (e *Encoder) appendInts(dst []byte, xs []uint64) []byte {
	dst = binary.AppendUvarint(dst, zigzag(int64(xs[0])))
	m := len(xs)
	if m == 1 {
		return dst
	}
	if allEqual(xs) {
		return append(dst, 0)
	}
	// Candidate 1: deltas, offset by their minimum.
	d := e.res[:m-1]
	minD := int64(xs[1] - xs[0])
	for i := 1; i < m; i++ {
		v := int64(xs[i] - xs[i-1])
		d[i-1] = uint64(v)
		minD = min(minD, v)
	}
	us := e.ms[:m-1] // xs may alias e.ms only when called with e.ms; use a copy below then
	if &xs[0] == &e.ms[0] {
		us = e.xs[:m-1]
	}
	for i, v := range d {
		us[i] = v - uint64(minD)
	}
	p1 := bestPacking(us)
	cost1 := p1.bits + 8*varintLen(zigzag(minD))
	// Candidate 2: deltas of deltas, zigzag around zero.
	for i := len(d) - 1; i >= 1; i-- {
		us[i-1] = zigzag(int64(d[i] - d[i-1]))
	}
	var p2 packing
	cost2 := math.MaxInt
	if m > 2 {
		p2 = bestPacking(us[:m-2])
		cost2 = p2.bits + 8*(varintLen(zigzag(int64(d[0])))+1)
	}
	w := &e.w
	w.b = dst
	if cost1 <= cost2 {
		w.b = append(w.b, packFlags(1, true, p1))
		w.b = binary.AppendUvarint(w.b, zigzag(minD))
		w.b = appendWidths(w.b, p1)
		for _, v := range d {
			writePacked(w, v-uint64(minD), p1)
		}
	} else {
		w.b = append(w.b, packFlags(2, false, p2))
		w.b = binary.AppendUvarint(w.b, zigzag(int64(d[0])))
		w.b = binary.AppendUvarint(w.b, 0)
		w.b = appendWidths(w.b, p2)
		for i := 1; i < len(d); i++ {
			writePacked(w, zigzag(int64(d[i]-d[i-1])), p2)
		}
	}
	out := w.finish()
	w.b = nil
	return out
}

func varintLen(u uint64) int { return (bits.Len64(u|1) + 6) / 7 }

func packFlags(order byte, offset bool, p packing) byte {
	f := order
	if offset {
		f |= 1 << 2
	}
	if p.zero {
		f |= 1 << 3
	}
	if p.two {
		f |= 1 << 4
	}
	return f
}

func appendWidths(dst []byte, p packing) []byte {
	dst = append(dst, byte(p.w2))
	if p.two {
		dst = append(dst, byte(p.w1))
	}
	return dst
}

func writePacked(w *bitWriter, u uint64, p packing) {
	if p.zero {
		if u == 0 {
			w.write(0, 1)
			return
		}
		w.write(1, 1)
	}
	if p.two {
		if uint(bits.Len64(u)) <= p.w1 {
			w.write(u, 1+p.w1) // leading '0' then w1 bits
			return
		}
		w.write(1, 1)
	}
	w.write(u, p.w2)
}

// appendXOR appends float bits Gorilla-style: the first value raw, then for each next value
// '0' when equal to the previous one, '10' + the meaningful bits when they fit the previous
// window, '11' + 6 bits of leading zeros + 6 bits of (length-1) + the meaningful bits otherwise.
func (e *Encoder) appendXOR(dst []byte, xs []uint64) []byte {
	w := &e.w
	w.b = dst
	w.write(xs[0], 64)
	lead, trail := uint(64), uint(0) // no window yet
	for i := 1; i < len(xs); i++ {
		x := xs[i] ^ xs[i-1]
		if x == 0 {
			w.write(0, 1)
			continue
		}
		l, t := uint(bits.LeadingZeros64(x)), uint(bits.TrailingZeros64(x))
		if lead != 64 && l >= lead && t >= trail {
			w.write(2, 2)
			w.write(x>>trail, 64-lead-trail)
			continue
		}
		lead, trail = l, t
		w.write(3, 2)
		w.write(uint64(l), 6)
		w.write(uint64(64-l-t-1), 6)
		w.write(x>>t, 64-l-t)
	}
	out := w.finish()
	w.b = nil
	return out
}

// Decoded is one decoded block: the scan index and value of each point, in scan order.
type Decoded struct {
	N   int
	Idx [MaxScans]uint16
	Val [MaxScans]uint64
}

// Decode decodes block b of a segment of the given number of scans into out. It never
// panics and allocates nothing; a malformed block is an error wrapping ErrCorrupt.
func Decode(b []byte, scans int, out *Decoded) error {
	out.N = 0
	if len(b) == 0 {
		return nil
	}
	if scans <= 0 || scans > MaxScans {
		return fmt.Errorf("%w: %d scans", ErrCorrupt, scans)
	}
	h := b[0]
	if h>>5 != 0 {
		return fmt.Errorf("%w: header %#x", ErrCorrupt, h)
	}
	p := 1
	m := 0
	switch h & 3 {
	case presAll:
		for j := 0; j < scans; j++ {
			out.Idx[j] = uint16(j)
		}
		m = scans
	case presRange:
		start, n1 := binary.Uvarint(b[p:])
		if n1 <= 0 {
			return fmt.Errorf("%w: range start", ErrCorrupt)
		}
		p += n1
		cnt, n2 := binary.Uvarint(b[p:])
		if n2 <= 0 {
			return fmt.Errorf("%w: range count", ErrCorrupt)
		}
		p += n2
		if cnt == 0 || start >= uint64(scans) || cnt > uint64(scans)-start {
			return fmt.Errorf("%w: range %d+%d of %d scans", ErrCorrupt, start, cnt, scans)
		}
		for j := 0; j < int(cnt); j++ {
			out.Idx[j] = uint16(int(start) + j)
		}
		m = int(cnt)
	case presBitmap:
		nb := (scans + 7) / 8
		if len(b) < p+nb {
			return fmt.Errorf("%w: short bitmap", ErrCorrupt)
		}
		for j := 0; j < scans; j++ {
			if b[p+j/8]>>(j%8)&1 != 0 {
				out.Idx[m] = uint16(j)
				m++
			}
		}
		if scans%8 != 0 && b[p+nb-1]>>(scans%8) != 0 {
			return fmt.Errorf("%w: bitmap bits past the segment", ErrCorrupt)
		}
		if m == 0 {
			return fmt.Errorf("%w: empty bitmap", ErrCorrupt)
		}
		p += nb
	default:
		return fmt.Errorf("%w: presence %d", ErrCorrupt, h&3)
	}
	vals := out.Val[:m]
	switch tf := h >> 2 & 7; tf {
	case tfInt, tfIntegal, tfDecimal:
		d := 0
		if tf == tfDecimal {
			if p >= len(b) || b[p] < 1 || b[p] > maxDecimals {
				return fmt.Errorf("%w: decimals", ErrCorrupt)
			}
			d = int(b[p])
			p++
		}
		if err := decodeInts(b[p:], vals); err != nil {
			return err
		}
		switch tf {
		case tfIntegal:
			for i, v := range vals {
				vals[i] = math.Float64bits(float64(int64(v)))
			}
		case tfDecimal:
			pw := pow10[d]
			for i, v := range vals {
				vals[i] = math.Float64bits(float64(int64(v)) / pw)
			}
		}
	case tfXOR:
		if err := decodeXOR(b[p:], vals); err != nil {
			return err
		}
	default:
		return fmt.Errorf("%w: transform %d", ErrCorrupt, tf)
	}
	out.N = m
	return nil
}

func decodeInts(b []byte, xs []uint64) error {
	u, n := binary.Uvarint(b)
	if n <= 0 {
		return fmt.Errorf("%w: first value", ErrCorrupt)
	}
	b = b[n:]
	xs[0] = uint64(unzigzag(u))
	if len(xs) == 1 {
		return nil
	}
	if len(b) == 0 {
		return fmt.Errorf("%w: missing order", ErrCorrupt)
	}
	f := b[0]
	b = b[1:]
	order := f & 3
	if f>>5 != 0 || order == 3 {
		return fmt.Errorf("%w: int flags %#x", ErrCorrupt, f)
	}
	if order == 0 {
		if f != 0 {
			return fmt.Errorf("%w: int flags %#x", ErrCorrupt, f)
		}
		for i := range xs {
			xs[i] = xs[0]
		}
		return nil
	}
	var d0 uint64
	if order == 2 {
		u, n := binary.Uvarint(b)
		if n <= 0 {
			return fmt.Errorf("%w: first delta", ErrCorrupt)
		}
		b = b[n:]
		d0 = uint64(unzigzag(u))
	}
	u, n = binary.Uvarint(b)
	if n <= 0 {
		return fmt.Errorf("%w: base", ErrCorrupt)
	}
	b = b[n:]
	base := uint64(unzigzag(u))
	p := packing{zero: f&8 != 0, two: f&16 != 0}
	offset := f&4 != 0
	if len(b) < 1 {
		return fmt.Errorf("%w: widths", ErrCorrupt)
	}
	p.w2 = uint(b[0])
	b = b[1:]
	if p.two {
		if len(b) < 1 {
			return fmt.Errorf("%w: widths", ErrCorrupt)
		}
		p.w1 = uint(b[0])
		b = b[1:]
		if p.w1 >= p.w2 {
			return fmt.Errorf("%w: widths %d/%d", ErrCorrupt, p.w1, p.w2)
		}
	}
	if p.w2 > 64 {
		return fmt.Errorf("%w: width %d", ErrCorrupt, p.w2)
	}
	r := bitReader{b: b}
	next := func() uint64 {
		var u uint64
		if p.zero && !r.bit() {
			u = 0
		} else if p.two && !r.bit() {
			u = r.read(p.w1)
		} else {
			u = r.read(p.w2)
		}
		if offset {
			return u + base
		}
		return uint64(unzigzag(u)) + base
	}
	if order == 1 {
		for i := 1; i < len(xs); i++ {
			xs[i] = xs[i-1] + next()
		}
	} else {
		d := d0
		xs[1] = xs[0] + d
		for i := 2; i < len(xs); i++ {
			d += next()
			xs[i] = xs[i-1] + d
		}
	}
	if r.bad {
		return fmt.Errorf("%w: truncated residuals", ErrCorrupt)
	}
	return nil
}

func decodeXOR(b []byte, xs []uint64) error {
	r := bitReader{b: b}
	xs[0] = r.read(64)
	lead, trail := uint(64), uint(0)
	for i := 1; i < len(xs) && !r.bad; i++ {
		if !r.bit() {
			xs[i] = xs[i-1]
			continue
		}
		if !r.bit() {
			if lead == 64 {
				return fmt.Errorf("%w: xor window before any", ErrCorrupt)
			}
		} else {
			lead = uint(r.small(6))
			sig := uint(r.small(6)) + 1
			if lead+sig > 64 {
				return fmt.Errorf("%w: xor window %d+%d", ErrCorrupt, lead, sig)
			}
			trail = 64 - lead - sig
		}
		xs[i] = xs[i-1] ^ r.read(64-lead-trail)<<trail
	}
	if r.bad {
		return fmt.Errorf("%w: truncated xor stream", ErrCorrupt)
	}
	return nil
}
