package cluster

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cantal-go/cantal/internal/connlimit"
	"github.com/cantal-go/cantal/internal/logbudget"
	sockaddr "github.com/hashicorp/go-sockaddr"
	"github.com/hashicorp/memberlist"
)

// GossipPath is the HTTP path on which memberlist's stream connections (push/pull state sync,
// TCP fallback probes, joins) arrive. A stream is an HTTP/1.1 GET with "Upgrade: cantal-gossip"
// answered by "101 Switching Protocols"; after that the connection carries memberlist's own
// protocol unchanged (encrypted when a key is set).
const GossipPath = "/api/v1/gossip"

// upgradeProto is the Upgrade token of gossip streams.
const upgradeProto = "cantal-gossip"

const (
	udpPacketBufSize = 65536
	udpRecvBufSize   = 2 << 20
)

// transport is memberlist's network: UDP datagrams on the gossip address, and streams as HTTP
// upgrades to GossipPath on TCP at the same host:port. The agent's HTTP server usually owns that
// TCP port (gossip defaults to the --listen address), so streams ride it through
// Cluster.StreamHandler; when the gossip address is its own, the transport serves the upgrade
// on a TCP listener of its own. Either way every node speaks the same wire protocol, and a peer
// is one host:port for both UDP and TCP.
//
// In a cluster with mutual TLS (clientTLS set) every stream is TLS: dialled with the node's
// client certificate, and accepted only with a client certificate the server verified against
// the cluster CA (on the own listener by its tls.Config, on the agent's server by checking the
// request's verified chains in ServeHTTP).
type transport struct {
	log       *slog.Logger
	clientTLS func() *tls.Config // nil: plain streams
	udp       *net.UDPConn
	advertise string // configured advertise host:port, may be empty
	packetCh  chan *memberlist.Packet
	streamCh  chan net.Conn
	shutdown  chan struct{}
	once      sync.Once
	wg        sync.WaitGroup
	tcp       net.Listener        // own stream listener, nil when streams ride the agent's HTTP server
	conns     *connlimit.Listener // under tcp (and its TLS)
	srv       *http.Server
}

var _ memberlist.Transport = (*transport)(nil)

// transportConfig is what newTransport needs besides the addresses.
type transportConfig struct {
	log       *slog.Logger
	lim       *logbudget.Limiter // budget of the stream listener's error log
	clientTLS func() *tls.Config
	serverTLS *tls.Config       // own listener's TLS; required with clientTLS unless viaHTTP
	conns     connlimit.Options // own listener's connection limits; zero Max: DefaultStreamConns
}

// DefaultStreamConns are the limits of the own stream listener when the configuration gives
// none: at most 1024 connections, 128 from one address (package connlimit: at the cap the
// quietest connection makes room; streams hijacked from an upgrade are never evicted).
var DefaultStreamConns = connlimit.Options{Max: 1024, PerSource: 128}

// Timeouts of the own stream listener's HTTP server: an upgrade's headers, and a connection
// idle between requests (memberlist bounds the streams themselves by its TCPTimeout).
const (
	streamHeaderTimeout = 5 * time.Second
	streamIdleTimeout   = 30 * time.Second
)

// newTransport binds UDP on bindAddr and, unless viaHTTP, TCP on the same address.
func newTransport(bindAddr, advertise string, viaHTTP bool, tc transportConfig) (*transport, error) {
	log := tc.log
	ua, err := net.ResolveUDPAddr("udp", bindAddr)
	if err != nil {
		return nil, fmt.Errorf("gossip address %q: %w", bindAddr, err)
	}
	var srvTLS *tls.Config
	if tc.clientTLS != nil && !viaHTTP {
		if srvTLS, err = requireClientCert(tc.serverTLS); err != nil {
			return nil, err
		}
	}
	t := &transport{
		log:       log,
		clientTLS: tc.clientTLS,
		advertise: advertise,
		packetCh:  make(chan *memberlist.Packet),
		streamCh:  make(chan net.Conn),
		shutdown:  make(chan struct{}),
	}
	if !viaHTTP {
		// TCP first: with port 0 the kernel picks a port, which UDP then shares.
		ln, err := net.Listen("tcp", bindAddr)
		if err != nil {
			return nil, fmt.Errorf("listen gossip tcp: %w", err)
		}
		ua.Port = ln.Addr().(*net.TCPAddr).Port
		if tc.conns.Max == 0 {
			tc.conns = DefaultStreamConns
		}
		t.conns = connlimit.NewWith(ln, tc.conns)
		t.tcp = t.conns
		if srvTLS != nil {
			t.tcp = tls.NewListener(t.conns, srvTLS)
		}
	}
	t.udp, err = net.ListenUDP("udp", ua)
	if err != nil {
		if t.tcp != nil {
			t.tcp.Close()
		}
		return nil, fmt.Errorf("listen gossip udp: %w", err)
	}
	for size := udpRecvBufSize; size > 0; size /= 2 {
		if t.udp.SetReadBuffer(size) == nil {
			break
		}
	}
	t.wg.Add(1)
	go t.readUDP()
	if t.tcp != nil {
		mux := http.NewServeMux()
		mux.Handle(GossipPath, t)
		// Finding N2: without a cap and an idle timeout, a client's connections (each a
		// finished request kept alive, or nothing sent) took every descriptor of the agent.
		t.srv = &http.Server{
			Handler:           mux,
			ReadHeaderTimeout: streamHeaderTimeout,
			ReadTimeout:       streamHeaderTimeout, // no request here has a body
			IdleTimeout:       streamIdleTimeout,
			ConnState:         t.conns.ConnState,
			ErrorLog:          newServerErrorLog(log, tc.lim),
		}
		t.wg.Add(1)
		go func() {
			defer t.wg.Done()
			if err := t.srv.Serve(t.tcp); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("gossip stream listener stopped", "err", err)
			}
		}()
	}
	return t, nil
}

