package hub

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/cantal-go/cantal/internal/apiwire"
)

// dialer opens the WebSocket connections to peers: ws:// or, in a cluster with mutual TLS,
// wss:// with the node's client certificate. It uses no proxy from the environment: peers are
// reached directly.
type dialer struct {
	scheme string // "ws" or "wss"
	client *http.Client
	slots  chan struct{} // one per connection being opened (Config.MaxDials)
}

func newDialer(timeout time.Duration, secure bool, clientTLS func() *tls.Config, maxDials int) *dialer {
	nd := &net.Dialer{Timeout: timeout}
	tr := &http.Transport{DialContext: nd.DialContext}
	d := &dialer{scheme: "ws", client: &http.Client{Transport: tr}, slots: make(chan struct{}, maxDials)}
	if secure {
		d.scheme = "wss"
		tr.DialTLSContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			return DialTLS(ctx, nd, network, addr, clientTLS())
		}
	}
	return d
}

// DialTLS connects to addr with d and runs a TLS handshake with cfg, all bounded by ctx. A
// configuration that checks host names but names none is given addr's host. It fails when cfg
// is nil.
func DialTLS(ctx context.Context, d *net.Dialer, network, addr string, cfg *tls.Config) (net.Conn, error) {
	if cfg == nil {
		return nil, errNoClientTLS
	}
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	if cfg.ServerName == "" && !cfg.InsecureSkipVerify {
		cfg = cfg.Clone()
		cfg.ServerName, _, _ = net.SplitHostPort(addr)
	}
	tc := tls.Client(c, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("tls: %w", err)
	}
	return tc, nil
}

// peer is one WebSocket connection to one peer, carrying its subscriptions.
type peer struct {
	cfg    Config
	dial   *dialer
	name   string
	http   string
	cancel context.CancelFunc
	wake   chan struct{} // a new subscription to send
	retry  chan struct{} // the member is back: retry the connection now

	mu      sync.Mutex
	subs    map[string]*sub // by subKey, which is also the wire id
	up      bool            // connected
	upAt    time.Time       // when the current connection was made
	lastErr string
	downAt  int64
	// memberUp is the membership's word on the member at the last subscribe: a change from
	// down to up while the connection is down cuts its backoff short.
	memberUp bool
}

func newPeer(parent context.Context, cfg Config, m Member, d *dialer) *peer {
	ctx, cancel := context.WithCancel(parent)
	p := &peer{cfg: cfg, dial: d, name: m.Name, http: m.HTTP, cancel: cancel, wake: make(chan struct{}, 1),
		retry: make(chan struct{}, 1), subs: map[string]*sub{}, memberUp: m.Up}
	go p.run(ctx)
	return p
}

func (p *peer) stop() { p.cancel() }

// subscribe returns the subscription to match, made if needed; chunk makes it keep its
// history chunk (a history query), asked for now if it was not before.
func (p *peer) subscribe(match string, rate, chunk bool) *sub {
	key := subKey(match, rate)
	p.mu.Lock()
	s := p.subs[key]
	wake := false
	if s == nil {
		s = &sub{id: key, match: match, rate: rate, latest: make(chan struct{}), chunked: make(chan struct{}), keep: p.cfg.History}
		p.subs[key] = s
		wake = true
	}
	if chunk && s.askChunk() {
		wake = true
	}
	if s.retryRefused(time.Now()) {
		wake = true
	}
	p.mu.Unlock()
	if wake {
		p.poke()
	}
	s.touch()
	return s
}

// poke wakes the session's writer: a subscription or a chunk to send, or one to drop.
func (p *peer) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
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

// memberState records what the membership says of the member; when it comes back up (a
// healed partition) while the connection is down, the connection is retried at once, after a
// jitter of up to minBackoff, instead of at the end of its backoff.
func (p *peer) memberState(up bool) {
	p.mu.Lock()
	back := up && !p.memberUp && !p.up
	p.memberUp = up
	p.mu.Unlock()
	if back {
		select {
		case p.retry <- struct{}{}:
		default:
		}
	}
}

// failing reports whether the peer's connection is down after a failed or lost session: a
// query does not wait for such a peer.
func (p *peer) failing() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.up && p.downAt != 0
}

