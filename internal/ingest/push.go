// Package ingest receives series that applications push to the agent — InfluxDB line protocol
// on POST /write (and /api/v2/write), OTLP metrics on POST /v1/metrics (otlp.go) and statsd
// over UDP and TCP — and feeds them into the
// agent's scans: a Push is a series.Collector that stores the points pushed since the previous
// scan into the Sink of each scan, so pushed series join history, queries and exports like
// scanned ones. Series not updated for Config.Expire are dropped.
//
// # Points are kept as sent
//
// A pushed point is stored once, at its own time placed on the scan grid: the first scan at or
// after its timestamp (within 5 scan intervals; see history.Store.AddAt), which may be a scan
// already taken (a late point, written into the open history segment) or the next one. It is
// never re-stamped at later scans nor repeated: between two pushes a series has no points, and
// a gap is a missing point. A point without a timestamp is stamped when it arrives, so it lands
// on the next scan. Refused, with the reason in the answer (a partial write): a point more than
// Config.Interval ahead of the agent's clock (too far in the future) and a point at or before
// Config.BackfillFrom (older than the open history segment, whose closed predecessors are
// immutable). A point accepted but whose scan's segment closed before the next scan placed it
// is refused then, counted in Stats.Late and reported as a scan problem. Several points of one
// series in one scan's slot: the one with the latest timestamp wins (of equal ones, the last
// sent). A pushed series held by the Push (updated within Config.Expire) stays listed by the
// JSON API and the exports with its last point, whose "ts" tells its age (registry.Hold).
//
// statsd has no timestamps: a counter's increments are added up into a cumulative counter,
// stored at the scan after they arrived; a gauge is stored at the scan after it was sent; a
// timer's and a set's series at the scan after their values arrived. A scan with nothing new
// stores nothing.
//
// # Pushed series never pose as collected ones
//
// Every pushed series carries the label source="push" (SourceLabel, SourceValue), which no
// series the agent collects itself carries (machine, processes, cgroups, rrdd plugins; an
// application's series always carry the pid and process the agent found it in): a pushed series
// can never have the key of a collected one, so `system load_avg_1min=0.01` makes
// {metric="system.load_avg_1min", source="push"} beside the machine's
// {metric="system.load_avg_1min"}, never over it. A pushed tag named "source" is accepted only
// with the value "push" (so that what one agent exports can be pushed into another); any other
// value is rejected, as is a tag named "metric". The registry uses the label to keep pushed
// series in a budget of their own (registry.SetMaxPushed), apart from --max-series.
//
// # Limits
//
// What a pusher can make the agent hold is bounded in counts and in bytes (see Config):
//   - each label of a pushed series: its name up to MaxLabelNameBytes (256), its value up to
//     MaxLabelValueBytes (4096), the metric name and a string field's text included; at most
//     MaxLabels labels (32, metric and source included). A line or statsd line over a limit is
//     rejected with an error that gives the sizes, never the oversized text;
//   - all pushed series together: MaxSeries series (100000) and MaxBytes bytes (64 MiB). Every
//     series a pushed metric produces counts: a line-protocol field is one, a statsd timer is
//     4 + len(Percentiles) (count, min, max, mean and each percentile). A series costs its key
//     (metric name, tag names and values) plus 256 bytes; a string field's text, the samples a
//     statsd timer keeps (8 bytes each beyond the first 16) and the distinct values a statsd set
//     counts (16 bytes each beyond the first 16) are charged as they grow. A new series beyond
//     either budget is refused (Stats.Refused), a timer keeps a smaller sample and a set stops
//     counting new values; series already held are never displaced by new ones;
//   - one /write request: MaxBodyBytes (32 MiB) on the wire and again decompressed, checked
//     while reading, so a gzip bomb is stopped as soon as it crosses the limit (413); lines of
//     up to 1 MiB; MaxRequestLines lines (100000; more is answered 413, the lines before it
//     having been stored); MaxRequestNewSeries new series (20000; the lines that would create
//     more are rejected as a partial write). The body is decoded as it arrives, a batch of lines
//     at a time, so a request holds its current line and batch in memory, not its body;
//   - one OTLP request: MaxBodyBytes on the wire and decompressed, as /write; then, before it
//     is decoded, MaxOTLPMessages sub-messages (262144) and MaxBodyBytes of decoded memory
//     (estimated by MeasureOTLP, an upper bound), MaxOTLPPoints data points (100000); the
//     decompressed body and the decoded estimate are taken from Config.Bodies while held;
//   - while the history of pushed series fills its budget (Config.HistoryFull), points are
//     refused on arrival;
//   - statsd: a line or datagram of up to 64 KiB; a timer keeps MaxTimerSamples samples per
//     scan interval, a set counts MaxSetSize distinct values (kept as 64-bit hashes).
//
// Error messages quote at most 64 bytes of a line.
//
// # Line protocol
//
// Each field of a line becomes one series labelled {"metric": "<measurement>.<field>",
// "source": "push", tags...}. Field types map to kinds: float → float, integer (i) → level,
// unsigned (u) → counter, boolean → level 0/1, string → state (entered at the line's timestamp
// when the text changes). Unsigned means counter because that is how line-protocol producers
// that know about counters write them (ALICE ECS writes send_bytes=1638400u); Telegraf's
// integers stay levels. A series keeps the kind it was created with until it expires: a line
// changing it is rejected with InfluxDB's "field type conflict". The latest timestamp wins: a
// line older than the value held is accepted but does not replace it.
//
// # statsd
//
// See ServeStatsd for the accepted syntax and the series each statsd type produces.
package ingest

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/cantal-go/cantal/internal/series"
)

