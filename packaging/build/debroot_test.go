package build

import (
	"bytes"

	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Includes of the cached Debian root: systemd so that systemd-nspawn -b can boot it and
// deb-systemd-helper is there, as on a real machine.
const rootIncludes = "systemd,systemd-sysv,dbus"

// debianRoot returns a clean Debian 12 root, made once by debootstrap from the Debian main
// archive and cached under $CANTAL_TEST_CACHE (default /var/cache/cantal-test), seen through
// an overlay so that the cache stays clean: each call gets a fresh root.
func debianRoot(t *testing.T) string {
	t.Helper()
	cache := os.Getenv("CANTAL_TEST_CACHE")
	if cache == "" {
		cache = "/var/cache/cantal-test"
	}
	base := filepath.Join(cache, "bookworm-systemd")
	if _, err := os.Stat(filepath.Join(base, "usr", "bin", "dpkg")); err != nil {
		debootstrap := need(t, "debootstrap")
		os.MkdirAll(cache, 0o755)
		tmp := base + ".tmp"
		os.RemoveAll(tmp)
		start := time.Now()
		run(t, debootstrap, "--variant=minbase", "--include="+rootIncludes, "bookworm", tmp, "http://deb.debian.org/debian")
		if err := os.Rename(tmp, base); err != nil {
			t.Fatal(err)
		}
		t.Logf("debootstrap took %v (cached in %s)", time.Since(start).Round(time.Second), base)
	}
	dir := t.TempDir()
	upper, workdir, merged := filepath.Join(dir, "upper"), filepath.Join(dir, "work"), filepath.Join(dir, "root")
	for _, d := range []string{upper, workdir, merged} {
		os.Mkdir(d, 0o755)
	}
	run(t, "mount", "-t", "overlay", "overlay", "-o", "lowerdir="+base+",upperdir="+upper+",workdir="+workdir, merged)
	t.Cleanup(func() { exec.Command("umount", "-R", "-l", merged).Run() })
	return merged
}

// inRoot runs a shell command in root with chroot and returns its output.
func inRoot(t *testing.T, root, script string) string {
	t.Helper()
	return run(t, "chroot", root, "/bin/sh", "-ec", script)
}

// copyIn copies a host file into root.
func copyIn(t *testing.T, root, src, dst string) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, dst), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// runPackagedAgent starts the installed /usr/bin/cantal-agent in root with its packaged config
// (the listener moved to a free loopback port: there is no /run/cantal without systemd), waits
// for scans, and stops it with SIGTERM, which writes the history snapshot. It returns the
// status seen last.
func runPackagedAgent(t *testing.T, root string, scans int64) status {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	cmd := exec.Command("chroot", root, "/usr/bin/cantal-agent", "--config", "/etc/cantal/agent.yml",
		"--listen", addr, "--no-bpf", "--interval", "200ms", "--snapshot-interval", "1h")
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	st := waitStatus(t, addr, scans, exited, &logs)
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("agent: %v\n%s", err, logs.String())
		}
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("agent did not stop on SIGTERM\n%s", logs.String())
	}
	return st
}

// TestDebInstallUpgradeRemovePurge installs the .deb with dpkg -i into a clean Debian root, runs
// the packaged agent, upgrades to a newer version (history and node id kept, a changed
// conffile kept), removes (state and config kept) and purges (both gone).
func TestDebInstallUpgradeRemovePurge(t *testing.T) {
	need(t, "chroot")
	start := time.Now()
	v1, v2 := packages(t, "1.0.0"), packages(t, "1.0.1")
	root := debianRoot(t)
	t.Logf("root ready after %v", time.Since(start).Round(time.Millisecond))
	run(t, "mount", "-t", "proc", "proc", filepath.Join(root, "proc"))
	copyIn(t, root, v1, "/tmp/v1.deb")
	copyIn(t, root, v2, "/tmp/v2.deb")

	// Install: files in place, the unit enabled (deb-systemd-helper; systemd is not running
	// in a chroot, so nothing is started), the man page readable, the config valid.
	inRoot(t, root, "dpkg -i /tmp/v1.deb")
	out := inRoot(t, root, `dpkg-query -W -f='${Version} ${Status}\n' cantal
		test -L /etc/systemd/system/multi-user.target.wants/cantal-agent.service && echo enabled
		cantal-agent --version; cantal --version
		cantal-agent --check-config /etc/cantal/agent.yml
		zcat /usr/share/man/man8/cantal-agent.8.gz | grep -c '^\.B \\-\\-' `)
	for _, want := range []string{"1.0.0 install ok installed", "enabled", "cantal-agent version test", "configuration OK"} {
		if !strings.Contains(out, want) {
			t.Errorf("after install: lacks %q:\n%s", want, out)
		}
	}
	first := runPackagedAgent(t, root, 5)
	if first.NodeID == "" {
		t.Fatal("no node id")
	}
	state := filepath.Join(root, "var", "lib", "cantal")
	before := snapshot(t, state)
	if _, ok := before["node-id"]; !ok {
		t.Fatalf("no node-id in %s: %v", state, keys(before))
	}
	// The operator edits the conffile; the upgrade must keep the edit (non-interactively).
	inRoot(t, root, `sed -i 's/^log-level: info$/log-level: debug/' /etc/cantal/agent.yml; grep -q '^log-level: debug$' /etc/cantal/agent.yml`)

	// Upgrade: state untouched by the package, the node keeps its id and its history.
	inRoot(t, root, "dpkg -i --force-confold /tmp/v2.deb")
	out = inRoot(t, root, `dpkg-query -W -f='${Version}\n' cantal; grep '^log-level' /etc/cantal/agent.yml`)
	if !strings.Contains(out, "1.0.1") || !strings.Contains(out, "log-level: debug") {
		t.Errorf("after upgrade:\n%s", out)
	}
	after := snapshot(t, state)
	for name, data := range before {
		if !bytes.Equal(after[name], data) {
			t.Errorf("upgrade changed %s", name)
		}
	}
	second := runPackagedAgent(t, root, 1)
	if second.NodeID != first.NodeID {
		t.Errorf("node id %q after upgrade, %q before", second.NodeID, first.NodeID)
	}
	if second.Counts.HistoryPoints <= first.Counts.HistoryPoints/2 {
		t.Errorf("history after upgrade: %d points, before: %d", second.Counts.HistoryPoints, first.Counts.HistoryPoints)
	}

	// Remove: binaries gone, configuration and state kept.
	inRoot(t, root, "dpkg -r cantal")
	for path, want := range map[string]bool{"usr/bin/cantal-agent": false, "etc/cantal/agent.yml": true, "var/lib/cantal/node-id": true} {
		if _, err := os.Stat(filepath.Join(root, path)); (err == nil) != want {
			t.Errorf("after remove: %s exists = %v, want %v", path, err == nil, want)
		}
	}
	// Purge: configuration, state and the unit's enablement gone.
	inRoot(t, root, "dpkg -P cantal")
	for _, path := range []string{"etc/cantal", "var/lib/cantal", "etc/systemd/system/multi-user.target.wants/cantal-agent.service"} {
		if _, err := os.Lstat(filepath.Join(root, path)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("after purge: %s still there (%v)", path, err)
		}
	}
	exec.Command("umount", filepath.Join(root, "proc")).Run()
	t.Logf("install, run, upgrade, run, remove, purge: %v", time.Since(start).Round(time.Millisecond))
}

func snapshot(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	m := map[string][]byte{}
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			data, _ := os.ReadFile(p)
			rel, _ := filepath.Rel(dir, p)
			m[rel] = data
		}
		return nil
	})
	return m
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
