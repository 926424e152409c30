package carbon

import (
	"bufio"
	"context"
	"log/slog"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/series"
	"github.com/cantal-go/cantal/internal/statedir"
)

func samples(ts int64) []series.Sample {
	return []series.Sample{
		{Labels: series.Labels{"metric": "requests.number", "pid": "42", "process": "nginx"}, Kind: series.Counter, Bits: 7, TS: ts},
		{Labels: series.Labels{"metric": "memory.used"}, Kind: series.Level, Bits: uint64(1<<64 - 3), TS: ts},
		{Labels: series.Labels{"metric": "load.one", "cgroup": "/system.slice/a b.service", "empty": ""}, Kind: series.Float, Bits: math.Float64bits(0.5), TS: ts},
		{Labels: series.Labels{"metric": "load.nan"}, Kind: series.Float, Bits: math.Float64bits(math.NaN()), TS: ts},
		{Labels: series.Labels{"metric": "worker.state"}, Kind: series.State, Text: "x", Since: 1, TS: ts},
		{Labels: series.Labels{"metric": "odd..name."}, Kind: series.Level, Bits: 1, TS: ts},
	}
}

func TestAppendLines(t *testing.T) {
	c := &Client{Prefix: "cantal.node1."}
	got := string(c.AppendLines(nil, samples(1700000000999)))
	want := "cantal.node1.requests.number.pid.42.process.nginx 7 1700000000\n" +
		"cantal.node1.memory.used -3 1700000000\n" +
		"cantal.node1.load.one.cgroup._system_slice_a_b_service.empty._ 0.5 1700000000\n" +
		"cantal.node1.odd._.name._ 1 1700000000\n"
	if got != want {
		t.Errorf("AppendLines =\n%s\nwant\n%s", got, want)
	}
	c = &Client{Tagged: true}
	got = string(c.AppendLines(nil, samples(1700000000000)[:3]))
	want = "requests.number;pid=42;process=nginx 7 1700000000\n" +
		"memory.used -3 1700000000\n" +
		"load.one;cgroup=_system_slice_a_b_service 0.5 1700000000\n"
	if got != want {
		t.Errorf("AppendLines(tagged) =\n%s\nwant\n%s", got, want)
	}
}

// listener is a carbon plaintext receiver that records the lines it gets.
type listener struct {
	ln    net.Listener
	mu    sync.Mutex
	lines []string
	conns int
	open  []net.Conn
	wg    sync.WaitGroup
}

func listen(t *testing.T, addr string) *listener {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	l := &listener{ln: ln}
	l.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			l.mu.Lock()
			l.conns++
			l.open = append(l.open, c)
			l.mu.Unlock()
			l.wg.Go(func() {
				defer c.Close()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					l.mu.Lock()
					l.lines = append(l.lines, sc.Text())
					l.mu.Unlock()
				}
			})
		}
	})
	return l
}

// close stops accepting and drops every connection, as a restarting carbon would.
func (l *listener) close() {
	l.ln.Close()
	l.mu.Lock()
	for _, c := range l.open {
		c.Close()
	}
	l.mu.Unlock()
	l.wg.Wait()
}

func (l *listener) snapshot() ([]string, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...), l.conns
}

func waitLines(t *testing.T, l *listener, n int) []string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		lines, _ := l.snapshot()
		if len(lines) >= n {
			return lines
		}
		if time.Now().After(deadline) {
			t.Fatalf("got %d lines, want %d: %q", len(lines), n, lines)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// memSource is a Source of fake scans one second apart, added by the test while Run runs.
type memSource struct {
	mu    sync.Mutex
	scans []int64 // ts of each scan (ms)
	n     int     // series per scan
}

func (m *memSource) add(ts int64) {
	m.mu.Lock()
	m.scans = append(m.scans, ts)
	m.mu.Unlock()
}

func (m *memSource) Span() (int64, int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.scans) == 0 {
		return 0, 0
	}
	return m.scans[0], m.scans[len(m.scans)-1]
}

func (m *memSource) Points(from, to int64, fn func(series.Labels, series.Kind, []history.Point) bool) {
	m.mu.Lock()
	scans := slices.Clone(m.scans)
	m.mu.Unlock()
	for i := range m.n {
		var pts []history.Point
		for _, ts := range scans {
			if ts >= from && ts <= to {
				pts = append(pts, history.Point{TS: ts, Bits: uint64(ts / 1000)})
			}
		}
		if len(pts) > 0 && !fn(series.Labels{"metric": "s.n", "i": strconv.Itoa(i)}, series.Counter, pts) {
			return
		}
	}
}

// received parses lines "prefix.s.n.i.I V T" into per-series lists of timestamps.
func received(t *testing.T, lines []string) map[string][]int64 {
	t.Helper()
	got := map[string][]int64{}
	for _, line := range lines {
		f := strings.Fields(line)
		if len(f) != 3 {
			t.Fatalf("line %q is not 'path value timestamp'", line)
		}
		ts, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil || f[1] != f[2] {
			t.Fatalf("line %q: value is not the scan's second", line)
		}
		got[f[0]] = append(got[f[0]], ts)
	}
	return got
}

