// Package cluster is the agent's membership: peer-to-peer discovery by gossip with
// hashicorp/memberlist (SWIM with Lifeguard), so that adding one peer at any node makes every
// node know every other, with no master and no quorum.
//
// A Cluster gossips node metadata (id, name, HTTP address, version), measures the round-trip
// time to each peer, keeps failed peers listed (dead, or left when they said goodbye), remembers
// its peers in a state directory to rejoin them after a restart, and keeps trying failed peers so
// that a healed partition merges again. Nodes only see nodes with the same cluster name
// (memberlist's packet label, checked again on every node's metadata), and with a key file all
// gossip is encrypted and unencrypted traffic is dropped.
//
// Lifecycle: New starts gossip; Run does the background work until its context ends; Leave
// tells the peers goodbye and Shutdown stops everything (both safe to call twice, Leave before
// Shutdown). All methods are safe for concurrent use.
package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cantal-go/cantal/internal/logbudget"
	"github.com/cantal-go/cantal/internal/statedir"
	"github.com/hashicorp/memberlist"
)

// Status is a peer's membership state as the local node sees it.
type Status string

// The statuses of a peer.
const (
	StatusAlive   Status = "alive"   // answering probes
	StatusSuspect Status = "suspect" // missed probes; declared dead unless it refutes in time
	StatusDead    Status = "dead"    // failed; retried every Config.ReconnectInterval
	StatusLeft    Status = "left"    // said goodbye
)

// Peer is one known node as the HTTP API shows it. It is a value: the caller owns it.
type Peer struct {
	ID       string        // unique node id (memberlist's node name)
	Name     string        // human-readable node name
	Addr     string        // gossip host:port
	HTTP     string        // the node's HTTP address, from its metadata
	Version  string        // the node's agent version, from its metadata
	Status   Status        // membership state
	RTT      time.Duration // last measured probe round trip; 0 when not measured yet
	LastSeen time.Time     // last time the node answered or was heard of; zero if never
	Since    time.Time     // when Status last changed (as this node saw it)
}

type peerJSON struct {
	ID       string   `json:"id"`
	Name     string   `json:"name"`
	Addr     string   `json:"addr"`
	HTTP     string   `json:"http"`
	Version  string   `json:"version,omitempty"`
	Status   Status   `json:"status"`
	RTTMs    *float64 `json:"rtt_ms"`    // null when not measured yet
	LastSeen int64    `json:"last_seen"` // unix ms, 0 if never
	Since    int64    `json:"since"`     // unix ms of the last status change
}

// MarshalJSON encodes p as in GET /api/v1/peers: rtt_ms in milliseconds (null when unknown)
// and last_seen in unix milliseconds.
func (p Peer) MarshalJSON() ([]byte, error) {
	j := peerJSON{ID: p.ID, Name: p.Name, Addr: p.Addr, HTTP: p.HTTP, Version: p.Version,
		Status: p.Status, LastSeen: unixMilli(p.LastSeen), Since: unixMilli(p.Since)}
	if p.RTT > 0 {
		ms := float64(p.RTT.Microseconds()) / 1000
		j.RTTMs = &ms
	}
	return json.Marshal(j)
}

// UnmarshalJSON is the inverse of MarshalJSON (for clients of the API).
func (p *Peer) UnmarshalJSON(b []byte) error {
	var j peerJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return fmt.Errorf("decode peer: %w", err)
	}
	*p = Peer{ID: j.ID, Name: j.Name, Addr: j.Addr, HTTP: j.HTTP, Version: j.Version,
		Status: j.Status, LastSeen: fromUnixMilli(j.LastSeen), Since: fromUnixMilli(j.Since)}
	if j.RTTMs != nil {
		p.RTT = time.Duration(*j.RTTMs * float64(time.Millisecond))
	}
	return nil
}

// peerRec is the local record of a peer; guarded by Cluster.mu.
type peerRec struct {
	id       string
	addr     string
	meta     meta
	status   Status
	since    time.Time // when status last changed
	rtt      time.Duration
	lastSeen time.Time
}

func (r *peerRec) peer() Peer {
	return Peer{ID: r.id, Name: r.meta.Name, Addr: r.addr, HTTP: r.meta.HTTP, Version: r.meta.Version,
		Status: r.status, RTT: r.rtt, LastSeen: r.lastSeen, Since: r.since}
}

