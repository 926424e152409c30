package chunkenc

import "encoding/binary"

// bitWriter appends bits, most significant first, to a byte slice it owns.
type bitWriter struct {
	b   []byte
	acc uint64 // pending bits, right-aligned
	n   uint   // number of pending bits, < 64
}

// write appends the low nb bits of v (nb ≤ 64).
func (w *bitWriter) write(v uint64, nb uint) {
	if nb == 0 {
		return
	}
	if nb < 64 {
		v &= 1<<nb - 1
	}
	free := 64 - w.n
	if nb < free {
		w.acc = w.acc<<nb | v
		w.n += nb
		return
	}
	// Fill the accumulator with the top `free` bits of v and flush it.
	rest := nb - free
	var full uint64
	if free == 64 {
		full = v
	} else {
		full = w.acc<<free | v>>rest
	}
	w.b = binary.BigEndian.AppendUint64(w.b, full)
	w.n = rest
	if rest == 0 {
		w.acc = 0
	} else {
		w.acc = v & (1<<rest - 1)
	}
}

// bit appends one bit.
func (w *bitWriter) bit(b bool) {
	if b {
		w.write(1, 1)
	} else {
		w.write(0, 1)
	}
}

// finish flushes the pending bits, zero-padded to a whole byte, and returns the bytes.
func (w *bitWriter) finish() []byte {
	for w.n >= 8 {
		w.n -= 8
		w.b = append(w.b, byte(w.acc>>w.n))
	}
	if w.n > 0 {
		w.b = append(w.b, byte(w.acc<<(8-w.n)))
	}
	w.acc, w.n = 0, 0
	return w.b
}

// bitReader reads bits written by bitWriter. Reading past the end sets bad and yields zeros; the
// caller checks bad once at the end.
type bitReader struct {
	b   []byte
	i   int    // next byte of b to load
	acc uint64 // loaded bits, left-aligned
	n   uint   // number of loaded bits
	bad bool
}

func (r *bitReader) refill() {
	if r.i+8 <= len(r.b) && r.n <= 56 {
		// Load whole bytes in one go.
		v := binary.BigEndian.Uint64(r.b[r.i:])
		k := (63 - r.n) >> 3 // bytes that fit
		r.acc |= v >> r.n &^ (^uint64(0) >> (r.n + k*8))
		r.i += int(k)
		r.n += k * 8
		return
	}
	for r.n <= 56 && r.i < len(r.b) {
		r.acc |= uint64(r.b[r.i]) << (56 - r.n)
		r.i++
		r.n += 8
	}
}

// small reads nb bits, 1 ≤ nb ≤ 56.
func (r *bitReader) small(nb uint) uint64 {
	if r.n < nb {
		r.refill()
		if r.n < nb {
			r.bad = true
			r.n = 0
			r.acc = 0
			return 0
		}
	}
	v := r.acc >> (64 - nb)
	r.acc <<= nb
	r.n -= nb
	return v
}

// read reads nb bits, 0 ≤ nb ≤ 64.
func (r *bitReader) read(nb uint) uint64 {
	switch {
	case nb == 0:
		return 0
	case nb > 32:
		hi := r.small(nb - 32)
		return hi<<32 | r.small(32)
	}
	return r.small(nb)
}

func (r *bitReader) bit() bool { return r.small(1) == 1 }
