package cluster

import (
	"crypto/tls"
	"log/slog"
	"math"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/cantal-go/cantal/internal/connlimit"
)

// DefaultPort is the agent's port: HTTP on TCP and gossip on UDP (and gossip streams on the HTTP
// listener), as in the original Cantal.
const DefaultPort = 22682

// Config configures a Cluster. Build it with DefaultConfig and change what you need; a Config is
// copied by New and not used afterwards.
type Config struct {
	// NodeID is the node's unique, stable identity in the cluster (memberlist's node name).
	// Empty: one derived from NodeName and BindAddr. The agent passes the id its state
	// directory keeps (internal/statedir), which owns the node id file.
	NodeID string
	// NodeName is the human-readable name shown to peers (default: the host name).
	NodeName string
	// ClusterName enables gossip; nodes only ever see nodes with the same name. Required.
	ClusterName string
	// BindAddr is the gossip host:port: UDP packets, and TCP streams as HTTP upgrades at
	// GossipPath. Port 0 picks a free one (only without StreamsViaHTTP).
	BindAddr string
	// AdvertiseAddr is the gossip host:port peers use to reach this node when it differs from
	// BindAddr (NAT, wildcard bind). Empty: BindAddr, or for a wildcard BindAddr the host's
	// first private IP.
	AdvertiseAddr string
	// StreamsViaHTTP says that the agent's HTTP server listens on TCP at BindAddr's port and
	// mounts StreamHandler at GossipPath, so the cluster does not open a TCP listener of its
	// own. This is the agent's default (--gossip-listen equal to --listen).
	StreamsViaHTTP bool
	// StreamConns are the connection limits of the own TCP stream listener (without
	// StreamsViaHTTP; package connlimit); zero values: DefaultStreamConns.
	StreamConns connlimit.Options
	// HTTPAddr is the HTTP address advertised to peers in the node metadata.
	HTTPAddr string
	// Version is the agent version advertised in the node metadata.
	Version string
	// KeyFile is a gossip key file (see ParseKeys); empty disables encryption. An encrypted
	// node drops every unencrypted packet and stream.
	KeyFile string
	// ClientTLS, when set, makes the node a member of a cluster with mutual TLS: every gossip
	// stream it opens (joins, push/pull, TCP probes) is TLS with the configuration ClientTLS
	// returns at that moment (the node's certificate as client certificate, the cluster CA as
	// roots; see access.WebConfig.ClientTLS). A nil result fails the dial; a TLS node never
	// falls back to plain TCP. The node says so in its metadata, and TLS and plain nodes refuse
	// each other. Packets (UDP) are not TLS: they stay encrypted by KeyFile, which a TLS cluster
	// needs as well. Unused with Transport.
	ClientTLS func() *tls.Config
	// ServerTLS is the TLS server side of the transport's own stream listener (without
	// StreamsViaHTTP); required with ClientTLS in that case. The listener accepts only
	// connections whose client certificate verifies against ServerTLS's ClientCAs (whatever its
	// ClientAuth says). With StreamsViaHTTP the agent's HTTP server does TLS, and StreamHandler
	// refuses a stream without a verified client certificate.
	ServerTLS *tls.Config
	// PeersFile is the file that keeps the known peers across restarts (the agent's is named
	// by internal/statedir); empty keeps nothing.
	PeersFile string
	// Peers are addresses (host:port, or host for DefaultPort) joined by Run and retried
	// whenever the node is alone. They are the only addresses retried that have not proved to
	// be members (see Join).
	Peers []string
	// Logger receives the cluster's and memberlist's logs (default slog.Default()).
	Logger *slog.Logger

	// ReconnectInterval is how often Run tries to reach a failed peer, or every remembered
	// peer when the node is alone. memberlist never contacts dead nodes again, so without this
	// a healed partition would stay split.
	ReconnectInterval time.Duration
	// PersistInterval is how often Run saves changed peers to PeersFile.
	PersistInterval time.Duration
	// ForgetAfter is how long a failed or departed peer stays listed and remembered.
	ForgetAfter time.Duration
	// JoinTimeout bounds the name lookup of a Join and is the least time a failed Join takes
	// (so that its duration does not tell a closed port from a filtered one). memberlist's
	// TCPTimeout (3 s) bounds the connection, TLS and upgrade, and again the state exchange.
	JoinTimeout time.Duration

	// OnPeer, when set, is called with a peer whenever its status changes (alive, suspect,
	// dead, left) or an alive peer's metadata changes. It is called from memberlist's
	// goroutines, one call at a time per change but possibly concurrently for different
	// peers, and must not block or call back into the Cluster.
	OnPeer func(Peer)

	// Transport replaces the UDP/TCP transport (tests and benchmarks use memnet). BindAddr,
	// AdvertiseAddr and StreamsViaHTTP are then unused.
	Transport memberlist.Transport
	// SizeHint is the cluster size the node expects, for the settings that scale with it
	// (see scaleForSize; the agent's --cluster-size). The larger of it and the number of
	// remembered peers (PeersFile) or Peers, plus one, is used: memberlist reads these settings
	// once, at creation, and changing them afterwards would race with its goroutines.
	SizeHint int
	// Tune, when set, may adjust the memberlist configuration New built, just before it is used.
	Tune func(*memberlist.Config)
}