// lookup returns the subscription with wire id id, or nil.
func (p *peer) lookup(id string) *sub {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.subs[id]
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
		wait := jitter(retry.next(healthy))
		p.cfg.Log.Debug("peer connection lost", "peer", p.name, "err", err, "retry", wait)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		case <-p.retry:
			select {
			case <-ctx.Done():
				return
			case <-time.After(jitter(minBackoff)):
			}
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

// jitter spreads a retry delay over [d/2, d): after a partition heals, the answering node's
// connections to the peers that were cut do not all come back in the same instant, nor do
// every node's connections to one peer.
func jitter(d time.Duration) time.Duration {
	return d/2 + rand.N(d/2+1)
}

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

// session runs one connection until it fails.
func (p *peer) session(ctx context.Context) error {
	t0 := time.Now()
	select {
	case p.dial.slots <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	dctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	c, _, err := websocket.Dial(dctx, p.dial.scheme+"://"+p.http+"/api/v1/ws", &websocket.DialOptions{HTTPClient: p.dial.client})
	cancel()
	<-p.dial.slots
	if err != nil {
		return fmt.Errorf("dial %s: %w", p.http, err)
	}
	dialed := time.Since(t0)
	c.SetReadLimit(64 << 20)
	defer c.CloseNow()
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	p.mu.Lock()
	p.up = true
	p.upAt = time.Now()
	p.lastErr = ""
	p.mu.Unlock()

	errc := make(chan error, 2)
	go func() { errc <- p.read(sctx, c, t0, dialed) }()
	// The session ends when both goroutines have: a message read on this connection is never
	// applied after the next one has begun (connDown in between).
	end := func(err error, running int) error {
		stop()
		c.CloseNow()
		for range running {
			<-errc
		}
		return err
	}
	// The subscriptions go out from this goroutine, right after the dial, rather than from the
	// writer's once it is scheduled: on a busy node with a hundred sessions starting at once
	// (a first cluster query) that saves a turn in the run queue per peer.
	sent := map[string]bool{}
	if err := p.syncSubs(sctx, c, sent); err != nil {
		return end(err, 1)
	}
	go func() { errc <- p.write(sctx, c, sent) }()
	return end(<-errc, 1)
}

// syncSubs subscribes on c what is not in sent (the wire ids subscribed on this connection),
// asks for the chunks needed, and unsubscribes what was dropped and the chunks that have come,
// keeping sent up to date. Every live subscription goes out before any chunk: the peer
// answers its requests in order, so its current values are not held back behind the
// histories it builds.
func (p *peer) syncSubs(ctx context.Context, c *websocket.Conn, sent map[string]bool) error {
	p.mu.Lock()
	var live, chunks, drop [][]byte
	for k, s := range p.subs {
		if resend := s.takeResend(); !sent[k] || resend {
			live = append(live, s.request())
			sent[k] = true
		}
		if ck := chunkPrefix + k; !sent[ck] && s.needsChunk() {
			chunks = append(chunks, s.chunkRequest())
			sent[ck] = true
		}
	}
	for k := range sent {
		base, isChunk := strings.CutPrefix(k, chunkPrefix)
		s, ok := p.subs[base]
		if !ok || isChunk && !s.needsChunk() {
			delete(sent, k)
			drop = append(drop, (&sub{id: k, unsubscribe: true}).request())
		}
	}
	p.mu.Unlock()
	for _, b := range slices.Concat(live, chunks, drop) {
		if err := c.Write(ctx, websocket.MessageText, b); err != nil {
			return err
		}
	}
	return nil
}

// write subscribes on c what is not subscribed on this connection (sent, which it owns from
// now on), unsubscribes what was dropped, and pings, until ctx ends (nil) or c fails.
func (p *peer) write(ctx context.Context, c *websocket.Conn, sent map[string]bool) error {
	ping := time.NewTicker(p.cfg.Interval)
	defer ping.Stop()
	for {
		if err := p.syncSubs(ctx, c, sent); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-p.wake:
		case <-ping.C:
			pctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout+p.cfg.Interval)
			err := c.Ping(pctx)
			cancel()
			if err != nil {
				return fmt.Errorf("ping: %w", err)
			}
		}
	}
}

// read applies the peer's messages to their subscriptions until c fails. The session's first
// message is logged (debug) with where its time went: the dial (TCP, TLS, WebSocket upgrade),
// the wait for the peer's answer to the subscriptions, and its decoding.
func (p *peer) read(ctx context.Context, c *websocket.Conn, start time.Time, dialed time.Duration) error {
	for first := true; ; first = false {
		_, data, err := c.Read(ctx)
		if err != nil {
			return err
		}
		got := time.Now()
		var m apiwire.WSFrame
		if err := json.Unmarshal(data, &m); err != nil {
			return fmt.Errorf("bad message from %s: %w", p.http, err)
		}
		if first {
			p.cfg.Log.Debug("peer session: first message", "peer", p.name, "dial", dialed,
				"wait", got.Sub(start)-dialed, "decode", time.Since(got), "type", m.Type, "bytes", len(data))
		}
		if base, isChunk := strings.CutPrefix(m.ID, chunkPrefix); isChunk {
			if s := p.lookup(base); s != nil && s.receiveChunk(&m) {
				p.poke() // the chunk's subscription can go
			}
		} else if s := p.lookup(m.ID); s != nil {
			s.receive(p.name, &m)
		}
	}
}
