// Package ingest receives series that applications push to the agent — InfluxDB line protocol
// on POST /write (and /api/v2/write) and statsd over UDP and TCP — and feeds them into the
// agent's scans: a Push is a series.Collector that puts the latest value of every pushed series
// into the Sink of each scan, so pushed series join history, queries and exports like scanned
// ones. Series not updated for Config.Expire are dropped.
//
// # Line protocol
//
// Each field of a line becomes one series labelled {"metric": "<measurement>.<field>", tags...}.
// Field types map to kinds: float → float, integer (i) → level, unsigned (u) → counter,
// boolean → level 0/1, string → state (entered at the line's timestamp when the text changes).
// Unsigned means counter because that is how line-protocol producers that know about counters
// write them (ALICE ECS writes send_bytes=1638400u); Telegraf's integers stay levels. A series
// keeps the kind it was created with until it expires: a line changing it is rejected with
// InfluxDB's "field type conflict". The latest timestamp wins: a line older than the value held
// is accepted but does not replace it.
//
// # statsd
//
// See ServeStatsd for the accepted syntax and the series each statsd type produces.
package ingest

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/cantal-go/cantal/internal/series"
)

// Config configures a Push. The zero value of every field means its default.
type Config struct {
	// Expire drops a pushed series that has not been updated for this long. Default 10 min.
	Expire time.Duration
	// MaxSeries limits the number of pushed series held at once (line-protocol fields and
	// statsd metrics together; a statsd timer counts once). Default 100000.
	MaxSeries int
	// MaxBodyBytes limits a /write body, before and after gzip decompression. Default 32 MiB.
	MaxBodyBytes int64
	// Percentiles computed for statsd timers and histograms at each scan, in (0, 1).
	// Default 0.5 (as "median"), 0.9, 0.95, 0.99.
	Percentiles []float64
	// MaxTimerSamples bounds the values a statsd timer keeps per scan interval; past it a
	// uniform reservoir sample is kept (count, sum, min, max stay exact). Default 8192.
	MaxTimerSamples int
	// MaxSetSize bounds the distinct values a statsd set counts per scan interval. Default 100000.
	MaxSetSize int
	// Logger receives malformed-input summaries at Debug level. Default slog.Default().
	Logger *slog.Logger
	// Now returns the current time. Default time.Now.
	Now func() time.Time
}