// addr returns the bound UDP address.
func (t *transport) addr() *net.UDPAddr { return t.udp.LocalAddr().(*net.UDPAddr) }

func (t *transport) readUDP() {
	defer t.wg.Done()
	for {
		buf := make([]byte, udpPacketBufSize)
		n, from, err := t.udp.ReadFrom(buf)
		ts := time.Now()
		if err != nil {
			select {
			case <-t.shutdown:
				return
			default:
			}
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				continue
			}
			t.log.Error("gossip udp read", "err", err)
			return
		}
		if n < 1 {
			continue
		}
		select {
		case t.packetCh <- &memberlist.Packet{Buf: buf[:n:n], From: from, Timestamp: ts}:
		case <-t.shutdown:
			return
		}
	}
}

// FinalAdvertiseAddr implements memberlist.Transport: the configured advertise address, else the
// bound address, else (bound to a wildcard) the first private IP of the host.
func (t *transport) FinalAdvertiseAddr(ip string, port int) (net.IP, int, error) {
	bound := t.addr()
	if t.advertise != "" {
		host, ps, err := net.SplitHostPort(t.advertise)
		if err != nil {
			return nil, 0, fmt.Errorf("advertise address %q: %w", t.advertise, err)
		}
		p, err := strconv.ParseUint(ps, 10, 16)
		if err != nil {
			return nil, 0, fmt.Errorf("advertise port %q: %w", ps, err)
		}
		a := net.ParseIP(host)
		if a == nil {
			return nil, 0, fmt.Errorf("advertise address %q is not an IP", host)
		}
		return a, int(p), nil
	}
	if !bound.IP.IsUnspecified() {
		return bound.IP, bound.Port, nil
	}
	s, err := sockaddr.GetPrivateIP()
	if err != nil {
		return nil, 0, fmt.Errorf("find address to advertise: %w", err)
	}
	if s == "" {
		return nil, 0, errors.New("no private IP address to advertise; set the advertise address")
	}
	a := net.ParseIP(s)
	if a == nil {
		return nil, 0, fmt.Errorf("private IP %q is not an IP", s)
	}
	return a, bound.Port, nil
}

// WriteTo implements memberlist.Transport.
func (t *transport) WriteTo(b []byte, addr string) (time.Time, error) {
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return time.Time{}, fmt.Errorf("resolve %q: %w", addr, err)
	}
	now := time.Now()
	_, err = t.udp.WriteTo(b, ua)
	return now, err
}

// PacketCh implements memberlist.Transport.
func (t *transport) PacketCh() <-chan *memberlist.Packet { return t.packetCh }

// StreamCh implements memberlist.Transport.
func (t *transport) StreamCh() <-chan net.Conn { return t.streamCh }

// DialTimeout implements memberlist.Transport: TCP to addr, TLS in a cluster with mutual TLS,
// then the HTTP upgrade, all within timeout.
func (t *transport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	deadline := time.Now().Add(timeout)
	d := net.Dialer{Deadline: deadline}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	if t.clientTLS != nil {
		tc, err := dialTLS(c, addr, t.clientTLS(), deadline)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("gossip stream to %s: %w", addr, err)
		}
		c = tc
	}
	conn, err := clientUpgrade(c, addr, deadline)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("gossip stream to %s: %w", addr, err)
	}
	return conn, nil
}

// dialTLS runs the client side of a TLS handshake on c with cfg (nil: the node has no client
// identity any more, which fails rather than talking plain TCP).
func dialTLS(c net.Conn, addr string, cfg *tls.Config, deadline time.Time) (*tls.Conn, error) {
	if cfg == nil {
		return nil, errors.New("tls: this node has no client certificate configured")
	}
	if cfg.ServerName == "" && !cfg.InsecureSkipVerify {
		cfg = cfg.Clone()
		cfg.ServerName, _, _ = net.SplitHostPort(addr)
	}
	tc := tls.Client(c, cfg)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	return tc, nil
}