// TestRunResends sends scans to a listener, loses it for a while (it closes its connections,
// as a stopping carbon does), and checks that once a new listener is up every scan made in
// between arrives, each series' points in time order, each with its own timestamp.
func TestRunResends(t *testing.T) {
	l := listen(t, "127.0.0.1:0")
	addr := l.ln.Addr().String()
	src := &memSource{n: 3}
	base := int64(1_700_000_000_000)
	next := 0
	scan := func() { src.add(base + int64(next)*1000); next++ }
	scan()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	c := &Client{Prefix: "node1.", MinBackoff: 10 * time.Millisecond, MaxBackoff: 40 * time.Millisecond}
	go func() { done <- c.Run(ctx, addr, 10*time.Millisecond, src) }()

	for range 5 {
		time.Sleep(15 * time.Millisecond)
		scan()
	}
	waitLines(t, l, 3*6)
	time.Sleep(30 * time.Millisecond) // a round confirms the last batch
	l.close()
	for range 20 { // scans while carbon is away
		time.Sleep(10 * time.Millisecond)
		scan()
	}
	l2 := listen(t, addr)
	defer l2.close()
	for range 3 {
		time.Sleep(10 * time.Millisecond)
		scan()
	}
	last := base + int64(next-1)*1000
	deadline := time.Now().Add(10 * time.Second)
	var got map[string][]int64
	for {
		lines1, _ := l.snapshot()
		lines2, _ := l2.snapshot()
		got = received(t, append(lines1, lines2...))
		complete := len(got) == 3
		for _, ts := range got {
			complete = complete && slices.Contains(ts, last/1000)
		}
		if complete {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not every scan arrived: %v", got)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	for path, ts := range got {
		if !strings.HasPrefix(path, "node1.s.n.i.") {
			t.Errorf("path %q lacks the prefix", path)
		}
		seen := map[int64]bool{}
		for _, v := range ts {
			seen[v] = true
		}
		for i := range next {
			if !seen[base/1000+int64(i)] {
				t.Errorf("%s: scan %d (ts %d) never arrived", path, i, base/1000+int64(i))
			}
		}
		// Resent points may repeat ones sent before the loss, but each connection's points come
		// in time order.
		lines2, _ := l2.snapshot()
		var after []int64
		for _, line := range lines2 {
			if strings.HasPrefix(line, path+" ") {
				v, _ := strconv.ParseInt(strings.Fields(line)[2], 10, 64)
				after = append(after, v)
			}
		}
		if !slices.IsSorted(after) {
			t.Errorf("%s: points after the reconnection out of order: %v", path, after)
		}
	}
}

// TestRunFlushesAtStop: the scans taken since the last round are sent when Run is stopped.
func TestRunFlushesAtStop(t *testing.T) {
	l := listen(t, "127.0.0.1:0")
	defer l.close()
	src := &memSource{n: 2}
	base := int64(1_700_000_000_000)
	src.add(base)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- (&Client{}).Run(ctx, l.ln.Addr().String(), time.Hour, src) }()
	waitLines(t, l, 2) // the first round, at start
	for i := 1; i <= 5; i++ {
		src.add(base + int64(i)*1000)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got := received(t, waitLines(t, l, 12))
	for path, ts := range got {
		if len(ts) != 6 || ts[5] != base/1000+5 {
			t.Errorf("%s: %v; want the 6 scans", path, ts)
		}
	}
}

// TestRunPosition: the accepted position is saved, and a new Run with the same file resends
// from there: the scans taken while no Run ran arrive.
func TestRunPosition(t *testing.T) {
	l := listen(t, "127.0.0.1:0")
	defer l.close()
	dir, err := statedir.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	pos := dir.Position(statedir.Carbon, l.ln.Addr().String(), l.ln.Addr().String())
	src := &memSource{n: 1}
	base := int64(1_700_000_000_000)
	src.add(base)
	c := &Client{Position: pos}
	run := func() (context.CancelFunc, chan error) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- c.Run(ctx, l.ln.Addr().String(), 10*time.Millisecond, src) }()
		return cancel, done
	}
	cancel, done := run()
	waitLines(t, l, 1)
	src.add(base + 1000)
	waitLines(t, l, 2)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if p, _ := pos.Load(); p.AckedMs == base+1000 {
			break
		}
		if time.Now().After(deadline) {
			p, err := pos.Load()
			t.Fatalf("position file holds %+v, %v; want %d", p, err, base+1000)
		}
	}
	cancel()
	<-done
	// Scans while the agent is "down", then a new Run.
	src.add(base + 2000)
	src.add(base + 3000)
	cancel, done = run()
	defer func() { cancel(); <-done }()
	got := received(t, waitLines(t, l, 4))
	for path, ts := range got {
		if !slices.Contains(ts, base/1000+2) || !slices.Contains(ts, base/1000+3) {
			t.Errorf("%s: %v; the scans taken between the runs are missing", path, ts)
		}
	}
}

