// Package chunktest generates the value and presence shapes that reach every encoding path of
// chunkenc, for the tests of chunkenc and of the stores built on it. It holds no state: each
// call draws from the caller's *rand.Rand.
package chunktest

import (
	"math"
	"math/rand/v2"

	"github.com/cantal-go/cantal/internal/series"
)

// Values returns n values of a random shape, chosen to hit every encoding path: constants,
// steady and jittery counters, resets, huge jumps, random walks, decimals, NaN payloads, ±Inf, -0
// and raw random bits.
func Values(r *rand.Rand, kind series.Kind, n int) []uint64 {
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

// Presence returns n presence flags (1: the scan has a point) of a random pattern: every scan,
// one run, random gaps or sparse (possibly none).
func Presence(r *rand.Rand, n int) []uint8 {
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
