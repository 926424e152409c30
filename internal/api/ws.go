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

	"github.com/cantal-go/cantal/internal/apiwire"
	"github.com/cantal-go/cantal/internal/hub"
	"github.com/cantal-go/cantal/internal/registry"
	"github.com/cantal-go/cantal/internal/selector"
	"github.com/cantal-go/cantal/internal/series"
)

// ws serves the WebSocket protocol of /api/v1/ws (apiwire/ws.go declares its messages).
// Series are those the caller may see (Server.SeriesVisible, PeerSeriesVisible); a cluster
// subscription's peer history comes from the chunk the agent's remote subscriptions keep
// (5 minutes).
//
// What one connection may hold is bounded:
//
//   - A subscribe with an id already subscribed replaces that subscription: its answers not yet
//     written are dropped with it (one being written still arrives). Unsubscribe drops them too.
//   - At most maxSubs subscriptions, whose ids and selectors take at most maxSubBytes; an id is
//     at most maxIDBytes long.
//   - Answers waiting for the client (history, errors, the peers' updates) take at most
//     defaultWSBudget bytes (8 MiB). A history that would not fit in what is left is not sent: an
//     error with the subscription's id says so (ask for a shorter history or a narrower
//     selector), and the subscription stands, its updates following as usual. An update waiting to be written is replaced by the next one of the
//     same subscription and node, and skipped when it does not fit: a client too slow to read
//     skips updates rather than delaying the agent or growing its memory. A client that lets
//     maxPending answers or the whole budget pile up in errors is disconnected (close status
//     1008, policy violation).
type wsSub struct {
	id    string
	match string
	sel   *selector.Selector
	rate  bool
	node  string // cluster scope: the local node's name, labelled on its series
	size  int    // bytes of id and match, counted against maxSubBytes
	// ctx ends when the subscription is replaced or unsubscribed, or the connection closes:
	// it stops listening to the peers.
	ctx    context.Context
	cancel context.CancelFunc
}

// Bounds of one WebSocket connection (see the protocol above).
const (
	maxSubs         = 256
	maxSubBytes     = 256 << 10
	maxIDBytes      = 256
	maxPending      = 1024    // answers waiting to be written
	defaultWSBudget = 8 << 20 // bytes of answers waiting to be written
)

func (s *Server) ws(w http.ResponseWriter, r *http.Request) {
	// WebSockets are capped apart from plain requests (finding N5: 4 096 of them used to take
	// every connection slot and ~1.3 MB each).
	if n := s.wsOpen.Add(1); s.MaxWebSockets > 0 && n > int64(s.MaxWebSockets) {
		s.wsOpen.Add(-1)
		w.Header().Set("Retry-After", "5")
		Error(w, http.StatusServiceUnavailable, "busy: "+strconv.Itoa(s.MaxWebSockets)+" WebSockets are open, the most this agent serves; retry later")
		return
	}
	defer s.wsOpen.Add(-1)
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{
		// The library's origin check: a browser's handshake must come from a page of the host it
		// asks (or of WSOriginPatterns), so that another site cannot open the agent's WebSocket
		// with a logged-in user's browser (cross-site WebSocket hijacking). Clients that send
		// no Origin (peers, the cantal CLI) are accepted.
		OriginPatterns: s.WSOriginPatterns,
		// Without context takeover a connection keeps no compressor between messages (the
		// library pools them): with it, each kept ~1.3 MB of flate state (N5).
		CompressionMode: websocket.CompressionNoContextTakeover,
	})
	if err != nil {
		return // Accept has answered
	}
	c.SetReadLimit(1 << 16)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	// The writer stops on its own context, so that a connection given up on (fail) is closed
	// with a status rather than torn down by the reader's context.
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	conn := newWSConn(s, ctx)
	conn.c, conn.stop = c, wcancel
	stop := s.Registry.Subscribe(conn.views)
	defer stop()

	go func() {
		defer cancel()
		conn.readLoop(ctx)
	}()
	err = conn.writeLoop(wctx)
	if reason := conn.failure(); reason != "" {
		s.Log.Debug("websocket closed", "remote", r.RemoteAddr, "reason", reason)
		c.Close(websocket.StatusPolicyViolation, reason)
		return
	}
	status := websocket.CloseStatus(err)
	if status == -1 && err != nil && !errors.Is(err, context.Canceled) {
		s.Log.Debug("websocket closed", "remote", r.RemoteAddr, "err", err)
	}
	c.Close(websocket.StatusNormalClosure, "")
}