// Cluster is this node's membership in a gossip cluster.
type Cluster struct {
	cfg   Config
	log   *slog.Logger
	lim   *logbudget.Limiter // budget of memberlist's and the transport's log lines
	ml    *memberlist.Memberlist
	tr    *transport // nil with Config.Transport
	id    string
	local meta
	meta  atomic.Pointer[[]byte] // encoded local meta, replaced by Leave

	mu     sync.Mutex
	peers  map[string]*peerRec
	seeds  []string
	dirty  bool
	left   bool
	closed bool

	persistMu sync.Mutex

	joins  chan struct{} // a slot per Join in progress, at most maxJoins
	healCh chan struct{} // a peer came back: an extra reconnection round (see Run)
	port   int           // gossip port, for a Join address without one
}

// New validates cfg and starts gossiping. The node is alone until Join or Run contacts a peer.
func New(cfg Config) (*Cluster, error) {
	def := DefaultConfig()
	if cfg.ClusterName == "" {
		return nil, errors.New("cluster: no cluster name")
	}
	if l := len(labelPrefix) + len(cfg.ClusterName); l > memberlist.LabelMaxSize {
		return nil, fmt.Errorf("cluster: cluster name is %d bytes, at most %d", len(cfg.ClusterName), memberlist.LabelMaxSize-len(labelPrefix))
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.NodeName == "" {
		h, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("cluster: node name: %w", err)
		}
		cfg.NodeName = h
	}
	if cfg.ReconnectInterval <= 0 {
		cfg.ReconnectInterval = def.ReconnectInterval
	}
	if cfg.PersistInterval <= 0 {
		cfg.PersistInterval = def.PersistInterval
	}
	if cfg.ForgetAfter <= 0 {
		cfg.ForgetAfter = def.ForgetAfter
	}
	if cfg.JoinTimeout <= 0 {
		cfg.JoinTimeout = def.JoinTimeout
	}
	tlsOn := cfg.ClientTLS != nil && cfg.Transport == nil
	c := &Cluster{
		cfg:    cfg,
		log:    cfg.Logger.With("component", "cluster"),
		lim:    logbudget.New(cfg.Logger, "gossip log lines"),
		peers:  make(map[string]*peerRec),
		local:  meta{Cluster: cfg.ClusterName, Name: cfg.NodeName, HTTP: cfg.HTTPAddr, Version: cfg.Version, TLS: tlsOn},
		joins:  make(chan struct{}, maxJoins),
		healCh: make(chan struct{}, 1),
	}
	enc, err := c.local.encode()
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	c.meta.Store(&enc)
	switch {
	case cfg.NodeID != "":
		if err := statedir.CheckNodeID(cfg.NodeID); err != nil {
			return nil, fmt.Errorf("cluster: %w", err)
		}
		c.id = cfg.NodeID
	default:
		sum := sha256.Sum256([]byte(cfg.NodeName + "\x00" + cfg.BindAddr))
		c.id = hex.EncodeToString(sum[:8])
	}
	c.addSeeds(cfg.Peers)
	if cfg.PeersFile != "" {
		c.loadState()
	}

	mlc := memberlistConfig()
	size := max(cfg.SizeHint, 1+max(len(c.peers), len(c.seeds)))
	scaleForSize(mlc, size)
	mlc.Name = c.id
	mlc.Label = labelPrefix + cfg.ClusterName
	d := &delegate{c}
	mlc.Logger = newMemberlistLogger(cfg.Logger, c.lim, d.suspect)
	mlc.Delegate, mlc.Events, mlc.Ping, mlc.Alive, mlc.Merge, mlc.Conflict = d, d, d, d, d, d
	if cfg.KeyFile != "" {
		if mlc.Keyring, err = LoadKeyring(cfg.KeyFile); err != nil {
			return nil, fmt.Errorf("cluster: %w", err)
		}
	}
	if cfg.Transport != nil {
		mlc.Transport = cfg.Transport
		mlc.BindPort = DefaultPort
	} else {
		tc := transportConfig{log: cfg.Logger, lim: c.lim, conns: cfg.StreamConns}
		if tlsOn {
			tc.clientTLS, tc.serverTLS = cfg.ClientTLS, cfg.ServerTLS
		}
		c.tr, err = newTransport(cfg.BindAddr, cfg.AdvertiseAddr, cfg.StreamsViaHTTP, tc)
		if err != nil {
			return nil, fmt.Errorf("cluster: %w", err)
		}
		mlc.Transport = c.tr
		mlc.BindAddr = c.tr.addr().IP.String()
		mlc.BindPort = c.tr.addr().Port // a peer given as a bare host uses our port
	}
	if cfg.Tune != nil {
		cfg.Tune(mlc)
	}
	if c.ml, err = memberlist.Create(mlc); err != nil {
		if c.tr != nil {
			c.tr.Shutdown()
		}
		return nil, fmt.Errorf("cluster: start memberlist: %w", err)
	}
	ln := c.ml.LocalNode()
	c.port = int(ln.Port)
	c.log.Info("gossip started", "id", c.id, "name", cfg.NodeName, "cluster", cfg.ClusterName,
		"addr", ln.Address(), "encrypted", mlc.Keyring != nil, "tls", tlsOn,
		"sized_for", size, "probe_timeout", mlc.ProbeTimeout, "gossip_nodes", mlc.GossipNodes)
	return c, nil
}

