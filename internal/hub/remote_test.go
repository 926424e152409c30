package hub

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

func TestBackoff(t *testing.T) {
	var b backoff
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond,
		800 * time.Millisecond, 1600 * time.Millisecond, 3200 * time.Millisecond, 5 * time.Second, 5 * time.Second}
	for i, w := range want {
		if got := b.next(false); got != w {
			t.Errorf("failure %d: next(false) = %s; want %s", i+1, got, w)
		}
	}
	// A session that stayed up resets the delay: a peer back from a partition and lost again
	// is retried at once, not after the 5 s the partition had grown the delay to.
	if got := b.next(true); got != minBackoff {
		t.Errorf("after a healthy session: next(true) = %s; want %s", got, minBackoff)
	}
	if got := b.next(false); got != 2*minBackoff {
		t.Errorf("failure after the reset: next(false) = %s; want %s", got, 2*minBackoff)
	}
}

// fakePeer is a peer's /api/v1/ws: it answers each subscription with its points inside the
// requested history window (when one is asked for) and then its newest point as an update, and
// drops the connection when told.
type fakePeer struct {
	mu       sync.Mutex
	points   [][2]int64          // ts ms, value
	requests []map[string]string // the subscriptions that asked for a history
	conns    int
	drop     chan struct{}
	got      chan struct{} // a subscription with a history was answered
}

func (f *fakePeer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer c.CloseNow()
	f.mu.Lock()
	f.conns++
	drop := f.drop
	f.mu.Unlock()
	ctx := r.Context()
	go func() {
		<-drop
		c.CloseNow()
	}()
	for {
		_, data, err := c.Read(ctx)
		if err != nil {
			return
		}
		var req map[string]string
		if err := json.Unmarshal(data, &req); err != nil || req["type"] != "subscribe" {
			continue
		}
		f.mu.Lock()
		var latest int64
		if n := len(f.points); n > 0 {
			latest = f.points[n-1][0]
		}
		var pts [][2]int64
		if req["history"] != "" {
			d, err := time.ParseDuration(req["history"])
			if err != nil {
				f.mu.Unlock()
				return
			}
			from := time.Now().Add(-d).UnixMilli()
			f.requests = append(f.requests, req)
			for _, p := range f.points {
				if p[0] >= from {
					pts = append(pts, p)
				}
			}
		}
		f.mu.Unlock()
		if req["history"] != "" {
			msg, _ := json.Marshal(map[string]any{"type": "history", "id": req["id"], "series": []any{
				map[string]any{"labels": map[string]string{"metric": "m"}, "kind": "float", "points": pts}}})
			if err := c.Write(ctx, websocket.MessageText, msg); err != nil {
				return
			}
		}
		// The current values at once, as the agent sends them after the history: of its
		// latest scan, the newest point.
		upd, _ := json.Marshal(map[string]any{"type": "update", "id": req["id"], "ts": latest, "series": []any{}})
		if err := c.Write(ctx, websocket.MessageText, upd); err != nil {
			return
		}
		if req["history"] != "" {
			f.got <- struct{}{}
		}
	}
}

func (f *fakePeer) add(ts, v int64) {
	f.mu.Lock()
	f.points = append(f.points, [2]int64{ts, v})
	f.mu.Unlock()
}