// SourceLabel and SourceValue make the label that every pushed series carries and no collected
// series does: source="push".
const (
	SourceLabel = series.SourceLabel
	SourceValue = series.SourcePush
)

// seriesOverhead is what a pushed series costs in the byte budget beyond its key: the entry,
// its labels and the registry's and history's bookkeeping, roughly.
const seriesOverhead = 256

// Sizes charged to the byte budget for the storage of statsd timers and sets: a timer's samples
// are float64s; a set keeps a 64-bit hash per distinct value in a map. The first prepaid of
// each are part of the series' cost.
const (
	sampleBytes   = 8
	setValueBytes = 16
	prepaid       = 16
)

// Config configures a Push. The zero value of every field means its default.
type Config struct {
	// Interval is the agent's scan interval: a point more than this far ahead of the agent's
	// clock is refused (too far in the future). Default 2 s.
	Interval time.Duration
	// BackfillFrom returns the time (unix ms) at or before which a point can no longer be
	// placed on its scan (registry.Registry.BackfillFrom); such points are refused when they
	// arrive. Nil: no check on arrival (the scan still refuses them, counted in Stats.Late).
	BackfillFrom func() int64
	// Expire drops a pushed series that has not been updated for this long. Default 10 min.
	Expire time.Duration
	// MaxSeries limits the number of pushed series held at once (line-protocol fields and
	// statsd metrics together), counting every series a metric produces: a statsd timer counts
	// 4 + len(Percentiles). Default 100000.
	MaxSeries int
	// MaxBytes limits the bytes the pushed series held at once cost: each its key plus 256
	// bytes, plus string fields' texts and statsd timers' and sets' storage (see the package
	// doc). Default 64 MiB.
	MaxBytes int64
	// MaxLabelNameBytes limits the length of a pushed label's name (a tag key). Default 256.
	MaxLabelNameBytes int
	// MaxLabelValueBytes limits the length of a pushed label's value: a tag value, the metric
	// name (with a statsd timer's longest suffix) and a string field's text. Default 4096.
	MaxLabelValueBytes int
	// MaxLabels limits the labels of a pushed series, metric and source included. Default 32.
	MaxLabels int
	// MaxBodyBytes limits a /write body, before and after gzip decompression. Default 32 MiB.
	MaxBodyBytes int64
	// MaxRequestLines limits the lines of one /write request. Default 100000.
	MaxRequestLines int
	// MaxRequestNewSeries limits the series one /write request may create. Default 20000.
	MaxRequestNewSeries int
	// MaxOTLPMessages limits the sub-messages (protobuf) or objects (JSON) of one OTLP request,
	// counted before it is decoded; its decoded form is also bounded by MaxBodyBytes of memory
	// (see otlpcost.go). Default 262144.
	MaxOTLPMessages int
	// MaxOTLPPoints limits the data points of one OTLP request. Default 100000.
	MaxOTLPPoints int
	// HistoryFull reports whether the history of pushed series fills its budget
	// (registry.Registry.PushedFull): points are then refused on arrival, with the reason.
	// Nil: never.
	HistoryFull func() bool
	// Bodies is the memory shared by the requests being read (the agent's body budget): an
	// OTLP request's decompressed body and its decoded form are taken from it while held, and
	// the request is answered 503 when they do not fit. Nil: not shared.
	Bodies Budget
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
	if c.Interval <= 0 {
		c.Interval = 2 * time.Second
	}
	if c.Expire <= 0 {
		c.Expire = 10 * time.Minute
	}
	if c.MaxSeries <= 0 {
		c.MaxSeries = 100000
	}
	if c.MaxBytes <= 0 {
		c.MaxBytes = 64 << 20
	}
	if c.MaxLabelNameBytes <= 0 {
		c.MaxLabelNameBytes = 256
	}
	if c.MaxLabelValueBytes <= 0 {
		c.MaxLabelValueBytes = 4096
	}
	if c.MaxLabels <= 0 {
		c.MaxLabels = 32
	}
	c.MaxLabels = max(c.MaxLabels, 2) // metric and source
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = 32 << 20
	}
	if c.MaxRequestLines <= 0 {
		c.MaxRequestLines = 100000
	}
	if c.MaxRequestNewSeries <= 0 {
		c.MaxRequestNewSeries = 20000
	}
	if c.MaxOTLPMessages <= 0 {
		c.MaxOTLPMessages = 1 << 18
	}
	if c.MaxOTLPPoints <= 0 {
		c.MaxOTLPPoints = 100000
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

// Budget is memory shared by concurrent requests, in bytes: TryAcquire takes n if that much is
// left, Release gives n back. Safe for concurrent use (a *semaphore.Weighted is one).
type Budget interface {
	TryAcquire(n int64) bool
	Release(n int64)
}

// Stats are the running totals of a Push since it was made.
type Stats struct {
	WriteRequests  uint64 // /write requests answered
	WriteLines     uint64 // line-protocol lines accepted
	WriteRejected  uint64 // line-protocol lines rejected (malformed, over a limit, refused)
	WriteTooLarge  uint64 // /write requests answered 413 (body, decompressed body or lines)
	StatsdPackets  uint64 // UDP datagrams and TCP reads
	StatsdLines    uint64 // statsd lines accepted
	StatsdRejected uint64 // statsd lines malformed or refused
	// Refused counts the lines (of either protocol, counted in WriteRejected or StatsdRejected
	// too) refused because they would create series beyond MaxSeries, MaxBytes or
	// MaxRequestNewSeries, and the statsd set values not counted for lack of bytes.
	Refused uint64
	// Late counts the points accepted on arrival but refused when their scan came: the
	// history segment of their time had closed meanwhile, or no scan was taken near it.
	Late   uint64
	Points uint64 // points stored (line protocol, OTLP and statsd)
	// OTLP: requests answered, data points stored and refused, requests answered 413.
	OTLPRequests, OTLPPoints, OTLPRejected, OTLPTooLarge uint64
	Series                                               int    // pushed series held now, every series a metric produces counted
	Bytes                                                int64  // bytes of the budget (MaxBytes) the series held now cost
	Expired                                              uint64 // series dropped for not being updated (a statsd timer's counted once each)
}

// Push holds the series pushed to the agent. Its methods are safe for concurrent use: the HTTP
// handlers and statsd listeners write into it while the scan goroutine calls Collect.
type Push struct {
	cfg        Config
	timerNames []string // the suffixes of a statsd timer's series (timerStatNames)
	timerExtra int      // the bytes the suffixes add to a timer's keys, in all
	timerLong  int      // the longest suffix, with its dot
	seed       maphash.Seed
	lr         labelRules

	mu      sync.Mutex
	entries map[string]*entry // by internal key (see appendKey)
	nseries int               // series the entries produce
	bytes   int64             // what they cost in the byte budget
	stats   Stats
	// lastBad is the latest malformed statsd line and reason, reported at the next Collect.
	lastBad        string
	badSinceReport uint64
	// lastLate is why the latest point was refused at a scan (Stats.Late), reported at the next
	// Collect with the count since.
	lastLate        string
	lateSinceReport uint64
	rnd             uint64 // xorshift state for reservoir sampling
	keyBuf          []byte
	selfRefs        [len(selfNames)]*series.Ref
}

// New returns an empty Push.
func New(cfg Config) *Push {
	cfg.setDefaults()
	p := &Push{cfg: cfg, entries: make(map[string]*entry), rnd: uint64(cfg.Now().UnixNano()) | 1, seed: maphash.MakeSeed()}
	p.lr = labelRules{cfg.MaxLabelNameBytes, cfg.MaxLabelValueBytes, cfg.MaxLabels}
	p.timerNames = timerStatNames(cfg.Percentiles)
	for _, n := range p.timerNames {
		p.timerExtra += 1 + len(n)
		p.timerLong = max(p.timerLong, 1+len(n))
	}
	return p
}

// Stats returns the running totals.
func (p *Push) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	s.Series, s.Bytes = p.nseries, p.bytes
	return s
}

