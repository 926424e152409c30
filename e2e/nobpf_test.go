package e2e

import (
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"
)

// TestTaskIterAndNoBPF: the agent (root, on this kernel) takes the processes' scheduler
// counters from the BPF task iterator, and with --no-bpf from schedstat files; both list this
// test's process with its uid.
func TestTaskIterAndNoBPF(t *testing.T) {
	serial(t)
	for _, c := range []struct {
		args []string
		iter bool
	}{{nil, true}, {[]string{"--no-bpf"}, false}} {
		a := startAgent(t, c.args...)
		var st struct {
			ProcessScan struct {
				TaskIter bool `json:"task_iterator"`
				Scans    int64
			} `json:"process_scan"`
		}
		waitFor(t, 20*time.Second, func() error {
			if err := a.get("/api/v1/status", &st); err != nil {
				return err
			}
			if st.ProcessScan.Scans < 2 {
				return fmt.Errorf("%d process scans", st.ProcessScan.Scans)
			}
			return nil
		})
		if st.ProcessScan.TaskIter != c.iter {
			t.Errorf("agent %v: task_iterator %v; want %v", c.args, st.ProcessScan.TaskIter, c.iter)
		}
		// Listed with its uid, and pid 1 too (the task iterator's pass lacks it on some kernels,
		// 6.18). Waited for, not read once: on a loaded machine a scan that used its budget sheds
		// processes' details (uid included, without the task iterator) until a later scan.
		waitFor(t, 20*time.Second, func() error {
			var procs struct {
				Processes []struct {
					PID, UID int
				}
			}
			if err := a.get("/api/v1/processes", &procs); err != nil {
				return err
			}
			found, init := false, false
			for _, p := range procs.Processes {
				if p.PID == os.Getpid() {
					found = p.UID == os.Getuid()
				}
				init = init || p.PID == 1
			}
			if !found {
				return fmt.Errorf("agent %v: this test's process %d (uid %d) not listed with its uid among %d", c.args, os.Getpid(), os.Getuid(), len(procs.Processes))
			}
			if !init {
				return fmt.Errorf("agent %v: pid 1 not listed among %d processes", c.args, len(procs.Processes))
			}
			return nil
		})
		// And it stays, with its series, scan after scan (not forgotten and re-read as new).
		waitFor(t, 20*time.Second, func() error {
			pid1, err := a.series("/api/v1/metrics", `{pid="1", metric="process.memory.rss"}`)
			if err != nil {
				return err
			}
			if len(pid1) != 1 {
				return fmt.Errorf("%d process.memory.rss series of pid 1", len(pid1))
			}
			return nil
		})
		a.stop(syscall.SIGTERM)
	}
}
