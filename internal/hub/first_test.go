package hub

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

	"github.com/cantal-go/cantal/internal/apiwire"
	"github.com/cantal-go/cantal/internal/testsupport/cputime"
)

// chunkPeer is a peer's /api/v1/ws as the agent serves it: a subscription that asks for a
// history gets its chunk (a point per interval over the window, for every series) and then the
// latest values, one without only the latest values. The messages are built once, so that a
// benchmark's profile shows the querying hub's work.
type chunkPeer struct {
	msgs map[string][2][]byte // by wire id: history, update
}

const chunkMatch = "system.load_avg_1min"

func newChunkPeer(points int, interval time.Duration) *chunkPeer {
	return newSeriesPeer(1, points, interval)
}

// newSeriesPeer is a chunkPeer with n series (labelled series="0".."n-1" when n > 1).
func newSeriesPeer(n, points int, interval time.Duration) *chunkPeer {
	now := time.Now().UnixMilli()
	var hist, latest []any
	for j := range n {
		pts := make([]json.RawMessage, points)
		for i := range pts {
			pts[i] = json.RawMessage(fmt.Sprintf("[%d,%.2f]", now-int64(points-i)*interval.Milliseconds(), 0.25+float64((i+j)%17)/100))
		}
		labels := map[string]string{"metric": chunkMatch}
		if n > 1 {
			labels["series"] = fmt.Sprint(j)
		}
		hist = append(hist, map[string]any{"labels": labels, "kind": "float", "points": pts})
		latest = append(latest, map[string]any{"labels": labels, "kind": "float", "value": 0.42, "ts": now})
	}
	p := &chunkPeer{msgs: map[string][2][]byte{}}
	for _, id := range []string{subKey(canonicalMatch(chunkMatch), false), chunkPrefix + subKey(canonicalMatch(chunkMatch), false)} {
		h, _ := json.Marshal(map[string]any{"type": "history", "id": id, "series": hist})
		u, _ := json.Marshal(map[string]any{"type": "update", "id": id, "ts": now, "series": latest})
		p.msgs[id] = [2][]byte{h, u}
	}
	return p
}

func (p *chunkPeer) ServeHTTP(w http.ResponseWriter, r *http.Request) { p.serve(w, r, nil) }

// serve answers one hub connection: each subscription by its ready-made chunk (when it asks for
// history) and update. seen, when not nil, is called with each request first.
func (p *chunkPeer) serve(w http.ResponseWriter, r *http.Request, seen func(req map[string]string)) {
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
		if json.Unmarshal(data, &req) != nil {
			continue
		}
		if seen != nil {
			seen(req)
		}
		if req["type"] != "subscribe" {
			continue
		}
		msgs, ok := p.msgs[req["id"]]
		if !ok {
			continue
		}
		if req["history"] != "" && c.Write(ctx, websocket.MessageText, msgs[0]) != nil {
			return
		}
		if c.Write(ctx, websocket.MessageText, msgs[1]) != nil {
			return
		}
	}
}