// wsMsg is an answer waiting to be written.
type wsMsg struct {
	sub  *wsSub // the subscription it answers; nil for an error about a message
	kind byte   // msgUpdate, msgHistory or msgError
	node string // an update's node
	b    []byte
}

const (
	msgError = iota
	msgHistory
	msgUpdate
)

type wsConn struct {
	srv    *Server
	ctx    context.Context // the connection's
	c      *websocket.Conn
	stop   func() // stops the writer; nil in tests without a connection
	views  chan *registry.View
	wake   chan struct{} // tells the writer there are answers
	budget int           // bytes of answers waiting, at most

	mu       sync.Mutex // guards what follows
	subs     map[string]*wsSub
	subBytes int
	pending  []wsMsg
	// pendingBytes counts the answers in pending and the one being written.
	pendingBytes int
	inflight     int
	failed       string // why the connection is given up on
}

func newWSConn(s *Server, ctx context.Context) *wsConn {
	budget := s.wsBudget
	if budget <= 0 {
		budget = defaultWSBudget
	}
	return &wsConn{srv: s, ctx: ctx, subs: map[string]*wsSub{}, views: make(chan *registry.View, 1), wake: make(chan struct{}, 1), budget: budget}
}

func (w *wsConn) readLoop(ctx context.Context) {
	for {
		_, data, err := w.c.Read(ctx)
		if err != nil {
			return
		}
		var req apiwire.WSRequest
		if err := json.Unmarshal(data, &req); err != nil {
			w.queue(wsMsg{b: wsError("", "bad message: "+err.Error())})
			continue
		}
		w.handle(&req)
	}
}

// handle answers one request. It is called by the reader goroutine only, the one that changes
// subs (others read them).
func (w *wsConn) handle(req *apiwire.WSRequest) {
	if len(req.ID) > maxIDBytes {
		w.queue(wsMsg{b: wsError("", fmt.Sprintf("id longer than %d bytes", maxIDBytes))})
		return
	}
	switch req.Type {
	case "subscribe":
		w.subscribe(req)
	case "unsubscribe":
		w.mu.Lock()
		w.removeLocked(req.ID)
		w.mu.Unlock()
	default:
		w.queue(wsMsg{b: wsError(req.ID, fmt.Sprintf("unknown message type %q", req.Type))})
	}
}

