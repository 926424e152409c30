// Package carbon sends the agent's history to Graphite (carbon) in the plaintext protocol:
// one "path value timestamp" line per point, over TCP, every scan of every series with its own
// scan time, resending after a reconnection what carbon did not accept.
//
// # Paths
//
// The path of a series is its "metric" label followed by its other labels, sorted by name, as
// name and value node pairs:
//
//	{"metric": "requests.number", "pid": "42", "process": "nginx"}
//	→ requests.number.pid.42.process.nginx
//
// with Client.Prefix, if set, in front (e.g. "node1." — the agent's default is its node name
// made a single node by Node). Within the metric name dots stay node separators; in label names
// and values, and in any other place, every character other than ASCII letters, digits, "-"
// and "_" becomes "_" (so a label value never splits a node), and an empty node becomes "_".
// With Client.Tagged the labels are written as Graphite 1.1 tags instead:
// requests.number;pid=42;process=nginx.
//
// Counters are sent as their raw value (chart them with nonNegativeDerivative or perSecond),
// levels and floats as they are; states, NaN and infinities are not sent. The timestamp is the
// point's scan time in unix seconds (a storage schema finer than the scan interval keeps every
// point; carbon keeps the last of two points that fall in one of its slots).
//
// # Delivery
//
// The plaintext protocol has no acknowledgement, so "accepted" here means: the batch was
// written to the connection completely (Write and Flush returned before the write deadline)
// and, at the next round (the next interval, or 200 ms later while catching up), the connection
// was still open —
// carbon had not closed or reset it (checked without blocking by peeking at the socket: carbon
// never writes to it, so anything readable is a FIN or an RST). A carbon that stops closes its
// connections, and one that exits with bytes unread in its socket resets them, so what it
// never read is not counted as accepted. What it read but lost itself (killed before its cache
// reached disk), or what vanished with a host that sent neither FIN nor RST, is not detected:
// the protocol cannot tell.
//
// Run keeps the scan time up to which carbon accepted. After a reconnection it sends every
// point from there to the newest scan, oldest first (in windows of time; within a window series
// by series, each series' points in time order), as far back as the source still holds (the
// agent's hour); at most Client.Budget bytes per round, the next round following shortly while
// a backlog remains. A resent point that carbon had in fact stored is harmless: Graphite keeps
// one value per slot, and it is the same value.
//
// HistorySource is the agent's history as a Source, with the policy for pushed points that
// arrive late, at a scan already sent: their series are sent again (see HistorySource).
package carbon

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/series"
	"github.com/cantal-go/cantal/internal/statedir"
)

// Source is the history Run sends from. Run calls it from its own goroutine only; it must be
// safe to call while the agent scans.
type Source interface {
	// Span returns the scan times (unix ms) of the oldest and the newest scan held, both 0
	// when there is none. Every scan up to newest is complete when Span returns.
	Span() (oldestMs, newestMs int64)
	// Points calls fn once for every numeric series with points whose scan times are in
	// [fromMs, toMs], with those points oldest first, until fn returns false. fn must not keep
	// labels or points after it returns.
	Points(fromMs, toMs int64, fn func(labels series.Labels, kind series.Kind, points []history.Point) bool)
}