// TestBackfillAfterReconnect: after a lost connection the subscription asks only for what it
// missed, and the points the peer took meanwhile join those received before, none lost or
// doubled.
func TestBackfillAfterReconnect(t *testing.T) {
	f := &fakePeer{drop: make(chan struct{}), got: make(chan struct{}, 4)}
	srv := httptest.NewServer(f)
	defer srv.Close()
	now := time.Now().UnixMilli()
	for i := int64(0); i < 5; i++ {
		f.add(now-10_000+i*1000, i) // 10 s .. 6 s ago
	}
	h := New(Config{Members: func() []Member {
		return []Member{{ID: "p", Name: "peer", HTTP: strings.TrimPrefix(srv.URL, "http://"), Up: true}}
	}, Interval: time.Second, Timeout: 5 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go h.Run(ctx)

	ans := h.Query(ctx, "m", false)
	if len(ans) != 1 || len(ans[0].Series) != 1 || len(ans[0].Series[0].Points) != 5 {
		t.Fatalf("first query = %+v; want the peer's 5 points", ans)
	}
	<-f.got

	// The connection drops; the peer keeps scanning while the hub reconnects.
	f.mu.Lock()
	close(f.drop)
	f.drop = make(chan struct{})
	f.mu.Unlock()
	for i := int64(5); i < 8; i++ {
		f.add(now-10_000+i*1000, i) // 5 s .. 3 s ago
	}
	select {
	case <-f.got:
	case <-time.After(30 * time.Second):
		t.Fatal("the hub did not resubscribe after the connection dropped")
	}
	f.mu.Lock()
	second := f.requests[len(f.requests)-1]
	conns := f.conns
	f.mu.Unlock()
	if conns != 2 {
		t.Errorf("peer saw %d connections; want 2", conns)
	}
	d, _ := time.ParseDuration(second["history"])
	if d >= 5*time.Minute || d < time.Since(time.UnixMilli(now-6_000)) {
		t.Errorf("resubscription asks for history %q; want the gap since the last point received (6 s ago), not the whole chunk", second["history"])
	}

	var pts []Point
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		ans = h.Query(ctx, "m", false)
		if pts = ans[0].Series[0].Points; len(pts) >= 8 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(pts) != 8 {
		t.Fatalf("after the reconnect: %d points %v; want the 8 the peer took", len(pts), pts)
	}
	for i, p := range pts {
		if p.TS != now-10_000+int64(i)*1000 || p.Value != float64(i) {
			t.Errorf("point %d = %+v; want ts %d value %d", i, p, now-10_000+int64(i)*1000, i)
		}
	}
}

// TestStaleWhenStreamMissesAnInterval: a connected peer whose stream goes silent (here: a
// history chunk and no update after it) is ok at first, then stale once more than
// StaleAfter(Interval) has passed since its last message, and says since when.
func TestStaleWhenStreamMissesAnInterval(t *testing.T) {
	f := &fakePeer{drop: make(chan struct{}), got: make(chan struct{}, 4)}
	srv := httptest.NewServer(f)
	defer srv.Close()
	f.add(time.Now().UnixMilli()-1000, 1)
	const interval = 200 * time.Millisecond
	h := New(Config{Members: func() []Member {
		return []Member{{ID: "p", Name: "peer", HTTP: strings.TrimPrefix(srv.URL, "http://"), Up: true}}
	}, Interval: interval, Timeout: 30 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go h.Run(ctx)
	first := time.Now()
	ans := h.Query(ctx, "m", false)
	if len(ans) != 1 {
		t.Fatalf("query = %+v", ans)
	}
	if time.Since(first) < StaleAfter(interval) && ans[0].Status != OK {
		t.Errorf("right after the history chunk: status %s; want ok", ans[0].Status)
	}
	time.Sleep(StaleAfter(interval) + 100*time.Millisecond)
	ans = h.Query(ctx, "m", false)
	if ans[0].Status != Stale || ans[0].Since == 0 {
		t.Errorf("%s after the last message: status %s since %d; want stale with since", StaleAfter(interval)+100*time.Millisecond, ans[0].Status, ans[0].Since)
	}
}

// TestQueryDoesNotWaitForFailingPeer: once a peer's connection has failed, a query answers it
// unreachable from what is kept instead of waiting for its first data again (here the hub's
// Timeout is a minute: a query that waited would not return within the test's 30 s).
func TestQueryDoesNotWaitForFailingPeer(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := strings.TrimPrefix(srv.URL, "http://")
	srv.Close() // connections are refused
	h := New(Config{Members: func() []Member { return []Member{{ID: "p", Name: "peer", HTTP: addr, Up: true}} },
		Interval: time.Second, Timeout: time.Minute})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go h.Run(ctx)
	s, p := h.subscribe(Member{ID: "p", Name: "peer", HTTP: addr, Up: true}, "m", false, false)
	if s == nil {
		t.Fatal("no subscription")
	}
	deadline := time.Now().Add(30 * time.Second)
	for !p.failing() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !p.failing() {
		t.Fatal("the connection to a closed port never failed")
	}
	done := make(chan []NodeAnswer, 1)
	go func() { done <- h.Query(ctx, "m", false) }()
	select {
	case ans := <-done:
		if len(ans) != 1 || ans[0].Status != Unreachable {
			t.Errorf("query = %+v; want the peer unreachable", ans)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the query waited for a peer whose connection had failed")
	}
}

// acceptSubscription accepts a test peer's WebSocket and reads the hub's first message, its
// subscription (a malformed one reads as an empty map). ok is false when either failed.
func acceptSubscription(w http.ResponseWriter, r *http.Request) (c *websocket.Conn, req map[string]string, ok bool) {
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return nil, nil, false
	}
	_, data, err := c.Read(r.Context())
	if err != nil {
		c.CloseNow()
		return nil, nil, false
	}
	json.Unmarshal(data, &req)
	return c, req, true
}

// TestQueryWaitsWithinItsBudget: a peer that accepts the connection and then says nothing
// (a stalled process) costs a query at most Config.Wait, though the dial timeout is a
// minute; the answer shows it unreachable, and later queries do not wait for it again until
// it sends something.
func TestQueryWaitsWithinItsBudget(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _, ok := acceptSubscription(w, r)
		if !ok {
			return
		}
		defer c.CloseNow()
		c.Read(r.Context()) // silent until the hub goes
	}))
	defer srv.Close()
	m := Member{ID: "p", Name: "peer", HTTP: strings.TrimPrefix(srv.URL, "http://"), Up: true}
	h := New(Config{Members: func() []Member { return []Member{m} }, Interval: time.Second, Timeout: time.Minute, Wait: 200 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go h.Run(ctx)
	for i, q := range []func(context.Context, string, bool) []NodeAnswer{h.QueryLatest, h.Query} {
		done := make(chan []NodeAnswer, 1)
		go func() { done <- q(ctx, "m", false) }()
		select {
		case ans := <-done:
			if len(ans) != 1 || ans[0].Status != Unreachable {
				t.Errorf("query %d = %+v; want the silent peer unreachable", i+1, ans)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("query %d waited past its budget (Wait 200ms) for a silent peer", i+1)
		}
	}
	s, _ := h.subscribe(m, "m", false, false)
	if !s.gaveUp.Load() {
		t.Error("the silent peer's subscription is not marked given up: every query would wait for it")
	}
}
