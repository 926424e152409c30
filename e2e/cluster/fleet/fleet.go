// Package fleet runs a cluster of real cantal-agent processes, one per network namespace of a
// netns lab (permanent neighbour entries, so it scales to 150 hosts on one machine), for the
// multi-node tests (e2e/cluster, small N) and the fleet benchmark (bench, large N). It starts the
// agents joined by --peer flags, waits for scans and for membership, queries any node from
// inside its own namespace, partitions and heals the lab, and reads each agent's CPU time,
// memory and log lines from /proc.
//
// It needs root and iproute2 (scripts/install-deps.sh). A Fleet's methods are safe for
// concurrent use; Close tears everything down (agents, namespaces).
package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cantal-go/cantal/internal/apiwire"
	"github.com/cantal-go/cantal/internal/testsupport/netns"
)

// Port is the agents' HTTP and gossip port.
const Port = "22682"

// Build compiles cmd/cantal-agent of the module rooted at root into dir and returns its path.
func Build(ctx context.Context, root, dir string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", dir+string(os.PathSeparator), "./cmd/cantal-agent")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("fleet: build cantal-agent: %w: %s", err, bytes.TrimSpace(out))
	}
	return filepath.Join(dir, "cantal-agent"), nil
}

// Options configures a Fleet.
type Options struct {
	Agent    string        // the cantal-agent binary (Build)
	N        int           // nodes, 1 to 254
	Subnet   string        // the lab's /24, e.g. "10.77.20"
	Interval time.Duration // the agents' --interval (default 1s)
	LogLevel string        // the agents' --log-level (default info)
	// Seeds is how many of the first nodes every agent gets as --peer (default 3; node i
	// never gets itself).
	Seeds int
	// StartGap is the pause between two agents' starts (default 20 ms), so that 150 first
	// scans of the whole machine do not all run at once.
	StartGap time.Duration
	// Dir holds the agents' state and rrdd directories (default: a new temporary one,
	// removed by Close).
	Dir string
	// Extra arguments for every agent.
	Extra []string
	// FirstExtra are more arguments for node 1 only, the answering node of a Scenario (e.g.
	// --log-level debug to see where its first query's time goes).
	FirstExtra []string
	// OwnPIDs runs each agent in a PID namespace of its own (unshare --pid --mount-proc), so
	// that it scans its own host's processes (itself) instead of each of N agents scanning
	// the whole shared machine's (1100 processes here): the machine-wide scan cost would
	// otherwise grow as N × processes and drown what the cluster itself costs.
	OwnPIDs bool
}

// Fleet is a running cluster of agents.
type Fleet struct {
	Lab   *netns.Lab
	Nodes []*Node
	opts  Options
	dir   string
	tmp   bool
}

// Node is one agent of a Fleet.
type Node struct {
	Name  string // --node-name: n001, n002, ...
	Host  *netns.Host
	Proc  *netns.Proc
	URL   string // http://IP:Port
	Gaddr string // IP:Port
	args  []string
	tr    *http.Transport
	hc    *http.Client
}

// Start builds a lab of opts.N hosts and starts one agent in each. The agents are joined by
// their --peer flags (the first Seeds nodes); Start does not wait for anything (see
// WaitScanned and WaitMembers). On error what was started is torn down.
func Start(ctx context.Context, opts Options) (*Fleet, error) {
	if opts.Interval <= 0 {
		opts.Interval = time.Second
	}
	if opts.LogLevel == "" {
		opts.LogLevel = "info"
	}
	if opts.Seeds <= 0 {
		opts.Seeds = 3
	}
	if opts.StartGap <= 0 {
		opts.StartGap = 20 * time.Millisecond
	}
	f := &Fleet{opts: opts, dir: opts.Dir}
	if f.dir == "" {
		d, err := os.MkdirTemp("", "cantal-fleet")
		if err != nil {
			return nil, fmt.Errorf("fleet: %w", err)
		}
		f.dir, f.tmp = d, true
	}
	lab, err := netns.New(ctx, opts.N, netns.Options{Subnet: opts.Subnet})
	if err != nil {
		f.Close()
		return nil, err
	}
	f.Lab = lab
	hosts := lab.Hosts()
	for i, h := range hosts {
		n := &Node{Name: fmt.Sprintf("n%03d", i+1), Host: h, Gaddr: net.JoinHostPort(h.IP, Port)}
		n.URL = "http://" + n.Gaddr
		n.tr = &http.Transport{DialContext: n.Dial, MaxIdleConnsPerHost: 2, IdleConnTimeout: 30 * time.Second}
		n.hc = &http.Client{Transport: n.tr, Timeout: 30 * time.Second}
		f.Nodes = append(f.Nodes, n)
	}
	for i, n := range f.Nodes {
		state := filepath.Join(f.dir, n.Name)
		rrdd := filepath.Join(state, "rrdd")
		if err := os.MkdirAll(rrdd, 0o755); err != nil {
			f.Close()
			return nil, fmt.Errorf("fleet: %w", err)
		}
		args := []string{
			"--listen", n.Gaddr + "," + net.JoinHostPort("127.0.0.1", Port),
			"--cluster-name", "fleet",
			"--node-name", n.Name,
			"--interval", opts.Interval.String(),
			"--state-dir", state,
			"--rrdd-dir", rrdd,
			"--log-level", opts.LogLevel,
		}
		for s := 0; s < min(opts.Seeds, len(f.Nodes)); s++ {
			if s != i {
				args = append(args, "--peer", f.Nodes[s].Gaddr)
			}
		}
		args = append(args, opts.Extra...)
		if i == 0 {
			args = append(args, opts.FirstExtra...)
		}
		n.args = args
		p, err := f.start(n)
		if err != nil {
			f.Close()
			return nil, err
		}
		n.Proc = p
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(opts.StartGap):
		}
	}
	return f, nil
}

