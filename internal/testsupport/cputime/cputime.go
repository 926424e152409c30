// Package cputime reads the CPU time this process has used, user plus system. Benchmarks report
// it next to wall time because the machines they run on are often shared: wall time then
// measures the neighbours too. Safe for concurrent use.
package cputime

import (
	"syscall"
	"time"
)

// Process returns the user+system CPU time used by this process so far (0 if the kernel
// refuses to tell).
func Process() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
