package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// vmHWMKB is process pid's peak resident set in KiB.
func vmHWMKB(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmHWM:" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

// TestTextfileHostileFiles runs the attacks on --textfile-dir against the real agent: a symlink
// to a root-only file elsewhere, a file of another user (a spoofed RAID alert input), a file
// anyone may write, and five 10 MB files. None of their series reach /metrics or the API,
// node_textfile_scrape_error is 1, each refusal is a problem naming the file without quoting
// it, the honest file beside them is served, and the agent's peak memory does not grow by what
// the big files hold (they are refused by size before any byte is read).
func TestTextfileHostileFiles(t *testing.T) {
	background(t)()
	dir := t.TempDir()
	os.Chmod(filepath.Dir(dir), 0o755)
	os.Chmod(dir, 0o755)
	write := func(name, content string, uid int, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, mode)
		if err := os.Chown(p, uid, uid); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("honest.prom", "honest_value 1\n", 0, 0o644)
	secret := filepath.Join(t.TempDir(), "secret.prom")
	os.WriteFile(secret, []byte("secret_token 424242\n"), 0o600)
	os.Symlink(secret, filepath.Join(dir, "link.prom"))
	write("spoof.prom", "node_md_disks{device=\"md9\",state=\"failed\"} 1\n", 65534, 0o644)
	write("open.prom", "open_value 1\n", 0, 0o666)

	// Its own PID namespace: the processes the tests beside start (thousands in
	// TestProcessChurn) are not in its table, so its peak memory is the files' doing only (CI
	// at 1099dac: +9 MiB while the serial line ran beside it).
	a := startAgentOwnPIDs(t, "--textfile-dir", dir)
	waitFor(t, 20*time.Second, func() error {
		code, body := a.raw("GET", "/metrics", "")
		if code != 200 {
			return fmt.Errorf("/metrics: %d", code)
		}
		if !strings.Contains(body, "\nhonest_value ") {
			return fmt.Errorf("honest_value not on /metrics yet")
		}
		return nil
	})
	pid := a.pid()
	before := vmHWMKB(t, pid)
	big := strings.Repeat("big_series{pad=\""+strings.Repeat("x", 100)+"\"} 1\n", 10<<20/120)
	for i := range 5 {
		write(fmt.Sprintf("big%d.prom", i), big, 0, 0o644)
	}
	var body string
	var problems []struct{ Source, Reason string }
	waitFor(t, 30*time.Second, func() error {
		var st struct {
			Problems []struct{ Source, Reason string } `json:"problems"`
		}
		if err := a.get("/api/v1/status", &st); err != nil {
			return err
		}
		problems = st.Problems
		n := 0
		for _, p := range st.Problems {
			if strings.Contains(p.Source, "big") {
				n++
			}
		}
		if n < 5 {
			return fmt.Errorf("%d of the big files reported", n)
		}
		code := 0
		if code, body = a.raw("GET", "/metrics", ""); code != 200 {
			return fmt.Errorf("/metrics: %d", code)
		}
		return nil
	})
	after := vmHWMKB(t, pid)
	t.Logf("peak RSS %d KiB before the 5×10 MB files, %d KiB after", before, after)
	// Read whole, the files would add 50 MiB; refused by size, nothing but a scan's own work.
	if after-before > 12<<10 {
		t.Errorf("peak RSS grew by %d KiB with the big files", after-before)
	}
	for _, leak := range []string{"secret_token", "424242", "md9", "open_value", "big_series"} {
		if strings.Contains(body, leak) {
			t.Errorf("/metrics has %q", leak)
		}
		for _, p := range problems {
			if strings.Contains(p.Reason, leak) && leak != "md9" {
				t.Errorf("problem %+v quotes the file", p)
			}
		}
	}
	if !strings.Contains(body, "\nnode_textfile_scrape_error 1") {
		t.Errorf("node_textfile_scrape_error is not 1")
	}
	want := map[string]string{"link.prom": "refused", "spoof.prom": "uid 65534", "open.prom": "every user may write", "big0.prom": "exceeds the limit"}
	for f, reason := range want {
		found := false
		for _, p := range problems {
			found = found || (p.Source == filepath.Join(dir, f) && strings.Contains(p.Reason, reason))
		}
		if !found {
			t.Errorf("no problem %q for %s in %+v", reason, f, problems)
		}
	}
	if ss, err := a.series("/api/v1/metrics", `{metric="secret_token"}`); err != nil || len(ss) != 0 {
		t.Errorf("API: %v %v", ss, err)
	}
}
