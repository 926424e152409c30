package history

import (
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"testing"
)

// TestKeyIndexAgainstMap registers and deletes keys at random, as process churn does, and checks
// after each step that the index finds exactly the keys a map holds, with their IDs (backward
// shift deletion across the table's wrap-around and its growth included).
func TestKeyIndexAgainstMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	x := newKeyIndex()
	mt := &metaTable{m: make([]atomic.Pointer[meta], 4096)}
	want := map[string]ID{}
	var free []ID
	next := ID(0)
	keyOf := func(i int) string { return `{"pid":"` + strconv.Itoa(i) + `"}` }
	check := func(step int) {
		if x.n != len(want) {
			t.Fatalf("step %d: index holds %d; want %d", step, x.n, len(want))
		}
		for k, id := range want {
			if got, ok := x.find(k, mt); !ok || got != id {
				t.Fatalf("step %d: find(%s) = %d, %v; want %d", step, k, got, ok, id)
			}
		}
	}
	for step := range 20000 {
		k := keyOf(rng.IntN(3000))
		if id, ok := want[k]; ok {
			x.remove(k, id)
			mt.m[id].Store(nil)
			delete(want, k)
			free = append(free, id)
		} else {
			if _, ok := x.find(k, mt); ok {
				t.Fatalf("step %d: found %s, which was never added or was removed", step, k)
			}
			var id ID
			if n := len(free); n > 0 {
				id, free = free[n-1], free[:n-1]
			} else {
				id, next = next, next+1
			}
			mt.m[id].Store(&meta{key: k})
			x.insert(k, id)
			want[k] = id
		}
		if step%997 == 0 {
			check(step)
		}
	}
	check(-1)
}