// labelPrefix makes the memberlist label of a cluster: packets and streams carry it, and a node
// drops those with another label.
const labelPrefix = "cantal/"

func (c *Cluster) loadState() {
	s, err := readPeersState(c.cfg.PeersFile)
	if err != nil {
		c.log.Warn("ignoring remembered peers", "err", err)
		return
	}
	if s.Cluster != "" && s.Cluster != c.cfg.ClusterName {
		c.log.Info("ignoring remembered peers of another cluster", "cluster", s.Cluster)
		return
	}
	if len(s.Seeds) > 0 {
		// Files of earlier versions kept every address ever joined, also through the API;
		// only --peer addresses are retried now.
		c.log.Info("not retrying remembered join addresses; only configured peers are", "addresses", len(s.Seeds))
	}
	now := time.Now()
	for _, p := range s.Peers {
		if p.ID == c.id || p.ID == "" {
			continue
		}
		seen := fromUnixMilli(p.LastSeen)
		if now.Sub(seen) > c.cfg.ForgetAfter {
			continue
		}
		// Until gossip says otherwise, a remembered peer is one we cannot reach.
		c.peers[p.ID] = &peerRec{id: p.ID, addr: p.Addr, meta: meta{Cluster: c.cfg.ClusterName, Name: p.Name},
			status: StatusDead, since: now, lastSeen: seen}
	}
}

func (c *Cluster) addSeeds(addrs []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, a := range addrs {
		if a != "" && !slices.Contains(c.seeds, a) {
			c.seeds = append(c.seeds, a)
			c.dirty = true
		}
	}
}

// ID returns the node's id.
func (c *Cluster) ID() string { return c.id }

// StreamHandler returns the handler the agent's HTTP server mounts at GossipPath when
// Config.StreamsViaHTTP is set. It hijacks the connection; middleware in front of it must keep
// http.Hijacker. With Config.Transport it answers 404.
func (c *Cluster) StreamHandler() http.Handler {
	if c.tr == nil {
		return http.NotFoundHandler()
	}
	return c.tr
}

// maxJoins bounds the Joins in progress at once: a Join holds its caller for up to a few
// seconds, so that more callers cannot hold more goroutines.
const maxJoins = 4

// maxJoinAddrs bounds the addresses one host name of a Join is tried at.
const maxJoinAddrs = 3

// JoinError is the error of a Join. Its text is the same whatever went wrong at the address
// (refused, timed out, not cantal, another cluster, another key, a certificate of another CA),
// so that joining cannot be used to probe ports; the detail goes to the debug log.
type JoinError struct {
	status int
	msg    string
}

func (e *JoinError) Error() string { return e.msg }

// HTTPStatus is the status code the API answers with.
func (e *JoinError) HTTPStatus() int { return e.status }

// The errors of Join.
var (
	// ErrNoMember: no address given to Join answered as a member of this cluster.
	ErrNoMember = &JoinError{http.StatusBadGateway, "no cantal member of this cluster answered"}
	// ErrJoinBusy: maxJoins Joins are in progress already.
	ErrJoinBusy = &JoinError{http.StatusTooManyRequests, "too many joins in progress; try again later"}
	// ErrJoinAddr: an address is not host:port or host.
	ErrJoinAddr = &JoinError{http.StatusBadRequest, "bad address: want host:port or host"}
)

