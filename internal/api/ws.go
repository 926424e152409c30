package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/registry"
	"github.com/cantal-go/cantal/internal/remote"
	"github.com/cantal-go/cantal/internal/selector"
	"github.com/cantal-go/cantal/internal/series"
)

// The WebSocket protocol of /api/v1/ws. Messages are JSON text frames.
//
// Client → agent:
//
//	{"type": "subscribe", "id": "a", "match": "SEL", "history": "5m", "fn": "rate"}
//	{"type": "subscribe", "id": "b", "match": "SEL", "scope": "cluster"}
//	{"type": "unsubscribe", "id": "a"}
//
// Agent → client:
//
//	{"type": "history", "id": "a", "series": [{"labels", "kind", "points"}]}   once, when "history" was asked
//	{"type": "update", "id": "a", "ts": 1700000000000, "series": [series...]} after every scan
//	{"type": "error", "id": "a", "error": "..."}                              a bad request; the connection stays
//
// An update carries the latest value of every live series matching the selector (the series
// objects of /api/v1/metrics). With "scope": "cluster" the subscription covers every node: each
// node's updates are pushed as they arrive from it, as {"type": "update", "id", "node", "ts",
// "series"} with a "node" label on every series (the local node's after each local scan); this
// is the push a resource manager subscribes to. Its "history" comes as one message per node
// ({"type": "history", "id", "node", "series"}), the peers' from the chunk the agent's remote
// subscriptions keep (5 minutes). A subscription lasts until it is unsubscribed or the connection
// closes. A client too slow to read skips updates rather than delaying the agent.
type wsRequest struct {
	Type    string `json:"type"`
	ID      string `json:"id"`
	Match   string `json:"match"`
	History string `json:"history"`
	Fn      string `json:"fn"`
	Scope   string `json:"scope"`
}

type wsSub struct {
	id     string
	sel    *selector.Selector
	rate   bool
	node   string             // cluster scope: the local node's name, labelled on its series
	cancel context.CancelFunc // cluster scope: stops listening to the peers
}

// maxSubs bounds the subscriptions of one connection.
const maxSubs = 256

func (s *Server) ws(w http.ResponseWriter, r *http.Request) {
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{
		// The API is unauthenticated and served on loopback by default; browsers' same-origin
		// checks protect nothing here, and peers and tools connect from anywhere.
		InsecureSkipVerify: true,
		CompressionMode:    websocket.CompressionContextTakeover,
	})
	if err != nil {
		return // Accept has answered
	}
	c.SetReadLimit(1 << 16)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	conn := &wsConn{srv: s, c: c, ctx: ctx, subs: map[string]*wsSub{}, views: make(chan *registry.View, 1), wake: make(chan struct{}, 1)}
	stop := s.Registry.Subscribe(conn.views)
	defer stop()

	go func() {
		defer cancel()
		conn.readLoop(ctx)
	}()
	err = conn.writeLoop(ctx)
	status := websocket.CloseStatus(err)
	if status == -1 && err != nil && !errors.Is(err, context.Canceled) {
		s.Log.Debug("websocket closed", "remote", r.RemoteAddr, "err", err)
	}
	c.Close(websocket.StatusNormalClosure, "")
}

type wsConn struct {
	srv   *Server
	ctx   context.Context
	c     *websocket.Conn
	views chan *registry.View

	mu   sync.Mutex // guards subs and pending
	subs map[string]*wsSub
	// pending holds answers the reader produced (history, errors) for the writer to send;
	// wake tells the writer there are some.
	pending [][]byte
	wake    chan struct{}
}

func (w *wsConn) readLoop(ctx context.Context) {
	for {
		_, data, err := w.c.Read(ctx)
		if err != nil {
			return
		}
		var req wsRequest
		if err := json.Unmarshal(data, &req); err != nil {
			w.queue(wsError("", "bad message: "+err.Error()))
			continue
		}
		w.handle(&req)
	}
}

