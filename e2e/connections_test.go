package e2e

// The connection policy (docs/security.md, "Connections") against the real agent: each test
// runs one attack of issue 31 with bounded traffic on loopback, the agent's caps lowered by
// flags to keep the traffic small, and asserts what a legitimate client still gets and what the
// agent holds (its descriptors, its RSS).

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"golang.org/x/sys/unix"
)

// fdCount is the number of descriptors process pid holds. The tests counting an agent's
// descriptors (or its RSS) start it in a PID namespace of its own (startAgentOwnPIDs): it
// keeps a descriptor open per process it reads, and the processes of the tests and packages
// running beside it come and go (the integration phase, e2e beside internal/web and
// e2e/cluster, saw 217 descriptors become 351 while 300 gossip connections were held, the
// cap allowing 32).
func fdCount(t *testing.T, pid int) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// rssKB is process pid's resident set in KiB.
func rssKB(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// slowBodies runs n attackers until stop is closed: each connects (dial), sends one of reqs (in
// turn), which announces a body it never sends, and waits up to 40 s for the answer; then it
// closes and, after a pause, starts again. It returns how many answers came, and the slowest
// first answer among them once stop is closed.
func slowBodies(dial func() (net.Conn, error), reqs []string, n int, stop chan struct{}) (wait func() (answers int64, slowest time.Duration), dials *atomic.Int64) {
	var wg sync.WaitGroup
	var answered atomic.Int64
	var mu sync.Mutex
	var slowest time.Duration
	dials = new(atomic.Int64)
	for i := range n {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				c, err := dial()
				dials.Add(1)
				if err == nil {
					start := time.Now()
					c.SetDeadline(start.Add(40 * time.Second))
					go func() { <-stop; c.Close() }()
					io.WriteString(c, reqs[i%len(reqs)])
					if line, err := bufio.NewReader(c).ReadString('\n'); err == nil && strings.HasPrefix(line, "HTTP/1.1 ") {
						answered.Add(1)
						mu.Lock()
						slowest = max(slowest, time.Since(start))
						mu.Unlock()
					}
					c.Close()
				}
				select {
				case <-stop:
					return
				case <-time.After(250 * time.Millisecond):
				}
			}
		})
	}
	return func() (int64, time.Duration) {
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return answered.Load(), slowest
	}, dials
}

// userServedDuringSlowBodies: while 100 attackers (more than the 64 connections the agent is
// let hold) announce bodies they never send, a legitimate request is answered within 5 s, five
// times over, and the refusals the attackers get come at once, not after the body deadline.
func userServedDuringSlowBodies(t *testing.T, a *agent, dial func() (net.Conn, error), reqs []string) {
	t.Helper()
	stop := make(chan struct{})
	wait, dials := slowBodies(dial, reqs, 100, stop)
	stopped := false
	defer func() {
		if !stopped {
			close(stop)
			wait()
		}
	}()
	waitFor(t, 20*time.Second, func() error {
		if n := dials.Load(); n < 200 {
			return fmt.Errorf("%d attack connections so far", n)
		}
		return nil
	})
	for i := range 5 {
		start := time.Now()
		var st struct {
			NodeID string `json:"node_id"`
		}
		err := a.get("/api/v1/status", &st)
		if took := time.Since(start); err != nil || took > 5*time.Second {
			t.Fatalf("request %d during the attack: %v after %s; want an answer within 5 s", i, err, took)
		}
	}
	close(stop)
	stopped = true
	answers, slowest := wait()
	if answers == 0 || slowest > 5*time.Second {
		t.Errorf("attackers got %d answers, the slowest after %s; want refusals within 5 s (no wait for a body never sent)", answers, slowest)
	}
}

// TestUnauthenticatedSlowBodiesDoNotShutOutUsers defends finding N1 with --web-config: an
// unauthenticated request announcing a body is refused (401) and its connection closed at once,
// instead of being held for the 30 s body deadline while net/http waits to drain the body.
func TestUnauthenticatedSlowBodiesDoNotShutOutUsers(t *testing.T) {
	quiet(t)
	s := newSecureSetup(t, "VerifyClientCertIfGiven")
	a := startSecureAgent(t, s, "--max-connections", "64", "--max-connections-per-source", "64")
	addr := strings.TrimPrefix(a.URL, "https://")
	dial := func() (net.Conn, error) {
		d := &net.Dialer{Timeout: 5 * time.Second}
		return tls.DialWithDialer(d, "tcp", addr, &tls.Config{RootCAs: s.ca.Pool(), ServerName: "127.0.0.1"})
	}
	userServedDuringSlowBodies(t, a, dial, []string{
		"GET /api/v1/status HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n",
		"POST /write HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n",
	})
}

