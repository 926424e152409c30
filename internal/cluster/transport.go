package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

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
type transport struct {
	log       *slog.Logger
	udp       *net.UDPConn
	advertise string // configured advertise host:port, may be empty
	packetCh  chan *memberlist.Packet
	streamCh  chan net.Conn
	shutdown  chan struct{}
	once      sync.Once
	wg        sync.WaitGroup
	tcp       net.Listener // own stream listener, nil when streams ride the agent's HTTP server
	srv       *http.Server
}

var _ memberlist.Transport = (*transport)(nil)

// newTransport binds UDP on bindAddr and, unless viaHTTP, TCP on the same address.
func newTransport(bindAddr, advertise string, viaHTTP bool, log *slog.Logger) (*transport, error) {
	ua, err := net.ResolveUDPAddr("udp", bindAddr)
	if err != nil {
		return nil, fmt.Errorf("gossip address %q: %w", bindAddr, err)
	}
	t := &transport{
		log:       log,
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
		t.tcp = ln
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
		t.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}
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

// DialTimeout implements memberlist.Transport: TCP to addr, then the HTTP upgrade.
func (t *transport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	deadline := time.Now().Add(timeout)
	d := net.Dialer{Deadline: deadline}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	conn, err := clientUpgrade(c, addr, deadline)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("gossip stream to %s: %w", addr, err)
	}
	return conn, nil
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
