package agent

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/connlimit"
)

// serveChain serves h behind the agent's connection policy (closeUnread, deadlines, a
// connlimit Listener with admission) on loopback.
func serveChain(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := connlimit.NewWith(ln, connlimit.Options{Max: 8, Admission: true, Reserve: 1})
	srv := &http.Server{Handler: closeUnread(deadlines(h)), ConnState: cl.ConnState, ConnContext: connlimit.ConnContext}
	go srv.Serve(cl)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// answerOf sends req and returns the status line, and how long until the connection closed.
func answerOf(t *testing.T, addr, req string) (status string, closedAfter time.Duration) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	c.SetDeadline(start.Add(10 * time.Second))
	io.WriteString(c, req)
	br := bufio.NewReader(c)
	status, _ = br.ReadString('\n')
	io.Copy(io.Discard, br)
	return strings.TrimSpace(status), time.Since(start)
}

// TestRefusalDoesNotWaitForBody: a refusal written before the body (as the guard's 401) goes
// out at once and the connection closes, rather than net/http reading the announced body
// first, for up to the body deadline (issue 31 N1).
func TestRefusalDoesNotWaitForBody(t *testing.T) {
	addr := serveChain(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
	}))
	status, took := answerOf(t, addr, "POST /write HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n")
	if status != "HTTP/1.1 401 Unauthorized" || took > 5*time.Second {
		t.Errorf("refusal of a request whose body never comes: %q, closed after %s; want 401 and closed at once", status, took)
	}
}

// TestBodyOnlyWhereRouteTakesOne: a GET announcing a body is refused unread, at once; a POST
// to an ingest route gets its body, and its connection is kept (issue 31 N10).
func TestBodyOnlyWhereRouteTakesOne(t *testing.T) {
	addr := serveChain(t, admit(nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		io.WriteString(w, "read "+string(b))
	})))
	status, took := answerOf(t, addr, "GET /api/v1/status HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n")
	if status != "HTTP/1.1 400 Bad Request" || took > 5*time.Second {
		t.Errorf("GET with a body never sent: %q after %s; want 400 at once", status, took)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	for i := range 2 { // twice on one connection: kept alive once the body is read
		io.WriteString(c, "POST /write HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("push %d: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || string(b) != "read abc" || resp.Close {
			t.Errorf("push %d = %d %q close=%v; want 200 \"read abc\" on a kept connection", i, resp.StatusCode, b, resp.Close)
		}
	}
}

// TestBodyDeadlineEndsWithTheBody: a request runs past the body's deadline once its body has
// been read (a GET has none): its context is not canceled by net/http's read of the connection
// failing at that deadline (every query ended at 30 s, "canceled", whatever --query-timeout
// said); a body that does not come within the deadline still fails.
func TestBodyDeadlineEndsWithTheBody(t *testing.T) {
	const body = 300 * time.Millisecond
	h := deadlinesOf(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, "body: "+err.Error(), http.StatusRequestTimeout)
			return
		}
		select {
		case <-time.After(3 * body):
			io.WriteString(w, "ran past the body's deadline")
		case <-r.Context().Done():
			http.Error(w, "canceled: "+context.Cause(r.Context()).Error(), 499)
		}
	}), body, 10*time.Second)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	addr := ln.Addr().String()
	for _, c := range []struct{ name, req, want string }{
		{"GET", "GET /q HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP/1.1 200 OK"},
		{"POST", "POST /q HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello", "HTTP/1.1 200 OK"},
		{"POST, body never sent", "POST /q HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhe", "HTTP/1.1 408 Request Timeout"},
	} {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(conn, c.req)
		status, _ := bufio.NewReader(conn).ReadString('\n')
		conn.Close()
		if strings.TrimSpace(status) != c.want {
			t.Errorf("%s: %q, want %q", c.name, strings.TrimSpace(status), c.want)
		}
	}
}