// DefaultConfig returns the agent's defaults: gossip on 127.0.0.1:22682 with streams riding the
// HTTP server on the same port, and timers fit for a LAN.
func DefaultConfig() Config {
	return Config{
		BindAddr:          "127.0.0.1:22682",
		StreamsViaHTTP:    true,
		ReconnectInterval: 5 * time.Second,
		PersistInterval:   10 * time.Second,
		ForgetAfter:       24 * time.Hour,
		JoinTimeout:       3 * time.Second,
	}
}

// memberlistConfig returns memberlist's LAN defaults (SWIM with Lifeguard) tuned for fast
// convergence. The original Cantal sends 5 pings a second carrying 10 peers each; memberlist
// separates failure detection (one probe a second) from dissemination (gossip every 200 ms to 4
// random peers, i.e. 5 gossip packets a second, each packed with as many updates as fit),
// which spread one join to all of 1000 simulated nodes in 0.72 s (BenchmarkClusterConvergence
// in bench/cluster_test.go, whose simulation slows the probes, not the gossip, to fit 1000
// nodes on two cores).
func memberlistConfig() *memberlist.Config {
	c := memberlist.DefaultLANConfig()
	c.GossipInterval = 200 * time.Millisecond
	c.GossipNodes = 4
	c.ProbeInterval = time.Second
	c.ProbeTimeout = 500 * time.Millisecond
	// Anti-entropy: a full state exchange every 15 s (memberlist stretches this with cluster
	// size) repairs whatever gossip lost, e.g. under heavy packet loss.
	c.PushPullInterval = 15 * time.Second
	c.TCPTimeout = 3 * time.Second
	// A node that comes back with the same id on a new address may reclaim its name.
	c.DeadNodeReclaimTime = 30 * time.Second
	return c
}

// scaleForSize adapts c to a cluster of about n nodes, on top of what memberlist scales by
// itself (suspicion timeout and retransmissions grow with log10 N, push/pull intervals with
// log2 N above 32 nodes, and Lifeguard's awareness stretches a slow node's own probe timeouts up
// to AwarenessMaxMultiplier times). Above 32 nodes, with k = 1 + log2(n/32): the probe
// timeout grows to 500 ms × k, at most 80 % of the probe interval (a large cluster has more
// members whose answer can be late, and each false suspicion costs a refutation gossiped to
// all); above 128 nodes the gossip fan-out grows by one per doubling, so that an update still
// reaches every node in about as many rounds (log base fan-out + 1 of N). memberlist reads its
// configuration once, at creation: n is what the node knows then (SizeHint, its remembered
// peers).
func scaleForSize(c *memberlist.Config, n int) {
	if n <= 32 {
		return
	}
	k := 1 + math.Log2(float64(n)/32)
	c.ProbeTimeout = min(time.Duration(float64(c.ProbeTimeout)*k), c.ProbeInterval*8/10)
	if n > 128 {
		c.GossipNodes += int(math.Ceil(math.Log2(float64(n) / 128)))
	}
}
