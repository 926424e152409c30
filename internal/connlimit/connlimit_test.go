package connlimit

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// serve starts an HTTP server behind a Listener of n connections; /hold blocks until release
// is closed.
func serve(t *testing.T, n int, release chan struct{}) (*Listener, string) {
	t.Helper()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := New(inner, n)
	mux := http.NewServeMux()
	mux.HandleFunc("/hold", func(w http.ResponseWriter, r *http.Request) { <-release })
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	srv := &http.Server{Handler: mux, ConnState: l.ConnState}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return l, inner.Addr().String()
}

func get(addr, path string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", path)
	b, err := io.ReadAll(bufio.NewReader(c))
	return string(b), err
}

// TestIdleConnectionsCannotExhaustLimit: connections that send nothing (idle) fill the
// limit; a real client still gets its answer, and the count never passes the limit.
//
// Security finding 9.
func TestIdleConnectionsCannotExhaustLimit(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	l, addr := serve(t, 8, release)
	var idle []net.Conn
	for range 50 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		idle = append(idle, c)
	}
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	body, err := get(addr, "/")
	if err != nil || !strings.HasSuffix(body, "ok") {
		t.Fatalf("GET / with 50 idle connections open = %q, %v; want ok", body, err)
	}
	st := l.Stats()
	if st.Open > st.Max {
		t.Errorf("open = %d > max %d", st.Open, st.Max)
	}
	if st.Evicted < 40 {
		t.Errorf("evicted = %d; want at least 40 of the 50 idle connections closed", st.Evicted)
	}
}

// TestBusyConnectionsAreKept: connections in the middle of a request are never closed to make
// room; past the limit with all busy, the new connection is shed.
func TestBusyConnectionsAreKept(t *testing.T) {
	release := make(chan struct{})
	l, addr := serve(t, 2, release)
	done := make(chan error, 2)
	for range 2 {
		go func() {
			body, err := get(addr, "/hold")
			if err == nil && !strings.HasPrefix(body, "HTTP/1.1 200") {
				err = fmt.Errorf("answer %q", body)
			}
			done <- err
		}()
	}
	for l.Stats().Open < 2 || busy(l) < 2 {
		time.Sleep(5 * time.Millisecond)
	}
	// The kernel accepts the third connection; the limiter closes it with no answer.
	if body, _ := get(addr, "/"); body != "" {
		t.Errorf("third connection answered %q while two requests are busy; want it closed", body)
	}
	if s := l.Stats().Shed; s == 0 {
		t.Errorf("shed = 0; want the third connection closed while two requests are busy")
	}
	close(release)
	for range 2 {
		if err := <-done; err != nil {
			t.Errorf("a busy request was cut: %v", err)
		}
	}
}

func busy(l *Listener) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for c := range l.open {
		if c.state.Load() == stateBusy {
			n++
		}
	}
	return n
}

// serveAdmission starts an HTTP server behind a Listener with Admission: each request reads
// its body, then is admitted (trusted when it carries "X-Trusted"); /hold then blocks until
// release is closed. A refused admission answers 503 and closes.
func serveAdmission(t *testing.T, o Options, release chan struct{}) (*Listener, string) {
	t.Helper()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o.Admission = true
	l := NewWith(inner, o)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if !Admit(r.Context(), r.Header.Get("X-Trusted") != "") {
			w.Header().Set("Connection", "close")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		if r.URL.Path == "/hold" {
			<-release
		}
		io.WriteString(w, "ok")
	})
	srv := &http.Server{Handler: h, ConnState: l.ConnState, ConnContext: ConnContext}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return l, inner.Addr().String()
}

func rawRequest(addr, req string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(c, req)
	b, err := io.ReadAll(bufio.NewReader(c))
	return string(b), err
}

// TestSlowBodiesAreEvicted: connections that announce a body and never send it fill the
// limit (N1: they used to count as busy for the whole body deadline); a new client still gets
// its answer, in place of the quietest of them.
func TestSlowBodiesAreEvicted(t *testing.T) {
	l, addr := serveAdmission(t, Options{Max: 8}, nil)
	var slow []net.Conn
	defer func() {
		for _, c := range slow {
			c.Close()
		}
	}()
	for range 20 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n")
		slow = append(slow, c)
	}
	body, err := rawRequest(addr, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	if err != nil || !strings.HasSuffix(body, "ok") {
		t.Fatalf("GET / with 20 slow bodies open = %q, %v; want ok", body, err)
	}
	if st := l.Stats(); st.Open > st.Max || st.Evicted < 12 {
		t.Errorf("stats %+v: want open <= max and at least 12 slow connections evicted", st)
	}
}