// start starts n's agent.
func (f *Fleet) start(n *Node) (*netns.Proc, error) {
	if !f.opts.OwnPIDs {
		return n.Host.Start(f.opts.Agent, n.args...)
	}
	// unshare ignores SIGTERM while it waits, so a stop reaches the agent (same process
	// group) alone; if unshare is killed, so is the agent.
	return n.Host.Start("unshare", append([]string{"--pid", "--fork", "--mount-proc", "--kill-child=SIGKILL", f.opts.Agent}, n.args...)...)
}

// Pid returns the agent's process id (with OwnPIDs, the child of unshare), or 0 once it has
// exited.
func (n *Node) Pid() int {
	pid := n.Proc.Pid()
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		return 0
	}
	if strings.TrimSpace(string(comm)) != "unshare" {
		return pid
	}
	for try := 0; try < 50; try++ {
		kids, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
		if f := strings.Fields(string(kids)); len(f) > 0 {
			child, _ := strconv.Atoi(f[0])
			return child
		}
		time.Sleep(20 * time.Millisecond)
	}
	return 0
}

// Restart stops n's agent with SIGTERM (it says goodbye to its peers), calls gone (nil: none)
// once it has exited, and starts it again with the same arguments and state. It returns when
// the new agent was started.
func (f *Fleet) Restart(ctx context.Context, n *Node, gone func() error) (time.Time, error) {
	n.Proc.Stop(30 * time.Second)
	if gone != nil {
		if err := gone(); err != nil {
			return time.Time{}, err
		}
	}
	started := time.Now()
	p, err := f.start(n)
	if err != nil {
		return started, err
	}
	n.Proc = p
	return started, nil
}

// Interval is the agents' scan interval.
func (f *Fleet) Interval() time.Duration { return f.opts.Interval }

// Close stops every agent and deletes the lab (and the temporary directory).
func (f *Fleet) Close() error {
	var err error
	for _, n := range f.Nodes {
		n.tr.CloseIdleConnections()
	}
	if f.Lab != nil {
		err = f.Lab.Close()
	}
	if f.tmp {
		os.RemoveAll(f.dir)
	}
	return err
}

