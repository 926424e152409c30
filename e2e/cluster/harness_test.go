// Package cluster holds the multi-node end-to-end tests of issue 6: real cantal-agent binaries,
// one per network namespace (package internal/testsupport/netns: veth pairs into a bridge), joined by
// gossip, queried through the HTTP and WebSocket APIs while links are cut, healed, made lossy
// and agents killed. They need root and iproute2 (scripts/install-deps.sh); without them
// they fail, never skip.
//
// The test process stays in the root network namespace, which the labs never touch; it reaches
// an agent by creating its sockets inside that agent's namespace (see dialIn), so a node is
// observable from "its own host" even while its cable is cut.
//
// The tests run two at a time (each calls t.Parallel; go test's -parallel is GOMAXPROCS): each
// owns its lab (namespaces named from a random id, a /24 of its own, permanent neighbour
// entries, so the kernel's shared neighbour table does not overflow) and its agents; none sets
// the environment or measures the machine.
package cluster

import (
	"bufio"
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
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cantal-go/cantal/internal/apiwire"
	"github.com/cantal-go/cantal/internal/testsupport/netns"
)

// agentBin is the cantal-agent binary built by TestMain.
var agentBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "cantal-e2e-cluster")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Chmod(dir, 0o755)
	cmd := exec.Command("go", "build", "-o", dir+"/", "./cmd/cantal-agent")
	cmd.Dir = "../.."
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build ./cmd/cantal-agent:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	agentBin = filepath.Join(dir, "cantal-agent")
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

const (
	port     = "22682"
	interval = time.Second // the agents' --interval
)

// node is one host of a lab running one agent.
type node struct {
	name  string // --node-name: "a", "b", ...
	host  *netns.Host
	proc  *netns.Proc
	url   string // http://IP:22682
	gaddr string // gossip address IP:22682
	state string // --state-dir
	// local is the agent's loopback URL (http://127.0.0.1:22682, reached inside its own
	// namespace) when it listens there too: without a web config only loopback clients may
	// write, so addPeer posts there; "" for agents that do not.
	local string
	hc    *http.Client
	tr    *http.Transport
	// rxBytes and txBytes count what the test's own connections read and wrote.
	rxBytes, txBytes atomic.Int64
}

// newLab builds a lab of n hosts; a missing `ip netns` (or root) fails the test with the reason.
func newLab(t *testing.T, n int, subnet string) *netns.Lab {
	t.Helper()
	if err := netns.Available(); err != nil {
		t.Fatalf("multi-node tests need network namespaces (run as root with iproute2; see scripts/install-deps.sh): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lab, err := netns.New(ctx, n, netns.Options{Subnet: subnet})
	if err != nil {
		t.Fatalf("building a %d-host lab: %v", n, err)
	}
	t.Cleanup(func() {
		if err := lab.Close(); err != nil {
			t.Errorf("lab teardown: %v", err)
		}
	})
	return lab
}

// startNodes starts one agent per host of lab, named "a", "b", ..., with --cluster-name test,
// and waits until each has scanned. No --peer: the tests join them through the API.
func startNodes(t *testing.T, lab *netns.Lab) []*node {
	t.Helper()
	return startNodesOn(t, lab.Hosts())
}

// startNodesOn is startNodes on the given hosts, each agent with the extra arguments too.
func startNodesOn(t *testing.T, hosts []*netns.Host, extra ...string) []*node {
	t.Helper()
	var nodes []*node
	for i, h := range hosts {
		n := &node{name: string(rune('a' + i)), host: h, url: "http://" + net.JoinHostPort(h.IP, port),
			gaddr: net.JoinHostPort(h.IP, port), state: t.TempDir()}
		n.tr = &http.Transport{DialContext: n.dial, MaxIdleConnsPerHost: 4, IdleConnTimeout: 30 * time.Second}
		n.hc = &http.Client{Transport: n.tr, Timeout: 15 * time.Second}
		t.Cleanup(n.tr.CloseIdleConnections)
		n.local = "http://" + net.JoinHostPort("127.0.0.1", port)
		args := []string{
			"--listen", n.gaddr + "," + net.JoinHostPort("127.0.0.1", port),
			"--cluster-name", "test",
			"--node-name", n.name,
			"--interval", interval.String(),
			"--state-dir", n.state,
			"--rrdd-dir", t.TempDir(),
			"--log-level", "debug",
		}
		p, err := h.Start(agentBin, append(args, extra...)...)
		if err != nil {
			t.Fatal(err)
		}
		n.proc = p
		nodes = append(nodes, n)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range nodes {
				t.Logf("agent %s (%s) output, last 40 lines:\n%s", n.name, n.host.IP, tail(n.proc.Output(), 40))
			}
		}
	})
	// The first scan reads every process of the machine, five agents at once: on a loaded
	// 2-core CI machine that has taken 20 s.
	for _, n := range nodes {
		waitFor(t, time.Minute, func() error {
			select {
			case <-n.proc.Done():
				return fmt.Errorf("agent %s exited: %v\n%s", n.name, n.proc.Err(), n.proc.Output())
			default:
			}
			var st struct {
				LastScan struct{ Scans int } `json:"last_scan"`
			}
			if err := n.get("/api/v1/status", &st); err != nil {
				return err
			}
			if st.LastScan.Scans < 1 {
				return errors.New("no scan yet")
			}
			return nil
		})
	}
	return nodes
}

