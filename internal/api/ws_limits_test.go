package api

import (
	"context"
	"encoding/json"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/cantal-go/cantal/internal/apiwire"
	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/hub"
	"github.com/cantal-go/cantal/internal/registry"
	"github.com/cantal-go/cantal/internal/series"
)

// historyServer is a Server whose registry holds 10 series of 100 points each (a history
// answer of about 25 kB for every series) and whose WebSocket connections may queue budget
// bytes.
func historyServer(t testing.TB, budget int) *Server {
	t.Helper()
	h := history.New(history.Options{Retention: time.Hour, Interval: time.Second})
	reg := registry.New(h, time.Hour, slog.New(slog.DiscardHandler))
	var refs []*series.Ref
	for i := range 10 {
		refs = append(refs, reg.Series(series.Labels{"metric": "m" + strconv.Itoa(i)}, series.Float))
	}
	now := time.Now().UnixMilli()
	for i := int64(0); i < 100; i++ {
		reg.Begin(now - (99-i)*1000)
		for _, r := range refs {
			reg.Put(r, math.Float64bits(float64(i)+0.123456))
		}
		reg.Commit()
	}
	return &Server{Registry: reg, Log: slog.New(slog.DiscardHandler), MaxWindow: time.Hour, NodeName: "a", wsBudget: budget}
}

// checkAccounting fails unless the connection's byte count is what its queue holds and within
// its budget.
func checkAccounting(t *testing.T, w *wsConn) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, m := range w.pending {
		n += len(m.b)
	}
	if n+w.inflight != w.pendingBytes || w.pendingBytes > w.budget || len(w.pending) > maxPending {
		t.Fatalf("queue of %d messages holds %d bytes (+%d being written); counted %d, budget %d", len(w.pending), n, w.inflight, w.pendingBytes, w.budget)
	}
	subBytes := 0
	for _, s := range w.subs {
		subBytes += s.size
	}
	if subBytes != w.subBytes || subBytes > maxSubBytes || len(w.subs) > maxSubs {
		t.Fatalf("%d subscriptions of %d bytes; counted %d", len(w.subs), subBytes, w.subBytes)
	}
}

// pendingOf returns the types of the queued messages of id, in order.
func pendingOf(w *wsConn, id string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, m := range w.pending {
		var v struct{ Type, ID string }
		json.Unmarshal(m.b, &v)
		if v.ID == id {
			out = append(out, v.Type)
		}
	}
	return out
}

func subscribe(w *wsConn, s string) {
	var req apiwire.WSRequest
	if err := json.Unmarshal([]byte(s), &req); err != nil {
		panic(err)
	}
	w.handle(&req)
}

// TestWSResubscribeReplacesQueued: re-subscribing an id with a long history, again and again
// while the client reads nothing, replaces the subscription and its queued answers instead of
// adding to them.
//
// Security finding 8.
func TestWSResubscribeReplacesQueued(t *testing.T) {
	srv := historyServer(t, 1<<20)
	w := newWSConn(srv, context.Background())
	for range 200 {
		subscribe(w, `{"type":"subscribe","id":"a","history":"1h"}`)
		checkAccounting(t, w)
	}
	if got := pendingOf(w, "a"); len(got) != 2 || got[0] != "history" || got[1] != "update" {
		t.Errorf("after 200 subscribes of a: queued %v; want one history and one update", got)
	}
	if len(w.subs) != 1 {
		t.Errorf("%d subscriptions; want 1", len(w.subs))
	}
	one := w.pendingBytes
	if one < 20000 {
		t.Fatalf("a's answers take %d bytes; the test needs a history of some size", one)
	}
	subscribe(w, `{"type":"unsubscribe","id":"a"}`)
	checkAccounting(t, w)
	if w.pendingBytes != 0 || len(w.subs) != 0 {
		t.Errorf("after unsubscribe: %d bytes queued, %d subscriptions; want none", w.pendingBytes, len(w.subs))
	}
}

