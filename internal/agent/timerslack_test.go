package agent

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// threadSlacks is threadTimerSlacks, failing the test on error.
func threadSlacks(t *testing.T) map[string]string {
	t.Helper()
	m, err := threadTimerSlacks()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestSetTimerSlack checks that every thread gets the slack, and that a thread the runtime
// starts afterwards inherits it. It needs CAP_SYS_NICE (root), as the agent does.
func TestSetTimerSlack(t *testing.T) {
	// The main thread's slack: the one every thread had before the test.
	b, err := os.ReadFile("/proc/self/timerslack_ns")
	if err != nil {
		t.Fatal(err)
	}
	orig, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := setTimerSlack(time.Duration(orig)); err != nil {
			t.Error(err)
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
