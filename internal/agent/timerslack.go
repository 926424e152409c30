package agent

import (
	"bytes"
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
		slacks, err := threadTimerSlacks()
		if err != nil {
			return err
		}
		changed := false
		var errs []error
		for tid, cur := range slacks {
			if cur == want {
				continue
			}
			changed = true
			if err := os.WriteFile(slackPath(tid), []byte(want), 0); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err) // a thread that exited meanwhile is fine
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

// threadTimerSlacks returns the timer slack, in nanoseconds as the kernel writes it, of every
// thread of the process by thread id; a thread that exits while it reads is left out.
func threadTimerSlacks() (map[string]string, error) {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil, fmt.Errorf("timer slack: %w", err)
	}
	out := make(map[string]string, len(ents))
	var errs []error
	for _, e := range ents {
		b, err := os.ReadFile(slackPath(e.Name()))
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
			continue
		}
		out[e.Name()] = string(bytes.TrimSpace(b))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("timer slack: %w", err)
	}
	return out, nil
}

// slackPath is the timer slack file of thread tid. It lives in /proc/TID, which exists for
// every thread even though /proc lists only processes.
func slackPath(tid string) string { return "/proc/" + tid + "/timerslack_ns" }
