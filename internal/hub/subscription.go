package hub

import (
	"context"
	"encoding/json"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cantal-go/cantal/internal/apiwire"
	"github.com/cantal-go/cantal/internal/series"
)

// subKey names a subscription: the selector text and the function.
func subKey(match string, rate bool) string {
	if rate {
		return "rate:" + match
	}
	return "raw:" + match
}

// chunkPrefix makes the wire id of a subscription's chunk request from its subKey. The chunk
// (the history a subscription keeps, or the gap a lost connection left) is asked for by a
// subscription of its own on the same connection, after the live one, and unsubscribed once it
// has come: the peer answers a subscription with its history and only then its current values,
// and builds the history before it queues them (/api/v1/ws), so a chunk asked for with the live
// subscription would hold back the current values a metrics query waits for.
const chunkPrefix = "chunk:"

// sub is one subscription at one peer.
type sub struct {
	id          string
	match       string
	rate        bool
	unsubscribe bool // only for the wire
	keep        time.Duration
	// latest is closed at the first update: the peer's current values, which it sends at once
	// when subscribed (without a history, so nothing comes before them).
	latest chan struct{}
	// chunked is closed when the first history chunk asked for has come, or the peer refused
	// it (an error for the chunk's id): what a history query waits for.
	chunked chan struct{}

	// gaveUp: a query stopped waiting for this subscription at its deadline; later queries do
	// not wait for it until a message of the peer's arrives for it.
	gaveUp atomic.Bool

	mu          sync.Mutex
	latestOnce  sync.Once
	chunkedOnce sync.Once
	// wantChunk: a history query asked for this subscription, so it keeps the whole chunk
	// (Config.History) and backfills what a lost connection missed. A subscription asked for
	// by metrics queries and listeners only keeps the points of the updates it receives.
	wantChunk bool
	// chunkNeed: a chunk must be asked for on the current connection (or the next one); it is
	// cleared when the chunk's answer comes. chunkFrom is where it starts: 0 for the whole
	// chunk, else the newest point received before the connection was lost (a backfill).
	chunkNeed bool
	chunkFrom int64
	lastUsed  time.Time
	series    map[string]*Series // by labels key
	lastTS    int64              // newest point or update received
	lastData  time.Time
	connected bool
	errMsg    string
	// refused: the peer answered the live subscription with an error (its subscriptions on
	// this connection are used up): the node is Busy, not unreachable. The subscription is
	// sent again (resend) by a query at least refuseRetry after refusedAt.
	refused   bool
	refusedAt time.Time
	resend    bool
	listeners []listener
}

// refuseRetry is how long a refused subscription waits before a query sends it again.
const refuseRetry = time.Second

// retryRefused reports whether s was refused long enough ago to be sent again, and marks it to
// be (takeResend).
func (s *sub) retryRefused(now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.refused || s.resend || now.Sub(s.refusedAt) < refuseRetry {
		return false
	}
	s.resend = true
	return true
}

// takeResend reports whether s is to be sent again on the current connection, and clears it.
func (s *sub) takeResend() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.resend
	s.resend = false
	return r
}

type listener struct {
	ctx context.Context
	fn  func(Update)
}

func (s *sub) touch() {
	s.mu.Lock()
	s.lastUsed = time.Now()
	s.mu.Unlock()
}

func (s *sub) idleSince(now time.Time) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return now.Sub(s.lastUsed)
}

func (s *sub) addListener(ctx context.Context, fn func(Update)) {
	s.mu.Lock()
	s.listeners = append(s.listeners, listener{ctx, fn})
	s.mu.Unlock()
}

// hasListeners drops the listeners whose context ended and reports whether any is left.
func (s *sub) hasListeners() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	live := s.listeners[:0]
	for _, l := range s.listeners {
		if l.ctx.Err() == nil {
			live = append(live, l)
		}
	}
	clear(s.listeners[len(live):])
	s.listeners = live
	return len(live) > 0
}

