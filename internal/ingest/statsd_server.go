package ingest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/cantal-go/cantal/internal/connlimit"
)

// maxStatsdLine bounds one statsd line over TCP and one UDP datagram.
const maxStatsdLine = 64 << 10

// DefaultStatsdConns is the connection policy of the statsd TCP listener when the caller gives
// none (package connlimit): at most 1024 connections, 128 from one address; at the cap the
// connection that has been quiet longest makes room.
var DefaultStatsdConns = connlimit.Options{Max: 1024, PerSource: 128}

// statsdIdle closes a TCP connection that sent nothing for this long.
const statsdIdle = 2 * time.Minute

// ServeStatsd receives statsd on addr, UDP and TCP on the same port (":0" picks a free UDP port
// and then the same TCP port), until ctx is done; then it closes the sockets, waits for its
// goroutines and returns nil. It returns an error if a socket cannot be opened.
//
// A UDP datagram and a TCP stream carry newline-separated lines (see ParseStatsdLine).
// Malformed lines are counted (Stats.StatsdRejected) and the latest one is reported as a
// problem of source "statsd" at the next Collect. Series produced, labelled {"metric": name,
// "source": "push", tags...} (a "source" tag other than "push" is rejected; the limits of the
// package doc apply, and each series counts towards Config.MaxSeries and MaxBytes):
//   - counter (c): a counter holding the total received, each value divided by its sample rate
//     (fractions accumulate; a negative total is held at 0); the agent computes its rate;
//   - gauge (g): a float; "+N"/"-N" add to the value held;
//   - timer (ms), histogram (h), distribution (d): <name>.count (counter of values received,
//     scaled by the sample rate) and, for each scan interval that received values,
//     <name>.min, .max, .mean and the percentiles of Config.Percentiles (.median, .p90,
//     .p95, .p99): 8 series by default; an interval without values leaves a gap;
//   - set (s): a level holding the number of distinct values received in the scan interval.
func (p *Push) ServeStatsd(ctx context.Context, addr string) error {
	return p.ServeStatsdWith(ctx, addr, DefaultStatsdConns)
}

// ServeStatsdWith is ServeStatsd with the TCP listener's connection limits: at most lim.Max
// connections, lim.PerSource from one address, the quietest evicted to make room; one that
// sends nothing for 2 minutes is closed, and running out of descriptors pauses accepting
// instead of ending it (finding N6).
func (p *Push) ServeStatsdWith(ctx context.Context, addr string, lim connlimit.Options) error {
	var lc net.ListenConfig
	pc, err := lc.ListenPacket(ctx, "udp", addr)
	if err != nil {
		return fmt.Errorf("statsd: listen udp %s: %w", addr, err)
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		pc.Close()
		return fmt.Errorf("statsd: %w", err)
	}
	port := strconv.Itoa(pc.LocalAddr().(*net.UDPAddr).Port)
	ln, err := lc.Listen(ctx, "tcp", net.JoinHostPort(host, port))
	if err != nil {
		pc.Close()
		return fmt.Errorf("statsd: listen tcp %s: %w", net.JoinHostPort(host, port), err)
	}
	p.cfg.Logger.Info("statsd listening", "udp", pc.LocalAddr().String(), "tcp", ln.Addr().String(), "max_connections", lim.Max)
	return p.ServeStatsdConn(ctx, pc, connlimit.NewWith(ln, lim))
}

// ServeStatsdConn is ServeStatsd on sockets the caller opened; either may be nil. It takes
// ownership of them and closes them when ctx is done. A listener that is not a
// *connlimit.Listener gets the limits of DefaultStatsdConns.
func (p *Push) ServeStatsdConn(ctx context.Context, pc net.PacketConn, ln net.Listener) error {
	if _, ok := ln.(*connlimit.Listener); !ok && ln != nil {
		ln = connlimit.NewWith(ln, DefaultStatsdConns)
	}
	var wg sync.WaitGroup
	stop := context.AfterFunc(ctx, func() {
		if pc != nil {
			pc.Close()
		}
		if ln != nil {
			ln.Close()
		}
	})
	defer stop()
	errc := make(chan error, 2)
	if pc != nil {
		if uc, ok := pc.(*net.UDPConn); ok {
			_ = uc.SetReadBuffer(8 << 20) // best effort: absorbs bursts while the lock is busy
		}
		wg.Go(func() { errc <- p.serveUDP(ctx, pc) })
	}
	if ln != nil {
		wg.Go(func() { errc <- p.serveTCP(ctx, ln, &wg) })
	}
	wg.Wait()
	close(errc)
	var errs []error
	for err := range errc {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (p *Push) serveUDP(ctx context.Context, pc net.PacketConn) error {
	buf := make([]byte, maxStatsdLine)
	var l StatsdLine
	for {
		n, _, err := pc.ReadFrom(buf)
		if n > 0 {
			p.handleStatsd(buf[:n], &l)
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return fmt.Errorf("statsd: read udp: %w", err)
		}
	}
}

func (p *Push) serveTCP(ctx context.Context, ln net.Listener, wg *sync.WaitGroup) error {
	var mu sync.Mutex
	conns := map[net.Conn]struct{}{}
	defer func() {
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return fmt.Errorf("statsd: accept: %w", err)
		}
		mu.Lock()
		conns[c] = struct{}{}
		mu.Unlock()
		wg.Go(func() {
			defer func() {
				mu.Lock()
				delete(conns, c)
				mu.Unlock()
				c.Close()
			}()
			p.serveStream(c)
		})
	}
}

// serveStream reads newline-separated lines from one TCP connection, handing them over in
// batches: whole lines are stored once no further whole line is already buffered.
func (p *Push) serveStream(c net.Conn) {
	r := bufio.NewReaderSize(c, maxStatsdLine)
	var l StatsdLine
	var pending []byte
	flush := func() {
		if len(pending) > 0 {
			p.handleStatsd(pending, &l)
			pending = pending[:0]
		}
	}
	for {
		if r.Buffered() == 0 {
			c.SetReadDeadline(time.Now().Add(statsdIdle))
		}
		chunk, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			flush()
			p.mu.Lock()
			p.stats.StatsdRejected++
			p.badSinceReport++
			p.lastBad = fmt.Sprintf("TCP line longer than %d bytes dropped", maxStatsdLine)
			p.mu.Unlock()
			for errors.Is(err, bufio.ErrBufferFull) { // skip the rest of the line
				_, err = r.ReadSlice('\n')
			}
			if err != nil {
				return
			}
			continue
		}
		pending = append(pending, chunk...)
		if err != nil {
			flush() // including a last line without newline
			return
		}
		if buffered, _ := r.Peek(r.Buffered()); bytes.IndexByte(buffered, '\n') < 0 || len(pending) > 1<<20 {
			flush()
		}
	}
}