// TestWSHistoryWithinQueueBudget: histories that would take more than what the connection may
// still queue are not sent: an error says so and the subscription's live updates follow (a
// page asking for more history than fits still gets its values); room freed by the writer is
// used again.
//
// Security finding 8.
func TestWSHistoryWithinQueueBudget(t *testing.T) {
	srv := historyServer(t, 100<<10)
	w := newWSConn(srv, context.Background())
	var accepted, refused []string
	for i := range 20 {
		id := "s" + strconv.Itoa(i)
		subscribe(w, `{"type":"subscribe","id":"`+id+`","history":"1h"}`)
		checkAccounting(t, w)
		got := pendingOf(w, id)
		switch {
		case len(got) == 2 && got[0] == "history":
			accepted = append(accepted, id)
		case len(got) == 2 && got[0] == "error" && got[1] == "update":
			refused = append(refused, id)
			if w.subs[id] == nil {
				t.Errorf("subscription %s whose history did not fit was dropped; want its updates", id)
			}
		default:
			t.Fatalf("subscribe %s: queued %v", id, got)
		}
	}
	if len(accepted) < 2 || len(refused) == 0 {
		t.Fatalf("accepted %v, refused %v; want a few of each with a budget of 4 histories", accepted, refused)
	}
	// A history too large for the whole budget is refused even on an empty queue.
	big := newWSConn(historyServer(t, 10<<10), context.Background())
	subscribe(big, `{"type":"subscribe","id":"x","history":"1h"}`)
	if got := pendingOf(big, "x"); len(got) != 2 || got[0] != "error" || got[1] != "update" || big.subs["x"] == nil {
		t.Errorf("history over the whole budget: queued %v, subscribed %v; want an error, then updates", got, big.subs["x"] != nil)
	}
	var e struct{ Error string }
	big.mu.Lock()
	json.Unmarshal(big.pending[0].b, &e)
	big.mu.Unlock()
	if !strings.Contains(e.Error, "shorter history") {
		t.Errorf("error %q does not say what to do", e.Error)
	}
	// Re-subscribing an accepted id with its history fits in the room its old answers leave.
	id := accepted[len(accepted)-1]
	subscribe(w, `{"type":"subscribe","id":"`+id+`","history":"1h"}`)
	if got := pendingOf(w, id); len(got) != 2 || got[0] != "history" {
		t.Errorf("re-subscribe %s: queued %v; want its history again", id, got)
	}
	// Once the writer has taken the queue, histories fit again.
	for {
		if _, ok := w.next(); !ok {
			break
		}
	}
	checkAccounting(t, w)
	subscribe(w, `{"type":"subscribe","id":"`+refused[0]+`","history":"1h"}`)
	if got := pendingOf(w, refused[0]); len(got) != 2 || got[0] != "history" {
		t.Errorf("subscribe %s after the queue was written: queued %v; want its history", refused[0], got)
	}
}

// TestWSSlowReaderUpdatesReplaced: the peers' updates for a client that does not read replace
// one another: one per subscription and node waits, whatever their number.
//
// Security finding 8.
func TestWSSlowReaderUpdatesReplaced(t *testing.T) {
	srv := historyServer(t, 1<<20)
	w := newWSConn(srv, context.Background())
	subscribe(w, `{"type":"subscribe","id":"c","match":"m1","scope":"cluster"}`)
	sub := w.subs["c"]
	for i := range 1000 {
		for _, node := range []string{"b", "c"} {
			u := hub.Update{Node: node, TS: int64(i), Series: []series.Sample{{Labels: series.Labels{"metric": "m1"}, Kind: series.Float, TS: int64(i)}}}
			w.queue(wsMsg{sub: sub, kind: msgUpdate, node: node, b: remoteUpdate("c", u, nil)})
		}
	}
	checkAccounting(t, w)
	if got := pendingOf(w, "c"); len(got) != 3 { // the local first update, b's and c's latest
		t.Errorf("after 2000 peer updates: queued %v; want 3 updates", got)
	}
	w.mu.Lock()
	last := string(w.pending[len(w.pending)-1].b)
	w.mu.Unlock()
	if !strings.Contains(last, `"ts":999`) {
		t.Errorf("the update kept is %s; want the latest", last)
	}
	// An update of a subscription since replaced is dropped.
	subscribe(w, `{"type":"subscribe","id":"c","match":"m2"}`)
	w.queue(wsMsg{sub: sub, kind: msgUpdate, node: "b", b: []byte(`{"type":"update","id":"c","stale":true}`)})
	for _, m := range w.pending {
		if strings.Contains(string(m.b), "stale") {
			t.Error("an update of a replaced subscription was queued")
		}
	}
}