// TestSlowBodiesDoNotShutOutUsers defends finding N1 without a web config: a GET announcing a
// body is refused unread, and a write whose body never comes is evicted to make room (it is
// slow to send its body), so a client still gets its answer.
func TestSlowBodiesDoNotShutOutUsers(t *testing.T) {
	quiet(t)
	a := startAgent(t, "--max-connections", "64", "--max-connections-per-source", "64")
	addr := strings.TrimPrefix(a.URL, "http://")
	dial := func() (net.Conn, error) { return net.DialTimeout("tcp", addr, 5*time.Second) }
	userServedDuringSlowBodies(t, a, dial, []string{
		"GET /api/v1/status HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n",
		"POST /write HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n",
	})
}

// holdConns opens n connections to addr, each sending first (if not empty) and reading what
// comes back within a short while, and keeps them open until the test ends.
func holdConns(t *testing.T, addr string, n int, first string) {
	t.Helper()
	var conns []net.Conn
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	for range n {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatalf("dial %s: %v", addr, err)
		}
		conns = append(conns, c)
		if first != "" {
			io.WriteString(c, first)
		}
	}
	if strings.HasPrefix(first, "GET ") {
		// Let each read its answer: the connection is then a finished request kept alive.
		for _, c := range conns {
			c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
			bufio.NewReader(c).ReadString('\n')
			c.SetReadDeadline(time.Time{})
		}
	}
}

// TestGossipListenerDescriptorsBounded defends finding N2: connections to --gossip-listen's TCP
// port (each a finished request kept alive) no longer take a descriptor each without end; the
// agent holds at most its cap, and a peer's stream still gets in.
func TestGossipListenerDescriptorsBounded(t *testing.T) {
	quiet(t)
	gossip := freePort(t)
	// --max-connections 64: the gossip listener holds at most 16 (a quarter).
	a := startAgentOwnPIDs(t, "--cluster-name", "n2", "--gossip-listen", gossip, "--max-connections", "64")
	pid := a.pid()
	base := fdCount(t, pid)
	holdConns(t, gossip, 300, "GET /nothing HTTP/1.1\r\nHost: x\r\n\r\n")
	if got := fdCount(t, pid); got > base+16+16 {
		t.Errorf("agent holds %d descriptors with 300 gossip connections open (%d before); want at most %d", got, base, base+32)
	}
	c, err := net.DialTimeout("tcp", gossip, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(c, "GET /api/v1/gossip HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: cantal-gossip\r\n\r\n")
	if line, err := bufio.NewReader(c).ReadString('\n'); err != nil || !strings.HasPrefix(line, "HTTP/1.1 101") {
		t.Errorf("gossip stream during the attack: %q, %v; want 101 Switching Protocols", line, err)
	}
}

// statsdTCPLands sends a counter over a new TCP connection to statsd and waits for its series.
func statsdTCPLands(t *testing.T, a *agent, addr, metric string) {
	t.Helper()
	waitFor(t, 20*time.Second, func() error {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return err
		}
		io.WriteString(c, metric+":1|c\n")
		c.Close()
		ss, err := a.series("/api/v1/metrics", metric)
		if err != nil {
			return err
		}
		if find(ss, metric) == nil {
			return fmt.Errorf("no %s yet", metric)
		}
		return nil
	})
}

// TestStatsdTCPDescriptorsBounded defends finding N6 (the cap): 300 statsd TCP connections hold
// at most the statsd listener's cap of descriptors, and statsd TCP accepts afterwards.
func TestStatsdTCPDescriptorsBounded(t *testing.T) {
	quiet(t)
	statsd := freePort(t)
	// --max-connections 64: statsd TCP holds at most 16 (a quarter).
	a := startAgentOwnPIDs(t, "--statsd", statsd, "--max-connections", "64")
	pid := a.pid()
	base := fdCount(t, pid)
	holdConns(t, statsd, 300, "n6.held:1|c\n")
	if got := fdCount(t, pid); got > base+16+16 {
		t.Errorf("agent holds %d descriptors with 300 statsd connections open (%d before); want at most %d", got, base, base+32)
	}
	statsdTCPLands(t, a, statsd, "n6.after")
}

// TestStatsdTCPOutlivesDescriptorExhaustion defends finding N6 (EMFILE): with the agent's
// descriptor limit lowered below what the attack opens, statsd's accept loop waits and goes
// on instead of ending; once the attack stops, statsd TCP takes lines again.
func TestStatsdTCPOutlivesDescriptorExhaustion(t *testing.T) {
	quiet(t)
	statsd := freePort(t)
	a := startAgentOwnPIDs(t, "--statsd", statsd, "--max-connections", "2000", "--max-connections-per-source", "2000")
	pid := a.pid()
	limit := uint64(fdCount(t, pid) + 24)
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: limit, Max: limit}, nil); err != nil {
		t.Fatalf("prlimit: %v", err)
	}
	func() {
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for range 200 {
			c, err := net.DialTimeout("tcp", statsd, 5*time.Second)
			if err != nil {
				break // the kernel's queue is full: the agent is out of descriptors
			}
			conns = append(conns, c)
		}
		waitFor(t, 10*time.Second, func() error {
			if n := fdCount(t, pid); uint64(n) < limit-4 {
				return fmt.Errorf("agent holds %d descriptors, limit %d", n, limit)
			}
			return nil
		})
		time.Sleep(500 * time.Millisecond) // some accepts fail with EMFILE meanwhile
	}()
	statsdTCPLands(t, a, statsd, "n6.afteremfile")
}