// connDown records that the connection carrying s was lost. A subscription that keeps its
// chunk asks the next connection for what it misses meanwhile: since its newest point, or the
// whole chunk when the one asked for had not come yet.
func (s *sub) connDown() {
	s.mu.Lock()
	s.connected = false
	if s.wantChunk && !s.chunkNeed {
		s.chunkNeed, s.chunkFrom = true, s.lastTS
	}
	s.mu.Unlock()
}

// askChunk makes s keep its chunk (a history query); it reports whether the chunk must now be
// asked for (the first time only).
func (s *sub) askChunk() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.wantChunk {
		return false
	}
	s.wantChunk, s.chunkNeed, s.chunkFrom = true, true, 0
	return true
}

// needsChunk reports whether a chunk is to be asked for or is on its way.
func (s *sub) needsChunk() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.chunkNeed
}

// request is the live subscribe message: the current values at once and an update per scan,
// no history.
func (s *sub) request() []byte {
	if s.unsubscribe {
		b, _ := json.Marshal(apiwire.WSRequest{Type: "unsubscribe", ID: s.id})
		return b
	}
	return s.subscribeMsg(s.id, 0)
}

// chunkRequest is the subscribe message of s's chunk (wire id chunkPrefix + id): the whole
// chunk at first, after a reconnect only what was missed (backfill).
func (s *sub) chunkRequest() []byte {
	s.mu.Lock()
	window := s.keep
	if s.chunkFrom > 0 {
		missed := time.Since(time.UnixMilli(s.chunkFrom)) + 2*time.Second
		window = min(window, missed)
	}
	s.mu.Unlock()
	return s.subscribeMsg(chunkPrefix+s.id, window)
}

func (s *sub) subscribeMsg(id string, history time.Duration) []byte {
	req := apiwire.WSRequest{Type: "subscribe", ID: id, Match: s.match}
	if history > 0 {
		req.History = history.Round(time.Millisecond).String()
	}
	if s.rate {
		req.Fn = "rate"
	}
	b, _ := json.Marshal(req)
	return b
}

// receiveChunk applies a message of s's chunk subscription: the history (its points join
// those kept), or the peer's refusal (an error, kept for the answers). Either ends the chunk's
// wait; the updates the chunk subscription also carries until it is unsubscribed duplicate the
// live ones and are dropped. It reports whether the chunk is done with, so that its
// subscription can go.
func (s *sub) receiveChunk(m *apiwire.WSFrame) bool {
	s.mu.Lock()
	if !s.chunkNeed {
		s.mu.Unlock()
		return false
	}
	switch m.Type {
	case "history":
		s.applyHistory(m)
		s.trim()
		s.connected = true
		s.lastData = time.Now()
	case "error":
		s.errMsg = m.Error
	}
	// An update before any history means the peer sent none (it always sends the history or
	// an error first); the chunk is done with either way.
	s.chunkNeed = false
	s.mu.Unlock()
	s.gaveUp.Store(false)
	s.chunkedOnce.Do(func() { close(s.chunked) })
	return true
}

// applyHistory adds a history message's points; s.mu is held.
func (s *sub) applyHistory(m *apiwire.WSFrame) {
	if s.series == nil {
		s.series = map[string]*Series{}
	}
	for _, ws := range m.Series {
		key := ws.Labels.Key()
		sr := s.series[key]
		if sr == nil {
			sr = &Series{Latest: series.Sample{Labels: ws.Labels, Kind: ws.Kind}}
			s.series[key] = sr
		}
		for _, pt := range ws.Points {
			p := Point{TS: pt.TS, Value: pt.Value}
			sr.Points = insertPoint(sr.Points, p)
			s.lastTS = max(s.lastTS, p.TS)
		}
	}
}

// trim keeps only the chunk's span of every series; s.mu is held.
func (s *sub) trim() {
	horizon := time.Now().Add(-s.keep).UnixMilli()
	for _, sr := range s.series {
		i := sort.Search(len(sr.Points), func(i int) bool { return sr.Points[i].TS >= horizon })
		if i > 0 {
			sr.Points = append(sr.Points[:0], sr.Points[i:]...)
		}
	}
}