// Each runs fn for every node, at most par at once, and returns the errors joined.
func Each(nodes []*Node, par int, fn func(n *Node) error) error {
	sem := make(chan struct{}, max(1, par))
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := fn(n); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Poll calls cond every step until it returns nil and returns how long that took, or cond's
// last error once timeout has passed.
func Poll(ctx context.Context, timeout, step time.Duration, cond func() error) (time.Duration, error) {
	start := time.Now()
	for {
		err := cond()
		if err == nil {
			return time.Since(start), nil
		}
		if time.Since(start) > timeout {
			return time.Since(start), fmt.Errorf("not within %s: %w", timeout, err)
		}
		select {
		case <-ctx.Done():
			return time.Since(start), ctx.Err()
		case <-time.After(step):
		}
	}
}

// WaitScanned waits until every agent has scanned once (an agent that exited is an error).
func (f *Fleet) WaitScanned(ctx context.Context, timeout time.Duration) (time.Duration, error) {
	return Poll(ctx, timeout, 200*time.Millisecond, func() error {
		return Each(f.Nodes, 16, func(n *Node) error {
			select {
			case <-n.Proc.Done():
				return fmt.Errorf("agent %s exited: %v\n%s", n.Name, n.Proc.Err(), Tail(n.Proc.Output(), 20))
			default:
			}
			var st struct {
				LastScan struct{ Scans int } `json:"last_scan"`
			}
			if err := n.Get(ctx, "/api/v1/status", &st); err != nil {
				return err
			}
			if st.LastScan.Scans < 1 {
				return fmt.Errorf("%s: no scan yet", n.Name)
			}
			return nil
		})
	})
}

// LastJoined returns, over the views of the nodes of viewers, the latest time one of peers
// became a member (alive or suspect) as each viewer recorded it (GET /api/v1/peers' since), to
// the millisecond whatever the polling: once every viewer lists every one of peers as a
// member, that is when the last of them arrived. It fails if a viewer does not.
func LastJoined(ctx context.Context, viewers, peers []*Node) (time.Time, error) {
	var mu sync.Mutex
	var last int64
	err := Each(viewers, 16, func(n *Node) error {
		var ans apiwire.PeersAnswer
		if err := n.Get(ctx, "/api/v1/peers", &ans); err != nil {
			return err
		}
		by := map[string]apiwire.Peer{}
		for _, p := range ans.Peers {
			by[p.Name] = p
		}
		mu.Lock()
		defer mu.Unlock()
		for _, o := range peers {
			if o == n {
				continue
			}
			p := by[o.Name]
			if !member(p.Status) {
				return fmt.Errorf("%s sees %s as %q", n.Name, o.Name, p.Status)
			}
			last = max(last, p.Since)
		}
		return nil
	})
	return time.UnixMilli(last), err
}

// member reports whether a peer status is membership: alive, or suspect (a probe failed and
// it has not refuted yet; memberlist still counts it, and a loaded machine makes many).
func member(status string) bool { return status == "alive" || status == "suspect" }

// Peers returns the node's peers' statuses by name.
func (n *Node) Peers(ctx context.Context) (map[string]string, error) {
	var ans apiwire.PeersAnswer
	if err := n.Get(ctx, "/api/v1/peers", &ans); err != nil {
		return nil, err
	}
	out := make(map[string]string, len(ans.Peers))
	for _, p := range ans.Peers {
		out[p.Name] = p.Status
	}
	return out, nil
}

// KnowsAlive reports nil when n lists every node of want (but itself) as a member (alive or
// suspect), and none of notAlive as one.
func (n *Node) KnowsAlive(ctx context.Context, want, notAlive []*Node) error {
	st, err := n.Peers(ctx)
	if err != nil {
		return err
	}
	var bad []string
	for _, o := range want {
		if o != n && !member(st[o.Name]) {
			bad = append(bad, o.Name+"="+st[o.Name])
		}
	}
	for _, o := range notAlive {
		if member(st[o.Name]) {
			bad = append(bad, o.Name+" "+st[o.Name])
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return fmt.Errorf("%s: %d wrong: %s", n.Name, len(bad), strings.Join(bad[:min(len(bad), 5)], " "))
	}
	return nil
}

// AllKnow reports nil when every node of nodes lists every other of nodes as a member (alive
// or suspect) and none of notAlive as one.
func AllKnow(ctx context.Context, nodes, notAlive []*Node) error {
	return Each(nodes, 16, func(n *Node) error { return n.KnowsAlive(ctx, nodes, notAlive) })
}

// Get GETs path at the node (from inside its namespace) and decodes the JSON answer into v.
func (n *Node) Get(ctx context.Context, path string, v any) error {
	_, err := n.get(ctx, path, v)
	return err
}

func (n *Node) get(ctx context.Context, path string, v any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", n.URL+path, nil)
	if err != nil {
		return 0, err
	}
	resp, err := n.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return len(body), err
	}
	if resp.StatusCode != http.StatusOK {
		return len(body), fmt.Errorf("GET %s at %s: %s: %s", path, n.Name, resp.Status, bytes.TrimSpace(body))
	}
	if err := json.Unmarshal(body, v); err != nil {
		return len(body), fmt.Errorf("GET %s at %s: %w", path, n.Name, err)
	}
	return len(body), nil
}

// NodeAnswer is one node's part of a cluster answer.
// Either route's series decode into apiwire.HistorySeries (labels and kind; /metrics' values
// are not read).
type NodeAnswer struct {
	apiwire.NodeHead
	Series []apiwire.HistorySeries `json:"series"`
}

// Answer is a cluster answer with how long it took and how many bytes it was.
type Answer struct {
	Nodes map[string]NodeAnswer
	Took  time.Duration // at the client: from the request until the answer is decoded
	Bytes int
	// At the node, from its Server-Timing header: the whole answer (Server) and the hub's
	// query within it (Peers); -1 when the header is missing.
	Server, Peers time.Duration
}

// Cluster GETs a cluster route (/api/v1/cluster/metrics or /history) for match with extra
// key, value parameters.
func (n *Node) Cluster(ctx context.Context, route, match string, extra ...string) (Answer, error) {
	q := url.Values{"match": {match}}
	for i := 0; i+1 < len(extra); i += 2 {
		q.Set(extra[i], extra[i+1])
	}
	var ans struct{ Nodes []NodeAnswer }
	start := time.Now()
	a := Answer{Server: -1, Peers: -1, Nodes: map[string]NodeAnswer{}}
	req, err := http.NewRequestWithContext(ctx, "GET", n.URL+route+"?"+q.Encode(), nil)
	if err != nil {
		return a, err
	}
	resp, err := n.hc.Do(req)
	if err != nil {
		a.Took = time.Since(start)
		return a, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	a.Bytes = len(body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s at %s: %s: %s", route, n.Name, resp.Status, bytes.TrimSpace(body))
	}
	if err == nil {
		if err = json.Unmarshal(body, &ans); err != nil {
			err = fmt.Errorf("GET %s at %s: %w", route, n.Name, err)
		}
	}
	a.Took = time.Since(start)
	a.Server, a.Peers = serverTiming(resp.Header.Get("Server-Timing"))
	if err != nil {
		return a, err
	}
	for _, na := range ans.Nodes {
		a.Nodes[na.Node] = na
	}
	return a, nil
}

// Profile writes the agent's CPU profile over the next d to file (the agent must run with
// --pprof; asked over its loopback listener, which has the write role).
func (n *Node) Profile(ctx context.Context, file string, d time.Duration) error {
	u := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", net.JoinHostPort("127.0.0.1", Port), int(d.Seconds()))
	req, err := http.NewRequestWithContext(ctx, "GET", u, nil)
	if err != nil {
		return err
	}
	resp, err := n.hc.Do(req)
	if err != nil {
		return fmt.Errorf("profile of %s: %w", n.Name, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s", resp.Status)
	}
	if err != nil {
		return fmt.Errorf("profile of %s: %w", n.Name, err)
	}
	return os.WriteFile(file, body, 0o644)
}

// serverTiming reads the total and peers durations of a cluster answer's Server-Timing header
// (-1 for those missing).
func serverTiming(h string) (total, peers time.Duration) {
	total, peers = -1, -1
	for _, m := range strings.Split(h, ",") {
		name, dur, ok := strings.Cut(strings.TrimSpace(m), ";dur=")
		if !ok {
			continue
		}
		ms, err := strconv.ParseFloat(dur, 64)
		if err != nil {
			continue
		}
		d := time.Duration(ms * float64(time.Millisecond))
		switch name {
		case "total":
			total = d
		case "peers":
			peers = d
		}
	}
	return total, peers
}

// NotOK returns the names of the nodes of want whose status in a is not ok (or that are
// missing), sorted.
func (a Answer) NotOK(want []*Node) []string {
	var out []string
	for _, n := range want {
		if na, ok := a.Nodes[n.Name]; !ok || na.Status != "ok" {
			out = append(out, n.Name)
		}
	}
	sort.Strings(out)
	return out
}

// Unreachable returns the names of the nodes of want whose status in a is unreachable (or
// that are missing), sorted.
func (a Answer) Unreachable(want []*Node) []string {
	var out []string
	for _, n := range want {
		if na, ok := a.Nodes[n.Name]; !ok || na.Status == "unreachable" {
			out = append(out, n.Name)
		}
	}
	sort.Strings(out)
	return out
}

// Dial opens a connection from inside the node's network namespace.
func (n *Node) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	return DialIn(ctx, n.Host.NS, network, addr)
}

// DialIn dials addr with a socket made inside the named network namespace: on a thread that
// joins the namespace and is put back into its own before it is unlocked (a socket keeps its
// namespace, so it works from any goroutine afterwards). The thread is never left to die in
// the wrong namespace: netns starts agents with Pdeathsig, which fires when the thread that
// forked them ends.
func DialIn(ctx context.Context, ns, network, addr string) (net.Conn, error) {
	type result struct {
		c   net.Conn
		err error
	}
	res := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		self, err := unix.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			res <- result{nil, fmt.Errorf("open own namespace: %w", err)}
			return
		}
		defer unix.Close(self)
		target, err := unix.Open(filepath.Join("/run/netns", ns), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			res <- result{nil, fmt.Errorf("open namespace %s: %w", ns, err)}
			return
		}
		err = unix.Setns(target, unix.CLONE_NEWNET)
		unix.Close(target)
		if err != nil {
			runtime.UnlockOSThread()
			res <- result{nil, fmt.Errorf("enter namespace %s: %w", ns, err)}
			return
		}
		var d net.Dialer
		c, derr := d.DialContext(ctx, network, addr)
		if err := unix.Setns(self, unix.CLONE_NEWNET); err != nil {
			if c != nil {
				c.Close()
			}
			res <- result{nil, fmt.Errorf("leave namespace %s: %w", ns, err)} // the thread stays locked and dies
			return
		}
		runtime.UnlockOSThread()
		res <- result{c, derr}
	}()
	r := <-res
	return r.c, r.err
}

