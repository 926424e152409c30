package procscan

import (
	"context"
	"os/exec"
	"testing"

	"github.com/cantal-go/cantal/internal/series"
	"github.com/cantal-go/cantal/internal/testsupport/cputime"
)

// startSleepers starts n sleep processes and stops them when the benchmark ends.
func startSleepers(b *testing.B, n int) {
	b.Helper()
	cmds := make([]*exec.Cmd, 0, n)
	b.Cleanup(func() {
		for _, c := range cmds {
			c.Process.Kill()
			c.Wait()
		}
	})
	for range n {
		c := exec.Command("sleep", "3600")
		if err := c.Start(); err != nil {
			b.Fatalf("start sleeper: %v", err)
		}
		cmds = append(cmds, c)
	}
}

func benchScan(b *testing.B, cs ...series.Collector) {
	ctx := context.Background()
	sink := &series.Discard{}
	for _, c := range cs { // first scan registers every series and reads every environ
		if err := c.Collect(ctx, sink); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := cputime.Process()
	for b.Loop() {
		for _, c := range cs {
			if err := c.Collect(ctx, sink); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(cputime.Process()-start)/float64(b.N), "cpu-ns/op")
}

// BenchmarkProcesses is one process scan of the real /proc.
func BenchmarkProcesses(b *testing.B) {
	benchScan(b, NewProcesses(Options{}))
}

// BenchmarkProcessesIdle5000 is one process scan of the real /proc with 5000 sleeping processes
// more, side by side: every stat line read at every scan (as before issue 22's reuse), the
// stat lines of processes that have not run reused (see idle.go), knowing that from their
// schedstat files, and knowing it from the task iterator (taskiter.go).
func BenchmarkProcessesIdle5000(b *testing.B) {
	startSleepers(b, 5000)
	for _, mode := range []struct {
		name   string
		sched  int8
		noIter bool
	}{{"stat-every-scan", -1, true}, {"reuse-idle", 0, true}, {"reuse-idle-taskiter", 0, false}} {
		b.Run(mode.name, func(b *testing.B) {
			p := NewProcesses(Options{NoTaskIter: mode.noIter})
			defer p.Close()
			p.schedOK = mode.sched
			benchScan(b, p)
			if mode.sched == 0 && p.Stats().StatReused == 0 {
				b.Fatal("no stat line reused")
			}
		})
	}
}

// BenchmarkProcessesStates is BenchmarkProcesses with Options.States (node_processes_*): the
// difference is the counts from the scan's table, the two limits' reads and the listing and
// reading of the threads of multi-threaded processes.
func BenchmarkProcessesStates(b *testing.B) {
	benchScan(b, NewProcesses(Options{States: true}))
}
