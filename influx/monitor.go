package influx

import (
	"cmp"
	"fmt"
	"hash/maphash"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/influxdata/line-protocol/v2/lineprotocol"

	"github.com/cantal-go/cantal/influx/internal/stats"
)

// Defaults for the zero fields of Config.
const (
	DefaultEndpoint      = "8088/ecsmetrics"
	DefaultReservoirSize = 1000
	DefaultRetention     = time.Minute
	DefaultMaxBuckets    = 100_000
	DefaultPushInterval  = time.Second
)

// Config configures a Monitor. The zero value is the ECS defaults with non-destructive scrapes
// and no push.
type Config struct {
	// Endpoint is where Run serves the metrics: "[port]/[path]" as the ECS metricsEndpoint
	// flag, or "[host:port]/[path]". Default DefaultEndpoint ("8088/ecsmetrics").
	Endpoint string
	// ReservoirSize is how many values each histogrammable field keeps per bucket for its
	// percentiles. Default DefaultReservoirSize (1000).
	ReservoirSize int
	// Retention is how long a bucket can be scraped (and pushed) after it was created.
	// Default DefaultRetention (1 minute).
	Retention time.Duration
	// ResetOnScrape makes every scrape remove the buckets it returns, as ECS does. Only one
	// scraper can then be served correctly, and a bucket still being filled is split across
	// scrapes into points with the same timestamp. Push sees only what scrapes left.
	ResetOnScrape bool
	// MaxBuckets bounds the number of buckets kept. A metric that would create one more is
	// dropped: Send returns ErrDropped, and the count is exported (see Monitor.Stats).
	// Default DefaultMaxBuckets.
	MaxBuckets int
	// PushURL, if set, is an InfluxDB v1-compatible write URL, such as a cantal-agent's
	// "http://127.0.0.1:22682/write", to which Run pushes every completed second's buckets
	// (again when they change), every PushInterval.
	PushURL string
	// PushInterval is the push period. Default DefaultPushInterval (1 s).
	PushInterval time.Duration
	// PushClient sends the pushes. Default: a client with a 5 s timeout.
	PushClient *http.Client
	// Logger receives push failures and server errors. Default slog.Default().
	Logger *slog.Logger
	// Seed, if not zero, makes reservoir sampling deterministic (for tests): the same sends,
	// in the same order, keep the same samples.
	Seed uint64
	// Statistics chooses how a histogrammable field's statistics are computed and typed:
	// StatisticsDefault (the zero value) or StatisticsECS, which writes the same values and
	// field types as ECS, for an InfluxDB that already holds ECS data. See the package doc.
	Statistics Statistics
}

// Statistics chooses how SendHistogrammable's statistics are computed and written.
type Statistics uint8

const (
	// StatisticsDefault: f_mean, f_min and f_max are those of every value sent in the
	// second; the percentiles interpolate the sorted reservoir of n samples linearly at rank
	// p/100·(n−1) (values 1..10 give p10 1.9, median 5.5, p90 9.1); f_count and f_poolsize
	// are floats (f_count=10).
	StatisticsDefault Statistics = iota
	// StatisticsECS is ECS's reservoirSampling.GetStats: f_mean, f_min and f_max are those
	// of the reservoir; percentile p is the sample at index ⌊n·p/100⌋ of the sorted
	// reservoir (values 1..10 give p10 2, median 6, p90 10); f_count and f_poolsize are
	// unsigned integers (f_count=10u). The fields of a bucket stay on one line.
	StatisticsECS
)

const numShards = 16

// Monitor aggregates metrics into one-second buckets and serves them. Send,
// SendHistogrammable, AppendLines, Stats and the HTTP handler are safe for concurrent use from
// any number of goroutines; Run is called once.
type Monitor struct {
	cfg       Config
	seed      maphash.Seed
	shards    [numShards]shard
	seq       atomic.Uint64 // bucket creation order
	count     atomic.Int64  // live buckets
	drops     atomic.Uint64
	pushes    atomic.Uint64
	pushFails atomic.Uint64
	log       *slog.Logger
}

