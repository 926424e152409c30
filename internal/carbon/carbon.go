// Package carbon sends the agent's samples to Graphite (carbon) in the plaintext protocol:
// one "path value timestamp" line per series, over TCP, at a fixed interval, reconnecting with
// backoff — as the original Cantal's carbon output did.
//
// # Paths
//
// The path of a series is its "metric" label followed by its other labels, sorted by name, as
// name and value node pairs:
//
//	{"metric": "requests.number", "pid": "42", "process": "nginx"}
//	→ requests.number.pid.42.process.nginx
//
// with Client.Prefix, if set, in front (e.g. "cantal.node1."). Within the metric name dots
// stay node separators; in label names and values, and in any other place, every character
// other than ASCII letters, digits, "-" and "_" becomes "_" (so a label value never splits a
// node), and an empty node becomes "_". With Client.Tagged the labels are written as Graphite
// 1.1 tags instead: requests.number;pid=42;process=nginx.
//
// Counters are sent as their raw value (chart them with nonNegativeDerivative or perSecond),
// levels and floats as they are; states, NaN and infinities are not sent. The timestamp is the
// sample's scan time in unix seconds.
package carbon

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"math"
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/cantal-go/cantal/internal/series"
)

// Run sends the samples source returns every interval to the carbon plaintext listener at addr
// with a default Client until ctx is done, then returns nil. source is called from Run's
// goroutine.
func Run(ctx context.Context, addr string, interval time.Duration, source func() []series.Sample) error {
	return (&Client{}).Run(ctx, addr, interval, source)
}

// Client is the configuration of a carbon sender. The zero value is ready to use. A Client's
// fields must not change while Run runs; Run may be called by one goroutine at a time.
type Client struct {
	// Prefix is prepended to every path as it is (end it with a dot).
	Prefix string
	// Tagged writes labels as Graphite 1.1 tags (;name=value) instead of path nodes.
	Tagged bool
	// MinBackoff and MaxBackoff bound the wait between reconnection attempts (doubling from the
	// first to the second). Defaults 100 ms and 30 s.
	MinBackoff, MaxBackoff time.Duration
	// Timeout bounds connecting and writing one batch. Default 10 s.
	Timeout time.Duration
	// Logger receives connection problems. Default slog.Default().
	Logger *slog.Logger
	// Dial opens connections. Default net.Dialer.DialContext.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Run sends the samples source returns every interval to addr until ctx is done, then closes
// the connection and returns nil. A batch that cannot be written is kept and sent, once the
// connection is back, instead of a newer one only if no newer batch was taken: while carbon is
// down, only the latest batch is kept (older ones are dropped and logged), so a long outage
// does not build up memory. It returns an error only for a bad interval.
func (c *Client) Run(ctx context.Context, addr string, interval time.Duration, source func() []series.Sample) error {
	if interval <= 0 {
		return fmt.Errorf("carbon: interval %v must be positive", interval)
	}
	minB, maxB, timeout := c.MinBackoff, c.MaxBackoff, c.Timeout
	if minB <= 0 {
		minB = 100 * time.Millisecond
	}
	if maxB < minB {
		maxB = max(30*time.Second, minB)
	}
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	log := c.Logger
	if log == nil {
		log = slog.Default()
	}
	dial := c.Dial
	if dial == nil {
		var d net.Dialer
		dial = d.DialContext
	}

	var (
		conn    net.Conn
		w       *bufio.Writer
		pending []byte // the batch to send
		backoff = minB
		retryAt time.Time
		failing bool
	)
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	send := func() {
		if len(pending) == 0 || time.Now().Before(retryAt) {
			return
		}
		if conn == nil {
			dctx, cancel := context.WithTimeout(ctx, timeout)
			cn, err := dial(dctx, "tcp", addr)
			cancel()
			if err != nil {
				if !failing {
					log.Warn("carbon: cannot connect", "addr", addr, "err", err)
				}
				failing = true
				retryAt = time.Now().Add(backoff)
				backoff = min(backoff*2, maxB)
				return
			}
			conn, w = cn, bufio.NewWriterSize(cn, 64<<10)
		}
		_ = conn.SetWriteDeadline(time.Now().Add(timeout))
		_, err := w.Write(pending)
		if err == nil {
			err = w.Flush()
		}
		if err != nil {
			log.Warn("carbon: write failed, reconnecting", "addr", addr, "err", err)
			conn.Close()
			conn = nil
			failing = true
			retryAt = time.Now().Add(backoff)
			backoff = min(backoff*2, maxB)
			return
		}
		if failing {
			log.Info("carbon: connected", "addr", addr)
		}
		failing, backoff, retryAt = false, minB, time.Time{}
		pending = pending[:0]
	}
	retry := time.NewTimer(time.Hour)
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			if len(pending) > 0 {
				log.Warn("carbon: dropping an unsent batch for a newer one", "addr", addr, "bytes", len(pending))
			}
			pending = c.AppendLines(pending[:0], source())
			send()
		case <-retry.C:
			send()
		}
		if len(pending) > 0 && !retryAt.IsZero() {
			retry.Reset(time.Until(retryAt))
		}
	}
}

// AppendLines appends the plaintext lines of samples to dst and returns it.
func (c *Client) AppendLines(dst []byte, samples []series.Sample) []byte {
	var keys []string
	for i := range samples {
		s := &samples[i]
		var v float64
		switch s.Kind {
		case series.Counter, series.Level, series.Float:
			v = s.Float()
		default:
			continue
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			continue
		}
		dst = append(dst, c.Prefix...)
		dst = appendMetric(dst, s.Labels["metric"])
		keys = keys[:0]
		for k := range s.Labels {
			if k != "metric" {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			if c.Tagged {
				if s.Labels[k] == "" {
					continue // Graphite tags must have a value
				}
				dst = append(dst, ';')
				dst = appendNode(dst, k)
				dst = append(dst, '=')
				dst = appendNode(dst, s.Labels[k])
				continue
			}
			dst = append(dst, '.')
			dst = appendNode(dst, k)
			dst = append(dst, '.')
			dst = appendNode(dst, s.Labels[k])
		}
		dst = append(dst, ' ')
		switch s.Kind {
		case series.Counter:
			dst = strconv.AppendUint(dst, s.Bits, 10)
		case series.Level:
			dst = strconv.AppendInt(dst, int64(s.Bits), 10)
		default:
			dst = strconv.AppendFloat(dst, v, 'g', -1, 64)
		}
		dst = append(dst, ' ')
		dst = strconv.AppendInt(dst, s.TS/1000, 10)
		dst = append(dst, '\n')
	}
	return dst
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
