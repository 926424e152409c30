package querylimit

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"
)

// dialSlowReader sends a GET for path on a connection whose receive buffer is as small as the
// kernel allows, and never reads: the server's writes to it block once the buffers are full.
func dialSlowReader(t *testing.T, addr, path string) net.Conn {
	t.Helper()
	d := net.Dialer{Control: func(network, address string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		if err != nil {
			return err
		}
		return serr
	}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path)
	return c
}

// TestSlowReaderHoldsNoSlot: with one slot, a client that asks for a large answer and never
// reads it does not keep the next query from being answered; the slow reader's answer waits in
// memory, charged to the budget, not in the slot. (Issue 31, N4.)
func TestSlowReaderHoldsNoSlot(t *testing.T) {
	l := New(1, 64<<20, 256<<20)
	big := bytes.Repeat([]byte("x"), 16<<20)
	mux := http.NewServeMux()
	started := make(chan struct{}, 1)
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		select {
		case started <- struct{}{}:
		default:
		}
		w.Write(big)
	})
	mux.HandleFunc("/small", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "small answer") })
	srv := httptest.NewServer(l.Handler(mux, true))
	defer srv.Close()
	defer srv.CloseClientConnections() // the slow reader's answer would block Close

	dialSlowReader(t, srv.Listener.Addr().String(), "/big")
	<-started
	// The slow reader's answer is being written (its handler has run); wait until its slot is
	// back, with a deadline, before asking: that is what the fix is about.
	deadline := time.Now().Add(10 * time.Second)
	for l.InUse() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the slot is still held 10 s after the slow reader's answer was built")
		}
		time.Sleep(5 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/small", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("a query while a slow reader waits for its answer: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "small answer" || resp.ContentLength != int64(len("small answer")) {
		t.Errorf("answer %q (Content-Length %d); want %q with its length", body, resp.ContentLength, "small answer")
	}
	if held := heldBytes(l); held < 1<<20 {
		t.Errorf("the slow reader's unsent answer is charged %d bytes to the budget; want most of its 16 MiB", held)
	}
}

// heldBytes is how many bytes of the budget are taken.
func heldBytes(l *Limiter) int64 {
	var n int64
	for step := l.total; step > 0; step /= 2 {
		for l.held.TryAcquire(step) {
			n += step
		}
	}
	l.held.Release(n)
	return l.total - n
}

// TestAnswerBounds: an answer over the bound gets 422 with the reason and nothing of the
// handler's headers; when slow readers hold the budget a new answer gets 503 with Retry-After;
// every byte goes back to the budget once answers are sent or refused.
func TestAnswerBounds(t *testing.T) {
	l := New(2, 16<<20, 32<<20)
	h := l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := 0
		fmt.Sscan(r.URL.Query().Get("n"), &n)
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Content-Length", fmt.Sprint(n))
		if r.URL.Query().Get("owned") != "" {
			WriteOwned(w, bytes.Repeat([]byte("y"), n))
			return
		}
		for range n / 1000 {
			w.Write(bytes.Repeat([]byte("y"), 1000))
		}
	}), true)
	for _, owned := range []string{"", "1"} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/?n=17000000&owned="+owned, nil))
		if w.Code != http.StatusUnprocessableEntity || !strings.Contains(w.Body.String(), "--max-answer-bytes") || w.Header().Get("Content-Length") == "17000000" {
			t.Errorf("owned=%q: answer over the bound = %d %q (Content-Length %q); want 422 naming --max-answer-bytes", owned, w.Code, w.Body.String(), w.Header().Get("Content-Length"))
		}
		w = httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/?n=500000&owned="+owned, nil))
		if w.Code != 200 || w.Body.Len() != 500000 {
			t.Errorf("owned=%q: answer within the bound = %d, %d bytes; want 200, 500000", owned, w.Code, w.Body.Len())
		}
		if held := heldBytes(l); held != 0 {
			t.Errorf("owned=%q: %d bytes still charged after the answers were sent", owned, held)
		}
	}
	// Slow readers hold the budget: the next answer is refused with 503. Their answers are
	// larger than what the sockets' buffers take, so most of each stays in memory.
	srv := httptest.NewServer(h)
	defer srv.Close()
	defer srv.CloseClientConnections()
	for range 2 {
		dialSlowReader(t, srv.Listener.Addr().String(), "/?n=15000000&owned=1")
	}
	waitHeld(t, l, 16<<20+1)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/?n=9000000", nil))
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" {
		t.Errorf("answer past the budget = %d (Retry-After %q); want 503 with Retry-After", w.Code, w.Header().Get("Retry-After"))
	}
	srv.CloseClientConnections()
	waitHeld(t, l, 0)
}

// waitHeld waits until at least n bytes of l's budget are taken (n 0: none is).
func waitHeld(t *testing.T, l *Limiter, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		h := heldBytes(l)
		if n == 0 && h == 0 || n > 0 && h >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("budget taken %d bytes; waited for %d", h, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestHeadKeepsLength: a HEAD answer has the GET's Content-Length and no body.
func TestHeadKeepsLength(t *testing.T) {
	l := New(1, 1<<20, 1<<20)
	srv := httptest.NewServer(l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, strings.Repeat("z", 5000))
	}), true))
	defer srv.Close()
	resp, err := http.Head(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.ContentLength != 5000 {
		t.Errorf("HEAD Content-Length %d; want 5000", resp.ContentLength)
	}
	if h := heldBytes(l); h != 0 {
		t.Errorf("%d bytes still charged after a HEAD", h)
	}
}

