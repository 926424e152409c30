package history

import (
	"syscall"
	"testing"
	"time"
)

// cpuTime returns the process's user+system CPU time. Benchmarks report it next to wall time
// because the machine they run on is shared: wall time then measures the neighbours too.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports CPU ns per unit since start.
func reportCPU(b *testing.B, start time.Duration, units int, name string) {
	b.ReportMetric(float64(cpuTime()-start)/float64(units), name)
}
