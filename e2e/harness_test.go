// Package e2e holds the end-to-end tests: they build the real cantal-agent binary and real
// instrumented processes, start them, and assert through the HTTP API.
package e2e

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var bin string // directory of the built binaries

// ports is the run's book of handed-out ports (see freePort); set by TestMain.
var ports *portBook

// sched orders the tests (see serial and background); its zero value is ready.
var sched scheduler

// TestMain builds the binaries once for every test. Unless -test.parallel is given, it lets
// every test hold a parallel slot at once: the tests gate themselves (serial, background), and
// a serial test waiting its turn in a slot must not keep a background test from starting.
func TestMain(m *testing.M) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		flag.Set("test.parallel", "1000")
	}
	ports = &portBook{given: map[string]bool{}}
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
	sched.writeTimes(os.Getenv("CANTAL_E2E_TIMES"))
	os.RemoveAll(dir)
	os.Exit(code)
}

// scheduler runs the tests in two lines, with a third kind beside them:
//
//   - background: the few tests that mostly wait (a receiver's outage, an agent down and
//     restarted, a minute of points to gather) start one at a time, beside the lines from
//     their first test on, and leave that line of their own once started: they call
//     background and then its detach, and run on beside the lines and each other. A
//     background test's start (its receivers, its agent's first scans of every process) loads
//     the machine no more than an aside test's.
//   - serial and quiet: most tests assert on what an agent sees of the whole machine, or load
//     it (process churn, busy loops): they run one at a time in the first line, in the order
//     go test starts them (the files' order). A quiet one bets on time (a legitimate request
//     answered within seconds while attackers hold connections, no scan slipping its beat) or
//     compares figures of the whole machine with a tolerance (node_exporter's, a container's
//     CPU against its quota): no aside test runs beside it.
//   - aside: tests that load their own agent hard and assert only on it (its memory, its
//     answers) run one at a time in the second line, beside the serial ones. Their agents run
//     in a PID namespace of their own (startAgentOwnPIDs): the processes other tests start
//     (2000 of TestProcessChurn's) are not in their tables. One that then only waits (memory
//     to be returned after the spike it made) detaches, as a background test does.
//
// The first line takes its tests in order, but while an aside test runs it passes over the
// quiet ones and runs the serial tests after them meanwhile; an aside test starts whenever no
// quiet test runs. So the aside tests cost the first line nothing while serial tests are left;
// the quiet ones passed over run once the first line is free with no aside test running.
//
// From detach (background) or its start (aside) on, a test must own everything it uses: its
// ports (freePort never hands a port out twice, so a receiver stopped for minutes gets its
// port back), its temporary directories, its own receivers (Prometheus, VictoriaMetrics,
// carbon-cache), its agents; it sets no environment variable, measures no CPU or time, and
// asserts only on series and figures of its own agent. A test calling none of them runs alone,
// before all of them (go test runs the non-parallel tests first). Safe for concurrent use.
type scheduler struct {
	mu     sync.Mutex
	lastBG chan struct{} // closed when the last background test in line has detached
	// waiting holds the serial, quiet and aside tests not started yet, in the order they were
	// put in line (the files' order): all of them before any starts (see turn).
	waiting []*lineTest
	// first and second are the tests running in the first line (serial or quiet) and the
	// second (aside); nil when none.
	first, second *lineTest
	// times records each test's time from its turn to its end (what it held its line for).
	times []turnTime
}

// lineKind says which line a test takes, and what may run beside it.
type lineKind int

const (
	kindSerial lineKind = iota
	kindQuiet
	kindAside
)

// lineTest is a test waiting for, or holding, its place in a line.
type lineTest struct {
	kind lineKind
	go_  chan struct{} // closed when the test may start
}

// dispatch starts what may start now: the first line's next test (the first waiting serial or
// quiet test; a quiet one only with no aside test running, else the first serial test after
// it), and the second line's (the first waiting aside test, with no quiet test running). The
// first line is served first: once it is free and an aside test ends, a quiet test waiting
// goes before the next aside test. Called with s.mu held.
func (s *scheduler) dispatch() {
	if s.first == nil {
		for i, w := range s.waiting {
			if w.kind == kindAside || (w.kind == kindQuiet && s.second != nil) {
				continue
			}
			s.first = w
			s.waiting = append(s.waiting[:i:i], s.waiting[i+1:]...)
			close(w.go_)
			break
		}
	}
	if s.second == nil && (s.first == nil || s.first.kind != kindQuiet) {
		for i, w := range s.waiting {
			if w.kind == kindAside {
				s.second = w
				s.waiting = append(s.waiting[:i:i], s.waiting[i+1:]...)
				close(w.go_)
				break
			}
		}
	}
}

