package chunkenc

import (
	"math/rand/v2"
	"testing"

	"github.com/cantal-go/cantal/internal/history/chunkenc/chunktest"
	"github.com/cantal-go/cantal/internal/series"
)

// benchBlocks draws 256 blocks of 64 scans of every shape chunktest makes, every scan present.
func benchBlocks() (kinds []series.Kind, vals [][]uint64, pres []uint8) {
	r := rand.New(rand.NewPCG(7, 8))
	pres = make([]uint8, 64)
	for i := range pres {
		pres[i] = 1
	}
	for i := 0; i < 256; i++ {
		k := []series.Kind{series.Counter, series.Level, series.Float}[i%3]
		kinds = append(kinds, k)
		vals = append(vals, chunktest.Values(r, k, 64))
	}
	return kinds, vals, pres
}

// BenchmarkAppend measures encoding one block of 64 points (ns/op is per block).
//
//	go test -run '^$' -bench . -benchmem ./internal/history/chunkenc/
func BenchmarkAppend(b *testing.B) {
	kinds, vals, pres := benchBlocks()
	var e Encoder
	buf := make([]byte, 0, 4096)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		k := i % len(vals)
		buf = e.Append(buf[:0], kinds[k], vals[k], pres, 64)
	}
}

// BenchmarkDecode measures decoding one block of 64 points (ns/op is per block).
func BenchmarkDecode(b *testing.B) {
	kinds, vals, pres := benchBlocks()
	var e Encoder
	blocks := make([][]byte, len(vals))
	for k := range vals {
		blocks[k] = e.Append(nil, kinds[k], vals[k], pres, 64)
	}
	var d Decoded
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := Decode(blocks[i%len(blocks)], 64, &d); err != nil || d.N != 64 {
			b.Fatalf("Decode: %v, %d points", err, d.N)
		}
	}
}
