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

// scheduler runs the tests in a line, one at a time, in the order go test starts them (the
// files' order), with two kinds of tests beside the line:
//
//   - background: the few tests that mostly wait (a receiver's outage, an agent down and
//     restarted, memory to be returned) go first and leave the line once started: they call
//     background and then its detach, and run on beside the line and each other. A background
//     test's start (its receivers, its agent's first scans of every process) is in the line, so
//     it loads the machine no more than a serial test.
//   - aside: tests that load their own agent hard and assert only on it (its memory, its
//     answers) run one at a time in a second line beside the first, in the files' order, from
//     when the background tests have detached. Their agents run in a PID namespace of their
//     own (startAgentOwnPIDs): the processes other tests start (2000 of TestProcessChurn's)
//     are not in their tables.
//
// Most tests assert on what an agent sees of the whole machine, or load it (process churn,
// busy loops), or compare rates and CPU sums with a tolerance: they call serial and keep the
// line to themselves. A serial test that bets on time (a legitimate request answered within
// seconds while attackers hold connections: connection and answer budgets, slow bodies) calls
// quiet instead: it takes its place in both lines, so no aside test runs beside it.
// From detach (background) or its start (aside) on, a test must own everything it uses: its
// ports (freePort never hands a port out twice, so a receiver stopped for minutes gets its
// port back), its temporary directories, its own receivers (Prometheus, VictoriaMetrics,
// carbon-cache), its agents; it sets no environment variable, measures no CPU or time, and
// asserts only on series and figures of its own agent. A test calling none of them runs alone,
// before all of them (go test runs the non-parallel tests first). Safe for concurrent use.
type scheduler struct {
	mu         sync.Mutex
	lastSerial chan struct{} // closed when the last serial test in line has ended
	lastBG     chan struct{} // closed when the last background test in line has detached
	// lastAside is closed when the last test of the second line (aside and quiet tests, in
	// the files' order) has ended: one aside test at a time, none beside a quiet one.
	lastAside chan struct{}
	// times records each test's time from its turn to its end (what it held its line for).
	times []turnTime
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

// turn puts t in one or more lines (each given by its last place) and makes t parallel; it
// returns once the one before t in each line is done and what after returns (nil: nothing) is
// closed, with the func that says t is done (idempotent; called by t's last cleanup at the
// latest). A test waits only for tests put in line before it, so the lines never deadlock.
func turn(t *testing.T, lines []*chan struct{}, after func() chan struct{}) (done func()) {
	t.Helper()
	mine := make(chan struct{})
	var prevs []chan struct{}
	sched.mu.Lock()
	for _, last := range lines {
		prevs = append(prevs, *last)
		*last = mine
	}
	sched.mu.Unlock()
	var once sync.Once
	var start time.Time // set when t's turn comes, before done can be called
	done = func() {
		once.Do(func() {
			sched.mu.Lock()
			sched.times = append(sched.times, turnTime{name: t.Name(), start: start, end: time.Now()})
			sched.mu.Unlock()
			close(mine)
		})
	}
	// go test calls every test up to here, one by one, before it resumes any: the lines are
	// in the files' order and complete when t.Parallel returns.
	t.Parallel()
	for _, c := range append(prevs, after()) {
		if c != nil {
			<-c
		}
	}
	start = time.Now()
	t.Cleanup(done) // registered first, so run last: after t's agents and programs stopped
	return done
}

// detached returns the channel closed once the last background test has detached.
func detached() chan struct{} {
	sched.mu.Lock()
	defer sched.mu.Unlock()
	return sched.lastBG
}

// serial makes t one of the tests that run one at a time: it returns once the background
// tests have detached and the serial test before t has ended, its cleanups included.
func serial(t *testing.T) {
	t.Helper()
	turn(t, []*chan struct{}{&sched.lastSerial}, detached)
}

// quiet makes t a serial test that runs with no aside test beside it (see scheduler): a test
// that bets on time, whose figures a heavy neighbour would skew. It takes its place in both
// lines, in the files' order.
func quiet(t *testing.T) {
	t.Helper()
	turn(t, []*chan struct{}{&sched.lastSerial, &sched.lastAside}, detached)
}

// aside makes t a test of the second line (see scheduler): it returns once the background
// tests have detached and the test before t in the second line (an aside or a quiet one) has
// ended; t runs beside the serial ones.
//
// For now an aside test also takes its place in the serial line, as a quiet one does: beside
// the serial line, on 2 cores, the aside tests' load made serial tests that compare with the
// whole machine miss (CI at e44c9ab: node_cpu_seconds_total 0.2 s apart, a process missing
// from a --no-bpf scan), so the second line stays in the scheduler but runs nothing beside.
func aside(t *testing.T) {
	t.Helper()
	turn(t, []*chan struct{}{&sched.lastSerial, &sched.lastAside}, detached)
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

// background makes t a test that starts first, one at a time, and runs beside the serial
// ones from its call of detach on (see scheduler for what it must own from then on).
func background(t *testing.T) (detach func()) {
	t.Helper()
	return turn(t, []*chan struct{}{&sched.lastBG}, func() chan struct{} { return nil })
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