// turnTime is one test's time in its line: from when its turn came to when it ended.
type turnTime struct {
	name       string
	start, end time.Time
}

// writeTimes writes, when path is set, the tests' times in their lines, longest first, with
// the run's first turn and last end: what CI prints so the long tests of the serial line show.
func (s *scheduler) writeTimes(path string) {
	if path == "" {
		return
	}
	s.mu.Lock()
	times := append([]turnTime(nil), s.times...)
	s.mu.Unlock()
	sort.Slice(times, func(i, j int) bool { return times[i].end.Sub(times[i].start) > times[j].end.Sub(times[j].start) })
	var b bytes.Buffer
	var first, last time.Time
	for _, tt := range times {
		if first.IsZero() || tt.start.Before(first) {
			first = tt.start
		}
		if tt.end.After(last) {
			last = tt.end
		}
	}
	fmt.Fprintf(&b, "e2e: %d tests in line over %.0f s; time in line, longest first:\n", len(times), last.Sub(first).Seconds())
	for _, tt := range times {
		fmt.Fprintf(&b, "%7.1f s  %s  (from %+.0f s)\n", tt.end.Sub(tt.start).Seconds(), tt.name, tt.start.Sub(first).Seconds())
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "e2e times:", err)
	}
}

// inLine puts t in line (kind serial, quiet or aside) and makes t parallel; it returns once t
// may start (see scheduler), with the func that says t is done (idempotent; called by t's last
// cleanup at the latest). All tests are put in line before any starts: go test calls every
// test up to t.Parallel, one by one, before it resumes any.
func inLine(t *testing.T, kind lineKind) (done func()) {
	t.Helper()
	me := &lineTest{kind: kind, go_: make(chan struct{})}
	sched.mu.Lock()
	sched.waiting = append(sched.waiting, me)
	sched.mu.Unlock()
	t.Parallel()
	sched.mu.Lock()
	sched.dispatch()
	sched.mu.Unlock()
	<-me.go_
	start := time.Now()
	var once sync.Once
	done = func() {
		once.Do(func() {
			sched.mu.Lock()
			sched.times = append(sched.times, turnTime{name: t.Name(), start: start, end: time.Now()})
			if sched.first == me {
				sched.first = nil
			}
			if sched.second == me {
				sched.second = nil
			}
			sched.dispatch()
			sched.mu.Unlock()
		})
	}
	t.Cleanup(done) // registered first, so run last: after t's agents and programs stopped
	return done
}

// serial makes t a test of the first line (see scheduler): it returns once t's turn has
// come; nothing but background and aside tests runs beside it.
func serial(t *testing.T) {
	t.Helper()
	inLine(t, kindSerial)
}

// quiet makes t a test of the first line that runs with no aside test beside it (see
// scheduler): a test that bets on time (answers within seconds, no scan slipping its beat) or
// compares figures of the whole machine with a tolerance (node_exporter's, a container's CPU
// against its quota), which a heavy neighbour would skew.
func quiet(t *testing.T) {
	t.Helper()
	inLine(t, kindQuiet)
}

// aside makes t a test of the second line (see scheduler): it returns once t's turn has come;
// it runs beside the serial tests. A test that
// then only waits (for the agent to return memory) calls the returned detach, and runs on
// beside both lines as a background test does.
func aside(t *testing.T) (detach func()) {
	t.Helper()
	return inLine(t, kindAside)
}

// background makes t a test that starts first, one at a time, and runs beside the lines from
// its call of detach on (see scheduler for what it must own from then on).
func background(t *testing.T) (detach func()) {
	t.Helper()
	mine := make(chan struct{})
	sched.mu.Lock()
	prev := sched.lastBG
	sched.lastBG = mine
	sched.mu.Unlock()
	t.Parallel()
	if prev != nil {
		<-prev
	}
	start := time.Now()
	var once sync.Once
	detach = func() {
		once.Do(func() {
			sched.mu.Lock()
			sched.times = append(sched.times, turnTime{name: t.Name(), start: start, end: time.Now()})
			sched.mu.Unlock()
			close(mine)
		})
	}
	t.Cleanup(detach)
	return detach
}

// outageLength is how long the outage tests (TestRemoteWriteLossless, TestCarbonResendsAfterOutage)
// keep their receivers down: $CANTAL_E2E_OUTAGE (a Go duration, at least 30 s), else 30 s. 30 s
// drives the same code as minutes: the senders reach their longest backoff within seconds,
// retry a dozen times at it, fall behind by the whole outage, and catch up from the history
// afterwards. The long variant (5 minutes, as the suite ran before) is `make test-long`.
func outageLength(t *testing.T) time.Duration {
	t.Helper()
	d := 30 * time.Second
	if v := os.Getenv("CANTAL_E2E_OUTAGE"); v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil || d < 30*time.Second {
			t.Fatalf("CANTAL_E2E_OUTAGE=%q: want a duration of at least 30s (%v)", v, err)
		}
	}
	return d
}

