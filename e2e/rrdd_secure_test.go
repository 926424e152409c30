package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// problem is one entry of /api/v1/status problems.
type problem struct{ Source, Reason string }

func (a *agent) problems(t *testing.T) []problem {
	t.Helper()
	var st struct{ Problems []problem }
	if err := a.get("/api/v1/status", &st); err != nil {
		t.Fatal(err)
	}
	return st.Problems
}

// openTree returns a fresh directory that every uid may search (t.TempDir's parent is 0700).
func openTree(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	os.Chmod(filepath.Dir(dir), 0o755)
	os.Chmod(dir, 0o755)
	return dir
}

// mkdirMode makes a directory owned by uid with exactly mode.
func mkdirMode(t *testing.T, path string, uid int, mode os.FileMode) string {
	t.Helper()
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	os.Chown(path, uid, uid)
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestRRDDSquattedDirRefused: an unprivileged user creates the agent's rrdd directory
// first, inside a sticky world-writable directory like /dev/shm, as a symlink to a root-only
// directory holding a shadow-like file and a plugin file that claims to be the host's. The
// agent refuses the directory: nothing of the shadow file shows in the status, the exports or
// the log, and no series is published from it.
//
// Security finding 1.
func TestRRDDSquattedDirRefused(t *testing.T) {
	serial(t)
	top := openTree(t)
	shm := mkdirMode(t, filepath.Join(top, "shm"), 0, 0o777|os.ModeSticky)
	private := mkdirMode(t, filepath.Join(top, "private"), 0, 0o700)
	// 86420975319 stands for the shadow line's numbers: rare enough not to appear by chance
	// among the values of a busy machine's series (20222, a plausible date, once did).
	secret := fmt.Sprintf("root:$6$SECRET%d:86420975319:0:99999:7:::\n", time.Now().UnixNano())
	if err := os.WriteFile(filepath.Join(private, "shadow"), []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	// A real plugin, run as root, writes into the private directory: "host" series there.
	plugin := startProc(t, nil, nil, filepath.Join(bin, "rrdd-plugin"), "-dir", private, "-name", "fake", "-interval", "300ms")
	waitFor(t, 10*time.Second, func() error {
		_, err := os.Stat(filepath.Join(private, "fake"))
		return err
	})
	// The squat, made by nobody itself.
	metrics := filepath.Join(shm, "metrics")
	ln := startProc(t, nil, &syscall.Credential{Uid: nobody, Gid: nobody}, "ln", "-s", private, metrics)
	if err := ln.cmd.Wait(); err != nil {
		t.Fatalf("ln as nobody: %v: %s", err, ln.out)
	}
	a := startAgent(t, "--rrdd-dir", metrics)
	waitFor(t, 10*time.Second, func() error {
		for _, p := range a.problems(t) {
			if p.Source == "rrdd" && strings.Contains(p.Reason, "squatted") {
				return nil
			}
		}
		return fmt.Errorf("no squatted refusal in %+v", a.problems(t))
	})
	// A few more scans, to be sure nothing is read later either.
	scans := func() int64 {
		var st struct {
			LastScan struct{ Scans int64 } `json:"last_scan"`
		}
		if err := a.get("/api/v1/status", &st); err != nil {
			t.Fatal(err)
		}
		return st.LastScan.Scans
	}
	before := scans()
	waitFor(t, 10*time.Second, func() error {
		if n := scans(); n < before+3 {
			return fmt.Errorf("scans went from %d to %d only", before, n)
		}
		return nil
	})
	if ss, err := a.series("/api/v1/metrics", `{plugin=~".+"}`); err != nil || len(ss) != 0 {
		t.Errorf("series from the squatted directory: %v, %v", ss, err)
	}
	for _, path := range []string{"/api/v1/status", "/api/v1/metrics", "/metrics", "/influx"} {
		code, body := a.raw("GET", path, "")
		if code != 200 {
			t.Fatalf("GET %s = %d", path, code)
		}
		for _, bit := range []string{"SECRET", "86420975319", "root:", `plugin="fake"`} {
			if strings.Contains(body, bit) {
				t.Errorf("GET %s shows %q", path, bit)
			}
		}
	}
	if out := a.out.String(); strings.Contains(out, "SECRET") || strings.Contains(out, "root:") {
		t.Errorf("the log shows the shadow file:\n%s", out)
	}
	// The refusal is the same when the symlink points at nothing.
	var reason string
	for _, p := range a.problems(t) {
		if p.Source == "rrdd" {
			reason = p.Reason
		}
	}
	a.stop(syscall.SIGTERM)
	os.Remove(metrics)
	ln = startProc(t, nil, &syscall.Credential{Uid: nobody, Gid: nobody}, "ln", "-s", filepath.Join(private, "nothing"), metrics)
	if err := ln.cmd.Wait(); err != nil {
		t.Fatalf("ln as nobody: %v: %s", err, ln.out)
	}
	b := startAgent(t, "--rrdd-dir", metrics)
	waitFor(t, 10*time.Second, func() error {
		for _, p := range b.problems(t) {
			if p.Source == "rrdd" {
				if p.Reason != reason {
					return fmt.Errorf("refusal %q; want %q as for an existing target", p.Reason, reason)
				}
				return nil
			}
		}
		return fmt.Errorf("no rrdd refusal in %+v", b.problems(t))
	})
	plugin.kill()
}

// TestRRDDForeignPluginLabelledByOwner: in a plugin directory root opened to everyone
// (sticky, world-writable), a plugin run by nobody is read, but its series carry
// owner="uid 65534", never the owner="host" its metadata claims; a root plugin beside it keeps
// owner="host".
//
// Security finding 1.
func TestRRDDForeignPluginLabelledByOwner(t *testing.T) {
	serial(t)
	top := openTree(t)
	dir := mkdirMode(t, filepath.Join(top, "metrics"), 0, 0o777|os.ModeSticky)
	a := startAgent(t, "--rrdd-dir", dir)
	startProc(t, nil, &syscall.Credential{Uid: nobody, Gid: nobody}, filepath.Join(bin, "rrdd-plugin"), "-dir", dir, "-name", "theirs", "-interval", "300ms")
	startProc(t, nil, nil, filepath.Join(bin, "rrdd-plugin"), "-dir", dir, "-name", "roots", "-interval", "300ms")
	waitFor(t, 10*time.Second, func() error {
		for plugin, owner := range map[string]string{"theirs": "uid 65534", "roots": "host"} {
			ss, err := a.series("/api/v1/metrics", fmt.Sprintf(`{plugin=%q}`, plugin))
			if err != nil {
				return err
			}
			if len(ss) == 0 {
				return fmt.Errorf("no series of %s yet", plugin)
			}
			for _, s := range ss {
				if s.Labels["owner"] != owner {
					return fmt.Errorf("%s: %v; want owner %q", plugin, s.Labels, owner)
				}
			}
		}
		return nil
	})
}

// TestUnreachableCantalPathSameReason: processes of uid 65534 point CANTAL_PATH into a
// root-only directory, one at files that exist there (nobody's own, even), one at a name that
// does not exist. /api/v1/status gives both the same reason, so it cannot be used to probe
// directories nobody cannot search, and nothing is read from there.
//
// Security finding 13.
func TestUnreachableCantalPathSameReason(t *testing.T) {
	serial(t)
	top := openTree(t)
	private := mkdirMode(t, filepath.Join(top, "private"), 0, 0o700)
	secret := fmt.Sprint("SECRET", time.Now().UnixNano())
	for name, data := range map[string]string{
		"exists.values": "\x01\x00\x00\x00\x00\x00\x00\x00",
		"exists.meta":   fmt.Sprintf("counter 8: {\"metric\": %q}\n", secret),
	} {
		if err := os.WriteFile(filepath.Join(private, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		os.Chown(filepath.Join(private, name), nobody, nobody)
	}
	a := startAgent(t)
	cred := &syscall.Credential{Uid: nobody, Gid: nobody}
	names := []string{"exists", "missing", "sub/app"}
	for _, name := range names {
		startProc(t, []string{"CANTAL_PATH=" + filepath.Join(private, name)}, cred, "sleep", "600")
	}
	var reasons map[string]string
	waitFor(t, 10*time.Second, func() error {
		reasons = map[string]string{}
		for _, p := range a.problems(t) {
			for _, name := range names {
				if strings.HasPrefix(p.Source, filepath.Join(private, name)+" (pid ") {
					// The refusal names the directory the process named; then the reason.
					_, r, _ := strings.Cut(p.Reason, ": refused: ")
					reasons[name] = r
				}
			}
		}
		if len(reasons) != len(names) {
			return fmt.Errorf("problems for %v only: %+v", reasons, a.problems(t))
		}
		return nil
	})
	for _, name := range names {
		if reasons[name] != "not readable by the process's owner" {
			t.Errorf("%s: reason %q; want the same \"not readable by the process's owner\" for all", name, reasons[name])
		}
	}
	for _, path := range []string{"/api/v1/status", "/api/v1/metrics", "/metrics"} {
		if code, body := a.raw("GET", path, ""); code != 200 || strings.Contains(body, secret) {
			t.Errorf("GET %s = %d, shows the root-only directory's file: %v", path, code, strings.Contains(body, secret))
		}
	}
}