// TestGaveUpWaitingIsBusy: a request whose context ends while it waits for a slot (its client
// gone, or the connection's read deadline) is answered 503 with Retry-After, never an empty 200;
// so is one whose handler found no slot itself (Busy), as the cluster routes' local part does.
func TestGaveUpWaitingIsBusy(t *testing.T) {
	l := New(1, 1<<20, 1<<20)
	ran := false
	h := l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { ran = true }), true)
	release, _ := l.Acquire(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequestWithContext(ctx, "GET", "/", nil))
	release()
	if ran || w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" {
		t.Errorf("gave up waiting: ran %v, %d (Retry-After %q); want not run, 503 with Retry-After", ran, w.Code, w.Header().Get("Retry-After"))
	}
	own := l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := l.Acquire(ctx); err != nil {
			Busy(w)
		}
	}), false)
	release, _ = l.Acquire(context.Background())
	defer release()
	w = httptest.NewRecorder()
	own.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "busy") {
		t.Errorf("handler without a slot: %d %q; want 503 busy", w.Code, w.Body.String())
	}
}

// BenchmarkAnswer is the cost the limiter adds to a 1 MiB answer: written in 4 KiB pieces (as
// the exports' gzip writer does: a copy into chunks) or handed over whole (writeRaw: no copy),
// against writing it straight to the recorder.
func BenchmarkAnswer(b *testing.B) {
	body := bytes.Repeat([]byte("x"), 1<<20)
	pieces := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for p := body; len(p) > 0; p = p[min(len(p), 4096):] {
			w.Write(p[:min(len(p), 4096)])
		}
	})
	owned := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		WriteOwned(w, append([]byte(nil), body...)) // a handler's own buffer, built per request
	})
	l := New(1, 64<<20, 256<<20)
	for _, c := range []struct {
		name string
		h    http.Handler
	}{{"direct-pieces", pieces}, {"limited-pieces", l.Handler(pieces, true)}, {"direct-owned", owned}, {"limited-owned", l.Handler(owned, true)}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			req := httptest.NewRequest("GET", "/", nil)
			for b.Loop() {
				w := httptest.NewRecorder()
				w.Body = bytes.NewBuffer(make([]byte, 0, len(body)))
				c.h.ServeHTTP(w, req)
			}
		})
	}
}

// TestReserve: bytes reserved for a part held before writing count against the budget (a
// second reservation past it makes that answer 503), and are not charged twice once written.
func TestReserve(t *testing.T) {
	l := New(2, 1<<20, 1<<20)
	hold, held := make(chan struct{}), make(chan struct{})
	h := l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		part := make([]byte, 700<<10)
		if !Reserve(w, cap(part)) {
			return
		}
		if r.URL.Path == "/hold" {
			close(held)
			<-hold
		}
		WriteOwned(w, part)
	}), false)
	first := make(chan int)
	go func() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/hold", nil))
		first <- w.Code
	}()
	<-held
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	if w.Code != http.StatusServiceUnavailable {
		t.Errorf("a reservation past the budget: %d; want 503", w.Code)
	}
	close(hold)
	if code := <-first; code != 200 {
		t.Errorf("the answer whose part was reserved: %d; want 200 (its bytes not charged twice)", code)
	}
	if n := heldBytes(l); n != 0 {
		t.Errorf("%d bytes still charged after both answers", n)
	}
}

// TestAwayGivesTheSlotBack: a request waiting in Away holds no slot, so two servers of one
// slot each, each asking the other from inside its own request, both answer (without Away
// each waits for the slot the other holds); the slot is taken again when Away returns.
func TestAwayGivesTheSlotBack(t *testing.T) {
	var srvs [2]*httptest.Server
	var ls [2]*Limiter
	started := make(chan struct{}, 2)
	both := make(chan struct{})
	for i := range srvs {
		ls[i] = New(1, 1<<20, 1<<20)
		other := &srvs[1-i]
		l := ls[i]
		mux := http.NewServeMux()
		mux.HandleFunc("/peer", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "part") })
		mux.HandleFunc("/ask", func(w http.ResponseWriter, r *http.Request) {
			started <- struct{}{}
			<-both // both requests hold their slots before either asks the other
			var body []byte
			var err error
			Away(r.Context(), func() {
				if l.InUse() != 0 {
					err = fmt.Errorf("%d slots in use while away", l.InUse())
					return
				}
				var resp *http.Response
				// Bounded: without Away this waits for the other's slot until it gives up.
				c := &http.Client{Timeout: 5 * time.Second}
				if resp, err = c.Get((*other).URL + "/peer"); err == nil {
					body, err = io.ReadAll(resp.Body)
					resp.Body.Close()
				}
			})
			if l.InUse() != 1 {
				err = fmt.Errorf("%d slots in use after Away, want its own", l.InUse())
			}
			if err != nil {
				http.Error(w, err.Error(), 500)
				return
			}
			w.Write(body)
		})
		srvs[i] = httptest.NewServer(l.Handler(mux, true))
		t.Cleanup(srvs[i].Close)
	}
	go func() { <-started; <-started; close(both) }()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	errs := make(chan error, 2)
	for i := range srvs {
		go func() {
			req, _ := http.NewRequestWithContext(ctx, "GET", srvs[i].URL+"/ask", nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				errs <- fmt.Errorf("server %d: %w (each waiting for the other's slot)", i, err)
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || string(b) != "part" {
				errs <- fmt.Errorf("server %d: %d %q", i, resp.StatusCode, b)
				return
			}
			errs <- nil
		}()
	}
	for range srvs {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	for i, l := range ls {
		if l.InUse() != 0 {
			t.Errorf("server %d: %d slots in use after the requests", i, l.InUse())
		}
	}
}
