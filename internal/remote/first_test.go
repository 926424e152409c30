package remote

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// chunkPeer is a peer's /api/v1/ws as the agent serves it to a new subscription: its history
// chunk (one series, a point per interval over the window asked) and then its latest values.
// The messages are built once, so that a benchmark's profile shows the querying hub's work.
type chunkPeer struct {
	history, update []byte
}

func newChunkPeer(points int, interval time.Duration) *chunkPeer {
	now := time.Now().UnixMilli()
	pts := make([]json.RawMessage, points)
	for i := range pts {
		pts[i] = json.RawMessage(fmt.Sprintf("[%d,%.2f]", now-int64(points-i)*interval.Milliseconds(), 0.25+float64(i%17)/100))
	}
	labels := map[string]string{"metric": "system.load_avg_1min"}
	h, _ := json.Marshal(map[string]any{"type": "history", "id": "raw:system.load_avg_1min", "series": []any{
		map[string]any{"labels": labels, "kind": "float", "points": pts}}})
	u, _ := json.Marshal(map[string]any{"type": "update", "id": "raw:system.load_avg_1min", "ts": now, "series": []any{
		map[string]any{"labels": labels, "kind": "float", "value": 0.42, "ts": now}}})
	return &chunkPeer{history: h, update: u}
}

func (p *chunkPeer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer c.CloseNow()
	ctx := r.Context()
	for {
		_, data, err := c.Read(ctx)
		if err != nil {
			return
		}
		var req map[string]string
		if json.Unmarshal(data, &req) != nil || req["type"] != "subscribe" {
			continue
		}
		if req["history"] != "" && c.Write(ctx, websocket.MessageText, p.history) != nil {
			return
		}
		if c.Write(ctx, websocket.MessageText, p.update) != nil {
			return
		}
	}
}

// BenchmarkFirstQuery: the first cluster query of a hub with 9 to 149 peers (new
// subscriptions: a WebSocket each, a chunk of one series, 5 minutes at 1 s scans or the 5
// points of a fleet just started, then the latest values), all peers served by one in-process
// server whose messages are ready-made.
func BenchmarkFirstQuery(b *testing.B) {
	for _, c := range []struct{ n, points int }{{9, 300}, {49, 300}, {149, 300}, {149, 5}} {
		n := c.n
		b.Run(fmt.Sprintf("peers=%d/points=%d", n, c.points), func(b *testing.B) {
			srv := httptest.NewServer(newChunkPeer(c.points, time.Second))
			defer srv.Close()
			addr := strings.TrimPrefix(srv.URL, "http://")
			members := make([]Member, n)
			for i := range members {
				members[i] = Member{ID: fmt.Sprint("p", i), Name: fmt.Sprintf("n%03d", i+2), HTTP: addr, Up: true}
			}
			b.ReportAllocs()
			for b.Loop() {
				h := New(Config{Members: func() []Member { return members }, Interval: time.Second, Timeout: 10 * time.Second})
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan struct{})
				go func() { h.Run(ctx); close(done) }()
				ans := h.Query(ctx, "system.load_avg_1min", false)
				for _, a := range ans {
					if a.Status != OK || len(a.Series) != 1 {
						b.Fatalf("%s: %s, %d series", a.Node, a.Status, len(a.Series))
					}
				}
				cancel()
				<-done
				srv.CloseClientConnections()
			}
		})
	}
}

// anyMsg is the history message as it was decoded before wirePoint: each point a [2]any, its
// numbers boxed. It is kept here as the benchmark's side-by-side reference.
type anyMsg struct {
	Type   string `json:"type"`
	ID     string `json:"id"`
	Series []struct {
		Labels map[string]string `json:"labels"`
		Kind   string            `json:"kind"`
		Points [][2]any          `json:"points"`
	} `json:"series"`
}

