package agent

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"github.com/cantal-go/cantal/internal/apiwire"
	"github.com/cantal-go/cantal/internal/buildinfo"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/cantal-go/cantal/internal/cluster"
	"github.com/cantal-go/cantal/internal/hub"
)

// gossip joins the agent to its cluster: membership (package cluster) and the lazy remote
// subscriptions of cluster queries (package hub).
type gossip struct {
	c   *cluster.Cluster
	hub *hub.Hub
}

// startGossip builds the membership when --cluster-name is set. Gossip UDP listens on
// --gossip-listen (default: the HTTP address and port); memberlist's TCP streams ride the HTTP
// listener as upgrades at cluster.GossipPath when both addresses are the same, so one port
// serves everything.
//
// With --web-config (which openWeb only accepts for a cluster with mutual TLS and a gossip
// key) the cluster is a TLS cluster: the web config's certificate is the node's client
// identity towards its peers and its client CA the cluster's, every gossip stream, remote
// subscription and history fetch is TLS with them, and a stream listener of its own (gossip
// address apart from the HTTP one) serves TLS and wants a client certificate of the cluster.
// Packets stay encrypted by the gossip key.
func (a *Agent) startGossip() error {
	if a.cfg.ClusterName == "" {
		return nil
	}
	httpAddr := a.tcpAddr()
	bind := a.cfg.GossipListen
	if bind == "" {
		if httpAddr == nil {
			return fmt.Errorf("gossip: --listen has no TCP address; set --gossip-listen")
		}
		bind = httpAddr.String()
	}
	ccfg := cluster.DefaultConfig()
	ccfg.NodeID = a.nodeID
	ccfg.NodeName = a.cfg.NodeName
	ccfg.ClusterName = a.cfg.ClusterName
	ccfg.BindAddr = bind
	if httpAddr != nil {
		ccfg.StreamsViaHTTP = sameAddr(bind, httpAddr.String())
		ccfg.HTTPAddr = advertisedHTTP(httpAddr.String(), bind)
	}
	ccfg.Version = buildinfo.Version
	ccfg.KeyFile = a.cfg.GossipKey
	if a.state != nil {
		ccfg.PeersFile = a.state.PeersFile()
	}
	ccfg.Peers = a.cfg.Peers
	ccfg.SizeHint = a.cfg.ClusterSize
	ccfg.StreamConns = limitsOf(a.cfg).streams
	ccfg.Logger = a.log.With("subsystem", "cluster")
	var clientTLS func() *tls.Config
	if a.web != nil && a.web.MutualTLS() {
		clientTLS = a.web.ClientTLS
		ccfg.ClientTLS, ccfg.ServerTLS = clientTLS, a.web.ServerTLS()
	}
	c, err := cluster.New(ccfg)
	if err != nil {
		return fmt.Errorf("gossip: %w", err)
	}
	if ccfg.StreamsViaHTTP {
		a.mux.Handle(cluster.GossipPath, c.StreamHandler())
	}
	a.gossip = &gossip{c: c}
	a.gossip.hub = hub.New(hub.Config{
		Members:  a.gossip.members,
		TLS:      clientTLS,
		Interval: a.cfg.Interval,
		Log:      a.log.With("subsystem", "remote"),
	})
	return nil
}

func sameAddr(a, b string) bool {
	ha, pa, _ := net.SplitHostPort(a)
	hb, pb, _ := net.SplitHostPort(b)
	return pa == pb && (ha == hb || ha == "" || ha == "0.0.0.0" || ha == "::")
}

// advertisedHTTP is the HTTP address peers should use: the listener's, with the gossip host
// when the listener is bound to a wildcard address.
func advertisedHTTP(listen, gossipBind string) string {
	h, p, err := net.SplitHostPort(listen)
	if err != nil {
		return listen
	}
	if ip := net.ParseIP(h); ip == nil || ip.IsUnspecified() {
		if gh, _, err := net.SplitHostPort(gossipBind); err == nil && gh != "" {
			if gip := net.ParseIP(gh); gip != nil && !gip.IsUnspecified() {
				return net.JoinHostPort(gh, p)
			}
		}
	}
	return listen
}

