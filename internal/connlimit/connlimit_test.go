package connlimit

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
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

// TestFinding09_IdleConnectionsCannotExhaust: connections that send nothing (idle) fill the
// limit; a real client still gets its answer, and the count never passes the limit.
func TestFinding09_IdleConnectionsCannotExhaust(t *testing.T) {
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
		if c.idleSince.Load() == 0 {
			n++
		}
	}
	return n
}