func (c *Config) setDefaults() {
	if c.Expire <= 0 {
		c.Expire = 10 * time.Minute
	}
	if c.MaxSeries <= 0 {
		c.MaxSeries = 100000
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = 32 << 20
	}
	if len(c.Percentiles) == 0 {
		c.Percentiles = []float64{0.5, 0.9, 0.95, 0.99}
	}
	if c.MaxTimerSamples <= 0 {
		c.MaxTimerSamples = 8192
	}
	if c.MaxSetSize <= 0 {
		c.MaxSetSize = 100000
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Stats are the running totals of a Push since it was made.
type Stats struct {
	WriteRequests  uint64 // /write requests answered
	WriteLines     uint64 // line-protocol lines accepted
	WriteRejected  uint64 // line-protocol lines rejected
	StatsdPackets  uint64 // UDP datagrams and TCP reads
	StatsdLines    uint64 // statsd lines accepted
	StatsdRejected uint64 // statsd lines malformed or refused
	Series         int    // pushed series held now
	Expired        uint64 // series dropped for not being updated
}

// Push holds the series pushed to the agent. Its methods are safe for concurrent use: the HTTP
// handlers and statsd listeners write into it while the scan goroutine calls Collect.
type Push struct {
	cfg Config

	mu      sync.Mutex
	entries map[string]*entry // by internal key (see appendKey)
	stats   Stats
	// lastBad is the latest malformed statsd line and reason, reported at the next Collect.
	lastBad        string
	badSinceReport uint64
	rnd            uint64 // xorshift state for reservoir sampling
	keyBuf         []byte
	selfRefs       [len(selfNames)]*series.Ref
}

// New returns an empty Push.
func New(cfg Config) *Push {
	cfg.setDefaults()
	return &Push{cfg: cfg, entries: make(map[string]*entry), rnd: uint64(cfg.Now().UnixNano()) | 1}
}

// Stats returns the running totals.
func (p *Push) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	s.Series = len(p.entries)
	return s
}

// entry is one pushed series (for statsd timers, the family of series of one timer).
type entry struct {
	labels  series.Labels
	kind    series.Kind // of the line-protocol series; statsd entries use stype
	stype   statsdType  // 0 for line protocol
	updated int64       // unix ns of the last update
	ref     *series.Ref

	// line protocol and statsd gauges/counters
	bits  uint64
	text  string
	since int64
	ts    int64 // unix ms of the value held

	counter float64 // statsd counter total
	gauge   float64 // statsd gauge value
	timer   *timerAgg
	set     map[string]struct{}
}

// appendKey appends the internal key of a series: length-prefixed metric then sorted tags, so
// that no two label sets share a key.
func appendKey(b []byte, prefix byte, metric string, tags []kv) []byte {
	b = append(b, prefix)
	b = binary.AppendUvarint(b, uint64(len(metric)))
	b = append(b, metric...)
	for _, t := range tags {
		b = binary.AppendUvarint(b, uint64(len(t.k)))
		b = append(b, t.k...)
		b = binary.AppendUvarint(b, uint64(len(t.v)))
		b = append(b, t.v...)
	}
	return b
}

// sortTags sorts tags by key (insertion sort: tag lists are short).
func sortTags(t []kv) {
	for i := 1; i < len(t); i++ {
		for j := i; j > 0 && t[j].k < t[j-1].k; j-- {
			t[j], t[j-1] = t[j-1], t[j]
		}
	}
}

// applyPoints stores parsed line-protocol points. Lines are atomic: a line with one refused
// field (kind conflict, series limit) stores none of its fields. It returns the errors of the
// refused lines and the number of lines accepted. A large body is not stored atomically:
// other writers and Collect may run between its lines.
func (p *Push) applyPoints(points []Point, body []byte) (accepted int, errs []*LineError) {
	now := p.cfg.Now().UnixNano()
	p.mu.Lock()
	defer p.mu.Unlock()
	keys := make([]string, 0, 8)
	for i, n := 0, 0; i < len(points); n++ {
		if n > 0 && n%512 == 0 {
			// Let statsd and Collect in between the lines of a large body.
			p.mu.Unlock()
			p.mu.Lock()
		}
		j := i + 1
		for j < len(points) && points[j].Line == points[i].Line {
			j++
		}
		line := points[i:j:j]
		i = j
		// Pass 1: check every field of the line.
		keys = keys[:0]
		var fail error
		newSeries := 0
		for k := range line {
			pt := &line[k]
			p.keyBuf = appendKey(p.keyBuf[:0], 'l', pt.Metric, pt.Tags)
			key := string(p.keyBuf)
			keys = append(keys, key)
			e, ok := p.entries[key]
			switch {
			case !ok:
				newSeries++
				if len(p.entries)+newSeries > p.cfg.MaxSeries {
					fail = fmt.Errorf("max-series limit exceeded (%d pushed series)", p.cfg.MaxSeries)
				}
			case e.kind != pt.Kind:
				fail = fmt.Errorf("field type conflict: %q is %s, already exists as %s", pt.Metric, pt.Kind, e.kind)
			}
			if fail != nil {
				break
			}
		}
		if fail != nil {
			errs = append(errs, &LineError{Line: line[0].Line, Text: lineText(body, line[0].Line), Err: fail})
			continue
		}
		accepted++
		for k := range line {
			pt := &line[k]
			e, ok := p.entries[keys[k]]
			if !ok {
				e = &entry{labels: pt.Labels(), kind: pt.Kind, ts: math.MinInt64}
				p.entries[keys[k]] = e
			}
			e.updated = now
			if pt.TS < e.ts {
				continue // older than the value held
			}
			e.ts = pt.TS
			if pt.Kind == series.State {
				if e.text != pt.Text || e.since == 0 {
					e.since = pt.TS
				}
				e.text = pt.Text
				continue
			}
			e.bits = pt.Bits
		}
	}
	p.stats.WriteLines += uint64(accepted)
	p.stats.WriteRejected += uint64(len(errs))
	return accepted, errs
}

// lineText returns line n (one-based) of body, cut for an error message.
func lineText(body []byte, n int) string {
	for i := 1; i < n; i++ {
		j := indexByte(body, '\n')
		if j < 0 {
			return ""
		}
		body = body[j+1:]
	}
	if j := indexByte(body, '\n'); j >= 0 {
		body = body[:j]
	}
	return cut(body)
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

// Collect implements series.Collector: it puts the latest value of every pushed series into
// sink, computes the statsd timer and set statistics of the interval since the previous
// Collect, and drops series not updated for Config.Expire. Self metrics are put too:
// ingest.write.lines, ingest.write.rejected, ingest.statsd.lines, ingest.statsd.rejected
// (counters) and ingest.series (level).
func (p *Push) Collect(ctx context.Context, sink series.Sink) error {
	now := p.cfg.Now()
	cutoff := now.Add(-p.cfg.Expire).UnixNano()
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for key, e := range p.entries {
		if n++; n&4095 == 0 && ctx.Err() != nil {
			return fmt.Errorf("collect pushed series: %w", ctx.Err())
		}
		if e.updated < cutoff {
			delete(p.entries, key)
			p.stats.Expired++
			continue
		}
		if e.stype != 0 {
			p.collectStatsd(sink, e)
			continue
		}
		if e.ref == nil {
			e.ref = sink.Series(e.labels, e.kind)
		}
		if e.kind == series.State {
			sink.PutState(e.ref, e.since, e.text)
		} else {
			sink.Put(e.ref, e.bits)
		}
	}
	if p.badSinceReport > 0 {
		sink.Problem("statsd", fmt.Sprintf("%d malformed lines since the previous scan, the latest: %s", p.badSinceReport, p.lastBad))
		p.cfg.Logger.Debug("malformed statsd input", "lines", p.badSinceReport, "latest", p.lastBad)
		p.badSinceReport = 0
	}
	p.putSelf(sink)
	return nil
}

// putSelf puts the Push's own series.
func (p *Push) putSelf(sink series.Sink) {
	vals := [len(selfNames)]uint64{p.stats.WriteLines, p.stats.WriteRejected, p.stats.StatsdLines, p.stats.StatsdRejected, uint64(len(p.entries))}
	for i, name := range selfNames {
		if p.selfRefs[i] == nil {
			kind := series.Counter
			if i == len(selfNames)-1 {
				kind = series.Level
			}
			p.selfRefs[i] = sink.Series(series.Labels{"metric": name}, kind)
		}
		sink.Put(p.selfRefs[i], vals[i])
	}
}

var selfNames = [...]string{"ingest.write.lines", "ingest.write.rejected", "ingest.statsd.lines", "ingest.statsd.rejected", "ingest.series"}
