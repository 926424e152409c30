package stats

import (
	"math/rand/v2"
	"testing"
)

// window returns an hour of 2 s points (1800) of a noisy counter with jittered timestamps.
func window() []Point {
	r := rand.New(rand.NewPCG(3, 4))
	p := make([]Point, 1800)
	ts, v := int64(1_700_000_000_000), 0.0
	for i := range p {
		ts += 2000 + r.Int64N(40) - 20
		v += float64(r.IntN(500))
		p[i] = Point{ts, v}
	}
	return p
}

func BenchmarkSummarize1800(b *testing.B) {
	p := window()
	r := rand.New(rand.NewPCG(5, 6))
	for i := range p {
		p[i].Value = r.NormFloat64() * 1000 // a gauge: unsorted values
	}
	var z Summarizer
	b.ReportAllocs()
	for b.Loop() {
		z.Summarize(p)
	}
}

func BenchmarkRates1800(b *testing.B) {
	p := window()
	dst := make([]Point, 0, len(p))
	b.ReportAllocs()
	for b.Loop() {
		dst = Rates(dst[:0], p)
	}
}

func BenchmarkRatesMaxGap1800(b *testing.B) {
	p := window()
	dst := make([]Point, 0, len(p))
	b.ReportAllocs()
	for b.Loop() {
		dst = RatesMaxGap(dst[:0], p, 5000)
	}
}