// TestWebSocketsCappedAndSmall defends finding N5: WebSockets are capped apart from plain
// requests (the ones past --max-websockets are answered 503, and another client is served),
// and each keeps no compressor between messages: the agent's RSS grows by little per socket.
func TestWebSocketsCappedAndSmall(t *testing.T) {
	quiet(t)
	const capWS, tries = 48, 64
	a := startAgentOwnPIDs(t, "--max-connections", "512", "--max-connections-per-source", "512", "--max-websockets", strconv.Itoa(capWS))
	pid := a.pid()
	a.waitScans(4) // a few scans: the agent's own memory settles
	base := rssKB(t, pid)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wsURL := "ws" + strings.TrimPrefix(a.URL, "http") + "/api/v1/ws"
	var got []*atomic.Int64
	refused := 0
	for range tries {
		c, resp, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{CompressionMode: websocket.CompressionContextTakeover})
		if err != nil {
			if resp != nil && resp.StatusCode == http.StatusServiceUnavailable {
				refused++
				continue
			}
			t.Fatalf("websocket: %v", err)
		}
		defer c.CloseNow()
		if err := c.Write(ctx, websocket.MessageText, []byte(`{"type":"subscribe","id":"a","match":"{metric=~\"system.*|cpu.*|memory.*\"}","history":"10s"}`)); err != nil {
			t.Fatal(err)
		}
		var n atomic.Int64
		got = append(got, &n)
		go func() {
			for {
				if _, _, err := c.Read(ctx); err != nil {
					return
				}
				n.Add(1)
			}
		}()
	}
	if len(got) != capWS || refused != tries-capWS {
		t.Errorf("%d WebSockets opened, %d refused with 503; want %d and %d", len(got), refused, capWS, tries-capWS)
	}
	waitFor(t, 30*time.Second, func() error {
		for i, n := range got {
			if n.Load() < 4 {
				return fmt.Errorf("socket %d has %d messages", i, n.Load())
			}
		}
		return nil
	})
	rss := rssKB(t, pid)
	per := (rss - base) / max(len(got), 1)
	t.Logf("RSS %d KiB before, %d KiB with %d WebSockets: %d KiB each", base, rss, len(got), per)
	if per > 180 {
		t.Errorf("RSS grew %d KiB per WebSocket; want at most 180 (no compressor kept per connection)", per)
	}
	start := time.Now()
	var st map[string]any
	if err := a.get("/api/v1/status", &st); err != nil || time.Since(start) > 5*time.Second {
		t.Errorf("another client with %d WebSockets open: %v after %s; want an answer within 5 s", len(got), err, time.Since(start))
	}
}

// TestGetBodiesDoNotTakePushBudget defends finding N10: GETs carrying ~32 MiB bodies are refused
// without reading them, so the shared body budget stays for the pushes.
func TestGetBodiesDoNotTakePushBudget(t *testing.T) {
	quiet(t)
	a := startAgent(t)
	addr := strings.TrimPrefix(a.URL, "http://")
	const size = 32 << 20 // the most one body may be
	var wg sync.WaitGroup
	stop := make(chan struct{})
	defer func() { close(stop); wg.Wait() }()
	sent := make(chan int64, 2)
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			defer c.Close()
			go func() { <-stop; c.Close() }()
			fmt.Fprintf(c, "GET /api/v1/status HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\n\r\n", size)
			// All but the last byte, then nothing: the body never ends.
			n, _ := io.CopyN(c, zeros{}, size-1)
			sent <- n
			<-stop // and holds the connection
		})
	}
	for range 2 {
		select {
		case n := <-sent:
			t.Logf("an attacker sent %d bytes of its body", n)
		case <-time.After(30 * time.Second):
			// Still sending: the agent reads, or does not read and the socket is full.
		}
	}
	// The kernel may still hold megabytes of each body the agent has not read yet: push for a
	// few seconds, every push must be taken.
	for i := range 10 {
		code, body := a.raw("POST", "/write", "n10_push v="+strconv.Itoa(i))
		if code != http.StatusNoContent {
			t.Fatalf("push %d during two GETs with 32 MiB bodies = %d %s; want 204", i, code, body)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
