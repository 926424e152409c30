// Package hub is the agent's peer-query hub (not remote write): its lazy, on-demand view of its
// peers' series (seed 001). The first cluster query for a selector makes this agent — and only
// this one, so there is no full mesh — open one WebSocket per peer (/api/v1/ws), subscribe to
// just that selector and receive the peer's current values and then one update per scan. A
// history query also asks for a history chunk (Config.History), apart from the live subscription
// so that the current values a metrics query waits for never queue behind it (QueryLatest,
// Query). A subscription nobody has asked for during Config.Idle is dropped, and a connection
// with no subscription left is closed. A lost connection is retried with backoff, and on
// reconnect a subscription that keeps a chunk asks for the history since its last point so that
// no point is lost.
//
// In a cluster with mutual TLS (Config.TLS) every connection to a peer is WSS with the node's
// client certificate, and the peer's certificate must chain to the cluster's CA; such a hub
// never talks plain HTTP to a peer.
//
// The package is four parts: the Hub (hub.go) holds one peer connection per member
// (peer.go), each carrying subscriptions (subscription.go) that decode the peer's messages
// (wire.go).
//
// A Hub is safe for concurrent use. Its goroutines end when the context given to Run ends.
// Locks: Hub.mu, then peer.mu, then sub.mu, each taken in that order only; no callback (a
// listener's function, Config.Members, Config.TLS) is called with any of them held.
package hub

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/cantal-go/cantal/internal/series"
)

// Member is a peer as the hub needs it.
type Member struct {
	ID   string // stable node id
	Name string // node name, the "node" label of its series
	HTTP string // host:port of its HTTP API
	Up   bool   // alive or suspect in the membership (false: dead or left)
	// TLS is how to reach the member: nil for plain HTTP and WebSocket, else HTTPS and WSS
	// with this client configuration. Config.Members need not set it: Hub.Members sets it
	// from Config.TLS.
	TLS *tls.Config
}