// Client is the configuration of a carbon sender. The zero value is ready to use. A Client's
// fields must not change while Run runs; Run may be called by one goroutine at a time.
type Client struct {
	// Prefix is prepended to every path as it is (end it with a dot).
	Prefix string
	// Tagged writes labels as Graphite 1.1 tags (;name=value) instead of path nodes.
	Tagged bool
	// MinBackoff and MaxBackoff bound the wait between reconnection attempts: it doubles from
	// the first to the second, each wait drawn at random between half of it and all of it so
	// that agents do not reconnect in step. Defaults 1 s and 10 s.
	MinBackoff, MaxBackoff time.Duration
	// Timeout bounds connecting and writing one batch. Default 10 s.
	Timeout time.Duration
	// Budget bounds the bytes sent in one round. Default 4 MiB. A single scan larger than it
	// is sent whole (in a round of its own).
	Budget int
	// Position, if set, keeps the scan time carbon accepted up to (statedir.Position.AckedMs),
	// saved whenever it moves and loaded when Run starts: a restarted agent then resends what
	// carbon had not accepted, as far back as the source holds. Without it Run starts at the
	// newest scan.
	Position *statedir.PositionFile
	// Logger receives connection problems. Default slog.Default().
	Logger *slog.Logger
	// Dial opens connections. Default net.Dialer.DialContext.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Node returns s made into one Graphite path node: every character other than ASCII letters,
// digits, "-" and "_" (dots included) becomes "_"; an empty s becomes "_". The agent's default
// prefix is Node(node name) + ".".
func Node(s string) string { return string(appendNode(nil, s)) }

// Run sends the points of source to the carbon plaintext listener at addr every interval
// until ctx is done; then it sends what is left (over the open connection, or a new one if no
// retry is pending, within at most 2 s), closes the connection and returns nil. It starts with
// the newest scan source holds when it first holds one, and from then on sends every scan once
// carbon accepts it (see the package doc: Delivery). It returns an error only for a bad
// interval.
func (c *Client) Run(ctx context.Context, addr string, interval time.Duration, source Source) error {
	if interval <= 0 {
		return fmt.Errorf("carbon: interval %v must be positive", interval)
	}
	s := c.sender(addr, interval, source)
	defer s.closeConn()
	if c.Position != nil {
		switch pos, err := c.Position.Load(); {
		case err != nil:
			s.log.Warn("carbon: position unreadable; starting at the newest scan", "err", err)
		case pos.AckedMs > 0:
			s.accepted, s.sent, s.saved = pos.AckedMs, pos.AckedMs, pos.AckedMs
		}
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	next := time.NewTimer(time.Hour)
	defer next.Stop()
	for {
		after := s.round(ctx)
		if after > 0 {
			next.Reset(after)
		}
		select {
		case <-ctx.Done():
			s.flush()
			return nil
		case <-tick.C:
		case <-next.C:
		}
	}
}

// sender is Run's state; used by Run's goroutine only.
type sender struct {
	c                   *Client
	addr                string
	interval            time.Duration
	src                 Source
	minB, maxB, timeout time.Duration
	budget              int
	log                 *slog.Logger
	dial                func(ctx context.Context, network, addr string) (net.Conn, error)
	conn                net.Conn
	w                   *bufio.Writer
	buf                 []byte
	backoff             time.Duration
	retryAt             time.Time
	failing             bool
	accepted, sent      int64 // scan times (ms): carbon accepted up to; written up to
	saved               int64 // accepted as last saved to Client.Position
	saveFailed          bool
	bytesPerMs          float64 // the last round's density, to size the next window
	lostLogged          bool
}

func (c *Client) sender(addr string, interval time.Duration, src Source) *sender {
	s := &sender{c: c, addr: addr, interval: interval, src: src,
		minB: c.MinBackoff, maxB: c.MaxBackoff, timeout: c.Timeout, budget: c.Budget, log: c.Logger, dial: c.Dial}
	if s.minB <= 0 {
		s.minB = time.Second
	}
	if s.maxB < s.minB {
		s.maxB = max(10*time.Second, s.minB)
	}
	if s.timeout <= 0 {
		s.timeout = 10 * time.Second
	}
	if s.budget <= 0 {
		s.budget = 4 << 20
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.dial == nil {
		var d net.Dialer
		s.dial = d.DialContext
	}
	s.backoff = s.minB
	return s
}

// flush sends, at shutdown, the scans taken since the last round: rounds within 2 s while a
// backlog remains and nothing fails.
func (s *sender) flush() {
	s.timeout = min(s.timeout, 2*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		_, newest := s.src.Span()
		if wait := s.round(ctx); (wait != 0 && s.conn == nil) || s.sent >= newest {
			return
		}
	}
}

// savePosition saves s.accepted to Client.Position when it moved.
func (s *sender) savePosition() {
	if s.c.Position == nil || s.accepted == s.saved {
		return
	}
	if err := s.c.Position.Save(statedir.Position{AckedMs: s.accepted}); err != nil {
		if !s.saveFailed {
			s.log.Warn("carbon: cannot save the position", "err", err)
		}
		s.saveFailed = true
		return
	}
	s.saved, s.saveFailed = s.accepted, false
}

func (s *sender) closeConn() {
	if s.conn != nil {
		s.conn.Close()
		s.conn, s.w = nil, nil
	}
}

// fail drops the connection, goes back to what carbon accepted and schedules a retry.
func (s *sender) fail(msg string, err error) time.Duration {
	if !s.failing {
		s.log.Warn(msg, "addr", s.addr, "err", err)
	}
	s.failing = true
	s.closeConn()
	s.sent = s.accepted
	wait := s.backoff/2 + rand.N(s.backoff/2+1)
	s.backoff = min(s.backoff*2, s.maxB)
	s.retryAt = time.Now().Add(wait)
	return wait
}

// round confirms the previous batch, (re)connects if needed and sends the next batch. It
// returns when the next round should come sooner than the next tick (0: at the tick).
func (s *sender) round(ctx context.Context) time.Duration {
	oldest, newest := s.src.Span()
	if newest == 0 {
		return 0
	}
	if s.accepted == 0 || s.accepted > newest { // none yet, or a position file from the future
		s.accepted, s.sent = newest-1, newest-1
	}
	if s.conn != nil {
		if err := peerGone(s.conn); err != nil {
			return s.fail("carbon: connection lost, resending what it did not accept", err)
		}
		s.accepted = s.sent // written a round ago, and carbon has not closed or reset since
		s.savePosition()
	}
	if s.conn == nil {
		if wait := time.Until(s.retryAt); wait > 0 {
			return wait
		}
		dctx, cancel := context.WithTimeout(ctx, s.timeout)
		cn, err := s.dial(dctx, "tcp", s.addr)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return 0
			}
			return s.fail("carbon: cannot connect", err)
		}
		s.conn, s.w = cn, bufio.NewWriterSize(cn, 64<<10)
	}
	from := s.sent + 1
	if from < oldest {
		if !s.lostLogged {
			s.log.Warn("carbon: points older than the held history are lost", "addr", s.addr,
				"from", time.UnixMilli(from).UTC(), "oldest_held", time.UnixMilli(oldest).UTC())
			s.lostLogged = true
		}
		from = oldest
	}
	if from > newest {
		s.settled()
		return 0
	}
	to := s.fill(from, newest)
	_ = s.conn.SetWriteDeadline(time.Now().Add(s.timeout))
	_, err := s.w.Write(s.buf)
	if err == nil {
		err = s.w.Flush()
	}
	if err != nil {
		return s.fail("carbon: write failed, reconnecting", err)
	}
	s.sent = to
	if to < newest {
		return min(s.interval, 200*time.Millisecond) // a backlog: the next round soon
	}
	s.settled()
	return 0
}

// settled marks a round that had nothing left to catch up.
func (s *sender) settled() {
	if s.failing && s.accepted == s.sent {
		s.log.Info("carbon: connected, caught up", "addr", s.addr)
		s.failing, s.lostLogged = false, false
		s.backoff = s.minB
	}
}

// fill puts the lines of the points in [from, to'] into s.buf and returns to' ≤ newest: the
// window is the whole backlog, or the part of it that fits s.budget (at least one scan's ms).
func (s *sender) fill(from, newest int64) int64 {
	to := newest
	if s.bytesPerMs > 0 {
		if span := int64(float64(s.budget) / s.bytesPerMs); span < to-from {
			to = from + max(span, 0)
		}
	}
	for {
		s.buf = s.c.appendWindow(s.buf[:0], s.src, from, to)
		if len(s.buf) > 0 {
			s.bytesPerMs = float64(len(s.buf)) / float64(to-from+1)
		}
		if len(s.buf) <= s.budget || to == from {
			return to
		}
		to = from + (to-from)/2
	}
}

// appendWindow appends the lines of every point of src in [from, to].
func (c *Client) appendWindow(dst []byte, src Source, from, to int64) []byte {
	var keys []string
	var path []byte
	src.Points(from, to, func(labels series.Labels, kind series.Kind, pts []history.Point) bool {
		switch kind {
		case series.Counter, series.Level, series.Float:
		default:
			return true
		}
		path, keys = c.appendPath(path[:0], labels, keys)
		for _, p := range pts {
			dst = appendLine(dst, path, kind, p.Bits, p.TS)
		}
		return true
	})
	return dst
}

// peerGone reports whether carbon closed or reset conn, without blocking: carbon never writes
// on a plaintext connection, so readable means EOF or an error. A connection that cannot be
// peeked at (not a socket) is taken as open.
func peerGone(conn net.Conn) error {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return err
	}
	var gone error
	var b [1]byte
	err = rc.Read(func(fd uintptr) bool {
		n, _, rerr := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		switch {
		case rerr == unix.EAGAIN || rerr == unix.EINTR:
		case rerr != nil:
			gone = rerr
		case n == 0:
			gone = errors.New("closed by carbon")
		}
		return true
	})
	if err != nil {
		return err
	}
	return gone
}

