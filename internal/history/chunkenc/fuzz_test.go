package chunkenc

import (
	"math"
	"testing"

	"github.com/cantal-go/cantal/internal/series"
)

// FuzzDecodeBlock feeds arbitrary bytes to the block decoder: it must not panic, and whatever
// it accepts must re-encode into a block that decodes to the same points.
func FuzzDecodeBlock(f *testing.F) {
	var e Encoder
	all := make([]uint8, 64)
	for i := range all {
		all[i] = 1
	}
	vals := make([]uint64, 64)
	for shape := 0; shape < 4; shape++ {
		for i := range vals {
			switch shape {
			case 0:
				vals[i] = 7
			case 1:
				vals[i] = uint64(i * i * 1000)
			case 2:
				vals[i] = math.Float64bits(float64(i%9) / 100)
			case 3:
				vals[i] = math.Float64bits(float64(i) * math.Pi)
			}
		}
		kind := series.Counter
		if shape >= 2 {
			kind = series.Float
		}
		f.Add(e.Append(nil, kind, vals, all, 64), uint16(64))
		pres := make([]uint8, 64)
		pres[3], pres[40] = 1, 1
		f.Add(e.Append(nil, kind, vals, pres, 64), uint16(64))
	}
	f.Fuzz(func(t *testing.T, b []byte, scans uint16) {
		n := int(scans)%MaxScans + 1
		var d Decoded
		if err := Decode(b, n, &d); err != nil {
			return
		}
		vals := make([]uint64, n)
		pres := make([]uint8, n)
		for k := 0; k < d.N; k++ {
			vals[d.Idx[k]], pres[d.Idx[k]] = d.Val[k], 1
		}
		var e Encoder
		var d2 Decoded
		for _, kind := range []series.Kind{series.Counter, series.Float} {
			b2 := e.Append(nil, kind, vals, pres, n)
			if err := Decode(b2, n, &d2); err != nil {
				t.Fatalf("re-encoded block %x does not decode: %v", b2, err)
			}
			if d2.N != d.N || d2.Idx != d.Idx || d2.Val != d.Val {
				t.Fatalf("re-encoded block decodes differently")
			}
		}
	})
}