// entry is one pushed series (for statsd timers, the family of series of one timer).
type entry struct {
	labels  series.Labels
	kind    series.Kind // of the line-protocol series; statsd entries use stype
	stype   statsdType  // 0 for line protocol
	updated int64       // unix ns of the last update
	ref     *series.Ref
	nseries int   // series it produces
	cost    int64 // bytes it costs in the budget

	// line protocol and statsd gauges/counters
	text  string
	since int64
	ts    int64    // unix ms of the state held (State series)
	pts   []tpoint // points not yet stored (numeric series), in arrival order
	dirty bool     // statsd: values arrived since the previous scan

	// OTLP: the running total of a delta sum, and a histogram's previous buckets.
	otlp *otlpState

	counter float64 // statsd counter total
	gauge   float64 // statsd gauge value
	timer   *timerAgg
	set     map[uint64]struct{} // hashes of the values
	setPaid int                 // set values paid for in cost
}

// tpoint is a pushed point waiting for its scan.
type tpoint struct {
	ts   int64 // unix ms
	bits uint64
}

// pointBytes is what a point waiting for its scan costs in the byte budget.
const pointBytes = 16

// pushLabels returns the labels of a pushed series: {"metric": metric, "source": "push", tags...}.
func pushLabels(metric string, tags []kv) series.Labels {
	l := make(series.Labels, len(tags)+2)
	for _, t := range tags {
		l[t.k] = t.v
	}
	l["metric"] = metric
	l[SourceLabel] = SourceValue
	return l
}