func (w *wsConn) subscribe(req *apiwire.WSRequest) {
	refuse := func(msg string) { w.queue(wsMsg{b: wsError(req.ID, msg)}) }
	sel, err := selector.Parse(req.Match)
	if err != nil {
		refuse("bad match: " + err.Error())
		return
	}
	sub := &wsSub{id: req.ID, match: req.Match, sel: sel, size: len(req.ID) + len(req.Match)}
	switch req.Fn {
	case "":
	case "rate":
		sub.rate = true
	default:
		refuse(fmt.Sprintf("bad fn %q: the only function is rate", req.Fn))
		return
	}
	var window time.Duration
	if req.History != "" {
		d, err := time.ParseDuration(req.History)
		if err != nil || d <= 0 || (w.srv.MaxWindow > 0 && d > w.srv.MaxWindow) {
			refuse(fmt.Sprintf("bad history %q: want a positive duration within the history kept", req.History))
			return
		}
		window = d
	}
	switch req.Scope {
	case "", "node":
	case "cluster":
		sub.node = w.srv.NodeName
	default:
		refuse(fmt.Sprintf("bad scope %q: want node or cluster", req.Scope))
		return
	}

	w.mu.Lock()
	old := w.subs[req.ID]
	oldSize := 0
	if old != nil {
		oldSize = old.size
	}
	full := old == nil && len(w.subs) >= maxSubs
	tooBig := w.subBytes-oldSize+sub.size > maxSubBytes
	// What the answers may take: the budget less what waits, except what the replaced
	// subscription's answers take (they go with it).
	left := w.budget - w.pendingBytes + w.queuedLocked(old)
	w.mu.Unlock()
	switch {
	case full:
		refuse(fmt.Sprintf("too many subscriptions on this connection (at most %d)", maxSubs))
		return
	case tooBig:
		refuse(fmt.Sprintf("the subscriptions' ids and selectors would take more than %d bytes on this connection", maxSubBytes))
		return
	}

	vis := w.srv.SeriesVisible(w.ctx)
	var hist []byte
	var histErr []byte
	if window > 0 {
		var complete bool
		hist, complete = w.localHistory(sub, window, vis, left)
		if !complete {
			// The subscription stands (its live updates are small and replace each other);
			// only its history is not sent, and the client is told why.
			hist = nil
			histErr = wsError(req.ID, fmt.Sprintf("history %s of %q not sent: more than the %d bytes this connection may still queue; live updates follow. Ask for a shorter history or a narrower match", req.History, req.Match, max(left, 0)))
		}
	}
	// The current values at once, not only after the next scan.
	first := w.update(sub, w.srv.Registry.View(), vis, nil)

	sub.ctx, sub.cancel = context.WithCancel(w.ctx)
	w.mu.Lock()
	w.removeLocked(req.ID)
	w.subs[req.ID] = sub
	w.subBytes += sub.size
	if hist != nil {
		w.queueLocked(wsMsg{sub: sub, kind: msgHistory, b: hist})
	}
	if histErr != nil {
		w.queueLocked(wsMsg{sub: sub, kind: msgError, b: histErr})
	}
	w.queueLocked(wsMsg{sub: sub, kind: msgUpdate, b: first})
	w.mu.Unlock()
	w.signal()

	if sub.node != "" && w.srv.Cluster != nil {
		peerVis := w.srv.PeerSeriesVisible(w.ctx)
		go w.srv.Cluster.Listen(sub.ctx, req.Match, sub.rate, func(u hub.Update) {
			w.queue(wsMsg{sub: sub, kind: msgUpdate, node: u.Node, b: remoteUpdate(req.ID, u, peerVis)})
		})
		if window > 0 {
			// Every peer's chunk, from the remote subscriptions' kept points.
			go w.peerHistory(sub, window, peerVis)
		}
	}
}

// localHistory builds the history message of sub for this node, giving up (complete false)
// past limit bytes.
func (w *wsConn) localHistory(sub *wsSub, window time.Duration, vis func(series.Labels) bool, limit int) (_ []byte, complete bool) {
	if limit <= 0 {
		return nil, false
	}
	b := apiwire.AppendWSHead(nil, "history", sub.id, sub.node)
	b = append(b, ',')
	k := len(b)
	if limit <= k {
		return nil, false // (historyJSON takes a limit of 0 for none)
	}
	q := Query{Sel: sub.sel, Window: window, Rate: sub.rate, Visible: vis}
	now := time.Now().UnixMilli()
	if sub.node == "" {
		b, complete = historyJSON(b, w.srv.Registry, q, now, limit-k)
		if !complete {
			return nil, false
		}
		// b ends with {"series":[...]}\n: drop its opening brace and the newline, so that its
		// closing brace closes the message.
		b = append(b[:k], b[k+1:len(b)-1]...)
	} else {
		// A cluster subscription: the series carry the node label, written as the cluster
		// history's local node writes them.
		b = append(b, `"series":`...)
		if limit <= len(b) {
			return nil, false
		}
		b, complete = nodeHistoryJSON(b, w.srv.Registry, q, now, limit-len(b), sub.node)
		if !complete {
			return nil, false
		}
		b = append(b, '}')
	}
	if len(b) > limit {
		return nil, false
	}
	return b, true
}

// removeLocked ends the subscription id, if any, and drops its answers not yet written.
func (w *wsConn) removeLocked(id string) {
	old := w.subs[id]
	if old == nil {
		return
	}
	if old.cancel != nil {
		old.cancel()
	}
	delete(w.subs, id)
	w.subBytes -= old.size
	w.dropPendingLocked(func(m wsMsg) bool { return m.sub == old })
}