// Usage is an agent's CPU time (user + system, all threads) and resident memory.
type Usage struct {
	CPU time.Duration
	RSS int64 // bytes
}

// Usage reads the agent's CPU time and RSS from /proc.
func (n *Node) Usage() (Usage, error) {
	pid := n.Pid()
	if pid == 0 {
		return Usage{}, fmt.Errorf("agent %s is not running", n.Name)
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return Usage{}, err
	}
	// Fields after the command name (which may hold spaces) in parentheses.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return Usage{}, fmt.Errorf("/proc/%d/stat: no command", pid)
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 22 {
		return Usage{}, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	rss, err3 := strconv.ParseInt(f[21], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return Usage{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	const hz = 100 // USER_HZ on Linux
	return Usage{CPU: time.Duration(utime+stime) * time.Second / hz, RSS: rss * int64(os.Getpagesize())}, nil
}

// SchedCPU returns the CPU time the agent's threads have run so far, in nanoseconds (the first
// field of each /proc/PID/task/TID/schedstat), for spans too short for Usage's 10 ms ticks.
// Threads that have exited are not counted (the Go runtime keeps its threads).
func (n *Node) SchedCPU() (time.Duration, error) {
	run, _, err := n.Sched()
	return run, err
}

// Sched returns how long the agent's threads have run and how long they have waited on a run
// queue (runnable, not running) so far, summed over the threads (schedstat, as SchedCPU).
func (n *Node) Sched() (run, wait time.Duration, err error) {
	pid := n.Pid()
	if pid == 0 {
		return 0, 0, fmt.Errorf("agent %s is not running", n.Name)
	}
	return schedstat(pid)
}

// SelfSched is Sched for this process (the test or benchmark that runs the fleet).
func SelfSched() (run, wait time.Duration, err error) { return schedstat(os.Getpid()) }

func schedstat(pid int) (run, wait time.Duration, err error) {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, t := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", pid, t.Name()))
		if err != nil {
			continue // exited meanwhile
		}
		f := strings.Fields(string(b))
		if len(f) < 2 {
			continue
		}
		r, err1 := strconv.ParseInt(f[0], 10, 64)
		w, err2 := strconv.ParseInt(f[1], 10, 64)
		if err := errors.Join(err1, err2); err != nil {
			return 0, 0, fmt.Errorf("pid %d schedstat: %w", pid, err)
		}
		run += time.Duration(r)
		wait += time.Duration(w)
	}
	return run, wait, nil
}

// LogLines returns how many lines the agent has written so far.
func (n *Node) LogLines() int { return strings.Count(n.Proc.Output(), "\n") }

// Tail returns the last lines of s.
func Tail(s string, lines int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return strings.Join(l, "\n")
}

// Quantile returns the q-quantile (0..1) of ds (a sorted copy's).
func Quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	ds = append([]time.Duration(nil), ds...)
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[min(len(ds)-1, int(q*float64(len(ds))))]
}

// LoadAvg returns the machine's 1-minute load average.
func LoadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	v, _ := strconv.ParseFloat(strings.Fields(string(b))[0], 64)
	return v
}