// portBook remembers every port freePort handed out in this run: tests run side by side, and
// a port a test will listen on again (a receiver stopped for an outage, then started on the
// same address) must not be handed to another test meanwhile. Safe for concurrent use.
type portBook struct {
	mu    sync.Mutex
	given map[string]bool // host:port
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
	env        []string // added to the agent's environment
	ownPIDs    bool     // run in a PID namespace of its own (startAgentOwnPIDs)
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

// freePort returns a loopback address free now and never handed out before in this run.
func freePort(t *testing.T) string {
	t.Helper()
	ports.mu.Lock()
	defer ports.mu.Unlock()
	// Listeners stay open until one gives a new port, so the kernel offers another each time.
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for range 1000 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
		if addr := l.Addr().String(); !ports.given[addr] {
			ports.given[addr] = true
			return addr
		}
	}
	t.Fatalf("no port in 1000 that was not handed out before (%d handed out)", len(ports.given))
	return ""
}

// startAgent starts the agent on a free port with a 500 ms interval and a fresh state dir (unless
// args name one), and waits until it has scanned.
func startAgent(t *testing.T, args ...string) *agent {
	t.Helper()
	return newAgent(t, false, args...)
}

// startAgentOwnPIDs is startAgent with the agent in a PID namespace of its own, its /proc
// mounted for it (unshare --pid --fork --mount-proc): it sees itself alone, not the processes
// of the tests running beside it, so its memory and tables are its own doing. Its pid (in the
// test's namespace) is a.pid().
func startAgentOwnPIDs(t *testing.T, args ...string) *agent {
	t.Helper()
	return newAgent(t, true, args...)
}

func newAgent(t *testing.T, ownPIDs bool, args ...string) *agent {
	t.Helper()
	a := &agent{t: t, StateDir: t.TempDir(), ownPIDs: ownPIDs}
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
	if a.ownPIDs {
		// If unshare is killed, so is the agent (--kill-child); stop signals the agent itself.
		a.cmd = exec.Command("unshare", append([]string{"--pid", "--fork", "--mount-proc", "--kill-child=SIGKILL",
			filepath.Join(bin, "cantal-agent")}, a.args...)...)
	}
	a.cmd.Stdout, a.cmd.Stderr = a.out, a.out
	if a.env != nil {
		a.cmd.Env = append(os.Environ(), a.env...)
	}
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

// waitScans waits (up to 30 s: a loaded machine delays scans) until the agent has made n scans
// since it started, where a test needs a few scans behind it (rates, every-5th-scan
// collectors, a scan already taken) rather than betting on a fixed sleep.
func (a *agent) waitScans(n int) {
	a.t.Helper()
	waitFor(a.t, 30*time.Second, func() error {
		var st struct {
			LastScan struct{ Scans int } `json:"last_scan"`
		}
		if err := a.get("/api/v1/status", &st); err != nil {
			return err
		}
		if st.LastScan.Scans < n {
			return fmt.Errorf("%d scans; want %d", st.LastScan.Scans, n)
		}
		return nil
	})
}

// pid is the agent's process id: with ownPIDs, unshare's child, else the process started.
func (a *agent) pid() int {
	a.t.Helper()
	if !a.ownPIDs {
		return a.cmd.Process.Pid
	}
	up := a.cmd.Process.Pid
	var pid int
	waitFor(a.t, 10*time.Second, func() error {
		kids, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", up, up))
		if err != nil {
			return err
		}
		f := strings.Fields(string(kids))
		if len(f) == 0 {
			return fmt.Errorf("unshare (pid %d) has no child", up)
		}
		pid, err = strconv.Atoi(f[0])
		return err
	})
	return pid
}

// stop sends sig to the agent and waits for it to exit.
func (a *agent) stop(sig syscall.Signal) {
	if a.cmd == nil || a.cmd.Process == nil {
		return
	}
	if a.ownPIDs {
		// unshare ignores SIGTERM while it waits: the signal goes to the agent, and unshare
		// exits with it (it is gone already if unshare was killed: then nothing to signal).
		if kids, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", a.cmd.Process.Pid, a.cmd.Process.Pid)); err == nil {
			if f := strings.Fields(string(kids)); len(f) > 0 {
				if pid, err := strconv.Atoi(f[0]); err == nil {
					syscall.Kill(pid, sig)
				}
			}
		}
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