func (w *wsConn) handle(req *wsRequest) {
	switch req.Type {
	case "subscribe":
		sel, err := selector.Parse(req.Match)
		if err != nil {
			w.queue(wsError(req.ID, "bad match: "+err.Error()))
			return
		}
		sub := &wsSub{id: req.ID, sel: sel}
		switch req.Fn {
		case "":
		case "rate":
			sub.rate = true
		default:
			w.queue(wsError(req.ID, fmt.Sprintf("bad fn %q: the only function is rate", req.Fn)))
			return
		}
		var window time.Duration
		if req.History != "" {
			d, err := time.ParseDuration(req.History)
			if err != nil || d <= 0 || (w.srv.MaxWindow > 0 && d > w.srv.MaxWindow) {
				w.queue(wsError(req.ID, fmt.Sprintf("bad history %q: want a positive duration within the history kept", req.History)))
				return
			}
			window = d
		}
		switch req.Scope {
		case "", "node":
		case "cluster":
			sub.node = w.srv.NodeName
		default:
			w.queue(wsError(req.ID, fmt.Sprintf("bad scope %q: want node or cluster", req.Scope)))
			return
		}
		w.mu.Lock()
		if _, ok := w.subs[req.ID]; !ok && len(w.subs) >= maxSubs {
			w.mu.Unlock()
			w.queue(wsError(req.ID, "too many subscriptions on this connection"))
			return
		}
		if old := w.subs[req.ID]; old != nil && old.cancel != nil {
			old.cancel()
		}
		w.subs[req.ID] = sub
		w.mu.Unlock()
		if sub.node != "" && w.srv.Cluster != nil {
			ctx, cancel := context.WithCancel(w.ctx)
			sub.cancel = cancel
			go w.srv.Cluster.Listen(ctx, req.Match, sub.rate, func(u remote.Update) {
				w.queue(remoteUpdate(req.ID, u))
			})
		}
		if window > 0 {
			b := []byte(`{"type":"history","id":`)
			b = strconv.AppendQuote(b, req.ID)
			if sub.node != "" {
				b = append(b, `,"node":`...)
				b = series.AppendJSONString(b, sub.node)
			}
			b = append(b, ',')
			h := HistoryJSON(nil, w.srv.Registry, Query{Sel: sel, Window: window, Rate: sub.rate}, time.Now().UnixMilli())
			if sub.node != "" {
				h = append(append([]byte(`{"series":`), withNodeLabels(h, sub.node)...), "}\n"...)
			}
			b = append(b, h[1:len(h)-1]...) // drop the braces and newline of {"series":[...]}
			w.queue(b)
			if sub.node != "" && w.srv.Cluster != nil {
				// Every peer's chunk, from the remote subscriptions' kept points.
				go w.peerHistory(req.ID, req.Match, sub.rate, window)
			}
		}
		// The current values at once, not only after the next scan.
		w.queue(w.update(sub, w.srv.Registry.View(), nil))
	case "unsubscribe":
		w.mu.Lock()
		if old := w.subs[req.ID]; old != nil && old.cancel != nil {
			old.cancel()
		}
		delete(w.subs, req.ID)
		w.mu.Unlock()
	default:
		w.queue(wsError(req.ID, fmt.Sprintf("unknown message type %q", req.Type)))
	}
}

// peerHistory queues one history message per peer for a cluster subscription, from the points
// the remote subscriptions keep (at most their history chunk, 5 minutes by default).
func (w *wsConn) peerHistory(id, match string, rate bool, window time.Duration) {
	from := time.Now().Add(-window).UnixMilli()
	for _, node := range w.srv.Cluster.Query(w.ctx, match, rate) {
		b := []byte(`{"type":"history","id":`)
		b = strconv.AppendQuote(b, id)
		b = append(b, `,"node":`...)
		b = series.AppendJSONString(b, node.Node)
		b = append(b, `,"status":"`...)
		b = append(b, node.Status...)
		b = append(b, `","series":[`...)
		n := 0
		for _, sr := range node.Series {
			if sr.Latest.Kind == series.State {
				continue
			}
			if n > 0 {
				b = append(b, ',')
			}
			n++
			b = append(b, `{"labels":`...)
			b = append(b, sr.Latest.Labels.Key()...)
			b = append(b, `,"kind":"`...)
			b = append(b, sr.Latest.Kind.String()...)
			b = append(b, `","points":[`...)
			m := 0
			for _, p := range sr.Points {
				if p.TS < from {
					continue
				}
				if m > 0 {
					b = append(b, ',')
				}
				m++
				b = append(b, '[')
				b = strconv.AppendInt(b, p.TS, 10)
				b = append(b, ',')
				b = series.AppendFloat(b, p.Value)
				b = append(b, ']')
			}
			b = append(b, "]}"...)
		}
		w.queue(append(b, "]}"...))
	}
}

