package netns

import (
	"context"
	"testing"
	"time"
)

// TestLab150 builds a lab of 150 hosts (the cluster benchmark's size) and checks that the far
// ends reach each other: without permanent neighbour entries, 150 hosts talking to all overflow
// the kernel's shared neighbour table. Not in -short.
func TestLab150(t *testing.T) {
	if testing.Short() {
		t.Skip("150 namespaces: run without -short")
	}
	start := time.Now()
	lab := newLab(t, 150)
	t.Logf("built 150 hosts in %s", time.Since(start).Round(time.Millisecond))
	hs := lab.Hosts()
	ctx := context.Background()
	for _, p := range [][2]int{{0, 149}, {149, 0}, {74, 75}} {
		if err := reach(ctx, hs[p[0]], hs[p[1]].IP); err != nil {
			t.Errorf("h%d cannot ping h%d: %v", p[0]+1, p[1]+1, err)
		}
	}
}