func tail(s string, lines int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return strings.Join(l, "\n")
}

// dial opens a connection from inside the node's network namespace, counting its bytes.
func (n *node) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := dialIn(ctx, n.host.NS, network, addr)
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, rx: &n.rxBytes, tx: &n.txBytes}, nil
}

// dialIn dials addr with a socket made inside the named network namespace (see inNS).
func dialIn(ctx context.Context, ns, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := inNS(ns, func() error {
		var d net.Dialer
		var err error
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// inNS runs f on a thread that has joined the named network namespace, so that sockets f
// makes live there; a socket keeps its namespace, so it works from any goroutine afterwards.
// The thread is put back into its own namespace before it is unlocked. It must never be left
// to die instead (what the runtime does with a thread whose goroutine exits locked): netns
// starts the agents with Pdeathsig, which Linux fires when the *thread* that forked them ends,
// and any thread may have forked one.
func inNS(ns string, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		self, err := unix.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("open own namespace: %w", err)
			return
		}
		defer unix.Close(self)
		target, err := unix.Open(filepath.Join("/run/netns", ns), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("open namespace %s: %w", ns, err)
			return
		}
		err = unix.Setns(target, unix.CLONE_NEWNET)
		unix.Close(target)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("enter namespace %s: %w", ns, err)
			return
		}
		ferr := f()
		if err := unix.Setns(self, unix.CLONE_NEWNET); err != nil {
			// The thread stays locked and dies with this goroutine rather than being reused
			// in the wrong namespace.
			errc <- errors.Join(ferr, fmt.Errorf("leave namespace %s: %w", ns, err))
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// countingConn counts the bytes read and written through a connection.
type countingConn struct {
	net.Conn
	rx, tx *atomic.Int64
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.rx.Add(int64(n))
	return n, err
}

func (c *countingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.tx.Add(int64(n))
	return n, err
}

// get GETs path at the node and decodes the JSON answer into v; a non-200 answer is an error.
func (n *node) get(path string, v any) error {
	resp, err := n.hc.Get(n.url + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s at %s: %s: %s", path, n.name, resp.Status, bytes.TrimSpace(body))
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("GET %s at %s: %w in %s", path, n.name, err, body)
	}
	return nil
}

// addPeer asks the node to join addr (POST /api/v1/peers), on its loopback listener when it
// has one (a write, which an agent without a web config takes from loopback only).
func (n *node) addPeer(addr string) error {
	body, _ := json.Marshal(map[string]string{"addr": addr})
	base := n.url
	if n.local != "" {
		base = n.local
	}
	resp, err := n.hc.Post(base+"/api/v1/peers", "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("POST /api/v1/peers at %s: %s: %s", n.name, resp.Status, bytes.TrimSpace(b))
	}
	return nil
}

// peer is an entry of GET /api/v1/peers.
type peer struct {
	ID     string   `json:"id"`
	Name   string   `json:"name"`
	Addr   string   `json:"addr"`
	HTTP   string   `json:"http"`
	Status string   `json:"status"`
	RTTMs  *float64 `json:"rtt_ms"`
}

func (n *node) peers() ([]peer, error) {
	var ans struct{ Peers []peer }
	err := n.get("/api/v1/peers", &ans)
	return ans.Peers, err
}

// peerStatus returns the status of every peer the node lists, by name.
func (n *node) peerStatus() (map[string]string, error) {
	ps, err := n.peers()
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, p := range ps {
		out[p.Name] = p.Status
	}
	return out, nil
}

// allKnowAll reports nil when every node in nodes lists every other one as alive.
func allKnowAll(nodes []*node) error {
	var problems []string
	for _, n := range nodes {
		st, err := n.peerStatus()
		if err != nil {
			return err
		}
		for _, o := range nodes {
			if o != n && st[o.name] != "alive" {
				problems = append(problems, fmt.Sprintf("%s sees %s as %q", n.name, o.name, st[o.name]))
			}
		}
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

// clusterNode is one node of a cluster answer, as apiwire decodes it.
type clusterNode interface {
	apiwire.ClusterMetricsNode | apiwire.ClusterHistoryNode
}

// headOf returns a cluster answer's node head and how many series it has.
func headOf[N clusterNode](cn N) (apiwire.NodeHead, int) {
	switch v := any(cn).(type) {
	case apiwire.ClusterMetricsNode:
		return v.NodeHead, len(v.Series)
	case apiwire.ClusterHistoryNode:
		return v.NodeHead, len(v.Series)
	}
	panic("headOf: not a cluster node")
}

// clusterMetrics GETs /api/v1/cluster/metrics and returns its nodes by name, and how long the
// request took.
func (n *node) clusterMetrics(match string, extra ...string) (map[string]apiwire.ClusterMetricsNode, time.Duration, error) {
	var ans apiwire.ClusterMetricsAnswer
	return clusterNodes(n, "/api/v1/cluster/metrics", match, extra, &ans, &ans.Nodes)
}

// clusterHistory GETs /api/v1/cluster/history, as clusterMetrics.
func (n *node) clusterHistory(match string, extra ...string) (map[string]apiwire.ClusterHistoryNode, time.Duration, error) {
	var ans apiwire.ClusterHistoryAnswer
	return clusterNodes(n, "/api/v1/cluster/history", match, extra, &ans, &ans.Nodes)
}

// clusterNodes GETs route into ans and returns *nodes (ans's node list) by name.
func clusterNodes[N clusterNode](n *node, route, match string, extra []string, ans any, nodes *[]N) (map[string]N, time.Duration, error) {
	took, err := n.clusterGet(route, match, extra, ans)
	if err != nil {
		return nil, took, err
	}
	out, err := byNode(n, route, *nodes)
	return out, took, err
}

// clusterGet GETs a cluster route with match and the extra name, value pairs into ans.
func (n *node) clusterGet(route, match string, extra []string, ans any) (time.Duration, error) {
	q := url.Values{"match": {match}}
	for i := 0; i+1 < len(extra); i += 2 {
		q.Set(extra[i], extra[i+1])
	}
	start := time.Now()
	err := n.get(route+"?"+q.Encode(), ans)
	return time.Since(start), err
}

// byNode returns a cluster answer's nodes by name; a node listed twice is an error.
func byNode[N clusterNode](n *node, route string, nodes []N) (map[string]N, error) {
	out := map[string]N{}
	for _, cn := range nodes {
		h, _ := headOf(cn)
		if _, dup := out[h.Node]; dup {
			return nil, fmt.Errorf("%s at %s: node %q listed twice", route, n.name, h.Node)
		}
		out[h.Node] = cn
	}
	return out, nil
}

// summary formats a cluster answer's statuses for messages.
func summary[N clusterNode](ans map[string]N) string {
	var parts []string
	for name, cn := range ans {
		h, n := headOf(cn)
		s := fmt.Sprintf("%s=%s(%d series)", name, h.Status, n)
		if h.Error != "" {
			s += "[" + h.Error + "]"
		}
		parts = append(parts, s)
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

// netDev returns eth0's received and transmitted bytes in the namespace of process pid.
func netDev(pid int) (rx, tx int64, err error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/net/dev", pid))
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || strings.TrimSpace(name) != "eth0" {
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 9 {
			return 0, 0, fmt.Errorf("/proc/%d/net/dev: short eth0 line %q", pid, sc.Text())
		}
		rx, err1 := strconv.ParseInt(f[0], 10, 64)
		tx, err2 := strconv.ParseInt(f[8], 10, 64)
		if err := errors.Join(err1, err2); err != nil {
			return 0, 0, fmt.Errorf("/proc/%d/net/dev: %w", pid, err)
		}
		return rx, tx, nil
	}
	if err := sc.Err(); err != nil {
		return 0, 0, err
	}
	return 0, 0, fmt.Errorf("/proc/%d/net/dev: no eth0", pid)
}

// waitFor polls cond every 100 ms until it returns nil, and fails the test with cond's last
// error after timeout. It returns how long it took.
func waitFor(t *testing.T, timeout time.Duration, cond func() error) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := start.Add(timeout)
	var err error
	for {
		if err = cond(); err == nil {
			return time.Since(start)
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("not within %s: %v", timeout, err)
	return 0
}

// quantile returns the q-quantile (0..1) of ds, which it sorts.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[min(len(ds)-1, int(q*float64(len(ds))))]
}
