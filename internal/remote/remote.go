// Package remote is the agent's lazy, on-demand view of its peers' series (seed 001): the first
// cluster query for a selector makes this agent — and only this one, so there is no full mesh —
// open one WebSocket per peer (/api/v1/ws), subscribe to just that selector, receive a history
// chunk and then one update per scan. A subscription nobody has asked for during Config.Idle is
// dropped, and a connection with no subscription left is closed. A lost connection is retried
// with backoff, and on reconnect the subscription asks for the history since its last point so
// that no point is lost.
//
// A Hub is safe for concurrent use. Its goroutines end when the context given to Run ends.
package remote

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/cantal-go/cantal/internal/series"
)

// Member is a peer as the hub needs it.
type Member struct {
	ID   string // stable node id
	Name string // node name, the "node" label of its series
	HTTP string // host:port of its HTTP API
	Up   bool   // alive or suspect in the membership (false: dead or left)
}

// Config configures a Hub.
type Config struct {
	// Members returns the current peers (not the local node). Required.
	Members func() []Member
	// Interval is the peers' scan interval: data older than 3 intervals is stale.
	Interval time.Duration
	// History is the chunk of history a new subscription fetches and keeps (default 5m).
	History time.Duration
	// Idle is how long a subscription lives without being asked for (default 3m).
	Idle time.Duration
	// Timeout bounds how long a query waits for a peer's first data (default 1s); it is also
	// the dial timeout and the ping timeout.
	Timeout time.Duration
	Log     *slog.Logger
}

// Point is one value of a remote series.
type Point struct {
	TS    int64
	Value float64
}

// Series is one remote series: its latest sample and the points kept for it.
type Series struct {
	Latest series.Sample
	Points []Point
}

// NodeState says how fresh a node's data is.
type NodeState string

// The node states of cluster answers.
const (
	OK          NodeState = "ok"
	Stale       NodeState = "stale"
	Unreachable NodeState = "unreachable"
)

// NodeAnswer is one node's part of a cluster answer.
type NodeAnswer struct {
	Node   string
	ID     string
	Status NodeState
	Since  int64 // unix ms of the last data, for stale and unreachable nodes (0: never)
	Error  string
	Series []Series
}

// Update is a peer's new values for a subscription, as delivered to listeners.
type Update struct {
	Node   string
	TS     int64
	Series []series.Sample
}

// Hub holds the connections and subscriptions.
type Hub struct {
	cfg   Config
	mu    sync.Mutex
	peers map[string]*peer // by member ID
	ctx   context.Context
}

// New returns a Hub; call Run to let it work.
func New(cfg Config) *Hub {
	if cfg.History <= 0 {
		cfg.History = 5 * time.Minute
	}
	if cfg.Idle <= 0 {
		cfg.Idle = 3 * time.Minute
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = time.Second
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 2 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Hub{cfg: cfg, peers: map[string]*peer{}, ctx: context.Background()}
}

// Run expires idle subscriptions until ctx ends, then closes every connection.
func (h *Hub) Run(ctx context.Context) error {
	h.mu.Lock()
	h.ctx = ctx
	h.mu.Unlock()
	t := time.NewTicker(min(h.cfg.Idle/4, 10*time.Second))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			h.mu.Lock()
			for id, p := range h.peers {
				p.stop()
				delete(h.peers, id)
			}
			h.mu.Unlock()
			return nil
		case <-t.C:
			h.expire(time.Now())
		}
	}
}

