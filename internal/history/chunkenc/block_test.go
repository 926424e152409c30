package chunkenc

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/cantal-go/cantal/internal/history/chunkenc/chunktest"
	"github.com/cantal-go/cantal/internal/series"
)

func checkBlock(t *testing.T, e *Encoder, kind series.Kind, vals []uint64, pres []uint8) []byte {
	t.Helper()
	scans := len(vals)
	b := e.Append(nil, kind, vals, pres, scans)
	var d Decoded
	if err := Decode(b, scans, &d); err != nil {
		t.Fatalf("Decode(kind %v, %x): %v", kind, b, err)
	}
	k := 0
	for j := 0; j < scans; j++ {
		if pres[j] == 0 {
			continue
		}
		if k >= d.N {
			t.Fatalf("kind %v: decoded %d points; want more (scan %d)", kind, d.N, j)
		}
		if int(d.Idx[k]) != j || d.Val[k] != vals[j] {
			t.Fatalf("kind %v point %d = scan %d bits %#x; want scan %d bits %#x\nvals %x\npres %v", kind, k, d.Idx[k], d.Val[k], j, vals[j], vals, pres)
		}
		k++
	}
	if k != d.N {
		t.Fatalf("kind %v: decoded %d points; want %d", kind, d.N, k)
	}
	return b
}

func TestBlockRoundTripProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var e Encoder
	for iter := 0; iter < 20000; iter++ {
		kind := []series.Kind{series.Counter, series.Level, series.Float}[r.IntN(3)]
		scans := 1 + r.IntN(MaxScans)
		if r.IntN(2) == 0 {
			scans = 64
		}
		checkBlock(t, &e, kind, chunktest.Values(r, kind, scans), chunktest.Presence(r, scans))
	}
}

func TestBlockSizes(t *testing.T) {
	var e Encoder
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
	var d Decoded
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
		if err := Decode(b, 64, &d); !errors.Is(err, ErrCorrupt) {
			t.Errorf("Decode(%x) = %v; want ErrCorrupt", b, err)
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