// labelRules are the limits on the labels of a pushed series.
type labelRules struct {
	maxName, maxValue, maxLabels int
}

func (p *Push) rules() *labelRules { return &p.lr }

// tagRule checks one tag of a pushed series. It reports whether the tag is to be kept: a "source"
// tag with the value "push" is dropped (every pushed series gets it); with another value it is
// an error. The errors quote the name only when it is within the limit, and never the value.
func tagRule[T ~string | ~[]byte](r *labelRules, k, v T) (keep bool, err error) {
	if len(k) > r.maxName {
		return false, fmt.Errorf("tag key of %d bytes exceeds the limit of %d", len(k), r.maxName)
	}
	if len(v) > r.maxValue {
		return false, fmt.Errorf("value of tag %s: %d bytes exceeds the limit of %d", quote(k), len(v), r.maxValue)
	}
	if string(k) == SourceLabel {
		if string(v) != SourceValue {
			return false, fmt.Errorf(`tag key %q is reserved: every pushed series is labelled %s=%q`, SourceLabel, SourceLabel, SourceValue)
		}
		return false, nil
	}
	return true, nil
}

// count checks the number of labels of a series with tags tags (plus metric and source).
func (r *labelRules) count(tags int) error {
	if tags+2 > r.maxLabels {
		return fmt.Errorf("%d labels exceed the limit of %d per series (metric and source included)", tags+2, r.maxLabels)
	}
	return nil
}