// Stats are a Monitor's own counters.
type Stats struct {
	Buckets      int64  // buckets currently kept
	Dropped      uint64 // metrics dropped because MaxBuckets was reached
	Pushes       uint64 // successful pushes
	PushFailures uint64 // failed pushes (retried at the next interval)
}

type shard struct {
	mu        sync.Mutex
	buckets   map[bucketKey]*bucket
	free      []*bucket
	rng       *rand.Rand
	lastSweep int64 // unix ns
	_         [64]byte
}

type bucketKey struct {
	sec  int64
	hash uint64
	hist bool
}

type bucket struct {
	key         bucketKey
	next        *bucket // same key, different series (hash collision)
	measurement string
	tags        []Tag
	fields      []aggField
	created     int64 // unix ns
	seq         uint64
	version     uint64 // bumped by every update
	pushed      uint64 // version last pushed
	gen         uint64 // bumped when recycled
}

// aggField is a field's aggregate: a sum (Send) or a reservoir (SendHistogrammable).
type aggField struct {
	key  string
	kind Kind
	bits uint64 // the sum
	// histogrammable:
	n        uint64
	sum      float64
	min, max float64
	res      []float64
}

// New returns a Monitor for cfg. It fails on an invalid Endpoint or PushURL.
func New(cfg Config) (*Monitor, error) {
	if cfg.Endpoint == "" {
		cfg.Endpoint = DefaultEndpoint
	}
	if _, _, err := ParseEndpoint(cfg.Endpoint); err != nil {
		return nil, err
	}
	if cfg.PushURL != "" && !strings.HasPrefix(cfg.PushURL, "http://") && !strings.HasPrefix(cfg.PushURL, "https://") {
		return nil, fmt.Errorf("influx: push URL %q: want http:// or https://", cfg.PushURL)
	}
	if cfg.ReservoirSize <= 0 {
		cfg.ReservoirSize = DefaultReservoirSize
	}
	if cfg.Retention <= 0 {
		cfg.Retention = DefaultRetention
	}
	if cfg.MaxBuckets <= 0 {
		cfg.MaxBuckets = DefaultMaxBuckets
	}
	if cfg.Statistics > StatisticsECS {
		return nil, fmt.Errorf("influx: unknown Statistics %d", cfg.Statistics)
	}
	if cfg.PushInterval <= 0 {
		cfg.PushInterval = DefaultPushInterval
	}
	if cfg.PushClient == nil {
		cfg.PushClient = &http.Client{Timeout: 5 * time.Second}
	}
	m := &Monitor{cfg: cfg, seed: maphash.MakeSeed(), log: cfg.Logger}
	if m.log == nil {
		m.log = slog.Default()
	}
	for i := range m.shards {
		s1, s2 := cfg.Seed, uint64(i)
		if s1 == 0 {
			s1, s2 = rand.Uint64(), rand.Uint64()
		}
		m.shards[i].rng = rand.New(rand.NewPCG(s1, s2))
		m.shards[i].buckets = make(map[bucketKey]*bucket)
	}
	return m, nil
}

// Stats returns the Monitor's own counters.
func (m *Monitor) Stats() Stats {
	return Stats{Buckets: m.count.Load(), Dropped: m.drops.Load(), Pushes: m.pushes.Load(), PushFailures: m.pushFails.Load()}
}

// Send adds m's fields to the bucket of its measurement, tags and second: integer fields are
// summed as integers (wrapping on overflow), float fields as floats. A zero timestamp means
// now. It fails, changing nothing, if m is invalid, if a field has another type than the same
// field already has in the bucket (ErrFieldType), or if the bucket would exceed
// Config.MaxBuckets (ErrDropped). m may be reused as soon as Send returns.
func (mon *Monitor) Send(m *Metric) error { return mon.send(m, false) }

