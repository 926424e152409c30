// Package memnet is an in-memory network for hashicorp/memberlist: many members in one process
// talk through channels instead of sockets, so cluster tests and scale benchmarks run without
// touching the host's network.
//
// Unlike memberlist's own MockTransport, memnet is safe to grow while members run, never blocks
// a sender (packets to a full or closed receiver are dropped, as UDP drops them), and can cut a
// member off to simulate a partition.
package memnet

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

// packetQueue is how many packets a transport buffers before dropping; memberlist's own UDP
// transport relies on the kernel's 2 MiB receive buffer for the same purpose.
const packetQueue = 4096

// Network connects the Transports it made. Its methods are safe for concurrent use.
// The zero value is ready to use.
type Network struct {
	mu     sync.RWMutex
	byAddr map[string]*Transport
	cut    map[string]bool
	next   int

	packets, bytes, dropped atomic.Uint64
}

// Stats returns how many packets, and bytes in them, were delivered so far (streams not counted).
func (n *Network) Stats() (packets, bytes uint64) {
	return n.packets.Load(), n.bytes.Load()
}

// Dropped returns how many packets were lost so far because their receiver's queue was full
// (not counting packets to cut, closed or unknown addresses).
func (n *Network) Dropped() uint64 { return n.dropped.Load() }

// NewTransport returns a transport with a fresh address 127.0.0.1:N (N counting from 1), or
// with addr when it is not empty. The transport belongs to the caller, who hands it to exactly
// one memberlist; memberlist shuts it down.
func (n *Network) NewTransport(addr string) (*Transport, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.byAddr == nil {
		n.byAddr = make(map[string]*Transport)
		n.cut = make(map[string]bool)
	}
	if addr == "" {
		n.next++
		addr = "127.0.0.1:" + strconv.Itoa(n.next)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("memnet: address %q: %w", addr, err)
	}
	ip := net.ParseIP(host)
	p, err := strconv.ParseUint(port, 10, 16)
	if ip == nil || err != nil {
		return nil, fmt.Errorf("memnet: address %q is not ip:port", addr)
	}
	if _, dup := n.byAddr[addr]; dup {
		return nil, fmt.Errorf("memnet: address %q in use", addr)
	}
	t := &Transport{
		net:      n,
		addr:     addr,
		ip:       ip,
		port:     int(p),
		packetCh: make(chan *memberlist.Packet, packetQueue),
		streamCh: make(chan net.Conn),
		done:     make(chan struct{}),
	}
	n.byAddr[addr] = t
	return t, nil
}

// Cut isolates addr (true) or heals it (false): while cut, nothing reaches it and nothing it
// sends arrives, like a pulled cable.
func (n *Network) Cut(addr string, cut bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cut == nil {
		n.cut = make(map[string]bool)
	}
	if cut {
		n.cut[addr] = true
	} else {
		delete(n.cut, addr)
	}
}

// route returns the live destination for a message from src to dst.
func (n *Network) route(src, dst string) (*Transport, error) {
	n.mu.RLock()
	defer n.mu.RUnlock()
	if n.cut[src] || n.cut[dst] {
		return nil, fmt.Errorf("memnet: no route from %s to %s", src, dst)
	}
	t := n.byAddr[dst]
	if t == nil {
		return nil, fmt.Errorf("memnet: no member at %s", dst)
	}
	return t, nil
}

func (n *Network) remove(t *Transport) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.byAddr[t.addr] == t {
		delete(n.byAddr, t.addr)
	}
}

// Addr is the net.Addr of a memnet transport.
type Addr string

// Network returns "memnet".
func (Addr) Network() string { return "memnet" }

// String returns the host:port address.
func (a Addr) String() string { return string(a) }

// Transport is one member's endpoint on a Network; it implements memberlist.NodeAwareTransport.
// Its methods are safe for concurrent use, as memberlist requires.
type Transport struct {
	net      *Network
	addr     string
	ip       net.IP
	port     int
	packetCh chan *memberlist.Packet
	streamCh chan net.Conn
	done     chan struct{}
	once     sync.Once
}

var _ memberlist.NodeAwareTransport = (*Transport)(nil)

// Addr returns the transport's host:port.
func (t *Transport) Addr() string { return t.addr }

// FinalAdvertiseAddr returns the transport's own address, whatever was asked.
func (t *Transport) FinalAdvertiseAddr(string, int) (net.IP, int, error) {
	return t.ip, t.port, nil
}

// WriteTo delivers b to addr if it is reachable and has room; otherwise the packet is lost.
func (t *Transport) WriteTo(b []byte, addr string) (time.Time, error) {
	now := time.Now()
	dst, err := t.net.route(t.addr, addr)
	if err != nil {
		// A lost datagram is not an error to the sender.
		return now, nil
	}
	buf := make([]byte, len(b))
	copy(buf, b)
	select {
	case <-dst.done:
	case dst.packetCh <- &memberlist.Packet{Buf: buf, From: Addr(t.addr), Timestamp: now}:
		t.net.packets.Add(1)
		t.net.bytes.Add(uint64(len(b)))
	default: // receiver overloaded: drop like a full socket buffer
		t.net.dropped.Add(1)
	}
	return now, nil
}

// WriteToAddress is WriteTo by address.
func (t *Transport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	return t.WriteTo(b, a.Addr)
}

// PacketCh returns the channel of received packets.
func (t *Transport) PacketCh() <-chan *memberlist.Packet { return t.packetCh }

// DialTimeout opens a synchronous in-memory stream to addr.
func (t *Transport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	dst, err := t.net.route(t.addr, addr)
	if err != nil {
		return nil, err
	}
	local, remote := net.Pipe()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case dst.streamCh <- &addrConn{Conn: remote, local: Addr(addr), remote: Addr(t.addr)}:
		return &addrConn{Conn: local, local: Addr(t.addr), remote: Addr(addr)}, nil
	case <-dst.done:
	case <-t.done:
	case <-timer.C:
	}
	local.Close()
	remote.Close()
	return nil, fmt.Errorf("memnet: dial %s: %w", addr, errors.New("connection refused"))
}

// DialAddressTimeout is DialTimeout by address.
func (t *Transport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	return t.DialTimeout(a.Addr, timeout)
}

// StreamCh returns the channel of accepted streams.
func (t *Transport) StreamCh() <-chan net.Conn { return t.streamCh }

// Shutdown detaches the transport from its network; safe to call twice.
func (t *Transport) Shutdown() error {
	t.once.Do(func() {
		close(t.done)
		t.net.remove(t)
	})
	return nil
}

// addrConn gives a net.Pipe end meaningful addresses (memberlist logs and checks them).
type addrConn struct {
	net.Conn
	local, remote net.Addr
}

func (c *addrConn) LocalAddr() net.Addr  { return c.local }
func (c *addrConn) RemoteAddr() net.Addr { return c.remote }