// Join contacts the given peers (host:port, or host for this node's port) and merges their
// view of the cluster. Only a full state exchange with a member of this cluster counts (same
// cluster name, gossip key and, with mutual TLS, a certificate of the cluster's CA on both
// sides); an address that does not prove to be one is dropped at once: not retried, not
// remembered. Join returns how many addresses it reached, and ErrNoMember when none, after
// Config.JoinTimeout at the least; ErrJoinBusy when maxJoins Joins are in progress, and
// ErrJoinAddr for a malformed address.
func (c *Cluster) Join(addrs ...string) (int, error) {
	for _, a := range addrs {
		if err := checkJoinAddr(a); err != nil {
			c.log.Debug("join refused", "addr", a, "err", err)
			return 0, ErrJoinAddr
		}
	}
	select {
	case c.joins <- struct{}{}:
	default:
		return 0, ErrJoinBusy
	}
	defer func() { <-c.joins }()
	start := time.Now()
	n := 0
	for _, a := range addrs {
		if c.joinOne(a) {
			n++
		}
	}
	if n == 0 {
		// A refused port answers at once, a filtered one after the timeout: both take as long.
		if wait := c.cfg.JoinTimeout - time.Since(start); wait > 0 && !c.isClosed() {
			time.Sleep(wait)
		}
		return 0, ErrNoMember
	}
	return n, nil
}

// checkJoinAddr checks that a is host:port or a bare host. memberlist's "name/host:port" form
// is not taken.
func checkJoinAddr(a string) error {
	if a == "" || len(a) > 300 || strings.ContainsAny(a, "/ \t\r\n") {
		return errors.New("malformed")
	}
	if host, port, err := net.SplitHostPort(a); err == nil {
		if host == "" {
			return errors.New("no host")
		}
		if p, err := strconv.ParseUint(port, 10, 16); err != nil || p == 0 {
			return errors.New("bad port")
		}
		return nil
	}
	if strings.Contains(a, ":") && net.ParseIP(a) == nil {
		return errors.New("malformed")
	}
	return nil
}

// joinOne joins the member at a, a host name being tried at up to maxJoinAddrs of its
// addresses; it reports whether one answered as a member.
func (c *Cluster) joinOne(a string) bool {
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		host, port = a, strconv.Itoa(c.port)
	}
	var ips []string
	if ip := net.ParseIP(host); ip != nil {
		ips = []string{ip.String()}
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), c.cfg.JoinTimeout)
		found, err := net.DefaultResolver.LookupIPAddr(ctx, host)
		cancel()
		if err != nil {
			c.log.Debug("join failed", "addr", a, "err", err)
			return false
		}
		for _, f := range found[:min(len(found), maxJoinAddrs)] {
			ips = append(ips, f.IP.String())
		}
	}
	for _, ip := range ips {
		target := net.JoinHostPort(ip, port)
		if _, err := c.ml.Join([]string{target}); err != nil {
			c.log.Debug("join failed", "addr", a, "at", target, "err", err)
			continue
		}
		c.log.Info("joined", "addr", a, "at", target)
		return true
	}
	return false
}

// Local returns this node as peers see it.
func (c *Cluster) Local() Peer {
	ln := c.ml.LocalNode()
	return Peer{ID: c.id, Name: c.local.Name, Addr: ln.Address(), HTTP: c.local.HTTP,
		Version: c.local.Version, Status: StatusAlive, LastSeen: time.Now()}
}

// Peers returns every known peer but the node itself, sorted by name then id.
func (c *Cluster) Peers() []Peer {
	c.mu.Lock()
	out := make([]Peer, 0, len(c.peers))
	for _, r := range c.peers {
		out = append(out, r.peer())
	}
	c.mu.Unlock()
	slices.SortFunc(out, func(a, b Peer) int {
		if a.Name != b.Name {
			if a.Name < b.Name {
				return -1
			}
			return 1
		}
		if a.ID < b.ID {
			return -1
		}
		if a.ID > b.ID {
			return 1
		}
		return 0
	})
	return out
}