// requireClientCert returns base for the own stream listener: HTTP/1.1 only (a stream is a
// hijacked HTTP/1.1 connection), and a client certificate required and verified against the
// client CAs, also in the configurations base.GetConfigForClient returns.
func requireClientCert(base *tls.Config) (*tls.Config, error) {
	if base == nil {
		return nil, errors.New("gossip listener: TLS streams need a server certificate (ServerTLS)")
	}
	fix := func(c *tls.Config) (*tls.Config, error) {
		if c.ClientCAs == nil {
			// RequireAndVerifyClientCert would verify against the system roots: any
			// certificate from a public CA would pass.
			return nil, errors.New("gossip listener: TLS streams need a client CA to verify members by")
		}
		c = c.Clone()
		c.ClientAuth = tls.RequireAndVerifyClientCert
		c.NextProtos = []string{"http/1.1"}
		return c, nil
	}
	out, err := fix(base)
	if err != nil {
		return nil, err
	}
	if get := base.GetConfigForClient; get != nil {
		out.GetConfigForClient = func(hi *tls.ClientHelloInfo) (*tls.Config, error) {
			c, err := get(hi)
			if err != nil || c == nil {
				return c, err // nil: the fixed outer configuration
			}
			return fix(c)
		}
	}
	return out, nil
}

// verifiedClient reports whether r came over TLS with a client certificate that the server
// verified (against its client CAs, the cluster's CA).
func verifiedClient(r *http.Request) bool {
	return r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.VerifiedChains[0]) > 0
}

// clientUpgrade performs the client half of the upgrade handshake on c.
func clientUpgrade(c net.Conn, host string, deadline time.Time) (net.Conn, error) {
	if err := c.SetDeadline(deadline); err != nil {
		return nil, err
	}
	req := "GET " + GossipPath + " HTTP/1.1\r\nHost: " + host +
		"\r\nConnection: Upgrade\r\nUpgrade: " + upgradeProto + "\r\n\r\n"
	if _, err := c.Write([]byte(req)); err != nil {
		return nil, err
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return nil, fmt.Errorf("read upgrade response: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSwitchingProtocols || !headerHasToken(resp.Header, "Upgrade", upgradeProto) {
		return nil, fmt.Errorf("peer refused gossip upgrade: %s", resp.Status)
	}
	if err := c.SetDeadline(time.Time{}); err != nil {
		return nil, err
	}
	return withReader(c, br), nil
}

// ServeHTTP accepts a gossip stream: the server half of the upgrade.
func (t *transport) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength != 0 {
		// An upgrade has no body: refuse unread and close, rather than wait for it.
		w.Header().Set("Connection", "close")
		http.NewResponseController(w).SetReadDeadline(time.Now())
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		w.Write([]byte(`{"error": "gossip stream: a request body is not taken"}` + "\n"))
		return
	}
	if t.clientTLS != nil && !verifiedClient(r) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		w.Write([]byte(`{"error": "gossip stream: a client certificate of the cluster is required"}` + "\n"))
		return
	}
	if r.Method != http.MethodGet || !headerHasToken(r.Header, "Connection", "upgrade") ||
		!headerHasToken(r.Header, "Upgrade", upgradeProto) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		w.Write([]byte(`{"error": "gossip stream: expected GET with Upgrade: ` + upgradeProto + `"}` + "\n"))
		return
	}
	select {
	case <-t.shutdown:
		http.Error(w, `{"error": "gossip is shut down"}`, http.StatusServiceUnavailable)
		return
	default:
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		http.Error(w, `{"error": "gossip stream: connection cannot be hijacked"}`, http.StatusInternalServerError)
		return
	}
	c, brw, err := hj.Hijack()
	if err != nil {
		t.log.Debug("gossip stream hijack", "err", err)
		return
	}
	c.SetDeadline(time.Time{})
	if _, err := brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " +
		upgradeProto + "\r\n\r\n"); err == nil {
		err = brw.Flush()
	}
	if err != nil {
		c.Close()
		return
	}
	conn := withReader(c, brw.Reader)
	select {
	case t.streamCh <- conn:
	case <-t.shutdown:
		conn.Close()
	}
}

// Shutdown implements memberlist.Transport; safe to call twice.
func (t *transport) Shutdown() error {
	t.once.Do(func() {
		close(t.shutdown)
		t.udp.Close()
		if t.srv != nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			t.srv.Shutdown(ctx)
			cancel()
		}
		t.wg.Wait()
	})
	return nil
}

func headerHasToken(h http.Header, key, token string) bool {
	for _, v := range h.Values(key) {
		for _, f := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(f), token) {
				return true
			}
		}
	}
	return false
}

// withReader returns c reading first whatever br has buffered.
func withReader(c net.Conn, br *bufio.Reader) net.Conn {
	if br.Buffered() == 0 {
		return c
	}
	return &bufferedConn{Conn: c, r: br}
}

type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }
