// Package connlimit bounds the connections an HTTP server holds open, so that no client, or
// crowd of clients, can take every file descriptor of the process: the agent needs descriptors
// for /proc, its applications' files and its snapshots every scan.
//
// A Listener wraps a net.Listener and counts the connections it accepted until they are closed.
// At the limit, a new connection first takes the place of the connection that has been idle
// longest (a keep-alive connection between requests, or one that never sent a request); if
// none is idle, the new connection is closed at once. Connections serving a request, or
// hijacked into a WebSocket or gossip stream, are never closed by the limiter.
//
// The Listener learns which connections are idle from the http.Server's ConnState hook: set
// Server.ConnState to the Listener's ConnState. All methods are safe for concurrent use.
package connlimit

import (
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Listener limits the open connections accepted from its inner listener.
type Listener struct {
	net.Listener
	max int

	mu    sync.Mutex
	open  map[*conn]struct{}
	shed  atomic.Uint64 // connections closed at accept for lack of room
	evict atomic.Uint64 // idle connections closed to make room
}

// New returns a Listener that holds at most n connections of ln open (n < 1 means 1).
func New(ln net.Listener, n int) *Listener {
	return &Listener{Listener: ln, max: max(n, 1), open: make(map[*conn]struct{})}
}

// Stats are the Listener's counts.
type Stats struct {
	Open    int    // connections open now
	Max     int    // the limit
	Shed    uint64 // new connections closed at once: at the limit and nothing idle
	Evicted uint64 // idle connections closed to make room for new ones
}

// Stats returns the current counts.
func (l *Listener) Stats() Stats {
	l.mu.Lock()
	n := len(l.open)
	l.mu.Unlock()
	return Stats{Open: n, Max: l.max, Shed: l.shed.Load(), Evicted: l.evict.Load()}
}

// Accept waits for the next connection that fits under the limit.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		wc := &conn{Conn: c, l: l}
		wc.idleSince.Store(time.Now().UnixNano()) // new: idle until it sends a request
		if l.admit(wc) {
			return wc, nil
		}
		l.shed.Add(1)
		c.Close()
	}
}

// admit adds c to the open set, closing the longest-idle connection first when at the limit.
func (l *Listener) admit(c *conn) bool {
	l.mu.Lock()
	if len(l.open) < l.max {
		l.open[c] = struct{}{}
		l.mu.Unlock()
		return true
	}
	var oldest *conn
	var oldestAt int64
	for o := range l.open {
		at := o.idleSince.Load()
		if at != 0 && (oldest == nil || at < oldestAt) {
			oldest, oldestAt = o, at
		}
	}
	if oldest == nil {
		l.mu.Unlock()
		return false
	}
	delete(l.open, oldest)
	oldest.evicted.Store(true)
	l.open[c] = struct{}{}
	l.mu.Unlock()
	l.evict.Add(1)
	oldest.Conn.Close() // the server's read on it fails and it forgets the connection
	return true
}

func (l *Listener) release(c *conn) {
	l.mu.Lock()
	delete(l.open, c)
	l.mu.Unlock()
}

// ConnState is the http.Server ConnState hook that tells the Listener which connections are
// idle. Connections not accepted by this Listener are ignored.
func (l *Listener) ConnState(nc net.Conn, st http.ConnState) {
	c := unwrap(nc)
	if c == nil || c.l != l {
		return
	}
	switch st {
	case http.StateNew, http.StateIdle:
		c.idleSince.Store(time.Now().UnixNano())
	case http.StateActive, http.StateHijacked:
		c.idleSince.Store(0)
	}
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

// conn is an accepted connection; idleSince is the unix-nanosecond time it became idle, 0 while
// it serves a request or is hijacked.
type conn struct {
	net.Conn
	l         *Listener
	idleSince atomic.Int64
	evicted   atomic.Bool
	once      sync.Once
}

// NetConn returns the connection this one wraps (for peer credentials on a Unix socket).
func (c *conn) NetConn() net.Conn { return c.Conn }

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		if !c.evicted.Load() {
			c.l.release(c)
		}
	})
	return err
}
