package sysscan

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/series"
)

// valueOf returns the value of the series with exactly these labels.
func valueOf(t *testing.T, r *series.Recorder, l series.Labels) (uint64, bool) {
	t.Helper()
	v, ok := r.Values[l.Key()]
	return v, ok
}

func mustValue(t *testing.T, r *series.Recorder, l series.Labels) uint64 {
	t.Helper()
	v, ok := valueOf(t, r, l)
	if !ok {
		t.Fatalf("series %s missing", l.Key())
	}
	return v
}

func TestMachineRealProc(t *testing.T) {
	m := NewMachine(Options{})
	r1 := series.NewRecorder()
	if err := m.Collect(context.Background(), r1); err != nil {
		t.Fatalf("Collect: %v", err)
	}
	for src, reasons := range r1.Problems {
		t.Errorf("problem %s: %v", src, reasons)
	}
	total := mustValue(t, r1, series.Labels{"metric": "memory.MemTotal"})
	free := mustValue(t, r1, series.Labels{"metric": "memory.MemFree"})
	if total < 64<<20 || free > total {
		t.Errorf("memory.MemTotal = %d, memory.MemFree = %d; want total >= 64 MiB >= free", total, free)
	}
	up := math.Float64frombits(mustValue(t, r1, series.Labels{"metric": "system.uptime_s"}))
	if up <= 0 {
		t.Errorf("system.uptime_s = %v; want > 0", up)
	}
	if l := math.Float64frombits(mustValue(t, r1, series.Labels{"metric": "system.load_avg_1min"})); l < 0 || math.IsNaN(l) {
		t.Errorf("system.load_avg_1min = %v", l)
	}
	if n := mustValue(t, r1, series.Labels{"metric": "system.files.allocated"}); n == 0 {
		t.Errorf("system.files.allocated = 0")
	}
	mustValue(t, r1, series.Labels{"metric": "net.interface.rx.bytes", "interface": "lo"})
	mustValue(t, r1, series.Labels{"metric": "net.Tcp.ActiveOpens"})
	mustValue(t, r1, series.Labels{"metric": "tcp.sockets", "state": "listen"})
	for key := range r1.Values {
		if strings.Contains(key, `"device":"loop`) || strings.Contains(key, `"device":"ram`) {
			t.Errorf("series %s: loop and ram devices must be skipped", key)
		}
	}

	// Burn a little CPU so that the counters move, then scan again.
	// Burn at least a few clock ticks (10 ms each) of CPU, however fast the machine is.
	x := 0
	for start := time.Now(); time.Since(start) < 80*time.Millisecond; {
		for i := range 100_000 {
			x += i ^ x
		}
	}
	_ = x
	r2 := series.NewRecorder()
	if err := m.Collect(context.Background(), r2); err != nil {
		t.Fatalf("Collect: %v", err)
	}
	var sum1, sum2 uint64
	for key, v1 := range r1.Values {
		ref := r1.Refs()[key]
		if ref.Kind != series.Counter || !strings.HasPrefix(ref.Labels["metric"], "cpu.") {
			continue
		}
		v2, ok := r2.Values[key]
		if !ok {
			t.Errorf("%s missing in second scan", key)
			continue
		}
		if v2 < v1 {
			t.Errorf("%s decreased: %d -> %d", key, v1, v2)
		}
		if _, percpu := ref.Labels["cpu"]; !percpu {
			sum1 += v1
			sum2 += v2
		}
	}
	if sum2 <= sum1 {
		t.Errorf("total CPU time did not grow: %d -> %d", sum1, sum2)
	}
}