// TestWSSubscriptionLimits: subscriptions are bounded in number and in the bytes of their ids and
// selectors, ids in length; a client that lets errors pile up past the budget is given up on.
//
// Security finding 8.
func TestWSSubscriptionLimits(t *testing.T) {
	srv := historyServer(t, 64<<10)
	w := newWSConn(srv, context.Background())
	for i := range maxSubs + 10 {
		subscribe(w, `{"type":"subscribe","id":"`+strconv.Itoa(i)+`","match":"none"}`)
		for {
			if _, ok := w.next(); !ok {
				break
			}
		}
	}
	if len(w.subs) != maxSubs {
		t.Errorf("%d subscriptions; want at most %d", len(w.subs), maxSubs)
	}
	subscribe(w, `{"type":"subscribe","id":"0","match":"other"}`) // replacing is always allowed
	if got := pendingOf(w, "0"); len(got) != 1 || got[0] != "update" {
		t.Errorf("replacing a subscription at the limit: queued %v; want its update", got)
	}

	w = newWSConn(srv, context.Background())
	long := strings.Repeat("x", 60<<10)
	for i := range 6 {
		subscribe(w, `{"type":"subscribe","id":"`+strconv.Itoa(i)+`","match":"`+long+`"}`)
		for {
			if _, ok := w.next(); !ok {
				break
			}
		}
		checkAccounting(t, w)
	}
	if len(w.subs) != maxSubBytes/(60<<10) {
		t.Errorf("%d subscriptions of 60 KiB selectors; want %d", len(w.subs), maxSubBytes/(60<<10))
	}
	subscribe(w, `{"type":"subscribe","id":"`+strings.Repeat("i", maxIDBytes+1)+`"}`)
	if got := pendingOf(w, ""); len(got) != 1 || got[0] != "error" {
		t.Errorf("an id over %d bytes: queued %v; want an error", maxIDBytes, got)
	}

	stopped := false
	w = newWSConn(srv, context.Background())
	w.stop = func() { stopped = true }
	for range 10000 {
		subscribe(w, `{"type":"nonsense","id":"`+strings.Repeat("e", 200)+`"}`)
		checkAccounting(t, w)
		if stopped {
			break
		}
	}
	if !stopped || w.failure() == "" {
		t.Errorf("a client leaving %d bytes of errors unread was not given up on", w.pendingBytes)
	}
}

// TestWSRefusesForeignOrigin: the WebSocket refuses a browser handshake from another site's page,
// accepts one from the agent's own pages and from allowed origins, and clients that send no
// Origin (peers, the CLI).
//
// Security finding 8.
func TestWSRefusesForeignOrigin(t *testing.T) {
	srv := historyServer(t, 0)
	srv.WSOriginPatterns = []string{"dashboard.example"}
	mux := http.NewServeMux()
	srv.Register(mux)
	ts := httptest.NewServer(mux)
	defer ts.Close()
	url := "ws" + strings.TrimPrefix(ts.URL, "http") + "/api/v1/ws"
	for origin, ok := range map[string]bool{
		"":                              true,
		ts.URL:                          true,
		"http://dashboard.example":      true,
		"https://evil.example":          false,
		"http://127.0.0.1.evil.example": false,
		"null":                          false,
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var h http.Header
		if origin != "" {
			h = http.Header{"Origin": {origin}}
		}
		c, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: h})
		switch {
		case ok && err != nil:
			t.Errorf("Origin %q refused: %v", origin, err)
		case !ok && err == nil:
			t.Errorf("Origin %q accepted", origin)
		case !ok && (resp == nil || resp.StatusCode != http.StatusForbidden):
			t.Errorf("Origin %q: %v; want 403", origin, resp)
		}
		if c != nil {
			c.CloseNow()
		}
		cancel()
	}
}

// BenchmarkWSUpdate builds the update of a subscription to every series for a caller who sees
// every process (no filter).
func BenchmarkWSUpdate(b *testing.B) {
	srv := historyServer(b, 0)
	w := newWSConn(srv, context.Background())
	subscribe(w, `{"type":"subscribe","id":"a"}`)
	sub := w.subs["a"]
	view := srv.Registry.View()
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf = w.update(sub, view, srv.SeriesVisible(w.ctx), buf)
	}
}