// Config configures a Hub.
type Config struct {
	// Members returns the current peers (not the local node). Required. It is called with no
	// lock of the hub held.
	Members func() []Member
	// TLS, when set, puts the hub in a cluster with mutual TLS: each connection to a peer is
	// WSS with the client configuration TLS returns at that moment (the node's certificate,
	// the cluster CA as roots); a nil result fails the connection, never falls back to plain.
	TLS func() *tls.Config
	// Interval is the peers' scan interval: data older than StaleAfter(Interval) is stale.
	Interval time.Duration
	// History is the chunk of history a new subscription fetches and keeps (default 5m).
	History time.Duration
	// Idle is how long a subscription lives without being asked for (default 3m).
	Idle time.Duration
	// Timeout is the dial timeout and the ping timeout (default 1s).
	Timeout time.Duration
	// Wait bounds how long a query waits, all peers under one deadline, for what is not in yet
	// (default 4/5 of Timeout): a query that waits its whole budget still answers within
	// Timeout, the peers not in shown unreachable, with what is kept.
	Wait time.Duration
	// MaxDials bounds the connections being opened at once, all peers together (default 256):
	// a first query in a cluster of a thousand nodes opens them in waves rather than all at
	// once. Below it, every peer's connection is opened at the same time.
	MaxDials int
	// MaxSelectors bounds the distinct selectors subscribed to at the peers (default 64), and
	// MaxSelectorsPerCaller those one caller (WithCaller) may add (default 16): see
	// selectors.go. Each peer refuses more than 256 subscriptions on one connection, and a
	// selector takes two while its history chunk comes.
	MaxSelectors          int
	MaxSelectorsPerCaller int
	Log                   *slog.Logger
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
	// Busy: the peer is reachable but this query's selector is not subscribed there: this
	// node has too many distinct selectors in use (BusyError), or the peer refused the
	// subscription (its subscriptions on this node's connection are used up). Error says which.
	Busy NodeState = "busy"
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
	cfg  Config
	dial *dialer

	// ctx is the parent of every peer connection; stop ends it when Run's context ends, also
	// for the connections made by a Query before Run began.
	ctx  context.Context
	stop context.CancelFunc

	mu    sync.Mutex
	peers map[string]*peer // by member ID
	// sels are the distinct selectors admitted (by subKey), callerSels how many each caller
	// added (selectors.go).
	sels       map[string]*selUse
	callerSels map[string]int
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
	if cfg.Wait <= 0 {
		cfg.Wait = cfg.Timeout * 4 / 5
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 2 * time.Second
	}
	if cfg.MaxDials <= 0 {
		cfg.MaxDials = 256
	}
	if cfg.MaxSelectors <= 0 {
		cfg.MaxSelectors = 64
	}
	if cfg.MaxSelectorsPerCaller <= 0 {
		cfg.MaxSelectorsPerCaller = 16
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	h := &Hub{cfg: cfg, peers: map[string]*peer{}, sels: map[string]*selUse{}, callerSels: map[string]int{}}
	h.ctx, h.stop = context.WithCancel(context.Background())
	h.dial = newDialer(cfg.Timeout, cfg.TLS != nil, h.clientTLS, cfg.MaxDials)
	return h
}

// errNoClientTLS fails the connections of a TLS hub whose client configuration is gone.
var errNoClientTLS = errors.New("this node has no client certificate for its peers")

// clientTLS returns the client configuration towards peers: nil for a plain hub; for a TLS
// hub, Config.TLS's, or one that fails every handshake when Config.TLS has none.
func (h *Hub) clientTLS() *tls.Config {
	if h.cfg.TLS == nil {
		return nil
	}
	if c := h.cfg.TLS(); c != nil {
		return c
	}
	return &tls.Config{
		InsecureSkipVerify: true, // replaced by VerifyConnection, which refuses
		VerifyConnection:   func(tls.ConnectionState) error { return errNoClientTLS },
	}
}

// Run expires idle subscriptions until ctx ends, then closes every connection. Call it once.
func (h *Hub) Run(ctx context.Context) error {
	t := time.NewTicker(min(h.cfg.Idle/4, 10*time.Second))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			h.stop()
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
	h.expireSelectors(now)
	for id, p := range h.peers {
		if p.expire(now, h.cfg.Idle) == 0 || !members[id] {
			p.stop()
			delete(h.peers, id)
		}
	}
}

// Query returns every peer's series for match (rate: counters as rates) with the points their
// subscriptions keep (Config.History): what a cluster history query needs. It subscribes where
// needed and makes each subscription keep its history chunk. It waits, all peers under one
// deadline of Config.Wait, only for what is not in yet at peers that are up and not known to
// be failing: a new subscription's current values, and the first chunk a subscription asks for.
// A peer whose connection is down (cut, dead, refusing, or reconnecting after a failure) is
// answered from what is kept, at once, while its connection is retried in the background.
// Peers are sorted by name.
func (h *Hub) Query(ctx context.Context, match string, rate bool) []NodeAnswer {
	return h.query(ctx, match, rate, true)
}

// QueryLatest is Query for a cluster metrics query: it waits only for each reachable peer's
// current values (a new subscription's first update), never for a history chunk, and does not
// make the subscriptions keep one. The answers' Points are what the subscriptions happen to
// keep.
func (h *Hub) QueryLatest(ctx context.Context, match string, rate bool) []NodeAnswer {
	return h.query(ctx, match, rate, false)
}

func (h *Hub) query(ctx context.Context, match string, rate, chunk bool) []NodeAnswer {
	start := time.Now()
	members := wantedMembers(ctx, h.cfg.Members())
	match = canonicalMatch(match)
	if err := h.admit(subKey(match, rate), callerOf(ctx), start); err != nil {
		return busyAnswers(members, err)
	}
	subs := make([]*sub, len(members))
	var wait []<-chan struct{}
	var waitFor []int // member index of each wait
	for i, m := range members {
		s, p := h.subscribe(m, match, rate, chunk)
		subs[i] = s
		if s == nil || !m.Up || p.failing() || s.gaveUp.Load() {
			continue
		}
		wait = append(wait, s.latest)
		waitFor = append(waitFor, i)
		if chunk {
			wait = append(wait, s.chunked)
			waitFor = append(waitFor, i)
		}
	}
	deadline := time.NewTimer(h.cfg.Wait - time.Since(start))
	defer deadline.Stop()
	missed := len(wait) // the first wait not over when the query stopped waiting
wait:
	for i, c := range wait {
		select {
		case <-c:
		case <-deadline.C:
			missed = i
			break wait
		case <-ctx.Done():
			missed = i
			break wait
		}
	}
	var late []string
	for j := missed; j < len(wait); j++ {
		select {
		case <-wait[j]:
		default:
			if ctx.Err() == nil {
				// Given up on at the query's deadline: later queries do not wait for it
				// again (a peer that is connected but silent would make each one wait).
				subs[waitFor[j]].gaveUp.Store(true)
			}
			if n := members[waitFor[j]].Name; len(late) == 0 || late[len(late)-1] != n {
				late = append(late, n)
			}
		}
	}
	if len(late) > 0 {
		h.cfg.Log.Debug("cluster query stopped waiting", "match", match, "history", chunk,
			"waited", time.Since(start), "peers_not_in", len(late), "first", late[:min(len(late), 5)])
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

// busyAnswers answers every member with status Busy and err, but those with no HTTP address
// (unreachable whatever the query), sorted by name.
func busyAnswers(members []Member, err error) []NodeAnswer {
	out := make([]NodeAnswer, 0, len(members))
	for _, m := range members {
		a := NodeAnswer{Node: m.Name, ID: m.ID, Status: Busy, Error: err.Error()}
		if m.HTTP == "" {
			a.Status, a.Error = Unreachable, ""
		}
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out
}

// Listen delivers every peer's updates for match to fn as they arrive, until ctx ends. fn is
// called from the peers' connection goroutines (one peer's updates in order, different peers'
// possibly concurrently), with no lock of the hub held, and must not block. A selector past the
// hub's bounds (selectors.go) is not listened to: Listen returns at once.
func (h *Hub) Listen(ctx context.Context, match string, rate bool, fn func(Update)) {
	match = canonicalMatch(match)
	key, caller := subKey(match, rate), callerOf(ctx)
	if err := h.admit(key, caller, time.Now()); err != nil {
		h.cfg.Log.Debug("cluster stream not listened to", "match", match, "err", err)
		return
	}
	seen := map[string]*sub{}
	refresh := func() {
		for _, m := range h.cfg.Members() {
			if _, ok := seen[m.ID]; ok {
				continue
			}
			if s, _ := h.subscribe(m, match, rate, false); s != nil {
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
			h.admit(key, caller, time.Now())
			for _, s := range seen {
				s.touch()
			}
		}
	}
}

// subscribe returns m's subscription to match (in its canonical form), made if needed (keeping its history chunk when
// chunk is set), and the peer connection that carries it; nil, nil for a member without an
// HTTP address.
func (h *Hub) subscribe(m Member, match string, rate, chunk bool) (*sub, *peer) {
	if m.HTTP == "" {
		return nil, nil
	}
	match = canonicalMatch(match)
	h.mu.Lock()
	p := h.peers[m.ID]
	if p == nil || p.http != m.HTTP {
		if p != nil {
			p.stop()
		}
		p = newPeer(h.ctx, h.cfg, m, h.dial)
		h.peers[m.ID] = p
	}
	h.mu.Unlock()
	p.memberState(m.Up)
	return p.subscribe(match, rate, chunk), p
}

// Kept is the span of history each subscription keeps (Config.History): cluster history
// windows up to it are answered from the subscriptions, without a request to the peers.
func (h *Hub) Kept() time.Duration { return h.cfg.History }

// Members returns the current peers, as Config.Members does, each with the TLS configuration
// to reach it (see Member.TLS).
func (h *Hub) Members() []Member {
	ms := h.cfg.Members()
	if tc := h.clientTLS(); tc != nil {
		for i := range ms {
			ms[i].TLS = tc
		}
	}
	return ms
}