// TestPerSourceLimit: one address holds at most PerSource connections; at that limit its new
// connection takes the place of its quietest one, and is shed when all of its are busy.
func TestPerSourceLimit(t *testing.T) {
	release := make(chan struct{})
	l, addr := serveAdmission(t, Options{Max: 100, PerSource: 3}, release)
	var quiet []net.Conn
	defer func() {
		for _, c := range quiet {
			c.Close()
		}
	}()
	for range 10 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		quiet = append(quiet, c)
	}
	waitFor(t, func() bool { return l.Stats().Evicted >= 7 }, "7 of 10 quiet connections evicted")
	if st := l.Stats(); st.Open > 3 {
		t.Errorf("open = %d from one address; want at most 3", st.Open)
	}
	done := make(chan string, 3)
	for range 3 {
		go func() {
			b, _ := rawRequest(addr, "GET /hold HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
			done <- b
		}()
	}
	waitFor(t, func() bool { return busy(l) == 3 }, "3 busy requests")
	if body, _ := rawRequest(addr, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); body != "" {
		t.Errorf("fourth connection of a source with 3 busy answered %q; want it shed", body)
	}
	close(release)
	for range 3 {
		if b := <-done; !strings.HasSuffix(b, "ok") {
			t.Errorf("busy request answered %q; want ok", b)
		}
	}
}

// TestReserveKeepsSlotsForTrusted: untrusted callers hold at most Max-Reserve connections
// busy; the next is refused, and a trusted caller still gets in.
func TestReserveKeepsSlotsForTrusted(t *testing.T) {
	release := make(chan struct{})
	l, addr := serveAdmission(t, Options{Max: 4, Reserve: 1}, release)
	done := make(chan string, 4)
	for range 3 {
		go func() {
			b, _ := rawRequest(addr, "GET /hold HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
			done <- b
		}()
	}
	waitFor(t, func() bool { return busy(l) == 3 }, "3 busy requests")
	if b, _ := rawRequest(addr, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); !strings.HasPrefix(b, "HTTP/1.1 503") {
		t.Errorf("fourth untrusted request answered %q; want 503 (only the reserve left)", b)
	}
	go func() {
		b, _ := rawRequest(addr, "GET /hold HTTP/1.1\r\nHost: x\r\nX-Trusted: 1\r\nConnection: close\r\n\r\n")
		done <- b
	}()
	waitFor(t, func() bool { return busy(l) == 4 }, "the trusted request admitted into the reserve")
	close(release)
	for range 4 {
		if b := <-done; !strings.HasSuffix(b, "ok") {
			t.Errorf("admitted request answered %q; want ok", b)
		}
	}
	if st := l.Stats(); st.Refused != 1 {
		t.Errorf("refused = %d; want 1", st.Refused)
	}
}

// flakyListener fails its first n Accepts with err.
type flakyListener struct {
	net.Listener
	n   int
	err error
}

func (f *flakyListener) Accept() (net.Conn, error) {
	if f.n > 0 {
		f.n--
		return nil, f.err
	}
	return f.Listener.Accept()
}

// TestAcceptWaitsOutEMFILE: out of descriptors, Accept backs off and goes on accepting instead
// of failing (N6: statsd's accept loop used to end for good on EMFILE).
func TestAcceptWaitsOutEMFILE(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer inner.Close()
	emfile := &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	l := New(&flakyListener{Listener: inner, n: 3, err: emfile}, 4)
	go func() {
		if c, err := net.Dial("tcp", inner.Addr().String()); err == nil {
			defer c.Close()
			time.Sleep(5 * time.Second)
		}
	}()
	c, err := l.Accept()
	if err != nil {
		t.Fatalf("Accept after 3 EMFILE = %v; want the connection", err)
	}
	c.Close()
	if st := l.Stats(); st.Retried != 3 {
		t.Errorf("retried = %d; want 3", st.Retried)
	}
	inner.Close()
	if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept on a closed listener = %v; want net.ErrClosed", err)
	}
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestUnixPeersCountedPerUID: on a Unix socket the source is the peer's uid, so one local user
// holds at most PerSource connections.
func TestUnixPeersCountedPerUID(t *testing.T) {
	path := t.TempDir() + "/s"
	inner, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	l := NewWith(inner, Options{Max: 100, PerSource: 2})
	defer l.Close()
	go func() {
		for {
			if _, err := l.Accept(); err != nil {
				return
			}
		}
	}()
	var cs []net.Conn
	defer func() {
		for _, c := range cs {
			c.Close()
		}
	}()
	for range 6 {
		c, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	waitFor(t, func() bool { return l.Stats().Evicted == 4 }, "4 of one uid's 6 connections evicted")
	if st := l.Stats(); st.Open != 2 {
		t.Errorf("open = %d from one uid; want 2", st.Open)
	}
}

// BenchmarkAdmitAtCap is the cost of one accepted connection at a full listener of 4096 (the
// default cap): finding and evicting the quietest connection.
func BenchmarkAdmitAtCap(b *testing.B) {
	l := NewWith(nil, Options{Max: 4096, PerSource: 4096})
	newConn := func(i int) *conn {
		c1, c2 := net.Pipe()
		c2.Close()
		c := &conn{Conn: c1, l: l, source: "src" + strconv.Itoa(i%64)}
		c.heard.Store(int64(i))
		return c
	}
	for i := range 4096 {
		if !l.admit(newConn(i)) {
			b.Fatal("not admitted under the cap")
		}
	}
	i := 4096
	b.ReportAllocs()
	for b.Loop() {
		if !l.admit(newConn(i)) {
			b.Fatal("not admitted at the cap with every connection quiet")
		}
		i++
	}
}