// BenchmarkFirstQuery: the first cluster query of a hub with 9 to 149 peers (new
// subscriptions: a WebSocket each), all peers served by one in-process server whose messages
// are ready-made. A history query (Query) waits for every peer's chunk (5 minutes at 1 s scans,
// or the 5 points of a fleet just started) and latest values; a metrics query (QueryLatest)
// for the latest values only. With 100 series per peer, the two side by side: what a metrics
// query cost before it had a path of its own (it asked Query) and what it costs now. cpu-ms/op
// is the process's CPU time (getrusage: the hub and the in-process peers, whose part is
// writing ready-made messages).
func BenchmarkFirstQuery(b *testing.B) {
	for _, c := range []struct {
		n, series, points int
		metrics           bool
	}{
		{9, 1, 300, false}, {49, 1, 300, false}, {149, 1, 300, false}, {149, 1, 5, false},
		{149, 100, 300, false}, {149, 100, 300, true},
	} {
		n := c.n
		name := "history"
		if c.metrics {
			name = "metrics"
		}
		b.Run(fmt.Sprintf("%s/peers=%d/series=%d/points=%d", name, n, c.series, c.points), func(b *testing.B) {
			srv := httptest.NewServer(newSeriesPeer(c.series, c.points, time.Second))
			defer srv.Close()
			addr := strings.TrimPrefix(srv.URL, "http://")
			members := make([]Member, n)
			for i := range members {
				members[i] = Member{ID: fmt.Sprint("p", i), Name: fmt.Sprintf("n%03d", i+2), HTTP: addr, Up: true}
			}
			b.ReportAllocs()
			cpu0 := cputime.Process()
			for b.Loop() {
				// The peers send no update after their first: an interval of 10 s keeps the
				// answers ok however long the query takes on a busy machine.
				h := New(Config{Members: func() []Member { return members }, Interval: 10 * time.Second, Timeout: 10 * time.Second})
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan struct{})
				go func() { h.Run(ctx); close(done) }()
				var ans []NodeAnswer
				if c.metrics {
					ans = h.QueryLatest(ctx, chunkMatch, false)
				} else {
					ans = h.Query(ctx, chunkMatch, false)
				}
				for _, a := range ans {
					if a.Status != OK || len(a.Series) != c.series || a.Series[0].Latest.TS == 0 {
						b.Fatalf("%s: %s, %d series; want ok with %d series and their latest values", a.Node, a.Status, len(a.Series), c.series)
					}
				}
				cancel()
				<-done
				srv.CloseClientConnections()
			}
			b.ReportMetric(float64(cputime.Process()-cpu0)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
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
// scans), decoded into apiwire.WSPoints (now) and into [2]any (before), side by side.
func BenchmarkDecodeChunk(b *testing.B) {
	msg := newChunkPeer(300, time.Second).msgs[subKey(canonicalMatch(chunkMatch), false)][0]
	b.Run("wirePoint", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(msg)))
		for b.Loop() {
			var m apiwire.WSFrame
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

// slowUpdatePeer answers a subscription that asks for a history with its chunk at once, and
// one without with its current values 300 ms later.
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
	for {
		if req["type"] == "subscribe" && req["history"] != "" {
			h, _ := json.Marshal(map[string]any{"type": "history", "id": req["id"], "series": []any{
				map[string]any{"labels": labels, "kind": "float", "points": [][2]int64{{now - 1000, 1}}}}})
			if c.Write(ctx, websocket.MessageText, h) != nil {
				return
			}
		} else if req["type"] == "subscribe" {
			go func(id string) {
				time.Sleep(300 * time.Millisecond)
				u, _ := json.Marshal(map[string]any{"type": "update", "id": id, "ts": now, "series": []any{
					map[string]any{"labels": labels, "kind": "float", "value": 42, "ts": now}}})
				c.Write(ctx, websocket.MessageText, u)
			}(req["id"])
		}
		_, data, err := c.Read(ctx)
		if err != nil {
			return // the hub went
		}
		req = nil
		json.Unmarshal(data, &req)
	}
}

// TestFirstQueryHasLatest: a first history query waits for the peer's current values, not only
// its history chunk (which comes first here): its answer has the latest value of every series.
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

// chunklessPeer answers a subscription without a history with its current values at once, and
// holds back one that asks for a history (its chunk, and the current values the agent queues
// after it) until release is closed: a peer whose chunk is slow to build, send or decode.
type chunklessPeer struct{ release chan struct{} }

func (p chunklessPeer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c, req, ok := acceptSubscription(w, r)
	if !ok {
		return
	}
	defer c.CloseNow()
	ctx := r.Context()
	now := time.Now().UnixMilli()
	labels := map[string]string{"metric": "m"}
	update := func(id string) []byte {
		u, _ := json.Marshal(map[string]any{"type": "update", "id": id, "ts": now, "series": []any{
			map[string]any{"labels": labels, "kind": "float", "value": 42, "ts": now}}})
		return u
	}
	for {
		switch {
		case req["type"] == "subscribe" && req["history"] != "":
			go func(id string) {
				select {
				case <-p.release:
				case <-ctx.Done():
					return
				}
				h, _ := json.Marshal(map[string]any{"type": "history", "id": id, "series": []any{
					map[string]any{"labels": labels, "kind": "float", "points": [][2]int64{{now - 1000, 1}}}}})
				if c.Write(ctx, websocket.MessageText, h) == nil {
					c.Write(ctx, websocket.MessageText, update(id))
				}
			}(req["id"])
		case req["type"] == "subscribe":
			if c.Write(ctx, websocket.MessageText, update(req["id"])) != nil {
				return
			}
		}
		_, data, err := c.Read(ctx)
		if err != nil {
			return
		}
		req = nil
		json.Unmarshal(data, &req)
	}
}

// TestMetricsQueryDoesNotWaitForChunk: a metrics query (QueryLatest) answers with a peer's
// current values although the peer holds back its history chunk, even after a history query
// has asked for the chunk; the history query gets the chunk once it comes. The hub's Timeout
// is a minute, so a query that waited for the chunk would not return within the test's 30 s.
func TestMetricsQueryDoesNotWaitForChunk(t *testing.T) {
	peer := chunklessPeer{release: make(chan struct{})}
	srv := httptest.NewServer(peer)
	defer srv.Close()
	h := New(Config{Members: func() []Member {
		return []Member{{ID: "p", Name: "peer", HTTP: strings.TrimPrefix(srv.URL, "http://"), Up: true}}
	}, Interval: time.Second, Timeout: time.Minute})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go h.Run(ctx)

	query := func(what string, q func(context.Context, string, bool) []NodeAnswer, qctx context.Context) []NodeAnswer {
		t.Helper()
		done := make(chan []NodeAnswer, 1)
		go func() { done <- q(qctx, "m", false) }()
		select {
		case ans := <-done:
			return ans
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: no answer in 30 s: it waited for the peer's history chunk", what)
			return nil
		}
	}
	checkLatest := func(what string, ans []NodeAnswer) {
		t.Helper()
		if len(ans) != 1 || ans[0].Status != OK || len(ans[0].Series) != 1 {
			t.Fatalf("%s = %+v; want the peer ok with its series", what, ans)
		}
		if l := ans[0].Series[0].Latest; l.TS == 0 || l.Float() != 42 {
			t.Errorf("%s: latest %+v; want the update's value 42", what, l)
		}
	}
	checkLatest("first metrics query", query("first metrics query", h.QueryLatest, ctx))

	// A history query asks for the chunk; given up on (its context ends), it answers with
	// what is in. The metrics queries after it still do not wait for the chunk.
	hctx, hcancel := context.WithTimeout(ctx, 100*time.Millisecond)
	ans := query("history query without its chunk", h.Query, hctx)
	hcancel()
	checkLatest("history query without its chunk", ans)
	if pts := ans[0].Series[0].Points; len(pts) != 1 {
		t.Errorf("history query without its chunk: points %v; want only the update's", pts)
	}
	checkLatest("metrics query with a chunk asked for", query("metrics query with a chunk asked for", h.QueryLatest, ctx))

	close(peer.release)
	ans = query("history query", h.Query, ctx)
	checkLatest("history query", ans)
	if pts := ans[0].Series[0].Points; len(pts) != 2 {
		t.Errorf("history query: points %v; want the chunk's and the update's", pts)
	}
}

// TestChunkSubscriptionGoes: a history query's chunk is asked for after the live subscription
// and unsubscribed once it has come, so that the peer does not send every update twice.
func TestChunkSubscriptionGoes(t *testing.T) {
	msgs := make(chan map[string]string, 16)
	peer := newChunkPeer(5, time.Second)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		peer.serve(w, r, func(req map[string]string) { msgs <- req })
	}))
	defer srv.Close()
	h := New(Config{Members: func() []Member {
		return []Member{{ID: "p", Name: "peer", HTTP: strings.TrimPrefix(srv.URL, "http://"), Up: true}}
	}, Interval: 10 * time.Second, Timeout: time.Minute})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go h.Run(ctx)
	ans := h.Query(ctx, chunkMatch, false)
	if len(ans) != 1 || ans[0].Status != OK || len(ans[0].Series) != 1 || len(ans[0].Series[0].Points) < 5 {
		t.Fatalf("history query = %+v; want the peer's chunk", ans)
	}
	live, chunk := subKey(canonicalMatch(chunkMatch), false), chunkPrefix+subKey(canonicalMatch(chunkMatch), false)
	want := []string{"subscribe " + live, "subscribe " + chunk, "unsubscribe " + chunk}
	for i, w := range want {
		select {
		case m := <-msgs:
			if got := m["type"] + " " + m["id"]; got != w {
				t.Errorf("message %d from the hub: %q; want %q", i+1, got, w)
			}
			if i == 0 && m["history"] != "" {
				t.Errorf("the live subscription asks for a history (%s); want none", m["history"])
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("no message %d from the hub; want %q", i+1, w)
		}
	}
}
