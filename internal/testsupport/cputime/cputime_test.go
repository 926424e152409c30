package cputime

import (
	"testing"
	"time"
)

func TestProcessGrows(t *testing.T) {
	before := Process()
	x := 0
	for start := time.Now(); time.Since(start) < 50*time.Millisecond; {
		for i := range 10_000 {
			x += i ^ x
		}
	}
	_ = x
	if after := Process(); after <= before {
		t.Errorf("CPU time %v then %v after 50 ms of spinning; want it to grow", before, after)
	}
}