// SendHistogrammable adds each of m's field values to the reservoir of that field in the
// bucket of m's measurement, tags and second, for percentiles. Its buckets are separate from
// Send's. Errors are as for Send, except that fields of any type mix (values become float64).
func (mon *Monitor) SendHistogrammable(m *Metric) error { return mon.send(m, true) }

func (mon *Monitor) send(m *Metric, hist bool) error {
	if err := m.check(); err != nil {
		return err
	}
	ts := m.ts
	if ts.IsZero() {
		ts = time.Now()
	}
	key := bucketKey{sec: ts.Unix(), hash: mon.hashSeries(m), hist: hist}
	s := &mon.shards[key.hash%numShards]
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.buckets[key]
	for b != nil && !b.matches(m) {
		b = b.next
	}
	if b == nil {
		for _, f := range m.fields { // no bucket is created for a metric that will be refused
			if err := checkFieldKey(m.measurement, f.Key); err != nil {
				return err
			}
		}
		var err error
		if b, err = mon.newBucket(s, key, m); err != nil {
			return err
		}
	}
	if hist {
		return b.observe(m, s.rng, mon.cfg.ReservoirSize)
	}
	return b.add(m)
}

func (mon *Monitor) hashSeries(m *Metric) uint64 {
	if mon.cfg.Seed != 0 {
		return seededHash(mon.cfg.Seed, m)
	}
	var h maphash.Hash
	h.SetSeed(mon.seed)
	h.WriteString(m.measurement)
	for _, t := range m.tags {
		h.WriteByte(0)
		h.WriteString(t.Key)
		h.WriteByte(0)
		h.WriteString(t.Value)
	}
	return h.Sum64()
}

// seededHash is hashSeries when Config.Seed is set: FNV-1a from the seed, so that a series
// lands in the same shard, and so draws from the same generator, in every Monitor with that
// seed (maphash's seeds are random).
func seededHash(seed uint64, m *Metric) uint64 {
	h := seed ^ 14695981039346656037
	add := func(s string) {
		for i := 0; i < len(s); i++ {
			h = (h ^ uint64(s[i])) * 1099511628211
		}
		h = (h ^ 0xff) * 1099511628211 // separator: no byte of valid UTF-8
	}
	add(m.measurement)
	for _, t := range m.tags {
		add(t.Key)
		add(t.Value)
	}
	return h
}

func (b *bucket) matches(m *Metric) bool {
	if b.measurement != m.measurement || len(b.tags) != len(m.tags) {
		return false
	}
	for i, t := range m.tags {
		if b.tags[i] != t {
			return false
		}
	}
	return true
}

// newBucket creates and links the bucket of key for m. s is locked.
func (mon *Monitor) newBucket(s *shard, key bucketKey, m *Metric) (*bucket, error) {
	if err := m.checkNames(); err != nil {
		return nil, err
	}
	now := time.Now().UnixNano()
	if now-s.lastSweep > int64(time.Second) {
		mon.sweep(s, now)
	}
	if mon.count.Add(1) > int64(mon.cfg.MaxBuckets) {
		mon.count.Add(-1)
		mon.drops.Add(1)
		return nil, fmt.Errorf("%s: %w (%d)", m.measurement, ErrDropped, mon.cfg.MaxBuckets)
	}
	var b *bucket
	if n := len(s.free); n > 0 {
		b, s.free = s.free[n-1], s.free[:n-1]
	} else {
		b = new(bucket)
	}
	b.key, b.measurement, b.created, b.seq = key, m.measurement, now, mon.seq.Add(1)
	b.tags = append(b.tags[:0], m.tags...)
	b.fields = b.fields[:0]
	b.version, b.pushed = 0, 0
	b.next = s.buckets[key]
	s.buckets[key] = b
	return b, nil
}

// field returns the index of the aggregate for key, -1 if none.
func (b *bucket) field(key string) int {
	for i := range b.fields {
		if b.fields[i].key == key {
			return i
		}
	}
	return -1
}