// IsLiveMemberIP reports whether ip is the gossip or HTTP host of a peer that is alive or
// suspect. With a verified client certificate it tells a member's own connection (its remote
// subscriptions and history fetches) from another holder of a certificate of the same CA that
// is not in the cluster (it lacks the gossip key, say).
func (c *Cluster) IsLiveMemberIP(ip net.IP) bool {
	if ip == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.peers {
		if r.status != StatusAlive && r.status != StatusSuspect {
			continue
		}
		for _, a := range []string{r.addr, r.meta.HTTP} {
			if h, _, err := net.SplitHostPort(a); err == nil && net.ParseIP(h).Equal(ip) {
				return true
			}
		}
	}
	return false
}

// NumAlive returns how many nodes, this one included, are alive or suspect.
func (c *Cluster) NumAlive() int { return c.ml.NumMembers() }

// Run rejoins the configured and remembered peers, then until ctx ends: retries failed peers
// (all of them while the node is alone, else one at random each Config.ReconnectInterval),
// forgets peers failed for longer than Config.ForgetAfter, and saves the peers to
// Config.PeersFile. It returns nil when ctx ends, after a last save.
//
// Reconnection rounds are jittered (each wait drawn from [0.5, 1.5) × ReconnectInterval), so
// that the nodes of a cluster do not all push their state at the same instant. When a dead or
// departed peer comes back (a partition healed), the node runs an extra round after a random
// delay of up to healJitter, one for all the returns seen meanwhile: the merge of the two sides
// then starts from many nodes, spread over that second, instead of waiting for the next round.
func (c *Cluster) Run(ctx context.Context) error {
	c.reconnect(ctx)
	rec := time.NewTimer(jitterInterval(c.cfg.ReconnectInterval))
	defer rec.Stop()
	per := time.NewTicker(c.cfg.PersistInterval)
	defer per.Stop()
	var heal <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			c.persist()
			return nil
		case <-rec.C:
			c.forget(time.Now())
			c.reconnect(ctx)
			rec.Reset(jitterInterval(c.cfg.ReconnectInterval))
		case <-c.healCh:
			if heal == nil {
				heal = time.After(rand.N(healJitter))
			}
		case <-heal:
			heal = nil
			c.reconnect(ctx)
		case <-per.C:
			c.persist()
		}
	}
}

// healJitter spreads the extra reconnection round that follows a peer's return.
const healJitter = time.Second

// jitterInterval returns d × [0.5, 1.5).
func jitterInterval(d time.Duration) time.Duration {
	return d/2 + rand.N(d)
}

// healed asks Run for an extra reconnection round: a dead or departed peer is alive again.
func (c *Cluster) healed() {
	select {
	case c.healCh <- struct{}{}:
	default:
	}
}

// reconnect joins every candidate when alone, else one random candidate. Candidates are failed
// peers and seeds that are not the address of a live member.
func (c *Cluster) reconnect(ctx context.Context) {
	if c.isClosed() {
		return
	}
	members := c.ml.Members()
	live := make(map[string]bool, len(members))
	for _, m := range members {
		live[m.Address()] = true
	}
	alone := len(members) <= 1
	self := c.ml.LocalNode().Address()
	var cands []string
	c.mu.Lock()
	for _, r := range c.peers {
		if r.status == StatusDead || (alone && r.status == StatusLeft) {
			if !live[r.addr] && r.addr != self {
				cands = append(cands, r.addr)
			}
		}
	}
	for _, s := range c.seeds {
		if !live[s] && s != self {
			cands = append(cands, s)
		}
	}
	c.mu.Unlock()
	slices.Sort(cands)
	cands = slices.Compact(cands)
	if len(cands) == 0 {
		return
	}
	if !alone {
		cands = []string{cands[rand.IntN(len(cands))]}
	}
	const parallel = 8
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for _, a := range cands {
		if ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if _, err := c.ml.Join([]string{a}); err != nil {
				c.log.Debug("reconnect failed", "addr", a, "err", err)
			} else {
				c.log.Info("reconnected", "addr", a)
			}
		}()
	}
	wg.Wait()
}

// forget drops peers failed or departed for longer than ForgetAfter.
func (c *Cluster) forget(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, r := range c.peers {
		if (r.status == StatusDead || r.status == StatusLeft) && now.Sub(r.since) > c.cfg.ForgetAfter {
			delete(c.peers, id)
			c.dirty = true
		}
	}
}