// TestRunBudget holds a backlog larger than the budget: it arrives over several rounds,
// oldest first, none of them over the budget unless a single scan is.
func TestRunBudget(t *testing.T) {
	l := listen(t, "127.0.0.1:0")
	defer l.close()
	src := &memSource{n: 10}
	base := int64(1_700_000_000_000)
	for i := range 200 {
		src.add(base + int64(i)*1000)
	}
	var writes []int
	var mu sync.Mutex
	c := &Client{Budget: 2000, Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
		cn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &countConn{Conn: cn, mu: &mu, writes: &writes}, nil
	}}
	s := c.sender(l.ln.Addr().String(), time.Hour, src)
	s.accepted, s.sent = base-1, base-1 // as if carbon had everything before the first scan
	defer s.closeConn()
	rounds := 0
	for s.sent < base+199*1000 {
		if rounds++; rounds > 1000 {
			t.Fatalf("backlog not sent after 1000 rounds: at %d", s.sent)
		}
		if wait := s.round(context.Background()); wait > 200*time.Millisecond {
			t.Fatalf("round asks to wait %v with a backlog", wait)
		}
	}
	lines := waitLines(t, l, 2000)
	mu.Lock()
	defer mu.Unlock()
	total := 0
	for _, w := range writes {
		total += w
		if w > 2000 {
			t.Errorf("a write of %d bytes; budget 2000", w)
		}
	}
	if len(writes) < total/2000 {
		t.Errorf("%d writes for %d bytes at a 2000-byte budget", len(writes), total)
	}
	for path, ts := range received(t, lines) {
		if len(ts) != 200 {
			t.Errorf("%s: %d points; want 200", path, len(ts))
		}
	}
	prev := int64(0)
	// Windows go oldest first: the first point of each write is not older than the last one's.
	for _, line := range lines {
		v, _ := strconv.ParseInt(strings.Fields(line)[2], 10, 64)
		if v < prev-60 {
			t.Fatalf("line %q arrives after points a minute newer", line)
		}
		prev = max(prev, v)
	}
}

type countConn struct {
	net.Conn
	mu     *sync.Mutex
	writes *[]int
}

func (c *countConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	*c.writes = append(*c.writes, len(p))
	c.mu.Unlock()
	return c.Conn.Write(p)
}

// TestBackoff checks that waits are jittered within [b/2, b] and capped at MaxBackoff.
func TestBackoff(t *testing.T) {
	c := &Client{MinBackoff: time.Second, MaxBackoff: 10 * time.Second, Logger: slog.New(slog.DiscardHandler)}
	s := c.sender("x", time.Second, &memSource{})
	bounds := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}
	distinct := map[time.Duration]bool{}
	for i, b := range bounds {
		w := s.fail("x", nil)
		if w < b/2 || w > b {
			t.Errorf("wait %d = %v; want within [%v, %v]", i, w, b/2, b)
		}
		distinct[w] = true
	}
	if len(distinct) < 3 {
		t.Errorf("waits %v are not jittered", distinct)
	}
}

// TestPeerGone checks the non-blocking liveness check on an open, a closed and a reset peer.
func TestPeerGone(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dial := func() (net.Conn, net.Conn) {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		s, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		return c, s
	}
	c, s := dial()
	if err := peerGone(c); err != nil {
		t.Errorf("peerGone(open) = %v", err)
	}
	s.Close()
	waitGone(t, c)
	c.Close()

	c, s = dial()
	c.Write([]byte("unread\n"))
	time.Sleep(20 * time.Millisecond)
	s.Close() // closing with unread bytes resets the connection
	waitGone(t, c)
	c.Close()
}

func waitGone(t *testing.T, c net.Conn) {
	t.Helper()
	for range 500 {
		if peerGone(c) != nil {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Error("peerGone did not see the peer close")
}

func TestNode(t *testing.T) {
	for in, want := range map[string]string{"web1.example.com": "web1_example_com", "": "_", "a-b_c": "a-b_c", "é x": "___x"} {
		if got := Node(in); got != want {
			t.Errorf("Node(%q) = %q; want %q", in, got, want)
		}
	}
}

func TestRunBadInterval(t *testing.T) {
	if err := (&Client{}).Run(context.Background(), "127.0.0.1:1", 0, &memSource{}); err == nil {
		t.Error("Run(interval 0) = nil; want error")
	}
}

// TestRunNoListener checks that Run keeps trying without failing while nothing listens.
func TestRunNoListener(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	src := &memSource{n: 1}
	src.add(1000)
	c := &Client{MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond}
	if err := c.Run(ctx, addr, 10*time.Millisecond, src); err != nil {
		t.Errorf("Run = %v; want nil at ctx end", err)
	}
}
