package build

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// booted is a Debian root booted with systemd-nspawn -b: systemd as its PID 1.
type booted struct {
	t       *testing.T
	systemd int // its PID 1, as the host numbers it
}

// in runs a command inside the booted system (all its namespaces) and returns its output and
// error.
func (b booted) in(args ...string) (string, error) {
	cmd := exec.Command("nsenter", append([]string{"-t", strconv.Itoa(b.systemd), "-a"}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (b booted) must(args ...string) string {
	b.t.Helper()
	out, err := b.in(args...)
	if err != nil {
		b.t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// until polls cond every 200 ms until it holds or the deadline passes.
func until(t *testing.T, what string, d time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v; last: %s", what, d, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// boot starts systemd-nspawn -b on root and returns once systemd runs in it; cleanup powers it
// off.
func boot(t *testing.T, root string) booted {
	t.Helper()
	nspawn := need(t, "systemd-nspawn")
	need(t, "nsenter")
	// The container gets what a host's systemd has and nspawn withholds by default (the
	// capabilities and system calls the unit grants), so that the unit's own limits are what
	// the agent meets.
	cmd := exec.Command(nspawn, "-D", root, "-b", "--register=no", "--keep-unit", "--console=pipe", "--quiet",
		"--capability=CAP_BPF,CAP_PERFMON,CAP_NET_ADMIN,CAP_SYS_TIME", "--system-call-filter=adjtimex bpf perf_event_open")
	var console bytes.Buffer
	cmd.Stdout, cmd.Stderr = &console, &console
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	b := booted{t: t}
	t.Cleanup(func() {
		b.in("systemctl", "poweroff")
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	until(t, "systemd in the container", 60*time.Second, func() (bool, string) {
		data, _ := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/task/" + strconv.Itoa(cmd.Process.Pid) + "/children")
		for _, f := range strings.Fields(string(data)) {
			comm, _ := os.ReadFile("/proc/" + f + "/comm")
			if strings.TrimSpace(string(comm)) == "systemd" {
				b.systemd, _ = strconv.Atoi(f)
				return true, ""
			}
		}
		return false, console.String()
	})
	until(t, "the system running", 120*time.Second, func() (bool, string) {
		out, _ := b.in("systemctl", "is-system-running")
		s := strings.TrimSpace(out)
		return s == "running" || s == "degraded", s
	})
	return b
}

// cliStatus asks the packaged agent through its Unix socket with the packaged cantal.
func (b booted) cliStatus() (status, error) {
	var st status
	out, err := b.in("cantal", "status", "--agent", "unix:/run/cantal/agent.sock", "--json")
	if err != nil {
		return st, err
	}
	return st, json.Unmarshal([]byte(out), &st)
}

// TestBootedServiceUnderSystemd boots the Debian root with the .deb installed under
// systemd-nspawn -b: the packaged unit starts at boot (enabled by postinst), reports ready,
// answers on its Unix socket, keeps its node id and history over systemctl restart, reloads its
// configuration in the same process on systemctl reload, and stops clean.
func TestBootedServiceUnderSystemd(t *testing.T) {
	start := time.Now()
	deb := packages(t, "1.0.0")
	root := debianRoot(t)
	copyIn(t, root, deb, "/tmp/cantal.deb")
	inRoot(t, root, "dpkg -i /tmp/cantal.deb")
	b := boot(t, root)
	t.Logf("booted after %v", time.Since(start).Round(time.Millisecond))

	if out := strings.TrimSpace(b.must("systemctl", "show", "-p", "ActiveState,SubState,Type", "cantal-agent")); !strings.Contains(out, "ActiveState=active") || !strings.Contains(out, "Type=notify") {
		t.Fatalf("after boot: %s\n%s", out, b.must("journalctl", "-u", "cantal-agent", "--no-pager"))
	}
	var first status
	until(t, "five scans", 60*time.Second, func() (bool, string) {
		st, err := b.cliStatus()
		first = st
		return err == nil && st.LastScan.Scans >= 5, strings.TrimSpace(first.NodeID)
	})
	if first.NodeID == "" {
		t.Fatal("no node id")
	}
	pid1 := b.must("systemctl", "show", "-p", "MainPID", "--value", "cantal-agent")

	b.must("systemctl", "restart", "cantal-agent")
	pid2 := b.must("systemctl", "show", "-p", "MainPID", "--value", "cantal-agent")
	if pid2 == pid1 {
		t.Errorf("restart kept MainPID %s", pid1)
	}
	second, err := b.cliStatus() // Type=notify: restart returned once the API answers
	if err != nil {
		t.Fatalf("right after restart: %v", err)
	}
	if second.NodeID != first.NodeID {
		t.Errorf("node id %q after restart, %q before", second.NodeID, first.NodeID)
	}
	if second.Counts.HistoryPoints < first.Counts.HistoryPoints {
		t.Errorf("history after restart: %d points, before: %d", second.Counts.HistoryPoints, first.Counts.HistoryPoints)
	}

	// systemctl reload: the same process reads /etc/cantal/agent.yml again (ExecReload sends
	// SIGHUP), and says so in its status.
	b.must("systemctl", "reload", "cantal-agent")
	if pid3 := b.must("systemctl", "show", "-p", "MainPID", "--value", "cantal-agent"); pid3 != pid2 {
		t.Errorf("reload changed MainPID from %s to %s", strings.TrimSpace(pid2), strings.TrimSpace(pid3))
	}
	until(t, "the reload", 30*time.Second, func() (bool, string) {
		st, err := b.cliStatus()
		return err == nil && st.Config.Reloads >= 1 && st.Config.LastReloadSuccessful, fmt.Sprintf("%+v %v", st.Config, err)
	})

	b.must("systemctl", "stop", "cantal-agent")
	out := b.must("systemctl", "show", "-p", "Result,ExecMainStatus,ActiveState", "cantal-agent")
	for _, want := range []string{"Result=success", "ExecMainStatus=0", "ActiveState=inactive"} {
		if !strings.Contains(out, want) {
			t.Errorf("after stop: lacks %s:\n%s", want, out)
		}
	}
	journal := b.must("journalctl", "-u", "cantal-agent", "--no-pager", "-o", "cat")
	t.Logf("journal:\n%s", journal)
	// The unit's sandbox lets the agent read the clock (adjtimex) and load its BPF program
	// (which then finds itself in nspawn's pid namespace and steps aside: not the unit's doing).
	for _, refused := range []string{"source=adjtimex", "load program: operation not permitted"} {
		if strings.Contains(journal, refused) {
			t.Errorf("the unit refuses the agent something it needs: %q in the journal", refused)
		}
	}
	t.Logf("boot, start, restart, reload, stop: %v", time.Since(start).Round(time.Millisecond))
}
