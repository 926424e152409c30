package history

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/cantal-go/cantal/internal/series"
)

// genValues returns n values of a random shape, chosen to hit every encoding path: constants,
// steady and jittery counters, resets, huge jumps, random walks, decimals, NaN payloads, ±Inf, -0
// and raw random bits.
func genValues(r *rand.Rand, kind series.Kind, n int) []uint64 {
	out := make([]uint64, n)
	switch kind {
	case series.Counter, series.Level:
		x := r.Uint64()
		if r.IntN(2) == 0 {
			x = uint64(r.IntN(1000))
		}
		shape := r.IntN(7)
		step := uint64(r.IntN(2000))
		for i := range out {
			switch shape {
			case 0: // constant
			case 1: // steady with jitter
				x += step + uint64(r.IntN(20))
			case 2: // changes one scan in five
				if r.IntN(5) == 0 {
					x += uint64(r.IntN(100000))
				}
			case 3: // random walk
				x += uint64(int64(r.IntN(201) - 100))
			case 4: // resets and huge jumps
				switch r.IntN(10) {
				case 0:
					x = 0
				case 1:
					x = r.Uint64()
				default:
					x += step
				}
			case 5: // long constant runs broken rarely
				if r.IntN(40) == 0 {
					x = r.Uint64() >> uint(r.IntN(64))
				}
			default:
				x = r.Uint64()
			}
			out[i] = x
		}
	case series.Float:
		shape := r.IntN(6)
		v := float64(r.IntN(10000)) / 100
		specials := []float64{math.NaN(), math.Inf(1), math.Inf(-1), math.Copysign(0, -1), 0, math.MaxFloat64, math.SmallestNonzeroFloat64}
		for i := range out {
			switch shape {
			case 0: // constant
			case 1: // two-decimal gauge
				v = math.Round((v+float64(r.IntN(21)-10)/100)*100) / 100
			case 2: // integral
				v = float64(r.IntN(1 << 20))
			case 3: // random
				v = r.Float64() * 1e6
			case 4: // specials mixed in
				if r.IntN(3) == 0 {
					v = specials[r.IntN(len(specials))]
				} else {
					v = float64(r.IntN(100)) / 10
				}
			default: // raw bits, including NaN payloads
				out[i] = r.Uint64()
				if r.IntN(4) == 0 {
					out[i] = 0x7ff0000000000000 | r.Uint64()&0x800fffffffffffff | 1 // NaN with payload
				}
				continue
			}
			out[i] = math.Float64bits(v)
		}
	}
	return out
}

func genPresence(r *rand.Rand, n int) []uint8 {
	p := make([]uint8, n)
	switch r.IntN(4) {
	case 0: // every scan
		for i := range p {
			p[i] = 1
		}
	case 1: // a contiguous run
		a := r.IntN(n)
		b := a + r.IntN(n-a) + 1
		for i := a; i < b; i++ {
			p[i] = 1
		}
	case 2: // random gaps
		for i := range p {
			if r.IntN(8) != 0 {
				p[i] = 1
			}
		}
	default: // sparse, possibly empty
		for i := range p {
			if r.IntN(10) == 0 {
				p[i] = 1
			}
		}
	}
	return p
}

func checkBlock(t *testing.T, e *encoder, kind series.Kind, vals []uint64, pres []uint8) []byte {
	t.Helper()
	scans := len(vals)
	b := e.appendBlock(nil, kind, vals, pres, scans)
	var d decoded
	if err := decodeBlock(b, scans, &d); err != nil {
		t.Fatalf("decodeBlock(kind %v, %x): %v", kind, b, err)
	}
	k := 0
	for j := 0; j < scans; j++ {
		if pres[j] == 0 {
			continue
		}
		if k >= d.n {
			t.Fatalf("kind %v: decoded %d points; want more (scan %d)", kind, d.n, j)
		}
		if int(d.idx[k]) != j || d.val[k] != vals[j] {
			t.Fatalf("kind %v point %d = scan %d bits %#x; want scan %d bits %#x\nvals %x\npres %v", kind, k, d.idx[k], d.val[k], j, vals[j], vals, pres)
		}
		k++
	}
	if k != d.n {
		t.Fatalf("kind %v: decoded %d points; want %d", kind, d.n, k)
	}
	return b
}

func TestBlockRoundTripProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var e encoder
	for iter := 0; iter < 20000; iter++ {
		kind := []series.Kind{series.Counter, series.Level, series.Float}[r.IntN(3)]
		scans := 1 + r.IntN(MaxBlockScans)
		if r.IntN(2) == 0 {
			scans = 64
		}
		checkBlock(t, &e, kind, genValues(r, kind, scans), genPresence(r, scans))
	}
}

func TestBlockSizes(t *testing.T) {
	var e encoder
	all := make([]uint8, 64)
	for i := range all {
		all[i] = 1
	}
	vals := make([]uint64, 64)
	for i := range vals {
		vals[i] = 123456789
	}
	if b := checkBlock(t, &e, series.Counter, vals, all); len(b) > 6 {
		t.Errorf("constant block is %d bytes (%x); want ≤ 6", len(b), b)
	}
	for i := range vals {
		vals[i] = 1000 + uint64(i)*250
	}
	if b := checkBlock(t, &e, series.Counter, vals, all); len(b) > 8 {
		t.Errorf("linear block is %d bytes (%x); want ≤ 8", len(b), b)
	}
	for i := range vals {
		vals[i] = math.Float64bits(float64(2000+i%7) / 100)
	}
	if b := checkBlock(t, &e, series.Float, vals, all); len(b) > 30 {
		t.Errorf("2-decimal block is %d bytes (%x); want ≤ 30", len(b), b)
	}
}

func TestDecodeBlockRejects(t *testing.T) {
	var d decoded
	for _, b := range [][]byte{
		{0xe0},             // reserved bits
		{presAll | 7<<2},   // bad transform
		{presRange, 70, 1}, // range past the segment
		{presRange, 0, 0},  // empty range
		{presBitmap, 0, 0, 0, 0, 0, 0, 0, 0},
		{presAll},                         // no value
		{presAll, 2, 3},                   // bad order
		{presAll, 2, 1, 0, 65},            // width > 64
		{presAll, 2, 1, 0, 10},            // truncated residuals
		{presAll | tfXOR<<2, 1, 2, 3},     // truncated xor
		{presAll | tfDecimal<<2, 9, 2, 0}, // bad decimals
	} {
		if err := decodeBlock(b, 64, &d); !errors.Is(err, errCorrupt) {
			t.Errorf("decodeBlock(%x) = %v; want errCorrupt", b, err)
		}
	}
}

func TestBits(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for iter := 0; iter < 200; iter++ {
		var w bitWriter
		type item struct {
			v  uint64
			nb uint
		}
		var items []item
		for k := 0; k < 100; k++ {
			nb := uint(r.IntN(65))
			v := r.Uint64()
			if nb < 64 {
				v &= 1<<nb - 1
			}
			items = append(items, item{v, nb})
			w.write(v, nb)
		}
		br := bitReader{b: w.finish()}
		for i, it := range items {
			if got := br.read(it.nb); got != it.v {
				t.Fatalf("iter %d item %d: read(%d) = %#x; want %#x", iter, i, it.nb, got, it.v)
			}
		}
		if br.bad {
			t.Fatal("reader reported truncation")
		}
	}
}

func TestSegmentIndex(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for iter := 0; iter < 200; iter++ {
		var sw segWriter
		n := r.IntN(400)
		want := make([][]byte, n)
		dense := r.IntN(4)
		for id := range want {
			if r.IntN(4) < dense {
				want[id] = make([]byte, 1+r.IntN(300))
				for k := range want[id] {
					want[id][k] = byte(r.Uint32())
				}
			}
			sw.add(want[id])
		}
		g := sw.segment([]int64{1})
		for id := 0; id < n+70; id++ {
			var w []byte
			if id < n {
				w = want[id]
			}
			if got := g.block(ID(id)); !bytes.Equal(got, w) {
				t.Fatalf("iter %d: block(%d) = %d bytes; want %d", iter, id, len(got), len(w))
			}
		}
	}
}