// queuedLocked returns the bytes of the answers of sub waiting to be written.
func (w *wsConn) queuedLocked(sub *wsSub) int {
	n := 0
	for _, m := range w.pending {
		if sub != nil && m.sub == sub {
			n += len(m.b)
		}
	}
	return n
}

// peerHistory queues one history message per peer for a cluster subscription, from the points
// the remote subscriptions keep (at most their history chunk, 5 minutes by default). A peer's
// history that does not fit in what the connection may still queue is answered with an error
// naming the node.
func (w *wsConn) peerHistory(sub *wsSub, window time.Duration, vis func(series.Labels) bool) {
	from := time.Now().Add(-window).UnixMilli()
	for _, node := range w.srv.Cluster.Query(sub.ctx, sub.match, sub.rate) {
		if sub.ctx.Err() != nil {
			return
		}
		w.mu.Lock()
		limit := w.budget - w.pendingBytes
		w.mu.Unlock()
		b := apiwire.AppendWSHead(nil, "history", sub.id, node.Node)
		b = append(b, `,"status":"`...)
		b = append(b, node.Status...)
		b = append(b, `","series":[`...)
		n := 0
		for _, sr := range node.Series {
			if sr.Latest.Kind == series.State || vis != nil && !vis(sr.Latest.Labels) {
				continue
			}
			if n > 0 {
				b = append(b, ',')
			}
			n++
			b = apiwire.AppendSeriesHead(b, sr.Latest.Labels.Key(), sr.Latest.Kind.String(), "")
			b = append(b, `,"points":[`...)
			m := 0
			for _, p := range sr.Points {
				if p.TS < from {
					continue
				}
				if m > 0 {
					b = append(b, ',')
				}
				m++
				b = apiwire.Point{TS: p.TS, Value: apiwire.Float(p.Value)}.AppendJSON(b)
			}
			b = append(b, "]}"...)
			if len(b) > limit {
				break
			}
		}
		b = append(b, "]}"...)
		if len(b) > limit {
			b = apiwire.WSErrorFrame(sub.id, node.Node, fmt.Sprintf("history of node %s is more than the %d bytes this connection may still queue: ask for a shorter history or a narrower match", node.Node, max(limit, 0)))
			w.queue(wsMsg{sub: sub, kind: msgError, b: b})
			continue
		}
		w.queue(wsMsg{sub: sub, kind: msgHistory, b: b})
	}
}

// remoteUpdate is the update message of a peer's new values for a cluster subscription, with
// the series vis refuses left out.
func remoteUpdate(id string, u hub.Update, vis func(series.Labels) bool) []byte {
	b := apiwire.AppendWSHead(nil, "update", id, u.Node)
	b = append(b, `,"ts":`...)
	b = strconv.AppendInt(b, u.TS, 10)
	b = append(b, `,"series":[`...)
	n := 0
	for i := range u.Series {
		smp := u.Series[i]
		if vis != nil && !vis(smp.Labels) {
			continue
		}
		if n > 0 {
			b = append(b, ',')
		}
		n++
		smp.Labels = apiwire.WithNode(smp.Labels, u.Node)
		b = smp.AppendJSON(b)
	}
	return append(b, "]}"...)
}

func wsError(id, msg string) []byte { return apiwire.WSErrorFrame(id, "", msg) }

// queue adds an answer for the writer (see queueLocked).
func (w *wsConn) queue(m wsMsg) {
	w.mu.Lock()
	w.queueLocked(m)
	w.mu.Unlock()
	w.signal()
}

