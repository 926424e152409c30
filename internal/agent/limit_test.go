package agent

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/querylimit"
)

// TestLimitQueries checks the query limiter: with one slot, a second query waits until the
// first is done, exempt requests pass while it is held, and a query whose client gives up
// while waiting never runs.
func TestLimitQueries(t *testing.T) {
	release := make(chan struct{})
	var running, ran atomic.Int32
	h := limitQueries(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v1/metrics" {
			if running.Add(1) > 1 {
				t.Error("two limited queries ran at once")
			}
			<-release
			running.Add(-1)
		}
		ran.Add(1)
	}), querylimit.New(1, 1<<20, 4<<20))
	do := func(ctx context.Context, path string, hdr ...string) <-chan struct{} {
		done := make(chan struct{})
		r := httptest.NewRequestWithContext(ctx, "GET", path, nil)
		if len(hdr) == 2 {
			r.Header.Set(hdr[0], hdr[1])
		}
		go func() { defer close(done); h.ServeHTTP(httptest.NewRecorder(), r) }()
		return done
	}
	first := do(context.Background(), "/api/v1/metrics")
	for running.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	second := do(context.Background(), "/api/v1/metrics")
	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := do(ctx, "/api/v1/metrics")
	for _, path := range []string{"/api/v1/status", "/api/v1/cluster/metrics", "/debug/pprof/profile"} {
		select {
		case <-do(context.Background(), path):
		case <-time.After(5 * time.Second):
			t.Fatalf("exempt %s waited for the held slot", path)
		}
	}
	select {
	case <-do(context.Background(), "/api/v1/ws", "Upgrade", "websocket"):
	case <-time.After(5 * time.Second):
		t.Fatal("a WebSocket upgrade waited for the held slot")
	}
	select {
	case <-second:
		t.Fatal("the second query ran while the first held the only slot")
	case <-time.After(50 * time.Millisecond):
	}
	cancel()
	<-gaveUp
	before := ran.Load()
	release <- struct{}{}
	<-first
	release <- struct{}{}
	<-second
	if got := ran.Load() - before; got != 2 {
		t.Fatalf("%d queries ran after the slot was released; want 2 (the one whose client gave up must not run)", got)
	}
}

// TestUpgradeHeaderDoesNotSkipLimiter: an Upgrade header on a route that is not a
// stream does not let the request past the held slot.
//
// Security finding 6.
func TestUpgradeHeaderDoesNotSkipLimiter(t *testing.T) {
	release := make(chan struct{})
	var held atomic.Bool
	h := limitQueries(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("hold") != "" {
			held.Store(true)
			<-release
		}
	}), querylimit.New(1, 1<<20, 4<<20))
	go h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/api/v1/metrics?hold=1", nil))
	for !held.Load() {
		time.Sleep(time.Millisecond)
	}
	done := make(chan struct{})
	go func() {
		r := httptest.NewRequest("GET", "/metrics", nil)
		r.Header.Set("Upgrade", "websocket")
		r.Header.Set("Connection", "Upgrade")
		h.ServeHTTP(httptest.NewRecorder(), r)
		close(done)
	}()
	select {
	case <-done:
		t.Fatal("GET /metrics with an Upgrade header ran while the only slot was held")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	<-done
}

// TestSilentBodyHoldsNoSlot: a client that sends a POST's headers and never its body
// does not take the query slot: with one slot, a GET still gets its answer.
//
// Security finding 3.
func TestSilentBodyHoldsNoSlot(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/write", func(w http.ResponseWriter, r *http.Request) { io.Copy(io.Discard, r.Body) })
	mux.HandleFunc("/api/v1/metrics", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "answer") })
	b := newBodyBudget(1<<20, 4<<20)
	srv := httptest.NewServer(deadlines(b.readBodies(limitQueries(mux, querylimit.New(1, 1<<20, 4<<20)))))
	defer srv.Close()
	for range 3 {
		c, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "POST /write HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nsome")
	}
	time.Sleep(50 * time.Millisecond) // let the server start reading the bodies
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(srv.URL + "/api/v1/metrics")
	if err != nil {
		t.Fatalf("GET with three silent POST bodies pending: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "answer" {
		t.Errorf("GET = %q; want answer", body)
	}
}

// TestBodyLimits: a body over the limit is refused with 413 whether or not its length is
// announced; bodies past the shared budget get 503 with Retry-After.
func TestBodyLimits(t *testing.T) {
	var got int
	h := newBodyBudget(100<<10, 128<<10).readBodies(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = len(b)
	}))
	for _, c := range []struct {
		size      int
		announced bool
		want      int
	}{{50 << 10, true, 200}, {50 << 10, false, 200}, {200 << 10, true, 413}, {200 << 10, false, 413}} {
		got = 0
		r := httptest.NewRequest("POST", "/write", io.MultiReader(strings.NewReader(strings.Repeat("x", c.size))))
		if !c.announced {
			r.ContentLength = -1
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != c.want || (c.want == 200 && got != c.size) {
			t.Errorf("body of %d (announced %v) = %d, handler saw %d; want %d", c.size, c.announced, w.Code, got, c.want)
		}
	}
	// The budget: a handler holding a 100 KiB body leaves too little for another of 100 KiB.
	hold, in := make(chan struct{}), make(chan struct{})
	b := newBodyBudget(100<<10, 128<<10)
	slow := b.readBodies(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			close(in)
			<-hold
		}
	}))
	go slow.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/hold", strings.NewReader(strings.Repeat("x", 90<<10))))
	<-in
	w := httptest.NewRecorder()
	slow.ServeHTTP(w, httptest.NewRequest("POST", "/write", strings.NewReader(strings.Repeat("x", 90<<10))))
	if w.Code != 503 || w.Header().Get("Retry-After") == "" {
		t.Errorf("second body past the budget = %d (Retry-After %q); want 503 with Retry-After", w.Code, w.Header().Get("Retry-After"))
	}
	close(hold)
}