func (h *Hub) expire(now time.Time) {
	members := map[string]bool{}
	for _, m := range h.cfg.Members() {
		members[m.ID] = true
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for id, p := range h.peers {
		if p.expire(now, h.cfg.Idle) == 0 || !members[id] {
			p.stop()
			delete(h.peers, id)
		}
	}
}

// subKey names a subscription: the selector text and the function.
func subKey(match string, rate bool) string {
	if rate {
		return "rate:" + match
	}
	return "raw:" + match
}

// Query returns every peer's series for match (rate: counters as rates), subscribing where
// needed and waiting at most Config.Timeout for peers' first data. Peers are sorted by name.
func (h *Hub) Query(ctx context.Context, match string, rate bool) []NodeAnswer {
	members := h.cfg.Members()
	subs := make([]*sub, len(members))
	for i, m := range members {
		subs[i] = h.subscribe(m, match, rate)
	}
	deadline := time.NewTimer(h.cfg.Timeout)
	defer deadline.Stop()
	for _, s := range subs {
		if s == nil {
			continue
		}
		select {
		case <-s.ready:
		case <-deadline.C:
		case <-ctx.Done():
		}
	}
	out := make([]NodeAnswer, 0, len(members))
	now := time.Now()
	for i, m := range members {
		a := NodeAnswer{Node: m.Name, ID: m.ID, Status: Unreachable}
		if s := subs[i]; s != nil {
			a = s.answer(now, h.cfg.Interval, m)
		}
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out
}

// Listen delivers every peer's updates for match to fn as they arrive, until ctx ends. fn is
// called from the peers' connection goroutines, possibly concurrently, and must not block.
func (h *Hub) Listen(ctx context.Context, match string, rate bool, fn func(Update)) {
	seen := map[string]*sub{}
	refresh := func() {
		for _, m := range h.cfg.Members() {
			if _, ok := seen[m.ID]; ok {
				continue
			}
			if s := h.subscribe(m, match, rate); s != nil {
				seen[m.ID] = s
				s.addListener(ctx, fn)
			}
		}
	}
	refresh()
	t := time.NewTicker(h.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			refresh() // new peers join the stream
			for _, s := range seen {
				s.touch()
			}
		}
	}
}

func (h *Hub) subscribe(m Member, match string, rate bool) *sub {
	if m.HTTP == "" {
		return nil
	}
	h.mu.Lock()
	p := h.peers[m.ID]
	if p == nil || p.http != m.HTTP {
		if p != nil {
			p.stop()
		}
		p = newPeer(h.ctx, h.cfg, m)
		h.peers[m.ID] = p
	}
	h.mu.Unlock()
	return p.subscribe(match, rate)
}

// peer is one WebSocket connection to one peer, carrying its subscriptions.
type peer struct {
	cfg    Config
	name   string
	http   string
	cancel context.CancelFunc
	wake   chan struct{} // a new subscription to send

	mu      sync.Mutex
	subs    map[string]*sub // by subKey, which is also the wire id
	up      bool            // connected
	upAt    time.Time       // when the current connection was made
	lastErr string
	downAt  int64
}

func newPeer(parent context.Context, cfg Config, m Member) *peer {
	ctx, cancel := context.WithCancel(parent)
	p := &peer{cfg: cfg, name: m.Name, http: m.HTTP, cancel: cancel, wake: make(chan struct{}, 1), subs: map[string]*sub{}}
	go p.run(ctx)
	return p
}

func (p *peer) stop() { p.cancel() }

func (p *peer) subscribe(match string, rate bool) *sub {
	key := subKey(match, rate)
	p.mu.Lock()
	s := p.subs[key]
	if s == nil {
		s = &sub{id: key, match: match, rate: rate, ready: make(chan struct{}), keep: p.cfg.History}
		p.subs[key] = s
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
	p.mu.Unlock()
	s.touch()
	return s
}

// expire drops subscriptions idle for longer than idle; it returns how many are left.
func (p *peer) expire(now time.Time, idle time.Duration) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, s := range p.subs {
		if s.idleSince(now) > idle && !s.hasListeners() {
			delete(p.subs, k)
		}
	}
	return len(p.subs)
}

// run keeps the connection up while the peer has subscriptions.
func (p *peer) run(ctx context.Context) {
	var retry backoff
	for ctx.Err() == nil {
		err := p.session(ctx)
		now := time.Now()
		p.mu.Lock()
		healthy := p.up && now.Sub(p.upAt) >= healthySession
		p.up = false
		if err != nil {
			p.lastErr = err.Error()
		}
		p.downAt = now.UnixMilli()
		for _, s := range p.subs {
			s.connDown()
		}
		p.mu.Unlock()
		if ctx.Err() != nil {
			return
		}
		wait := retry.next(healthy)
		p.cfg.Log.Debug("peer connection lost", "peer", p.name, "err", err, "retry", wait)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// Reconnection backoff: the first retry after a failure waits minBackoff, each further failed
// attempt twice as long up to maxBackoff. A session that stayed up for healthySession resets
// it, so that a peer back from a partition is retried quickly the next time it is lost, while a
// peer that accepts connections and drops them at once is not hammered.
const (
	minBackoff     = 100 * time.Millisecond
	maxBackoff     = 5 * time.Second
	healthySession = time.Second
)

// backoff is the reconnection delay of one peer; the zero value is ready. It is owned by the
// peer's run goroutine.
type backoff struct{ cur time.Duration }

// next returns how long to wait after a session ended; healthy says whether it was up for
// healthySession.
func (b *backoff) next(healthy bool) time.Duration {
	if healthy || b.cur == 0 {
		b.cur = minBackoff
	} else {
		b.cur = min(b.cur*2, maxBackoff)
	}
	return b.cur
}

type wireMsg struct {
	Type   string `json:"type"`
	ID     string `json:"id"`
	Error  string `json:"error"`
	TS     int64  `json:"ts"`
	Series []struct {
		Labels series.Labels   `json:"labels"`
		Kind   series.Kind     `json:"kind"`
		Value  json.RawMessage `json:"value"`
		TS     int64           `json:"ts"`
		Rate   *float64        `json:"rate"`
		Text   string          `json:"text"`
		Since  int64           `json:"since"`
		Fn     string          `json:"fn"`
		Points [][2]any        `json:"points"`
	} `json:"series"`
}

// session runs one connection until it fails.
func (p *peer) session(ctx context.Context) error {
	dctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	c, _, err := websocket.Dial(dctx, "ws://"+p.http+"/api/v1/ws", nil)
	cancel()
	if err != nil {
		return fmt.Errorf("dial %s: %w", p.http, err)
	}
	c.SetReadLimit(64 << 20)
	defer c.CloseNow()
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	p.mu.Lock()
	p.up = true
	p.upAt = time.Now()
	p.lastErr = ""
	p.mu.Unlock()

	// Writer: subscribe what is not subscribed on this connection, and ping.
	errc := make(chan error, 2)
	go func() {
		sent := map[string]bool{}
		ping := time.NewTicker(p.cfg.Interval)
		defer ping.Stop()
		for {
			p.mu.Lock()
			var todo []*sub
			for k, s := range p.subs {
				if !sent[k] {
					todo = append(todo, s)
					sent[k] = true
				}
			}
			for k := range sent {
				if _, ok := p.subs[k]; !ok {
					delete(sent, k)
					todo = append(todo, &sub{id: k, unsubscribe: true})
				}
			}
			p.mu.Unlock()
			for _, s := range todo {
				if err := c.Write(sctx, websocket.MessageText, s.request()); err != nil {
					errc <- err
					return
				}
			}
			select {
			case <-sctx.Done():
				return
			case <-p.wake:
			case <-ping.C:
				pctx, cancel := context.WithTimeout(sctx, p.cfg.Timeout+p.cfg.Interval)
				err := c.Ping(pctx)
				cancel()
				if err != nil {
					errc <- fmt.Errorf("ping: %w", err)
					return
				}
			}
		}
	}()
	go func() {
		for {
			_, data, err := c.Read(sctx)
			if err != nil {
				errc <- err
				return
			}
			var m wireMsg
			if err := json.Unmarshal(data, &m); err != nil {
				errc <- fmt.Errorf("bad message from %s: %w", p.http, err)
				return
			}
			p.mu.Lock()
			s := p.subs[m.ID]
			p.mu.Unlock()
			if s != nil {
				s.receive(p.name, &m)
			}
		}
	}()
	return <-errc
}

// sub is one subscription at one peer.
type sub struct {
	id          string
	match       string
	rate        bool
	unsubscribe bool // only for the wire
	keep        time.Duration
	ready       chan struct{} // closed at the first data

	mu        sync.Mutex
	readyOnce sync.Once
	lastUsed  time.Time
	series    map[string]*Series // by labels key
	lastTS    int64              // newest point or update received
	lastData  time.Time
	connected bool
	errMsg    string
	listeners []listener
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

func (s *sub) hasListeners() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	live := s.listeners[:0]
	for _, l := range s.listeners {
		if l.ctx.Err() == nil {
			live = append(live, l)
		}
	}
	s.listeners = live
	return len(live) > 0
}

func (s *sub) connDown() {
	s.mu.Lock()
	s.connected = false
	s.mu.Unlock()
}

// request is the subscribe message: the whole history chunk at first, after a reconnect only
// what was missed (backfill).
func (s *sub) request() []byte {
	if s.unsubscribe {
		b, _ := json.Marshal(map[string]string{"type": "unsubscribe", "id": s.id})
		return b
	}
	s.mu.Lock()
	window := s.keep
	if s.lastTS > 0 {
		missed := time.Since(time.UnixMilli(s.lastTS)) + 2*time.Second
		window = min(window, missed)
	}
	s.mu.Unlock()
	req := map[string]string{"type": "subscribe", "id": s.id, "match": s.match, "history": window.Round(time.Millisecond).String()}
	if s.rate {
		req["fn"] = "rate"
	}
	b, _ := json.Marshal(req)
	return b
}

func parseNum(raw json.RawMessage) float64 {
	var f float64
	if json.Unmarshal(raw, &f) == nil {
		return f
	}
	var str string
	json.Unmarshal(raw, &str)
	return parseFloatString(str)
}

func anyNum(v any) float64 {
	switch x := v.(type) {
	case float64:
		return x
	case string:
		return parseFloatString(x)
	}
	return 0
}

func parseFloatString(s string) float64 {
	switch s {
	case "NaN":
		return nanValue()
	case "+Inf":
		return infValue(1)
	case "-Inf":
		return infValue(-1)
	}
	f, _ := strconv.ParseFloat(s, 64)
	return f
}

// receive applies a history or update message.
func (s *sub) receive(node string, m *wireMsg) {
	s.mu.Lock()
	if s.series == nil {
		s.series = map[string]*Series{}
	}
	s.connected = true
	switch m.Type {
	case "error":
		s.errMsg = m.Error
	case "history":
		for _, ws := range m.Series {
			key := ws.Labels.Key()
			sr := s.series[key]
			if sr == nil {
				sr = &Series{Latest: series.Sample{Labels: ws.Labels, Kind: ws.Kind}}
				s.series[key] = sr
			}
			for _, pt := range ws.Points {
				p := Point{TS: int64(anyNum(pt[0])), Value: anyNum(pt[1])}
				sr.Points = insertPoint(sr.Points, p)
				s.lastTS = max(s.lastTS, p.TS)
			}
		}
		s.lastData = time.Now()
	case "update":
		var upd Update
		if len(s.listeners) > 0 {
			upd = Update{Node: node, TS: m.TS, Series: make([]series.Sample, 0, len(m.Series))}
		}
		for _, ws := range m.Series {
			key := ws.Labels.Key()
			sr := s.series[key]
			if sr == nil {
				sr = &Series{}
				s.series[key] = sr
			}
			smp := series.Sample{Labels: ws.Labels, Kind: ws.Kind, TS: ws.TS, Text: ws.Text, Since: ws.Since}
			v := parseNum(ws.Value)
			if ws.Kind != series.State {
				smp.Bits = exactBits(ws.Kind, ws.Value, v)
			}
			if ws.Rate != nil {
				smp.Rate, smp.HasRate = *ws.Rate, true
			}
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
		for _, l := range s.listeners {
			if l.ctx.Err() == nil {
				l.fn(upd)
			}
		}
	}
	// Keep only the history chunk's span.
	horizon := time.Now().Add(-s.keep).UnixMilli()
	for _, sr := range s.series {
		i := sort.Search(len(sr.Points), func(i int) bool { return sr.Points[i].TS >= horizon })
		if i > 0 {
			sr.Points = append(sr.Points[:0], sr.Points[i:]...)
		}
	}
	s.mu.Unlock()
	if m.Type != "error" {
		s.readyOnce.Do(func() { close(s.ready) })
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

func (s *sub) answer(now time.Time, interval time.Duration, m Member) NodeAnswer {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := NodeAnswer{Node: m.Name, ID: m.ID, Error: s.errMsg}
	if !s.lastData.IsZero() {
		a.Since = s.lastData.UnixMilli()
	}
	fresh := !s.lastData.IsZero() && now.Sub(s.lastData) <= 3*interval
	switch {
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
		cp.Latest.Labels = withNode(sr.Latest.Labels, m.Name)
		a.Series = append(a.Series, cp)
	}
	return a
}

func withNode(l series.Labels, node string) series.Labels {
	c := l.Clone()
	c["node"] = node
	return c
}

// WithNode returns a copy of l with the node label set.
func WithNode(l series.Labels, node string) series.Labels { return withNode(l, node) }

func nanValue() float64         { return math.NaN() }
func infValue(sign int) float64 { return math.Inf(sign) }

// exactBits turns a JSON number back into the raw bits of kind k, exactly for integers.
func exactBits(k series.Kind, raw json.RawMessage, v float64) uint64 {
	switch k {
	case series.Counter:
		if u, err := strconv.ParseUint(string(raw), 10, 64); err == nil {
			return u
		}
	case series.Level:
		if i, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
			return uint64(i)
		}
	}
	return floatBits(k, v)
}

// floatBits turns a JSON number back into the raw bits of kind k.
func floatBits(k series.Kind, v float64) uint64 {
	switch k {
	case series.Counter:
		return uint64(v)
	case series.Level:
		return uint64(int64(v))
	}
	return math.Float64bits(v)
}

// Members returns the current peers, as Config.Members does.
func (h *Hub) Members() []Member { return h.cfg.Members() }
