package history

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

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
