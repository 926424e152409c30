package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// unixGet GETs path from the agent's Unix socket as uid (with curl, so the kernel's peer
// credentials are really those of another process and user).
func unixGet(t *testing.T, sock string, uid int, path string) (string, error) {
	t.Helper()
	cmd := exec.Command("curl", "-sS", "--unix-socket", sock, "http://localhost"+path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// tcpAs sends one request to the agent's TCP address from a curl running as uid: a local user
// over TCP, whom the agent knows by its socket's owner (sock_diag) without a web config.
func (a *agent) tcpAs(uid int, method, path, body string) (int, string) {
	a.t.Helper()
	args := []string{"-sS", "-o", "-", "-w", "\n%{http_code}", "-X", method, a.URL + path}
	if body != "" {
		args = append(args, "--data-binary", body)
	}
	cmd := exec.Command("curl", args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	out, err := cmd.Output()
	if err != nil {
		a.t.Fatalf("curl as uid %d %s %s: %v: %s", uid, method, path, err, out)
	}
	i := bytes.LastIndexByte(out, '\n')
	code, _ := strconv.Atoi(string(out[i+1:]))
	return code, string(out[:i])
}

type procRow struct {
	PID     int      `json:"pid"`
	UID     int      `json:"uid"`
	Cmdline []string `json:"cmdline"`
}

func processesOf(t *testing.T, body string) []procRow {
	t.Helper()
	var ans struct{ Processes []procRow }
	if err := json.Unmarshal([]byte(body), &ans); err != nil {
		t.Fatalf("processes answer %q: %v", body, err)
	}
	return ans.Processes
}

// TestHidePIDUserSeesOnlyOwnProcesses: with /proc mounted hidepid=2, a local user asking over the Unix
// socket or over TCP sees its own processes and not root's, root
// sees every one; command lines carry no secret either way.
//
// Security finding 12.
func TestHidePIDUserSeesOnlyOwnProcesses(t *testing.T) {
	serial(t)
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl is not installed (make setup installs it)")
	}
	dir := t.TempDir()
	os.Chmod(filepath.Dir(dir), 0o755)
	os.Chmod(dir, 0o755)
	procDir := filepath.Join(dir, "proc")
	os.Mkdir(procDir, 0o755)
	if out, err := exec.Command("mount", "-t", "proc", "-o", "hidepid=2", "proc", procDir).CombinedOutput(); err != nil {
		t.Fatalf("mount proc hidepid=2: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", procDir).Run() })
	sock := filepath.Join(dir, "cantal.sock")

	mine := startProc(t, nil, &syscall.Credential{Uid: nobody, Gid: nobody}, "/usr/bin/python3", "-c", "import time; time.sleep(300)", "--db-password=NOBODY-SECRET")
	roots := startProc(t, nil, nil, "/usr/bin/python3", "-c", "import time; time.sleep(300)", "--db-password=ROOT-SECRET", "token=abc123")

	port := freePort(t)
	a := &agent{t: t, StateDir: t.TempDir(), URL: "http://" + port}
	a.args = []string{"--listen", port + ",unix:" + sock, "--interval", "500ms", "--state-dir", a.StateDir,
		"--rrdd-dir", t.TempDir(), "--proc", procDir, "--log-level", "debug"}
	a.start()
	t.Cleanup(func() { a.stop(syscall.SIGKILL) })
	waitFor(t, 15e9, func() error {
		out, err := unixGet(t, sock, 0, "/api/v1/processes")
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		if !strings.Contains(out, fmt.Sprintf(`"pid":%s,`, roots.pid())) || !strings.Contains(out, fmt.Sprintf(`"pid":%s,`, mine.pid())) {
			return fmt.Errorf("root does not see both test processes yet")
		}
		for _, p := range []*proc{mine, roots} {
			out, _ := unixGet(t, sock, 0, "/api/v1/metrics?match=%7Bpid%3D%22"+p.pid()+"%22%7D")
			if !strings.Contains(out, `"pid":"`+p.pid()+`"`) {
				return fmt.Errorf("no series of process %s yet", p.pid())
			}
		}
		return nil
	})

	// Root on the socket: every process, secrets redacted.
	out, _ := unixGet(t, sock, 0, "/api/v1/processes")
	if strings.Contains(out, "NOBODY-SECRET") || strings.Contains(out, "ROOT-SECRET") || strings.Contains(out, "abc123") {
		t.Errorf("root's process list shows a secret from a command line")
	}
	// nobody on the socket: its own process, not root's.
	out, err := unixGet(t, sock, nobody, "/api/v1/processes")
	if err != nil {
		t.Fatalf("nobody on the socket: %v: %s", err, out)
	}
	seen := map[int]bool{}
	for _, p := range processesOf(t, out) {
		seen[p.PID] = true
		if p.UID != nobody {
			t.Errorf("nobody sees process %d of uid %d", p.PID, p.UID)
		}
	}
	if !seen[mine.cmd.Process.Pid] {
		t.Errorf("nobody does not see its own process %s", mine.pid())
	}
	if seen[roots.cmd.Process.Pid] {
		t.Errorf("nobody sees root's process %s", roots.pid())
	}
	// nobody's series: none of another uid's process.
	out, _ = unixGet(t, sock, nobody, "/api/v1/metrics?match=%7Bpid%3D~%22.%2B%22%7D")
	if strings.Contains(out, `"pid":"`+roots.pid()+`"`) {
		t.Errorf("nobody reads the series of root's process %s", roots.pid())
	}
	if !strings.Contains(out, `"pid":"`+mine.pid()+`"`) {
		all, _ := unixGet(t, sock, 0, "/api/v1/metrics?match=%7Bpid%3D%22"+mine.pid()+"%22%7D")
		t.Errorf("nobody does not read the series of its own process %s: %.300s\nroot reads: %.300s", mine.pid(), out, all)
	}
	out, _ = unixGet(t, sock, nobody, "/metrics")
	if strings.Contains(out, `pid="`+roots.pid()+`"`) {
		t.Errorf("nobody's /metrics has root's process %s", roots.pid())
	}
	// /metrics sums processes per group (not per pid): nobody's groups count only the processes
	// nobody may see, root's count more (its own test process at least).
	waitFor(t, 10e9, func() error {
		m, _ := unixGet(t, sock, nobody, "/metrics")
		p, _ := unixGet(t, sock, nobody, "/api/v1/processes")
		if n, want := numProcs(m), len(processesOf(t, p)); n != want || n == 0 {
			return fmt.Errorf("nobody's /metrics counts %d processes in its groups, its process list %d", n, want)
		}
		return nil
	})
	mine0, _ := unixGet(t, sock, nobody, "/metrics")
	all0, _ := unixGet(t, sock, 0, "/metrics")
	if numProcs(all0) <= numProcs(mine0) {
		t.Errorf("root's /metrics counts %d grouped processes, nobody's %d: root must see more", numProcs(all0), numProcs(mine0))
	}
	// Over TCP, a local user is known by its socket's owner (N13): root sees every process,
	// another user only its own: the curl it asks with, when a scan caught it (a loaded machine
	// keeps curl alive across scans), never root's or nobody's. (A caller from another host is
	// anonymous and sees none: access's TestRemoteTCPCallerStaysAnonymous.)
	if _, body := a.tcpAs(0, "GET", "/api/v1/processes", ""); len(processesOf(t, body)) < 2 {
		t.Errorf("root over TCP sees %d processes under hidepid; want every one", len(processesOf(t, body)))
	}
	code, body := a.tcpAs(otherUID, "GET", "/api/v1/processes", "")
	if code == 200 {
		for _, p := range processesOf(t, body) {
			if p.UID != otherUID {
				t.Errorf("another user over TCP got process %d of uid %d under hidepid", p.PID, p.UID)
			}
		}
	}
	_, body = a.tcpAs(otherUID, "GET", "/metrics", "")
	if strings.Contains(body, `pid="`) || numProcs(body) != 0 {
		t.Errorf("another user's /metrics over TCP has per-process series under hidepid (%d processes in groups)", numProcs(body))
	}
	_, body = a.tcpAs(otherUID, "GET", "/api/v1/metrics?match=%7Bpid%3D~%22.%2B%22%7D", "")
	if strings.Contains(body, `"pid":"`+roots.pid()+`"`) || strings.Contains(body, `"pid":"`+mine.pid()+`"`) {
		t.Errorf("another user's /api/v1/metrics over TCP has root's or nobody's process series under hidepid")
	}
	checkOriginalRoutesPrivacy(t, a, sock, mine, roots) // the original Cantal API (original_api_test.go)
	checkPrometheusAPIPrivacy(t, a, sock, mine, roots)  // /prometheus (promql_privacy_test.go)
}

// numProcs sums the cantal_process_num_procs samples of a /metrics exposition.
func numProcs(exposition string) int {
	n := 0
	for line := range strings.SplitSeq(exposition, "\n") {
		if !strings.HasPrefix(line, "cantal_process_num_procs{") {
			continue
		}
		_, rest, _ := strings.Cut(line, "} ")
		v, err := strconv.ParseFloat(strings.Fields(rest + " x")[0], 64)
		if err == nil {
			n += int(v)
		}
	}
	return n
}
