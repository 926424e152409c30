package carbon

import (
	"bufio"
	"context"
	"math"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/series"
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

// TestRunReconnects sends to a listener, loses it, and checks that Run reconnects to a new
// one on the same address and goes on sending.
func TestRunReconnects(t *testing.T) {
	l := listen(t, "127.0.0.1:0")
	addr := l.ln.Addr().String()
	var mu sync.Mutex
	calls := 0
	source := func() []series.Sample {
		mu.Lock()
		defer mu.Unlock()
		calls++
		return samples(int64(calls) * 1000)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	c := &Client{MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}
	go func() { done <- c.Run(ctx, addr, 20*time.Millisecond, source) }()

	lines := waitLines(t, l, 8)
	for _, line := range lines {
		f := strings.Fields(line)
		if len(f) != 3 {
			t.Errorf("line %q is not 'path value timestamp'", line)
		}
	}
	l.close()
	time.Sleep(100 * time.Millisecond) // Run notices the loss and backs off
	l2 := listen(t, addr)
	defer l2.close()
	lines = waitLines(t, l2, 8)
	if !strings.HasPrefix(lines[0], "requests.number.pid.42.process.nginx 7 ") {
		t.Errorf("first line after reconnecting = %q", lines[0])
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run = %v; want nil after cancel", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}

func TestRunBadInterval(t *testing.T) {
	if err := Run(context.Background(), "127.0.0.1:1", 0, nil); err == nil {
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
	c := &Client{MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond}
	if err := c.Run(ctx, addr, 10*time.Millisecond, func() []series.Sample { return samples(0) }); err != nil {
		t.Errorf("Run = %v; want nil at ctx end", err)
	}
}