// persist saves the peers when they changed since the last save.
func (c *Cluster) persist() {
	if c.cfg.PeersFile == "" {
		return
	}
	c.persistMu.Lock()
	defer c.persistMu.Unlock()
	c.mu.Lock()
	if !c.dirty {
		c.mu.Unlock()
		return
	}
	s := peersState{Cluster: c.cfg.ClusterName}
	for _, r := range c.peers {
		s.Peers = append(s.Peers, statePeer{ID: r.id, Name: r.meta.Name, Addr: r.addr, LastSeen: unixMilli(r.lastSeen)})
	}
	c.dirty = false
	c.mu.Unlock()
	slices.SortFunc(s.Peers, func(a, b statePeer) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	if err := writePeersState(c.cfg.PeersFile, s); err != nil {
		c.log.Warn("cannot remember peers", "err", err)
		c.mu.Lock()
		c.dirty = true
		c.mu.Unlock()
	}
}

func (c *Cluster) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// Leave tells the peers that this node is leaving and waits up to timeout for the news to
// spread. It is safe to call twice; call Shutdown afterwards.
func (c *Cluster) Leave(timeout time.Duration) error {
	c.mu.Lock()
	if c.left || c.closed {
		c.mu.Unlock()
		return nil
	}
	c.left = true
	c.mu.Unlock()
	start := time.Now()
	if c.ml.NumMembers() > 1 {
		lm := c.local
		lm.Leaving = true
		if enc, err := lm.encode(); err == nil {
			c.meta.Store(&enc)
			// Half the time for the leaving mark to spread ahead of the goodbye.
			if err := c.ml.UpdateNode(timeout / 2); err != nil {
				c.log.Debug("leaving mark not confirmed", "err", err)
			}
		}
	}
	if err := c.ml.Leave(max(timeout-time.Since(start), timeout/2)); err != nil {
		return fmt.Errorf("cluster: leave: %w", err)
	}
	return nil
}

// Shutdown saves the peers and stops gossip without telling the peers (they will find this
// node failed unless Leave was called first). It is safe to call twice.
func (c *Cluster) Shutdown() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	c.persist()
	err := c.ml.Shutdown()
	c.lim.Stop()
	if err != nil {
		return fmt.Errorf("cluster: shutdown: %w", err)
	}
	return nil
}

// delegate receives memberlist's callbacks. memberlist calls them from its own goroutines,
// some while holding its node lock: they only take Cluster.mu and never call memberlist.
type delegate struct{ c *Cluster }

// NodeMeta implements memberlist.Delegate.
func (d *delegate) NodeMeta(limit int) []byte {
	m := *d.c.meta.Load()
	if len(m) > limit {
		return nil // New checked against MetaMaxSize, the only limit memberlist uses
	}
	return m
}

// NotifyMsg implements memberlist.Delegate; the cluster sends no user messages.
func (d *delegate) NotifyMsg([]byte) {}

// GetBroadcasts implements memberlist.Delegate.
func (d *delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }

// LocalState implements memberlist.Delegate.
func (d *delegate) LocalState(join bool) []byte { return nil }

// MergeRemoteState implements memberlist.Delegate.
func (d *delegate) MergeRemoteState(buf []byte, join bool) {}

// checkNode rejects a node that is not of our cluster.
func (d *delegate) checkNode(n *memberlist.Node) error {
	if n.Name == d.c.id {
		return nil
	}
	m, err := decodeMeta(n.Meta)
	if err != nil {
		return fmt.Errorf("node %s at %s: %w", n.Name, n.Address(), err)
	}
	if m.Cluster != d.c.cfg.ClusterName {
		return fmt.Errorf("node %s at %s is in cluster %q, not %q", n.Name, n.Address(), m.Cluster, d.c.cfg.ClusterName)
	}
	if m.TLS != d.c.local.TLS {
		return fmt.Errorf("node %s at %s has mutual TLS %v, this node %v", n.Name, n.Address(), m.TLS, d.c.local.TLS)
	}
	return nil
}

// NotifyAlive implements memberlist.AliveDelegate.
func (d *delegate) NotifyAlive(n *memberlist.Node) error {
	if err := d.checkNode(n); err != nil {
		return err
	}
	if n.Name != d.c.id {
		d.heard(n.Name, 0)
	}
	return nil
}