// signal tells the writer there are answers.
func (w *wsConn) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// queueLocked adds m to the answers waiting, within the connection's bounds: an answer of a
// subscription that was since replaced or ended is dropped; an update replaces the waiting
// update of the same subscription and node, and is skipped when it does not fit; a history or
// an error that does not fit first drops the waiting updates; a history that still does not fit
// becomes an error, and an error that still does not fit gives the connection up.
func (w *wsConn) queueLocked(m wsMsg) {
	if w.failed != "" || m.sub != nil && w.subs[m.sub.id] != m.sub {
		return
	}
	fits := func(n int) bool { return w.pendingBytes+n <= w.budget && len(w.pending) < maxPending }
	if m.kind == msgUpdate {
		for i := range w.pending {
			if p := &w.pending[i]; p.kind == msgUpdate && p.sub == m.sub && p.node == m.node {
				if w.pendingBytes-len(p.b)+len(m.b) <= w.budget {
					w.pendingBytes += len(m.b) - len(p.b)
					p.b = m.b
				}
				return
			}
		}
		if fits(len(m.b)) {
			w.pending = append(w.pending, m)
			w.pendingBytes += len(m.b)
		}
		return
	}
	if !fits(len(m.b)) {
		w.dropUpdatesLocked()
	}
	if !fits(len(m.b)) && m.kind == msgHistory {
		id := ""
		if m.sub != nil {
			id = m.sub.id
		}
		m = wsMsg{sub: m.sub, kind: msgError, b: wsError(id, fmt.Sprintf("history not sent: more than the %d bytes this connection may still queue", max(w.budget-w.pendingBytes, 0)))}
	}
	if !fits(len(m.b)) {
		w.failed = "too many answers left unread"
		if w.stop != nil {
			w.stop()
		}
		return
	}
	w.pending = append(w.pending, m)
	w.pendingBytes += len(m.b)
}

// dropUpdatesLocked drops the updates waiting: the next scan brings newer ones.
func (w *wsConn) dropUpdatesLocked() {
	w.dropPendingLocked(func(m wsMsg) bool { return m.kind == msgUpdate })
}

// dropPendingLocked drops the answers waiting to be written that drop picks, keeping the
// others in order.
func (w *wsConn) dropPendingLocked(drop func(wsMsg) bool) {
	kept := w.pending[:0]
	for _, m := range w.pending {
		if drop(m) {
			w.pendingBytes -= len(m.b)
			continue
		}
		kept = append(kept, m)
	}
	clear(w.pending[len(kept):])
	w.pending = kept
}

// failure returns why the connection was given up on, or "".
func (w *wsConn) failure() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failed
}

// next takes the first answer waiting, counting it until the following call (it is being
// written meanwhile).
func (w *wsConn) next() (wsMsg, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pendingBytes -= w.inflight
	w.inflight = 0
	if len(w.pending) == 0 {
		w.pending = nil // let the emptied array go
		return wsMsg{}, false
	}
	m := w.pending[0]
	w.pending[0] = wsMsg{}
	w.pending = w.pending[1:]
	w.inflight = len(m.b)
	return m, true
}

// update builds the update message of sub for view, with the series vis refuses left out.
func (w *wsConn) update(sub *wsSub, view *registry.View, vis func(series.Labels) bool, b []byte) []byte {
	b = apiwire.AppendWSHead(b[:0], "update", sub.id, sub.node)
	b = append(b, `,"ts":`...)
	b = strconv.AppendInt(b, view.TS, 10)
	b = append(b, `,"series":[`...)
	n := 0
	view.EachLatest(sub.sel, vis, func(_ registry.Handle, smp series.Sample) bool {
		if n > 0 {
			b = append(b, ',')
		}
		n++
		if sub.node != "" {
			smp.Labels = apiwire.WithNode(smp.Labels, sub.node)
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
	var subs []*wsSub
	for {
		var view *registry.View
		select {
		case <-ctx.Done():
			return ctx.Err()
		case view = <-w.views:
		case <-w.wake:
		}
		for {
			m, ok := w.next()
			if !ok {
				break
			}
			if err := send(m.b); err != nil {
				return err
			}
		}
		if view == nil {
			continue
		}
		subs = subs[:0]
		w.mu.Lock()
		for _, s := range w.subs {
			subs = append(subs, s)
		}
		w.mu.Unlock()
		vis := w.srv.SeriesVisible(w.ctx) // one per scan: it remembers pids
		for _, sub := range subs {
			if sub.ctx != nil && sub.ctx.Err() != nil {
				continue // replaced or unsubscribed meanwhile
			}
			if err := send(w.update(sub, view, vis, nil)); err != nil {
				return err
			}
		}
		clear(subs)
	}
}
