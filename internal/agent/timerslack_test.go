package agent

import (
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// threadSlacks returns the timer slack of every thread of the process, by thread id.
func threadSlacks(t *testing.T) map[string]string {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/timerslack_ns")
		if err != nil {
			continue // exited meanwhile
		}
		out[e.Name()] = strings.TrimSpace(string(b))
	}
	return out
}

// TestSetTimerSlack checks that every thread gets the slack, and that a thread the runtime
// starts afterwards inherits it. It needs CAP_SYS_NICE (root), as the agent does.
func TestSetTimerSlack(t *testing.T) {
	orig := threadSlacks(t)
	t.Cleanup(func() {
		for _, v := range orig {
			if err := setTimerSlackTo(v); err != nil {
				t.Error(err)
			}
			return
		}
	})
	if err := setTimerSlack(3 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	for tid, v := range threadSlacks(t) {
		if v != "3000000" {
			t.Errorf("thread %s: slack %s ns, want 3000000", tid, v)
		}
	}

	// Lock more goroutines to threads than there are threads: the runtime must start new ones.
	before := len(threadSlacks(t))
	release := make(chan struct{})
	started := make(chan struct{})
	n := before + 2
	for range n {
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			started <- struct{}{}
			<-release
		}()
	}
	for range n {
		<-started
	}
	after := threadSlacks(t)
	close(release)
	if len(after) <= before {
		t.Fatalf("no thread was started (%d before, %d after)", before, len(after))
	}
	for tid, v := range after {
		if v != "3000000" {
			t.Errorf("thread %s (of %d, %d before): slack %s ns, want 3000000", tid, len(after), before, v)
		}
	}
}

// setTimerSlackTo restores a slack given as the file's text.
func setTimerSlackTo(ns string) error {
	d, err := time.ParseDuration(ns + "ns")
	if err != nil {
		return err
	}
	return setTimerSlack(d)
}