// BenchmarkDecodeChunk: one peer's history chunk (one series, 300 points: 5 minutes at 1 s
// scans), decoded into wirePoints (now) and into [2]any (before), side by side.
func BenchmarkDecodeChunk(b *testing.B) {
	msg := newChunkPeer(300, time.Second).history
	b.Run("wirePoint", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(msg)))
		for b.Loop() {
			var m wireMsg
			if err := json.Unmarshal(msg, &m); err != nil || len(m.Series[0].Points) != 300 {
				b.Fatal(err)
			}
		}
	})
	b.Run("any", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(msg)))
		for b.Loop() {
			var m anyMsg
			if err := json.Unmarshal(msg, &m); err != nil || len(m.Series[0].Points) != 300 {
				b.Fatal(err)
			}
		}
	})
}

// TestDialsBounded: a first query to more peers than Config.MaxDials opens at most MaxDials
// connections at once (here each upgrade is held 30 ms by the peer), and still reaches every
// peer.
func TestDialsBounded(t *testing.T) {
	var active, most atomic.Int32
	peer := newChunkPeer(5, time.Second)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := active.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(30 * time.Millisecond)
		active.Add(-1)
		peer.ServeHTTP(w, r)
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	members := make([]Member, 12)
	for i := range members {
		members[i] = Member{ID: fmt.Sprint("p", i), Name: fmt.Sprintf("n%02d", i), HTTP: addr, Up: true}
	}
	h := New(Config{Members: func() []Member { return members }, Interval: time.Second, Timeout: 10 * time.Second, MaxDials: 3})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go h.Run(ctx)
	for _, a := range h.Query(ctx, "system.load_avg_1min", false) {
		if a.Status != OK || len(a.Series) != 1 {
			t.Errorf("%s: %s, %d series; want ok with its series", a.Node, a.Status, len(a.Series))
		}
	}
	if m := most.Load(); m > 3 || m < 2 {
		t.Errorf("at most %d upgrades at once; want 3 (MaxDials), and more than one", m)
	}
}

// slowUpdatePeer answers a subscription with its history chunk and, 300 ms later, its current
// values.
type slowUpdatePeer struct{}

func (slowUpdatePeer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c, req, ok := acceptSubscription(w, r)
	if !ok {
		return
	}
	defer c.CloseNow()
	ctx := r.Context()
	now := time.Now().UnixMilli()
	labels := map[string]string{"metric": "m"}
	h, _ := json.Marshal(map[string]any{"type": "history", "id": req["id"], "series": []any{
		map[string]any{"labels": labels, "kind": "float", "points": [][2]int64{{now - 1000, 1}}}}})
	if c.Write(ctx, websocket.MessageText, h) != nil {
		return
	}
	time.Sleep(300 * time.Millisecond)
	u, _ := json.Marshal(map[string]any{"type": "update", "id": req["id"], "ts": now, "series": []any{
		map[string]any{"labels": labels, "kind": "float", "value": 42, "ts": now}}})
	if c.Write(ctx, websocket.MessageText, u) != nil {
		return
	}
	c.Read(ctx) // until the hub goes
}

// TestFirstQueryHasLatest: a first query waits for the peer's current values, not only its
// history chunk (which comes first): its answer has the latest value of every series.
func TestFirstQueryHasLatest(t *testing.T) {
	srv := httptest.NewServer(slowUpdatePeer{})
	defer srv.Close()
	h := New(Config{Members: func() []Member {
		return []Member{{ID: "p", Name: "peer", HTTP: strings.TrimPrefix(srv.URL, "http://"), Up: true}}
	}, Interval: time.Second, Timeout: 10 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go h.Run(ctx)
	ans := h.Query(ctx, "m", false)
	if len(ans) != 1 || len(ans[0].Series) != 1 {
		t.Fatalf("first query = %+v; want the peer's series", ans)
	}
	sr := ans[0].Series[0]
	if sr.Latest.TS == 0 || sr.Latest.Bits == 0 || len(sr.Points) != 2 {
		t.Errorf("first query: latest %+v, points %v; want the update's value 42 and the chunk's point with it", sr.Latest, sr.Points)
	}
}