// NotifyMerge implements memberlist.MergeDelegate: a push/pull from another cluster is refused
// whole.
func (d *delegate) NotifyMerge(nodes []*memberlist.Node) error {
	for _, n := range nodes {
		if err := d.checkNode(n); err != nil {
			return err
		}
	}
	return nil
}

// NotifyConflict implements memberlist.ConflictDelegate.
func (d *delegate) NotifyConflict(existing, other *memberlist.Node) {
	d.c.log.Warn("two nodes claim one id", "id", existing.Name, "existing", existing.Address(), "other", other.Address())
}

// NotifyJoin implements memberlist.EventDelegate.
func (d *delegate) NotifyJoin(n *memberlist.Node) { d.update(n, true) }

// NotifyUpdate implements memberlist.EventDelegate.
func (d *delegate) NotifyUpdate(n *memberlist.Node) { d.update(n, true) }

// NotifyLeave implements memberlist.EventDelegate: the node failed, or left if it marked itself
// leaving in its metadata first.
func (d *delegate) NotifyLeave(n *memberlist.Node) { d.update(n, false) }

func (d *delegate) update(n *memberlist.Node, alive bool) {
	if n.Name == d.c.id {
		return
	}
	now := time.Now()
	m, err := decodeMeta(n.Meta)
	c := d.c
	c.mu.Lock()
	r := c.peers[n.Name]
	if r == nil {
		r = &peerRec{id: n.Name}
		c.peers[n.Name] = r
	}
	if err == nil {
		r.meta = m
	}
	r.addr = n.Address()
	st := StatusAlive
	switch {
	case !alive && r.meta.Leaving:
		st = StatusLeft
	case !alive:
		st = StatusDead
	}
	changed := r.status != st
	wasDown := r.status == StatusDead || r.status == StatusLeft
	if changed {
		r.status, r.since = st, now
	}
	if alive {
		r.lastSeen = now
	}
	c.dirty = true
	name := r.meta.Name
	p := r.peer()
	c.mu.Unlock()
	if c.cfg.OnPeer != nil && (changed || (alive && err == nil)) {
		c.cfg.OnPeer(p)
	}
	if !changed {
		return
	}
	if changed && st == StatusAlive && wasDown {
		c.healed()
	}
	lvl := slog.LevelInfo
	if st == StatusDead {
		lvl = slog.LevelWarn
	}
	// Within the node's gossip log budget: a partition makes every peer of the other side
	// suspect, then dead, at once.
	if c.log.Enabled(context.Background(), lvl) && c.lim.Allow() {
		c.log.Log(context.Background(), lvl, "peer "+string(st), "id", n.Name, "name", name, "addr", n.Address())
	}
}

// suspect marks an alive peer suspect after this node's probe of it failed.
func (d *delegate) suspect(id string) {
	c := d.c
	c.mu.Lock()
	r := c.peers[id]
	if r == nil || r.status != StatusAlive {
		c.mu.Unlock()
		return
	}
	r.status, r.since = StatusSuspect, time.Now()
	p := r.peer()
	c.mu.Unlock()
	if c.log.Enabled(context.Background(), slog.LevelInfo) && c.lim.Allow() {
		c.log.Info("peer suspect", "id", id, "name", p.Name, "addr", p.Addr)
	}
	if c.cfg.OnPeer != nil {
		c.cfg.OnPeer(p)
	}
}

// heard clears a suspicion: the peer answered or refuted it.
func (d *delegate) heard(id string, rtt time.Duration) {
	c := d.c
	c.mu.Lock()
	r := c.peers[id]
	if r == nil {
		c.mu.Unlock()
		return
	}
	cleared := r.status == StatusSuspect
	if cleared {
		r.status, r.since = StatusAlive, time.Now()
	}
	if rtt > 0 {
		r.rtt = rtt
	}
	r.lastSeen = time.Now()
	p := r.peer()
	c.mu.Unlock()
	if cleared && c.cfg.OnPeer != nil {
		c.cfg.OnPeer(p)
	}
}

// AckPayload implements memberlist.PingDelegate.
func (d *delegate) AckPayload() []byte { return nil }

// NotifyPingComplete implements memberlist.PingDelegate: it records the round-trip time.
func (d *delegate) NotifyPingComplete(other *memberlist.Node, rtt time.Duration, payload []byte) {
	d.heard(other.Name, rtt)
}