// newField appends an empty aggregate for key, reusing a recycled one's reservoir.
func (b *bucket) newField(key string, k Kind) *aggField {
	if len(b.fields) < cap(b.fields) {
		b.fields = b.fields[:len(b.fields)+1]
		f := &b.fields[len(b.fields)-1]
		*f = aggField{key: key, kind: k, res: f.res[:0]}
		return f
	}
	b.fields = append(b.fields, aggField{key: key, kind: k})
	return &b.fields[len(b.fields)-1]
}

func (b *bucket) add(m *Metric) error {
	for _, f := range m.fields { // check everything before changing anything
		if i := b.field(f.Key); i >= 0 {
			if b.fields[i].kind != f.Kind {
				return fmt.Errorf("%s: field %s: %w: %s sent, bucket has %s", m.measurement, f.Key, ErrFieldType, f.Kind, b.fields[i].kind)
			}
		} else if err := checkFieldKey(m.measurement, f.Key); err != nil {
			return err
		}
	}
	for _, f := range m.fields {
		var a *aggField
		if i := b.field(f.Key); i >= 0 {
			a = &b.fields[i]
		} else {
			a = b.newField(f.Key, f.Kind)
		}
		switch f.Kind {
		case Int, Uint:
			a.bits += f.bits // two's complement: the same wrapping sum for both
		case Float:
			sum := math.Float64frombits(a.bits) + math.Float64frombits(f.bits)
			a.bits = math.Float64bits(max(min(sum, math.MaxFloat64), -math.MaxFloat64))
		}
	}
	b.version++
	return nil
}

func (b *bucket) observe(m *Metric, rng *rand.Rand, size int) error {
	for _, f := range m.fields {
		if b.field(f.Key) < 0 {
			if err := checkFieldKey(m.measurement, f.Key); err != nil {
				return err
			}
		}
	}
	for _, f := range m.fields {
		var a *aggField
		if i := b.field(f.Key); i >= 0 {
			a = &b.fields[i]
		} else {
			a = b.newField(f.Key, Float)
		}
		v := f.Float()
		a.n++
		a.sum += v
		if a.n == 1 || v < a.min {
			a.min = v
		}
		if a.n == 1 || v > a.max {
			a.max = v
		}
		// Algorithm R: the i-th value replaces a random slot with probability size/i.
		if len(a.res) < size {
			a.res = append(a.res, v)
		} else if j := rng.Uint64N(a.n); j < uint64(size) {
			a.res[j] = v
		}
	}
	b.version++
	return nil
}

// sweep removes the buckets of s created more than Retention before now. s is locked.
func (mon *Monitor) sweep(s *shard, now int64) {
	s.lastSweep = now
	limit := now - int64(mon.cfg.Retention)
	for k, b := range s.buckets {
		var keep *bucket
		for b != nil {
			next := b.next
			if b.created < limit {
				mon.recycle(s, b)
			} else {
				b.next = keep
				keep = b
			}
			b = next
		}
		if keep == nil {
			delete(s.buckets, k)
		} else {
			s.buckets[k] = keep
		}
	}
}

// maxFree bounds the recycled buckets kept per shard.
const maxFree = 256

func (mon *Monitor) recycle(s *shard, b *bucket) {
	mon.count.Add(-1)
	b.gen++
	b.next = nil
	if len(s.free) < maxFree {
		s.free = append(s.free, b)
	}
}

// point is a copy of a bucket taken under its shard's lock, encoded outside it.
type point struct {
	sec         int64
	seq         uint64
	hist        bool
	measurement string
	tags        []Tag
	fields      []aggField // reservoirs copied
	b           *bucket
	shard       int // of b
	gen         uint64
	version     uint64
}