// metric checks the length of a metric name.
func (r *labelRules) metric(n int) error {
	if n > r.maxValue {
		return fmt.Errorf("metric name of %d bytes exceeds the limit of %d", n, r.maxValue)
	}
	return nil
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

// admit checks that n new series costing cost bytes fit the budgets, besides the series and
// bytes pending (being admitted by the same line). Called with p.mu held.
func (p *Push) admit(n int, cost int64) error {
	if p.nseries+n > p.cfg.MaxSeries {
		return fmt.Errorf("max-series limit exceeded (%d pushed series)", p.cfg.MaxSeries)
	}
	if p.bytes+cost > p.cfg.MaxBytes {
		return fmt.Errorf("max-bytes limit exceeded (%d bytes of pushed series)", p.cfg.MaxBytes)
	}
	return nil
}

// errRefused marks a line refused for a budget (counted in Stats.Refused).
type errRefused struct{ error }

// errHistoryFull refuses points while the history of pushed series fills its budget.
var errHistoryFull = errors.New("the history of pushed series fills its byte budget; retry later")

func (e errRefused) Unwrap() error { return e.error }

// pending is what applyLine knows of one point of a line between its two passes.
type pending struct {
	e   *entry // nil: a new series
	key string // new series only
}

// applyLine stores the points of one line of a /write request, all or none: a line with one
// refused field (kind conflict, a limit) stores none of its fields. Called with p.mu held.
func (p *Push) applyLine(line []Point, req *writeReq, now int64) error {
	if p.cfg.HistoryFull != nil && p.cfg.HistoryFull() && slices.ContainsFunc(line, func(pt Point) bool { return pt.Kind != series.State }) {
		return errRefused{errHistoryFull}
	}
	pend := req.pend[:0]
	newSeries := 0
	var cost int64
	for k := range line {
		pt := &line[k]
		if pt.Kind != series.State {
			if err := p.checkTime(pt.TS, now, req.from); err != nil {
				return err
			}
			cost += pointBytes
		}
		p.keyBuf = appendKey(p.keyBuf[:0], 'l', pt.Metric, pt.Tags)
		if e, ok := p.entries[string(p.keyBuf)]; ok {
			if e.kind != pt.Kind {
				return fmt.Errorf("field type conflict: %s is %s, already exists as %s", quote(pt.Metric), pt.Kind, e.kind)
			}
			if pt.Kind == series.State && pt.TS >= e.ts {
				cost += max(int64(len(pt.Text))-int64(len(e.text)), 0)
			}
			pend = append(pend, pending{e: e})
			continue
		}
		// Refused as soon as it is known, without looking at the rest of a line of many fields.
		newSeries++
		if req.newSeries+newSeries > p.cfg.MaxRequestNewSeries {
			return errRefused{fmt.Errorf("more than %d new series in one request", p.cfg.MaxRequestNewSeries)}
		}
		cost += int64(len(p.keyBuf)) + seriesOverhead + int64(len(pt.Text))
		if err := p.admit(newSeries, cost); err != nil {
			return errRefused{err}
		}
		pend = append(pend, pending{key: string(p.keyBuf)})
	}
	req.pend = pend
	if err := p.admit(newSeries, cost); err != nil { // a string that grew
		return errRefused{err}
	}
	req.newSeries += newSeries
	for k := range line {
		pt := &line[k]
		e := pend[k].e
		if e == nil {
			e = &entry{labels: pushLabels(pt.Metric, pt.Tags), kind: pt.Kind, ts: math.MinInt64, nseries: 1,
				cost: int64(len(pend[k].key)) + seriesOverhead}
			p.entries[pend[k].key] = e
			p.nseries++
			p.bytes += e.cost
		}
		e.updated = now
		if pt.Kind != series.State {
			bits := pt.Bits
			if pt.acc {
				bits = e.accumulate(pt.Kind, bits)
			}
			e.pts = append(e.pts, tpoint{pt.TS, bits})
			e.cost += pointBytes
			p.bytes += pointBytes
			continue
		}
		if pt.TS < e.ts {
			continue // older than the state held
		}
		e.ts = pt.TS
		{
			if e.text != pt.Text || e.since == 0 {
				e.since = pt.TS
			}
			d := int64(len(pt.Text)) - int64(len(e.text))
			e.cost += d
			p.bytes += d
			e.text = pt.Text
		}
	}
	return nil
}

// checkTime refuses a point too far in the future or too old to be placed on its scan. now is
// unix ns, tsMs and from unix ms.
func (p *Push) checkTime(tsMs, now, from int64) error {
	if ahead := tsMs - now/1e6; ahead > p.cfg.Interval.Milliseconds() {
		return fmt.Errorf("timestamp %s is %s ahead of the agent's clock (more than the scan interval %s)",
			fmtMs(tsMs), time.Duration(ahead)*time.Millisecond, p.cfg.Interval)
	}
	if tsMs <= from {
		return fmt.Errorf("timestamp %s is too old: the agent stores a point on its scan in the open history segment, which begins after %s",
			fmtMs(tsMs), fmtMs(from))
	}
	return nil
}

// fmtMs formats a unix-ms time for an error message.
func fmtMs(ms int64) string { return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z") }

// TimedSink is the Sink that Collect stores pushed points into at their own time: the agent's
// registry (registry.Registry). ScanTime is the time of the scan being written; PutAt stores a
// point at the scan its time falls in and returns that scan's time; Hold lists a series in
// the scan without a point. Same goroutine rules as series.Sink.
type TimedSink interface {
	series.Sink
	ScanTime() int64
	PutAt(r *series.Ref, tsMs int64, bits uint64) (int64, error)
	Hold(r *series.Ref)
}

// latestSink makes a plain Sink (a collector test's Recorder) a TimedSink: every point due by
// now is Put into the scan, the last one winning.
type latestSink struct {
	series.Sink
	now int64
}

func (l latestSink) ScanTime() int64  { return l.now }
func (l latestSink) Hold(*series.Ref) {}
func (l latestSink) PutAt(r *series.Ref, tsMs int64, bits uint64) (int64, error) {
	l.Put(r, bits)
	return l.now, nil
}

// storePoints stores the due points of e into sink (the others wait for their scan) and holds
// e's series when none was for this scan. Called with p.mu held.
func (p *Push) storePoints(sink TimedSink, e *entry, ref *series.Ref) {
	scan := sink.ScanTime()
	if !slices.IsSortedFunc(e.pts, cmpPoint) {
		slices.SortStableFunc(e.pts, cmpPoint) // the latest time wins a slot; of equal ones the last sent
	}
	keep, now := e.pts[:0], false
	for _, pt := range e.pts {
		if pt.ts > scan {
			keep = append(keep, pt)
			continue
		}
		slot, err := sink.PutAt(ref, pt.ts, pt.bits)
		if err != nil {
			p.stats.Late++
			p.lateSinceReport++
			p.lastLate = fmt.Sprintf("%s at %s: %v", ref.Labels["metric"], fmtMs(pt.ts), err)
			continue
		}
		p.stats.Points++
		now = now || slot == scan
	}
	freed := int64(len(e.pts)-len(keep)) * pointBytes
	e.cost -= freed
	p.bytes -= freed
	clear(e.pts[len(keep):])
	e.pts = keep
	if len(keep) == 0 && cap(keep) > 64 {
		e.pts = nil // a burst is over
	}
	if !now {
		sink.Hold(ref)
	}
}

func cmpPoint(a, b tpoint) int { return cmp.Compare(a.ts, b.ts) }

// Collect implements series.Collector: it puts the latest value of every pushed series into
// sink, computes the statsd timer and set statistics of the interval since the previous
// Collect, and drops series not updated for Config.Expire. Self metrics are put too:
// ingest.write.lines, ingest.write.rejected, ingest.statsd.lines, ingest.statsd.rejected,
// ingest.refused (counters), ingest.series and ingest.bytes (levels); they are the agent's own
// series, without the source label.
func (p *Push) Collect(ctx context.Context, plain series.Sink) error {
	now := p.cfg.Now()
	sink, ok := plain.(TimedSink)
	if !ok {
		sink = latestSink{plain, now.UnixMilli()}
	}
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
			p.nseries -= e.nseries
			p.bytes -= e.cost
			p.stats.Expired += uint64(e.nseries)
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
			p.storePoints(sink, e, e.ref)
		}
	}
	if p.lateSinceReport > 0 {
		sink.Problem("push", fmt.Sprintf("%d pushed points refused at the scan since the previous one, the latest: %s", p.lateSinceReport, p.lastLate))
		p.lateSinceReport = 0
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
	vals := [len(selfNames)]uint64{p.stats.WriteLines, p.stats.WriteRejected, p.stats.StatsdLines, p.stats.StatsdRejected,
		p.stats.Refused, uint64(p.nseries), uint64(p.bytes)}
	for i, name := range selfNames {
		if p.selfRefs[i] == nil {
			kind := series.Counter
			if name == "ingest.series" || name == "ingest.bytes" {
				kind = series.Level
			}
			p.selfRefs[i] = sink.Series(series.Labels{"metric": name}, kind)
		}
		sink.Put(p.selfRefs[i], vals[i])
	}
}

var selfNames = [...]string{"ingest.write.lines", "ingest.write.rejected", "ingest.statsd.lines", "ingest.statsd.rejected",
	"ingest.refused", "ingest.series", "ingest.bytes"}
