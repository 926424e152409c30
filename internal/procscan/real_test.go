package procscan

import (
	"context"
	"os"
	"slices"
	"strconv"
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

func TestProcessesRealProc(t *testing.T) {
	p := NewProcesses(Options{})
	r := series.NewRecorder()
	for range 2 { // a process's series start at its second scan
		if err := p.Collect(context.Background(), r); err != nil {
			t.Fatalf("Collect: %v", err)
		}
	}
	for src, reasons := range r.Problems {
		if src == "/proc/PID/io" {
			continue // pid 1 of this sandbox denies even root
		}
		t.Errorf("problem %s: %v", src, reasons)
	}
	table := p.Table()
	if len(table) < 2 {
		t.Fatalf("Table() has %d processes", len(table))
	}
	if !slices.IsSortedFunc(table, func(a, b Process) int { return a.PID - b.PID }) {
		t.Errorf("Table() not sorted by pid")
	}
	me := findPID(table, os.Getpid())
	if me == nil {
		t.Fatalf("own pid %d not in table", os.Getpid())
	}
	if !slices.Equal(me.Cmdline, os.Args) {
		t.Errorf("own Cmdline = %q; want %q", me.Cmdline, os.Args)
	}
	if me.PPID != os.Getppid() || me.UID != os.Getuid() {
		t.Errorf("own PPID, UID = %d, %d; want %d, %d", me.PPID, me.UID, os.Getppid(), os.Getuid())
	}
	if me.RSS < 1<<20 || me.VSZ < me.RSS || me.Threads < 2 {
		t.Errorf("own RSS %d, VSZ %d, threads %d: implausible", me.RSS, me.VSZ, me.Threads)
	}
	if me.State != "R" && me.State != "S" {
		t.Errorf("own State = %q", me.State)
	}
	if me.Name == "" || !strings.HasPrefix(strings.TrimSuffix(os.Args[0][strings.LastIndexByte(os.Args[0], '/')+1:], ".test"), strings.TrimSuffix(me.Name, ".test")) {
		t.Errorf("own Name = %q; args[0] %q", me.Name, os.Args[0])
	}
	if me.StartTime <= 0 {
		t.Errorf("own StartTime = %d", me.StartTime)
	}
	pid := strconv.Itoa(os.Getpid())
	labels := series.Labels{"metric": "process.memory.rss", "pid": pid, "process": me.Name}
	if me.Cgroup != "" {
		labels["cgroup"] = me.Cgroup
	}
	if v := mustValue(t, r, labels); v != me.RSS {
		t.Errorf("process.memory.rss = %d; table says %d", v, me.RSS)
	}

	// Burn at least a few clock ticks (10 ms each) of CPU, however fast the machine is.
	x := 0
	for start := time.Now(); time.Since(start) < 80*time.Millisecond; {
		for i := range 100_000 {
			x += i ^ x
		}
	}
	_ = x
	if err := p.Collect(context.Background(), r); err != nil {
		t.Fatalf("Collect: %v", err)
	}
	me2 := findPID(p.Table(), os.Getpid())
	if me2 == nil {
		t.Fatalf("own pid missing in second scan")
	}
	if me2.CPUUser+me2.CPUSystem < me.CPUUser+me.CPUSystem {
		t.Errorf("own CPU went back: %v -> %v", me.CPUUser+me.CPUSystem, me2.CPUUser+me2.CPUSystem)
	}
	if me2.CPUPercent <= 0 || me2.CPUPercent > 100*float64(200) {
		t.Errorf("own CPUPercent = %v after a busy loop", me2.CPUPercent)
	}
	if me2.StartTime != me.StartTime {
		t.Errorf("StartTime changed %d -> %d", me.StartTime, me2.StartTime)
	}
}

func findPID(table []Process, pid int) *Process {
	for i := range table {
		if table[i].PID == pid {
			return &table[i]
		}
	}
	return nil
}
