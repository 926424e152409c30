// Package e2e holds the end-to-end tests: they build the real cantal-agent binary and real
// instrumented processes, start them, and assert through the HTTP API.
package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

var bin string // directory of the built binaries

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "cantal-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = dir
	os.Chmod(dir, 0o755) // tests run some binaries as an unprivileged uid
	for _, pkg := range []string{"./cmd/cantal-agent", "./cmd/cantal", "./e2e/testapp", "./examples/rrdd-plugin"} {
		cmd := exec.Command("go", "build", "-o", dir+"/", pkg)
		cmd.Dir = ".."
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "build", pkg, err)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// lockedBuffer collects a process's output for the failure message.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// agent is a running cantal-agent.
type agent struct {
	t        *testing.T
	cmd      *exec.Cmd
	URL      string
	StateDir string
	args     []string
	out      *lockedBuffer
	done     chan error
	// client and the basic-auth user and password, when set, are what get and raw use (an agent
	// with --web-config); by default http.DefaultClient without credentials.
	client     *http.Client
	user, pass string
}

func (a *agent) do(req *http.Request) (*http.Response, error) {
	if a.user != "" {
		req.SetBasicAuth(a.user, a.pass)
	}
	if a.client != nil {
		return a.client.Do(req)
	}
	return http.DefaultClient.Do(req)
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startAgent starts the agent on a free port with a 500 ms interval and a fresh state dir (unless
// args name one), and waits until it has scanned.
func startAgent(t *testing.T, args ...string) *agent {
	t.Helper()
	a := &agent{t: t, StateDir: t.TempDir()}
	addr := freePort(t)
	a.URL = "http://" + addr
	a.args = append([]string{"--listen", addr, "--interval", "500ms", "--state-dir", a.StateDir,
		"--rrdd-dir", t.TempDir(), "--log-level", "debug"}, args...)
	a.start()
	t.Cleanup(func() { a.stop(syscall.SIGKILL) })
	return a
}

func (a *agent) start() {
	a.t.Helper()
	a.out = &lockedBuffer{}
	a.cmd = exec.Command(filepath.Join(bin, "cantal-agent"), a.args...)
	a.cmd.Stdout, a.cmd.Stderr = a.out, a.out
	if err := a.cmd.Start(); err != nil {
		a.t.Fatal(err)
	}
	a.done = make(chan error, 1)
	go func() { a.done <- a.cmd.Wait() }()
	// A readiness wait, not a timing assertion: an agent reloading a large history on a loaded
	// machine can take tens of seconds before its first scan.
	waitFor(a.t, 60*time.Second, func() error {
		var st struct {
			LastScan struct{ Scans int } `json:"last_scan"`
		}
		if err := a.get("/api/v1/status", &st); err != nil {
			return err
		}
		if st.LastScan.Scans < 1 {
			return fmt.Errorf("no scan yet")
		}
		return nil
	})
}

// stop sends sig and waits for the agent to exit.
func (a *agent) stop(sig syscall.Signal) {
	if a.cmd == nil || a.cmd.Process == nil {
		return
	}
	a.cmd.Process.Signal(sig)
	select {
	case <-a.done:
	case <-time.After(20 * time.Second):
		a.cmd.Process.Kill()
		<-a.done
		a.t.Errorf("agent did not stop on %v; output:\n%s", sig, a.out)
	}
	a.cmd = nil
}

// get GETs path and decodes the JSON answer into v; a non-200 answer is an error.
func (a *agent) get(path string, v any) error {
	req, err := http.NewRequest("GET", a.URL+path, nil)
	if err != nil {
		return err
	}
	resp, err := a.do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != 200 {
		return fmt.Errorf("GET %s: %s: %s", path, resp.Status, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("GET %s: %w in %s", path, err, body)
	}
	return nil
}

// raw GETs path and returns the code and body.
func (a *agent) raw(method, path, body string) (int, string) {
	a.t.Helper()
	req, _ := http.NewRequest(method, a.URL+path, bytes.NewBufferString(body))
	resp, err := a.do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Series is the API's series object.
type Series struct {
	Labels map[string]string `json:"labels"`
	Kind   string            `json:"kind"`
	Value  any               `json:"value"`
	TS     int64             `json:"ts"`
	Rate   *float64          `json:"rate"`
	Text   string            `json:"text"`
	Since  int64             `json:"since"`
	Points [][2]float64      `json:"points"`
}

func (a *agent) series(path, match string) ([]Series, error) {
	var ans struct{ Series []Series }
	sep := "?"
	if bytes.ContainsRune([]byte(path), '?') {
		sep = "&"
	}
	err := a.get(path+sep+"match="+url.QueryEscape(match), &ans)
	return ans.Series, err
}

func waitFor(t *testing.T, timeout time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		if err = cond(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("not within %s: %v", timeout, err)
}

// proc is a started helper process.
type proc struct {
	cmd *exec.Cmd
	out *lockedBuffer
}

// startProc starts name with args and extra environment; it is killed at the end of the test.
func startProc(t *testing.T, env []string, cred *syscall.Credential, name string, args ...string) *proc {
	t.Helper()
	p := &proc{out: &lockedBuffer{}}
	p.cmd = exec.Command(name, args...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if cred != nil {
		p.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.kill() })
	return p
}

func (p *proc) pid() string { return strconv.Itoa(p.cmd.Process.Pid) }

func (p *proc) kill() {
	if p.cmd.ProcessState == nil {
		p.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { p.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			p.cmd.Process.Kill()
			<-done
		}
	}
}

func num(v any) float64 {
	switch x := v.(type) {
	case float64:
		return x
	case string:
		f, _ := strconv.ParseFloat(x, 64)
		return f
	}
	return 0
}

func find(ss []Series, metric string) *Series {
	for i := range ss {
		if ss[i].Labels["metric"] == metric {
			return &ss[i]
		}
	}
	return nil
}