// AppendLines appends the plaintext lines of samples (their latest values) to dst and
// returns it.
func (c *Client) AppendLines(dst []byte, samples []series.Sample) []byte {
	var keys []string
	var path []byte
	for i := range samples {
		s := &samples[i]
		switch s.Kind {
		case series.Counter, series.Level, series.Float:
		default:
			continue
		}
		path, keys = c.appendPath(path[:0], s.Labels, keys)
		dst = appendLine(dst, path, s.Kind, s.Bits, s.TS)
	}
	return dst
}

// appendPath appends the prefixed path of labels; keys is scratch space.
func (c *Client) appendPath(dst []byte, labels series.Labels, keys []string) ([]byte, []string) {
	dst = append(dst, c.Prefix...)
	dst = appendMetric(dst, labels["metric"])
	keys = keys[:0]
	for k := range labels {
		if k != "metric" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		if c.Tagged {
			if labels[k] == "" {
				continue // Graphite tags must have a value
			}
			dst = append(dst, ';')
			dst = appendNode(dst, k)
			dst = append(dst, '=')
			dst = appendNode(dst, labels[k])
			continue
		}
		dst = append(dst, '.')
		dst = appendNode(dst, k)
		dst = append(dst, '.')
		dst = appendNode(dst, labels[k])
	}
	return dst, keys
}