// remoteUpdate is the update message of a peer's new values for a cluster subscription.
func remoteUpdate(id string, u remote.Update) []byte {
	b := []byte(`{"type":"update","id":`)
	b = strconv.AppendQuote(b, id)
	b = append(b, `,"node":`...)
	b = series.AppendJSONString(b, u.Node)
	b = append(b, `,"ts":`...)
	b = strconv.AppendInt(b, u.TS, 10)
	b = append(b, `,"series":[`...)
	for i := range u.Series {
		if i > 0 {
			b = append(b, ',')
		}
		smp := u.Series[i]
		smp.Labels = remote.WithNode(smp.Labels, u.Node)
		b = smp.AppendJSON(b)
	}
	return append(b, "]}"...)
}

func wsError(id, msg string) []byte {
	b, _ := json.Marshal(map[string]string{"type": "error", "id": id, "error": msg})
	return b
}

// maxPending bounds the messages waiting for a slow client; past it the oldest are dropped, so
// a client that does not read costs bounded memory and misses updates instead.
const maxPending = 1024

func (w *wsConn) queue(b []byte) {
	w.mu.Lock()
	if len(w.pending) >= maxPending {
		n := copy(w.pending, w.pending[len(w.pending)-maxPending/2:])
		clear(w.pending[n:])
		w.pending = w.pending[:n]
	}
	w.pending = append(w.pending, b)
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// update builds the update message of sub for view.
func (w *wsConn) update(sub *wsSub, view *registry.View, b []byte) []byte {
	hist := w.srv.Registry.History()
	var scratch [2]history.Point
	b = append(b[:0], `{"type":"update","id":`...)
	b = strconv.AppendQuote(b, sub.id)
	if sub.node != "" {
		b = append(b, `,"node":`...)
		b = series.AppendJSONString(b, sub.node)
	}
	b = append(b, `,"ts":`...)
	b = strconv.AppendInt(b, view.TS, 10)
	b = append(b, `,"series":[`...)
	n := 0
	view.Each(func(h registry.Handle) bool {
		if !h.Live() || !sub.sel.Match(h.Labels()) {
			return true
		}
		smp, ok := h.Latest(hist, scratch[:0])
		if !ok {
			return true
		}
		if n > 0 {
			b = append(b, ',')
		}
		n++
		if sub.node != "" {
			smp.Labels = remote.WithNode(smp.Labels, sub.node)
		}
		b = smp.AppendJSON(b)
		return true
	})
	return append(b, "]}"...)
}

func (w *wsConn) writeLoop(ctx context.Context) error {
	send := func(b []byte) error {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return w.c.Write(wctx, websocket.MessageText, b)
	}
	for {
		var view *registry.View
		select {
		case <-ctx.Done():
			return ctx.Err()
		case view = <-w.views:
		case <-w.wake:
		}
		w.mu.Lock()
		pending := w.pending
		w.pending = nil
		var subs []*wsSub
		if view != nil {
			for _, s := range w.subs {
				subs = append(subs, s)
			}
		}
		w.mu.Unlock()
		for _, b := range pending {
			if err := send(b); err != nil {
				return err
			}
		}
		for _, sub := range subs {
			if err := send(w.update(sub, view, nil)); err != nil {
				return err
			}
		}
	}
}
