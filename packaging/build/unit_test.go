package build

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestUnitVerifies installs the .deb into a clean Debian root and runs systemd-analyze verify
// on the unit there (--root: ExecStart's binary, the man page of Documentation= through
// MANPATH); any complaint about cantal-agent.service fails. It also checks the unit says what
// docs/packaging.md promises.
func TestUnitVerifies(t *testing.T) {
	analyze := need(t, "systemd-analyze")
	deb := packages(t, "1.0.0")
	root := debianRoot(t)
	copyIn(t, root, deb, "/tmp/cantal.deb")
	inRoot(t, root, "dpkg -i /tmp/cantal.deb")
	unit := filepath.Join(root, "lib", "systemd", "system", "cantal-agent.service")
	cmd := exec.Command(analyze, "verify", "--root="+root, "/lib/systemd/system/cantal-agent.service")
	cmd.Env = append(os.Environ(), "MANPATH="+filepath.Join(root, "usr", "share", "man"), "SYSTEMD_LOG_LEVEL=notice")
	out, err := cmd.CombinedOutput()
	var mine []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "cantal") {
			mine = append(mine, l)
		}
	}
	if err != nil || len(mine) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	data, err := os.ReadFile(unit)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Type=notify", "ProtectSystem=strict", "StateDirectory=cantal", "RuntimeDirectory=cantal",
		"ExecReload=/bin/sh -c 'kill -HUP \"$$MAINPID\"'", "Restart=on-failure", "NoNewPrivileges=yes",
		"CapabilityBoundingSet=CAP_SYS_PTRACE CAP_DAC_READ_SEARCH CAP_BPF CAP_PERFMON CAP_NET_ADMIN\n"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("the unit lacks %q", want)
		}
	}
	// The security exposure systemd computes for it (lower is better; 10 is unconfined).
	if out, err := exec.Command(analyze, "security", "--offline=yes", "--root="+root, "cantal-agent.service").CombinedOutput(); err == nil {
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		t.Logf("systemd-analyze security: %s", lines[len(lines)-1])
	}
}

// TestAgentTellsSystemdItIsReady runs the agent as a Type=notify unit would ($NOTIFY_SOCKET):
// it sends READY=1, and the API answers as soon as it has.
func TestAgentTellsSystemdItIsReady(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "notify")
	l, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	cmd := exec.Command(agentBinary(t), "--listen", addr, "--state-dir", "", "--no-bpf")
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+sock)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
	l.SetReadDeadline(time.Now().Add(60 * time.Second))
	buf := make([]byte, 64)
	n, err := l.Read(buf)
	if err != nil {
		t.Fatalf("no notification: %v", err)
	}
	if got := string(buf[:n]); got != "READY=1" {
		t.Fatalf("notification %q", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := getStatus(ctx, addr); err != nil {
		t.Fatalf("ready, but the API does not answer: %v", err)
	}
}