func (g *gossip) members() []hub.Member {
	peers := g.c.Peers()
	out := make([]hub.Member, 0, len(peers))
	for _, p := range peers {
		out = append(out, hub.Member{
			ID: p.ID, Name: p.Name, HTTP: p.HTTP,
			Up: p.Status == cluster.StatusAlive || p.Status == cluster.StatusSuspect,
		})
	}
	return out
}

// Peers implements api.Peers.
func (g *gossip) Peers() []apiwire.Peer {
	peers := g.c.Peers()
	out := make([]apiwire.Peer, len(peers))
	for i, p := range peers {
		out[i] = peerWire(p)
	}
	return out
}

// peerWire is p as /api/v1/peers writes it: times in unix ms (0: never), the round trip in
// ms to the microsecond and absent until measured, written as encoding/json writes a float.
func peerWire(p cluster.Peer) apiwire.Peer {
	w := apiwire.Peer{ID: p.ID, Name: p.Name, Addr: p.Addr, HTTP: p.HTTP, Version: p.Version,
		Status: string(p.Status), LastSeen: unixMilli(p.LastSeen), Since: unixMilli(p.Since)}
	if p.RTT > 0 {
		ms := float64(p.RTT.Microseconds()) / 1000
		raw, _ := json.Marshal(ms)
		w.RTTMs = apiwire.Number{F: ms, Raw: string(raw), Valid: true}
	}
	return w
}

// unixMilli is t in unix ms, 0 for the zero time.
func unixMilli(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// Join implements api.Peers. Its errors are cluster.JoinError, one text whatever went wrong
// at addr, with the status code the API answers with.
func (g *gossip) Join(addr string) error {
	_, err := g.c.Join(addr)
	return err
}

// run runs the membership and the hub until ctx ends, then leaves the cluster and stops gossip:
// the two-stage shutdown (leave, then shutdown).
func (g *gossip) run(ctx context.Context) error {
	errc := make(chan error, 2)
	go func() { errc <- g.hub.Run(ctx) }()
	err := g.c.Run(ctx)
	<-errc
	g.c.Leave(2 * time.Second)
	g.c.Shutdown()
	return err
}

// targets answers /api/v1/targets: with gossip, every member alive or suspect (a suspect one
// is still a member and may answer: Prometheus tells by scraping) with the HTTP address it
// advertises, the node itself included; without, the node alone. Members without a TCP
// address (Unix sockets only) are left out.
func (a *Agent) targets() []apiwire.TargetGroup {
	if a.gossip != nil {
		return targetGroups(a.cfg.ClusterName, a.gossip.c.Local(), a.gossip.c.Peers())
	}
	addr := a.tcpAddr()
	if addr == nil {
		return nil
	}
	return targetGroups("", cluster.Peer{Name: a.cfg.NodeName, HTTP: advertisedHTTP(addr.String(), addr.String()), Status: cluster.StatusAlive}, nil)
}

// targetGroups makes the http_sd_configs groups of self and peers: one group per member so
// that each has its own node label, sorted by node name, then address. A member whose HTTP
// listener is on a wildcard address (0.0.0.0:22682) is listed at its gossip host.
func targetGroups(clusterName string, self cluster.Peer, peers []cluster.Peer) []apiwire.TargetGroup {
	out := make([]apiwire.TargetGroup, 0, len(peers)+1)
	for _, p := range append([]cluster.Peer{self}, peers...) {
		if p.HTTP == "" || (p.Status != cluster.StatusAlive && p.Status != cluster.StatusSuspect) {
			continue
		}
		addr := p.HTTP
		if h, port, err := net.SplitHostPort(addr); err == nil {
			// A listener on a wildcard address advertises it as is: scrape the host the
			// member gossips from instead (memberlist advertises a routable one).
			if ip := net.ParseIP(h); (h == "" || ip != nil && ip.IsUnspecified()) && p.Addr != "" {
				if gh, _, err := net.SplitHostPort(p.Addr); err == nil {
					addr = net.JoinHostPort(gh, port)
				}
			}
		}
		labels := map[string]string{"node": p.Name}
		if clusterName != "" {
			labels["cluster"] = clusterName
		}
		out = append(out, apiwire.TargetGroup{Targets: []string{addr}, Labels: labels})
	}
	slices.SortFunc(out, func(x, y apiwire.TargetGroup) int {
		if c := strings.Compare(x.Labels["node"], y.Labels["node"]); c != 0 {
			return c
		}
		return strings.Compare(x.Targets[0], y.Targets[0])
	})
	return out
}
