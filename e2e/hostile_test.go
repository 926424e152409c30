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

const nobody = 65534

// TestHostileFiles: processes running as an unprivileged uid point CANTAL_PATH at files they
// could not read themselves, at symlinks, a FIFO, a huge file and a meta rewritten every
// millisecond. The agent refuses each with a reason in /api/v1/status, leaks no content, keeps
// scanning promptly, and still reads a well-behaved application beside them.
func TestHostileFiles(t *testing.T) {
	serial(t)
	a := startAgent(t)
	dir := t.TempDir()
	// nobody must be able to reach the directory (t.TempDir's parent is 0700).
	os.Chmod(filepath.Dir(dir), 0o755)
	os.Chmod(dir, 0o755)
	udir := filepath.Join(dir, "nobody") // where nobody's own processes write
	os.Mkdir(udir, 0o755)
	os.Chown(udir, nobody, nobody)
	secret := "SECRET-" + fmt.Sprint(time.Now().UnixNano())
	meta := fmt.Sprintf("counter 8: {\"metric\": %q}\n", secret)
	mk := func(name, data string, uid int, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, mode)
		os.Lchown(p, uid, uid)
		return p
	}
	// 1. Root's private files: nobody cannot read them, so neither may the agent for nobody.
	mk("root.meta", meta, 0, 0o600)
	mk("root.values", "\x01\x00\x00\x00\x00\x00\x00\x00", 0, 0o600)
	// 2. Symlinks owned by nobody pointing at root's files.
	os.Symlink(filepath.Join(dir, "root.meta"), filepath.Join(dir, "link.meta"))
	os.Symlink(filepath.Join(dir, "root.values"), filepath.Join(dir, "link.values"))
	os.Lchown(filepath.Join(dir, "link.meta"), nobody, nobody)
	os.Lchown(filepath.Join(dir, "link.values"), nobody, nobody)
	// 3. FIFOs: opening one for reading would block a naive reader forever.
	syscall.Mkfifo(filepath.Join(dir, "fifo.meta"), 0o666)
	syscall.Mkfifo(filepath.Join(dir, "fifo.values"), 0o666)
	os.Chown(filepath.Join(dir, "fifo.meta"), nobody, nobody)
	os.Chown(filepath.Join(dir, "fifo.values"), nobody, nobody)
	// 4. A 1 GiB (sparse) values file under a valid meta.
	mk("huge.meta", "counter 8: {\"metric\": \"huge\"}\n", nobody, 0o644)
	big := mk("huge.values", "", nobody, 0o644)
	if err := os.Truncate(big, 1<<30); err != nil {
		t.Fatal(err)
	}
	// 5. A hard link to root's file, owned (as an inode) by root.
	os.Link(filepath.Join(dir, "root.meta"), filepath.Join(dir, "hard.meta"))
	mk("hard.values", "\x01\x00\x00\x00\x00\x00\x00\x00", nobody, 0o644)

	cred := &syscall.Credential{Uid: nobody, Gid: nobody}
	for _, name := range []string{"root", "link", "fifo", "huge", "hard"} {
		startProc(t, []string{"CANTAL_PATH=" + filepath.Join(dir, name)}, cred, "sleep", "600")
	}
	// 6. A meta file rewritten every millisecond (through rename) by its owner.
	churn := filepath.Join(udir, "churn")
	mk("nobody/churn.values", strings.Repeat("\x00", 16), nobody, 0o644)
	script := fmt.Sprintf(`
import os
base = %q
i = 0
while True:
    i += 1
    tmp = base + ".meta.tmp"
    with open(tmp, "w") as f:
        f.write('counter 8: {"metric": "churn", "gen": "%%d"}\n' %% (i %% 2))
    os.rename(tmp, base + ".meta")
`, churn)
	startProc(t, []string{"CANTAL_PATH=" + churn}, cred, python(t), "-c", script)
	// 7. A well-behaved neighbour.
	good := startProc(t, []string{"CANTAL_PATH=" + filepath.Join(udir, "good")}, cred, filepath.Join(bin, "testapp"), "-rate", "100")

	want := map[string]string{
		"root": "owned by uid 0",
		"link": "symbolic link",
		"fifo": "not a regular file",
		"huge": "exceeds the limit",
		"hard": "owned by uid 0",
	}
	waitFor(t, 10*time.Second, func() error {
		var st struct {
			Problems []struct{ Source, Reason string }
		}
		if err := a.get("/api/v1/status", &st); err != nil {
			return err
		}
		for name, reason := range want {
			ok := false
			for _, p := range st.Problems {
				if strings.Contains(p.Source, filepath.Join(dir, name)) && strings.Contains(p.Reason, reason) {
					ok = true
				}
			}
			if !ok {
				return fmt.Errorf("no problem %q for %s in %+v", reason, name, st.Problems)
			}
		}
		ss, err := a.series("/api/v1/metrics", fmt.Sprintf(`{pid=%q, metric="requests.number"}`, good.pid()))
		if err != nil {
			return err
		}
		if len(ss) != 1 || ss[0].Rate == nil {
			return fmt.Errorf("the well-behaved application is not read: %v", ss)
		}
		return nil
	})

	// Nothing of the secret leaks, anywhere.
	for _, path := range []string{"/api/v1/status", "/api/v1/metrics", "/api/v1/history?window=1m", "/api/v1/processes"} {
		code, body := a.raw("GET", path, "")
		if code != 200 {
			t.Fatalf("GET %s = %d %s", path, code, body)
		}
		if strings.Contains(body, secret) {
			t.Errorf("GET %s leaks the content of a root-only file", path)
		}
	}
	// The huge file's content was not decoded either.
	if ss, _ := a.series("/api/v1/metrics", `huge`); len(ss) != 0 {
		t.Errorf("series from the oversized file: %v", ss)
	}
	// Scanning goes on: no file stalls it (a FIFO opened for reading would block forever).
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
}
