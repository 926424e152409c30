package agent

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
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
	}), 1)
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
