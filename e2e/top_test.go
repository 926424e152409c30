package e2e

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// tmux runs a tmux command on the test's own tmux server (socket sock).
func tmux(t *testing.T, sock string, args ...string) string {
	t.Helper()
	out, err := exec.Command("tmux", append([]string{"-S", sock}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("tmux %q: %v: %s", args, err, out)
	}
	return string(out)
}

// TestTopInTmux runs `cantal top` in a tmux pane of 120×60 against a real agent over its Unix
// socket, with a busy loop running: the screen shows the header and the vital signs, lists the
// busy process, changes from one refresh to the next, and q ends the program (back to the
// shell, exit status 0).
func TestTopInTmux(t *testing.T) {
	serial(t)
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatalf("tmux not found (%v): run scripts/install-deps.sh", err)
	}
	sock := filepath.Join(t.TempDir(), "cantal.sock")
	a := &agent{t: t, StateDir: t.TempDir()}
	addr := freePort(t)
	a.URL = "http://" + addr
	a.args = []string{"--listen", addr + ",unix:" + sock, "--interval", "2s", "--state-dir", a.StateDir,
		"--rrdd-dir", t.TempDir(), "--node-name", "top-node"}
	a.start()
	t.Cleanup(func() { a.stop(syscall.SIGKILL) })
	burner := startProc(t, nil, nil, "sh", "-c", "while :; do :; done")

	tsock := filepath.Join(t.TempDir(), "tmux.sock")
	cmd := fmt.Sprintf("%s top --agent unix:%s; echo TOP-EXITED=$?; sleep 600", filepath.Join(bin, "cantal"), sock)
	tmux(t, tsock, "-f", "/dev/null", "new-session", "-d", "-s", "top", "-x", "120", "-y", "60", cmd)
	t.Cleanup(func() { exec.Command("tmux", "-S", tsock, "kill-server").Run() })
	capture := func() string { return tmux(t, tsock, "capture-pane", "-p", "-t", "top") }

	// The burner is listed once the agent has two scans of it (CPU % is a rate).
	var first string
	waitFor(t, 30*time.Second, func() error {
		first = capture()
		if !strings.Contains(first, "cantal top - top-node") {
			return fmt.Errorf("no header yet:\n%s", first)
		}
		if row := paneRow(first, burner.pid()); row == "" {
			return fmt.Errorf("busy loop %s not listed:\n%s", burner.pid(), first)
		}
		return nil
	})
	for _, want := range []string{"CPU ", "% busy", "Mem ", "Load ", "Net  rx", "Disk  read", "PID", "COMMAND"} {
		if !strings.Contains(first, want) {
			t.Errorf("screen lacks %q:\n%s", want, first)
		}
	}
	if lines := strings.Split(strings.TrimRight(first, "\n"), "\n"); len(lines) > 60 {
		t.Errorf("%d lines on a 60-line pane", len(lines))
	}
	// The command line, or [sh] when the agent had no time to read it (it sheds process details
	// under heavy churn).
	if row := paneRow(first, burner.pid()); !strings.Contains(row, "sh -c while :; do :; done") && !strings.Contains(row, "[sh]") {
		t.Errorf("busy loop's row = %q", row)
	}
	// Capture again at least 2 s later, once the next refresh has drawn (its clock moves; on a
	// loaded machine a refresh may come late, so wait for it rather than time it).
	time.Sleep(2 * time.Second)
	var second string
	waitFor(t, 60*time.Second, func() error {
		if second = capture(); line0(second) == line0(first) {
			return fmt.Errorf("header unchanged since the first capture: %q", line0(second))
		}
		return nil
	})
	if vitals(first) == vitals(second) && paneRow(first, burner.pid()) == paneRow(second, burner.pid()) {
		t.Errorf("neither the vital signs nor the busy loop's row changed between refreshes:\n%s\n%s", first, second)
	}
	t.Logf("screen after a refresh:\n%s", second)
	if row := paneRow(second, burner.pid()); row == "" {
		t.Errorf("busy loop %s no longer listed:\n%s", burner.pid(), second)
	}

	tmux(t, tsock, "send-keys", "-t", "top", "q")
	waitFor(t, 10*time.Second, func() error {
		if s := capture(); !strings.Contains(s, "TOP-EXITED=0") {
			return fmt.Errorf("top did not exit on q:\n%s", s)
		}
		return nil
	})
	if s := capture(); strings.Contains(s, "cantal top - ") {
		t.Errorf("top's screen stayed after it exited (alternate screen not left):\n%s", s)
	}
}

// paneRow returns the process row of pid on a captured top screen, "" if none.
func paneRow(screen, pid string) string {
	for _, l := range strings.Split(screen, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == pid {
			return l
		}
	}
	return ""
}

func line0(s string) string { return strings.SplitN(s, "\n", 2)[0] }

// vitals returns the lines of a top screen between the header and the process list.
func vitals(s string) string {
	lines := strings.SplitN(s, "\n", 7)
	if len(lines) < 6 {
		return s
	}
	return strings.Join(lines[1:5], "\n")
}