// appendLine appends "path value seconds\n", or nothing for NaN and infinities.
func appendLine(dst, path []byte, kind series.Kind, bits uint64, tsMs int64) []byte {
	if kind == series.Float {
		if v := math.Float64frombits(bits); math.IsNaN(v) || math.IsInf(v, 0) {
			return dst
		}
	}
	dst = append(dst, path...)
	dst = append(dst, ' ')
	switch kind {
	case series.Counter:
		dst = strconv.AppendUint(dst, bits, 10)
	case series.Level:
		dst = strconv.AppendInt(dst, int64(bits), 10)
	default:
		dst = strconv.AppendFloat(dst, math.Float64frombits(bits), 'g', -1, 64)
	}
	dst = append(dst, ' ')
	dst = strconv.AppendInt(dst, tsMs/1000, 10)
	return append(dst, '\n')
}

func safe(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

// appendMetric appends a metric name, keeping dots as node separators.
func appendMetric(dst []byte, m string) []byte {
	start := 0
	for i := 0; i <= len(m); i++ {
		if i == len(m) || m[i] == '.' {
			dst = appendNode(dst, m[start:i])
			if i < len(m) {
				dst = append(dst, '.')
			}
			start = i + 1
		}
	}
	return dst
}

func appendNode(dst []byte, s string) []byte {
	if s == "" {
		return append(dst, '_')
	}
	for i := 0; i < len(s); i++ {
		if safe(s[i]) {
			dst = append(dst, s[i])
		} else {
			dst = append(dst, '_')
		}
	}
	return dst
}
