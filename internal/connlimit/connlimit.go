// Package connlimit is the agent's one connection policy, shared by every listener (the HTTP
// and HTTPS listeners, the Unix sockets, the gossip TCP listener, statsd TCP, the rrdd RPC
// socket): no client, or crowd of clients, can take every file descriptor of the process or
// every connection slot, and an authenticated client or a peer always gets in.
//
// A Listener wraps a net.Listener and counts the connections it accepted until they are closed:
//
//   - At most Options.Max at a time, and at most Options.PerSource from one source: an IP
//     address, or on a Unix socket the peer's uid.
//   - At either limit a new connection takes the place of the quietest connection that may be
//     evicted (of its source, at the per-source limit; of a random sample of 64 when there are
//     more): the one that has gone longest without sending a byte, whether it is idle between requests, never sent a request, or is slow to
//     send its headers or its body. If none may be evicted, the new connection is closed at once
//     (shed).
//   - A connection that may not be evicted is busy (an HTTP request being served) or a stream
//     (hijacked into a WebSocket or gossip stream).
//   - With Options.Admission, an HTTP request counts as busy only once the server admits it
//     (Admit, after it has authenticated the caller and read the body); until then the
//     connection is receiving and may be evicted. Of the Max slots, Options.Reserve are kept for
//     trusted callers: connections admitted untrusted (anonymous callers) are at most
//     Max-Reserve, and Admit refuses the next one.
//   - Accept errors that are temporary (EMFILE and ENFILE included: out of descriptors) are
//     waited out with a back-off, up to a second, and Accept goes on; it returns only errors
//     that end the listener.
//
// The Listener learns an HTTP connection's state from the http.Server's ConnState hook: set
// Server.ConnState to the Listener's ConnState (and, with Admission, Server.ConnContext to
// ConnContext). A Listener not told of states (a plain TCP protocol) treats every connection as
// receiving. All methods are safe for concurrent use.
package connlimit

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Options are a Listener's limits.
type Options struct {
	// Max bounds the open connections (< 1 means 1).
	Max int
	// PerSource bounds the open connections from one IP address, or one uid on a Unix socket
	// (< 1 or > Max means Max).
	PerSource int
	// Admission: an active HTTP connection is receiving, and may be evicted, until Admit.
	Admission bool
	// Reserve is how many of Max only trusted callers may hold busy (see Admit); at most Max-1.
	Reserve int
}

// Listener limits the open connections accepted from its inner listener.
type Listener struct {
	net.Listener
	opt Options

	mu        sync.Mutex
	open      map[*conn]struct{}
	bySource  map[string]map[*conn]struct{} // open connections of each source but ""
	untrusted int                           // connections admitted untrusted and not yet idle or closed

	shed    atomic.Uint64 // connections closed at accept for lack of room
	evict   atomic.Uint64 // quiet connections closed to make room
	refused atomic.Uint64 // requests refused by Admit for the reserve
	retried atomic.Uint64 // temporary accept errors waited out
}

// New returns a Listener that holds at most n connections of ln open (n < 1 means 1), with no
// other limit.
func New(ln net.Listener, n int) *Listener { return NewWith(ln, Options{Max: n}) }

// NewWith returns a Listener of ln with the limits of o.
func NewWith(ln net.Listener, o Options) *Listener {
	o.Max = max(o.Max, 1)
	if o.PerSource < 1 || o.PerSource > o.Max {
		o.PerSource = o.Max
	}
	o.Reserve = min(max(o.Reserve, 0), o.Max-1)
	return &Listener{Listener: ln, opt: o, open: make(map[*conn]struct{}), bySource: make(map[string]map[*conn]struct{})}
}

// Stats are the Listener's counts.
type Stats struct {
	Open      int    // connections open now
	Max       int    // the limit
	PerSource int    // the limit per source address
	Reserve   int    // slots kept for trusted callers
	Shed      uint64 // new connections closed at once: at a limit and nothing to evict
	Evicted   uint64 // quiet connections closed to make room for new ones
	Refused   uint64 // requests Admit refused: only the reserve was left
	Retried   uint64 // temporary accept errors (EMFILE...) waited out
}

// Stats returns the current counts.
func (l *Listener) Stats() Stats {
	l.mu.Lock()
	n := len(l.open)
	l.mu.Unlock()
	return Stats{Open: n, Max: l.opt.Max, PerSource: l.opt.PerSource, Reserve: l.opt.Reserve,
		Shed: l.shed.Load(), Evicted: l.evict.Load(), Refused: l.refused.Load(), Retried: l.retried.Load()}
}

// Accept waits for the next connection that fits under the limits.
func (l *Listener) Accept() (net.Conn, error) {
	var backoff time.Duration
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			if !temporary(err) {
				return nil, err
			}
			// Out of descriptors (or a connection reset before it was accepted): wait and go
			// on; the connection stays in the kernel's queue meanwhile.
			l.retried.Add(1)
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		wc := &conn{Conn: c, l: l, source: source(c)}
		wc.heard.Store(time.Now().UnixNano())
		if l.admit(wc) {
			return wc, nil
		}
		l.shed.Add(1)
		c.Close()
	}
}

// temporary reports whether an accept error is worth waiting out: descriptors exhausted, or a
// connection aborted by its client before it was accepted.
func temporary(err error) bool {
	if errors.Is(err, net.ErrClosed) {
		return false
	}
	for _, e := range []error{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM,
		syscall.ECONNABORTED, syscall.ECONNRESET, syscall.EINTR, syscall.EAGAIN, syscall.EPROTO, syscall.EPERM} {
		if errors.Is(err, e) {
			return true
		}
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// source is the key of a connection for the per-source limit: its peer's IP address, or on a
// Unix socket its peer's uid; "" (no limit of its own) when neither is known.
func source(c net.Conn) string {
	switch a := c.RemoteAddr().(type) {
	case *net.TCPAddr:
		return string(a.IP.To16())
	case *net.UDPAddr:
		return string(a.IP.To16())
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		if nc, isWrapped := c.(interface{ NetConn() net.Conn }); isWrapped {
			uc, ok = nc.NetConn().(*net.UnixConn)
		}
	}
	if !ok {
		return ""
	}
	rc, err := uc.SyscallConn()
	if err != nil {
		return ""
	}
	var cred *syscall.Ucred
	if cerr := rc.Control(func(fd uintptr) {
		cred, err = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); cerr != nil || err != nil {
		return ""
	}
	return "uid:" + strconv.FormatUint(uint64(cred.Uid), 10)
}

// admit adds c to the open set, evicting the quietest evictable connection first at a limit.
func (l *Listener) admit(c *conn) bool {
	var victims []*conn
	l.mu.Lock()
	if c.source != "" && len(l.bySource[c.source]) >= l.opt.PerSource {
		v := quietest(l.bySource[c.source])
		if v == nil {
			l.mu.Unlock()
			return false
		}
		l.forget(v)
		victims = append(victims, v)
	}
	if len(l.open) >= l.opt.Max {
		v := quietest(l.open)
		if v == nil {
			l.mu.Unlock()
			for _, v := range victims {
				v.Conn.Close()
			}
			return false
		}
		l.forget(v)
		victims = append(victims, v)
	}
	l.open[c] = struct{}{}
	if c.source != "" {
		set := l.bySource[c.source]
		if set == nil {
			set = make(map[*conn]struct{})
			l.bySource[c.source] = set
		}
		set[c] = struct{}{}
	}
	l.mu.Unlock()
	for _, v := range victims {
		l.evict.Add(1)
		v.Conn.Close() // its server's read fails and it forgets the connection
	}
	return true
}

// sample is how many evictable connections quietest compares: at a full listener of
// thousands, scanning every connection for each new one would cost ~100 µs an accept
// (BenchmarkAdmitAtCap). Map iteration starts at a random place, so the sample is random; the
// connections that crowd a listener are the ones most likely in it, and a connection that sent
// a byte just now is the least likely to be the quietest of it.
const sample = 64

// quietest is, of a sample of the evictable connections in set, the one heard from longest
// ago; nil when none may be evicted. l.mu is held.
func quietest(set map[*conn]struct{}) *conn {
	var q *conn
	var at int64
	n := 0
	for o := range set {
		if o.state.Load() != stateQuiet {
			continue
		}
		if h := o.heard.Load(); q == nil || h < at {
			q, at = o, h
		}
		if n++; n == sample {
			break
		}
	}
	return q
}

// forget removes c from the counts; l.mu is held.
func (l *Listener) forget(c *conn) {
	if _, ok := l.open[c]; !ok {
		return
	}
	delete(l.open, c)
	if set := l.bySource[c.source]; set != nil {
		delete(set, c)
		if len(set) == 0 {
			delete(l.bySource, c.source)
		}
	}
	if c.untrusted {
		c.untrusted = false
		l.untrusted--
	}
}

func (l *Listener) release(c *conn) {
	l.mu.Lock()
	l.forget(c)
	l.mu.Unlock()
}

// ConnState is the http.Server ConnState hook that tells the Listener each connection's state.
// Connections not accepted by this Listener are ignored.
func (l *Listener) ConnState(nc net.Conn, st http.ConnState) {
	c := unwrap(nc)
	if c == nil || c.l != l {
		return
	}
	switch st {
	case http.StateNew, http.StateIdle:
		c.heard.Store(time.Now().UnixNano())
		l.settle(c, stateQuiet)
	case http.StateActive:
		if !l.opt.Admission {
			l.settle(c, stateBusy)
		}
	case http.StateHijacked:
		c.state.Store(stateStream)
	}
}

// settle sets c's state, ending its untrusted admission when it goes back to quiet.
func (l *Listener) settle(c *conn, s int32) {
	if c.state.Swap(s) == stateBusy && s == stateQuiet {
		l.mu.Lock()
		if c.untrusted {
			c.untrusted = false
			l.untrusted--
		}
		l.mu.Unlock()
	}
}

type ctxKey struct{}

// ConnContext is an http.Server ConnContext hook that lets Admit find a request's connection.
func ConnContext(ctx context.Context, nc net.Conn) context.Context {
	if c := unwrap(nc); c != nil {
		return context.WithValue(ctx, ctxKey{}, c)
	}
	return ctx
}

// Admit marks the connection of a request (its context, from ConnContext) busy: it is no longer
// evicted. A request from an untrusted caller is refused (false) when the untrusted busy
// connections already fill all but the Listener's reserve; the server then answers it and
// closes the connection. A request on no Listener's connection is always admitted.
func Admit(ctx context.Context, trusted bool) bool {
	c, _ := ctx.Value(ctxKey{}).(*conn)
	if c == nil {
		return true
	}
	l := c.l
	if !trusted {
		l.mu.Lock()
		if _, open := l.open[c]; open && !c.untrusted {
			if l.untrusted >= l.opt.Max-l.opt.Reserve {
				l.mu.Unlock()
				l.refused.Add(1)
				return false
			}
			c.untrusted = true
			l.untrusted++
		}
		l.mu.Unlock()
	}
	c.state.CompareAndSwap(stateQuiet, stateBusy)
	return true
}

// unwrap finds this package's conn under wrappers that expose NetConn (as *tls.Conn does).
func unwrap(nc net.Conn) *conn {
	for range 8 {
		switch x := nc.(type) {
		case *conn:
			return x
		case interface{ NetConn() net.Conn }:
			nc = x.NetConn()
		default:
			return nil
		}
	}
	return nil
}

// Connection states.
const (
	stateQuiet  int32 = iota // new, idle, or receiving a request: may be evicted
	stateBusy                // serving a request
	stateStream              // hijacked
)

// conn is an accepted connection. heard is the unix-nanosecond time it last sent a byte or went
// idle; untrusted (under l.mu) is whether it holds one of the untrusted busy slots.
type conn struct {
	net.Conn
	l         *Listener
	source    string
	state     atomic.Int32
	heard     atomic.Int64
	untrusted bool
	once      sync.Once
}

// NetConn returns the connection this one wraps (for peer credentials on a Unix socket).
func (c *conn) NetConn() net.Conn { return c.Conn }

func (c *conn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.heard.Store(time.Now().UnixNano())
	}
	return n, err
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c) })
	return err
}