// receive applies a history or update message. It is called by the peer's read goroutine only,
// so one subscription's messages are applied, and its listeners called, in the order they came;
// the listeners are called after the subscription's lock is released.
func (s *sub) receive(node string, m *apiwire.WSFrame) {
	var (
		notify []listener
		upd    Update
	)
	s.mu.Lock()
	if s.series == nil {
		s.series = map[string]*Series{}
	}
	s.connected = true
	switch m.Type {
	case "error":
		s.errMsg = m.Error
		s.refused, s.refusedAt = true, time.Now()
	case "history":
		s.applyHistory(m)
		s.lastData = time.Now()
	case "update":
		if s.refused {
			s.refused, s.errMsg = false, ""
		}
		for _, l := range s.listeners {
			if l.ctx.Err() == nil {
				notify = append(notify, l)
			}
		}
		if len(notify) > 0 {
			upd = Update{Node: node, TS: m.TS, Series: make([]series.Sample, 0, len(m.Series))}
		}
		for _, ws := range m.Series {
			key := ws.Labels.Key()
			sr := s.series[key]
			if sr == nil {
				sr = &Series{}
				s.series[key] = sr
			}
			smp, v := ws.Sample()
			sr.Latest = smp
			switch {
			case ws.Kind == series.State:
			case s.rate && ws.Kind == series.Counter:
				if smp.HasRate {
					sr.Points = insertPoint(sr.Points, Point{TS: ws.TS, Value: smp.Rate})
				}
			default:
				sr.Points = insertPoint(sr.Points, Point{TS: ws.TS, Value: v})
			}
			if upd.Series != nil {
				upd.Series = append(upd.Series, smp)
			}
		}
		s.lastTS = max(s.lastTS, m.TS)
		s.lastData = time.Now()
	}
	s.trim()
	s.mu.Unlock()
	s.gaveUp.Store(false)
	if m.Type == "update" || m.Type == "error" {
		// The peer's current values, or its refusal: either way it answered.
		s.latestOnce.Do(func() { close(s.latest) })
	}
	for _, l := range notify {
		if l.ctx.Err() == nil {
			l.fn(upd)
		}
	}
}

// insertPoint adds p keeping pts sorted and free of duplicate timestamps (a backfill overlaps
// what was already received).
func insertPoint(pts []Point, p Point) []Point {
	n := len(pts)
	if n == 0 || pts[n-1].TS < p.TS {
		return append(pts, p)
	}
	i := sort.Search(n, func(i int) bool { return pts[i].TS >= p.TS })
	if i < n && pts[i].TS == p.TS {
		pts[i] = p
		return pts
	}
	pts = append(pts, Point{})
	copy(pts[i+1:], pts[i:])
	pts[i] = p
	return pts
}

// StaleAfter is how long after its last message a peer's data is stale: the peer sends one
// update per scan, so its stream has missed an interval, with half an interval (at least
// 500 ms) of slack for a scan that runs late. A peer whose cable was cut is shown not ok at most
// that long after its last update: 1.5 s with an interval of 1 s, 3 s with 2 s.
func StaleAfter(interval time.Duration) time.Duration {
	return interval + max(interval/2, 500*time.Millisecond)
}

// answer is the subscription's part of a cluster answer for member m.
func (s *sub) answer(now time.Time, interval time.Duration, m Member) NodeAnswer {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := NodeAnswer{Node: m.Name, ID: m.ID, Error: s.errMsg}
	if !s.lastData.IsZero() {
		a.Since = s.lastData.UnixMilli()
	}
	fresh := !s.lastData.IsZero() && now.Sub(s.lastData) <= StaleAfter(interval)
	switch {
	case s.refused && s.connected && m.Up:
		a.Status = Busy
	case fresh && s.connected && m.Up:
		a.Status = OK
		a.Since = 0
	case !s.connected || !m.Up:
		a.Status = Unreachable
	default:
		a.Status = Stale
	}
	keys := make([]string, 0, len(s.series))
	for k := range s.series {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		sr := s.series[k]
		cp := Series{Latest: sr.Latest, Points: append([]Point(nil), sr.Points...)}
		cp.Latest.Labels = apiwire.WithNode(sr.Latest.Labels, m.Name)
		a.Series = append(a.Series, cp)
	}
	return a
}
