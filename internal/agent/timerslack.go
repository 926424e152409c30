package agent

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"
)

// setTimerSlack sets the timer slack of every thread of the process to d (see prctl(2),
// PR_SET_TIMERSLACK): the kernel may then fire a thread's sleeps and timeouts up to d late, to
// fire several together. Threads inherit the slack of the thread that creates them, so once all
// have it, so do those the Go runtime starts later; a thread started while this runs is caught
// by the next pass (it makes up to three).
//
// Why the agent wants it: while any goroutine runs, the Go runtime's monitor thread (sysmon)
// sleeps 20 µs at a time, doubling only after a millisecond, and each wake is a context switch.
// On a virtual machine where a context switch costs tens of microseconds, that was ~40 wakes and
// ~1.7 ms of CPU per scan at 1000 processes × 100 metrics, 9 % of the agent's whole cost
// (per-thread schedstat). With 5 ms of slack it wakes ~6 times per scan for ~0.5 ms. Nothing in
// the agent needs finer timing than a few milliseconds: scans are seconds apart.
//
// Writing another thread's slack needs CAP_SYS_NICE; without it the error says so and nothing
// else changes. Linux only, like the agent.
func setTimerSlack(d time.Duration) error {
	want := strconv.FormatInt(d.Nanoseconds(), 10)
	for range 3 {
		ents, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return fmt.Errorf("timer slack: %w", err)
		}
		changed := false
		var errs []error
		for _, e := range ents {
			// The per-thread file lives in /proc/TID, which exists for every thread even
			// though /proc lists only processes.
			path := "/proc/" + e.Name() + "/timerslack_ns"
			cur, err := os.ReadFile(path)
			if err != nil {
				if !errors.Is(err, os.ErrNotExist) { // a thread that exited meanwhile is fine
					errs = append(errs, err)
				}
				continue
			}
			if string(trimNL(cur)) == want {
				continue
			}
			changed = true
			if err := os.WriteFile(path, []byte(want), 0); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
		if err := errors.Join(errs...); err != nil {
			return fmt.Errorf("timer slack: %w", err)
		}
		if !changed {
			return nil
		}
	}
	return nil
}

func trimNL(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == ' ') {
		b = b[:len(b)-1]
	}
	return b
}