// collect copies the buckets selected by want (all if nil), removing them if reset. It sweeps
// expired buckets first.
func (mon *Monitor) collect(reset bool, want func(*bucket) bool) []point {
	var pts []point
	now := time.Now().UnixNano()
	for i := range mon.shards {
		s := &mon.shards[i]
		s.mu.Lock()
		mon.sweep(s, now)
		for k, b := range s.buckets {
			for ; b != nil; b = b.next {
				if want != nil && !want(b) {
					continue
				}
				p := point{sec: b.key.sec, seq: b.seq, hist: b.key.hist, measurement: b.measurement,
					tags: slices.Clone(b.tags), fields: slices.Clone(b.fields), b: b, shard: i, gen: b.gen, version: b.version}
				for j := range p.fields {
					p.fields[j].res = slices.Clone(p.fields[j].res)
				}
				pts = append(pts, p)
			}
			if reset {
				for b := s.buckets[k]; b != nil; {
					next := b.next
					mon.recycle(s, b)
					b = next
				}
				delete(s.buckets, k)
			}
		}
		s.mu.Unlock()
	}
	// Seconds in order; within a second, buckets in the order they were created.
	slices.SortFunc(pts, func(a, b point) int { return cmp.Or(cmp.Compare(a.sec, b.sec), cmp.Compare(a.seq, b.seq)) })
	return pts
}

// appendPoints encodes pts as line protocol. Timestamps are the bucket's second.
func (mon *Monitor) appendPoints(dst []byte, pts []point) []byte {
	var e lineprotocol.Encoder
	e.SetBuffer(dst)
	var key []byte
	ecs := mon.cfg.Statistics == StatisticsECS
	for i := range pts {
		p := &pts[i]
		if len(p.fields) == 0 {
			continue // cannot happen: buckets are created with their first fields
		}
		e.StartLine(p.measurement)
		for _, t := range p.tags {
			e.AddTag(t.Key, t.Value)
		}
		for j := range p.fields {
			f := &p.fields[j]
			if !p.hist {
				e.AddField(f.key, Field{Kind: f.kind, bits: f.bits}.lpValue())
				continue
			}
			var sum stats.Summary
			if ecs {
				sum = stats.ECS(f.res, f.n)
			} else {
				slices.Sort(f.res)
				sum = stats.Interpolated(f.res, f.n, f.sum, f.min, f.max)
			}
			key = sum.AddFields(&e, key, f.key, ecs)
		}
		e.EndLine(time.Unix(p.sec, 0))
		if err := e.Err(); err != nil {
			mon.log.Error("influx: encode bucket", "measurement", p.measurement, "err", err)
			e.ClearErr()
		}
	}
	return e.Bytes()
}

// appendSelf appends the monitor's own line when anything was dropped.
func (mon *Monitor) appendSelf(dst []byte) []byte {
	st := mon.Stats()
	if st.Dropped == 0 && st.PushFailures == 0 {
		return dst
	}
	var e lineprotocol.Encoder
	e.SetBuffer(dst)
	e.StartLine(SelfMeasurement)
	e.AddField("buckets", lineprotocol.IntValue(st.Buckets))
	e.AddField("dropped", lineprotocol.UintValue(st.Dropped))
	e.AddField("push_failures", lineprotocol.UintValue(st.PushFailures))
	e.EndLine(time.Now())
	return e.Bytes()
}

// SelfMeasurement is the measurement of the line a Monitor adds to every scrape once it has
// dropped a metric or failed a push: fields buckets (i), dropped (u) and push_failures (u),
// stamped with the scrape time.
const SelfMeasurement = "influx_monitor"

// AppendLines appends every kept bucket to dst as line protocol, ordered by second and then by
// creation, followed by the SelfMeasurement line if anything was dropped. It does not remove
// the buckets, whatever Config.ResetOnScrape says.
func (mon *Monitor) AppendLines(dst []byte) []byte {
	return mon.appendSelf(mon.appendPoints(dst, mon.collect(false, nil)))
}

// ServeHTTP serves a scrape: AppendLines, or the same removing the buckets returned when
// Config.ResetOnScrape is set.
func (mon *Monitor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	body := mon.appendSelf(mon.appendPoints(nil, mon.collect(mon.cfg.ResetOnScrape, nil)))
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.Write(body)
}
