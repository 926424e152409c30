package ecs

import (
	"cmp"
	"fmt"
	"hash/maphash"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/cantal-go/cantal/influx/internal/stats"
)

// reservoirSize is how many values each histogrammable field keeps per second, as ECS.
const reservoirSize = 1000

// bucketKey is ECS's key: the second the timestamp falls in and a hash of the measurement,
// the tags in their order and, for histograms, the field. ECS trusts the hash; here a bucket
// also compares the names, so that ECS's unseparated hash collisions (tag a=bc and ab=c)
// do not merge two series.
type bucketKey struct {
	sec  int64
	hash uint64
}

func hashSeries(seed maphash.Seed, m *Metric) uint64 {
	var h maphash.Hash
	h.SetSeed(seed)
	h.WriteString(m.name)
	for _, t := range m.tags {
		h.WriteByte(0)
		h.WriteString(t.name)
		h.WriteByte(1)
		h.WriteString(t.value)
	}
	return h.Sum64()
}

// withField combines a series hash with a field's, for the histogram buckets.
func withField(seed maphash.Seed, series uint64, fieldKey string) uint64 {
	return series ^ (maphash.String(seed, fieldKey) * 0x9e3779b97f4a7c15)
}

func sameSeries(name string, tags TagsType, m *Metric) bool {
	return name == m.name && slices.Equal(tags, m.tags)
}

// MetricsAggregate is ECS's container for Send: it sums the fields of the metrics with the
// same measurement, the same tags in the same order and the same second. Like ECS's, it is
// not safe for concurrent use; the package-level functions guard theirs.
type MetricsAggregate struct {
	seed    maphash.Seed
	buckets map[bucketKey]*aggBucket
	list    []*aggBucket // in creation order
}

type aggBucket struct {
	next   *aggBucket // same key, another series
	metric Metric     // owned: tags and fields are copies
}

// NewMetricsAggregate returns an empty container.
func NewMetricsAggregate() *MetricsAggregate {
	return &MetricsAggregate{seed: maphash.MakeSeed(), buckets: make(map[bucketKey]*aggBucket)}
}

// AddMetric adds metric to its bucket, creating it with a copy of metric (even one without
// fields, as ECS) or summing its fields into it (see Metric.MergeFields). A metric with a
// field whose type differs from the bucket's is ignored as a whole (ECS panics).
func (this *MetricsAggregate) AddMetric(metric *Metric) {
	this.add(metric)
}

func (this *MetricsAggregate) add(m *Metric) error {
	sec := m.timestamp.Unix()
	k := bucketKey{sec, hashSeries(this.seed, m)}
	b := this.buckets[k]
	for b != nil && !sameSeries(b.metric.name, b.metric.tags, m) {
		b = b.next
	}
	if b == nil {
		b = &aggBucket{next: this.buckets[k], metric: m.clone()}
		b.metric.timestamp = time.Unix(sec, 0)
		this.buckets[k] = b
		this.list = append(this.list, b)
		return nil
	}
	if have, sent, bad := b.metric.conflict(m); bad {
		return fmt.Errorf("%s: field %s: %s sent, bucket has %s (ECS panics)", m.name, sent.key, sent.kind, have.kind)
	}
	b.metric.MergeFields(m)
	return nil
}

// Clear empties the container.
func (this *MetricsAggregate) Clear() {
	clear(this.buckets)
	clear(this.list)
	this.list = this.list[:0]
}

// GetMetrics returns a copy of every bucket as a Metric stamped with its second, ordered by
// second and then by creation (ECS: in map order).
func (this *MetricsAggregate) GetMetrics() []Metric {
	result := make([]Metric, 0, len(this.list))
	for _, b := range this.list {
		result = append(result, b.metric.clone())
	}
	sortBySecond(result)
	return result
}

// drain returns the buckets as metrics, without copying, and empties the container.
func (this *MetricsAggregate) drain() []Metric {
	result := make([]Metric, 0, len(this.list))
	for _, b := range this.list {
		result = append(result, b.metric)
	}
	this.Clear()
	sortBySecond(result)
	return result
}

func sortBySecond(ms []Metric) {
	slices.SortStableFunc(ms, func(a, b Metric) int { return cmp.Compare(a.timestamp.Unix(), b.timestamp.Unix()) })
}

// MetricsReservoirSampling is ECS's container for SendHistogrammable: one bucket per
// measurement, tags (in order), field and second, each a reservoir of up to 1000 of the
// field's values (Algorithm R) and a count of them. GetMetrics reports each bucket as its
// own line: f_mean, f_median, f_min, f_p10, f_p30, f_p70, f_p90, f_max (floats over the
// reservoir; percentile p is the sample at index ⌊n·p/100⌋ of the sorted reservoir of n), then
// f_count and f_poolsize (unsigned). Like ECS's, it is not safe for concurrent use.
type MetricsReservoirSampling struct {
	seed    maphash.Seed
	rng     *rand.Rand
	buckets map[bucketKey]*resBucket
	list    []*resBucket
}

type resBucket struct {
	next    *resBucket
	name    string
	tags    TagsType
	field   string
	sec     int64
	count   uint64
	samples []float64
}

// NewMetricsReservoirSampling returns an empty container.
func NewMetricsReservoirSampling() *MetricsReservoirSampling {
	return &MetricsReservoirSampling{seed: maphash.MakeSeed(), rng: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
		buckets: make(map[bucketKey]*resBucket)}
}

// AddMetric adds each field of metric, as a float64, to its bucket's reservoir.
func (this *MetricsReservoirSampling) AddMetric(metric *Metric) {
	sec := metric.timestamp.Unix()
	series := hashSeries(this.seed, metric)
	for _, f := range metric.fields {
		k := bucketKey{sec, withField(this.seed, series, f.key)}
		b := this.buckets[k]
		for b != nil && !(b.field == f.key && sameSeries(b.name, b.tags, metric)) {
			b = b.next
		}
		if b == nil {
			b = &resBucket{next: this.buckets[k], name: metric.name, tags: slices.Clip(slices.Clone(metric.tags)),
				field: f.key, sec: sec}
			this.buckets[k] = b
			this.list = append(this.list, b)
		}
		b.count++
		b.samples = stats.Observe(b.samples, b.count, f.float(), reservoirSize, this.rng)
	}
}

// Clear empties the container.
func (this *MetricsReservoirSampling) Clear() {
	clear(this.buckets)
	clear(this.list)
	this.list = this.list[:0]
}

// GetMetrics returns one Metric per bucket, stamped with its second, ordered by second and
// then by creation (ECS: in map order). It sorts the reservoirs in place, as ECS does.
func (this *MetricsReservoirSampling) GetMetrics() []Metric {
	return reservoirMetrics(this.list)
}

// drain returns the buckets and empties the container, so that their statistics can be
// computed without holding the lock that guards it.
func (this *MetricsReservoirSampling) drain() []*resBucket {
	list := this.list
	this.list = nil
	clear(this.buckets)
	return list
}

func reservoirMetrics(list []*resBucket) []Metric {
	result := make([]Metric, 0, len(list))
	for _, b := range list {
		s := stats.ECS(b.samples, b.count)
		m := Metric{name: b.name, tags: b.tags, timestamp: time.Unix(b.sec, 0), fields: make([]field, 0, len(stats.Suffixes))}
		for i, v := range s.Floats() {
			// A mean can overflow to ±Inf (ECS then panics formatting it): clamp it.
			m.SetFieldFloat64(b.field+stats.Suffixes[i], max(min(v, math.MaxFloat64), -math.MaxFloat64))
		}
		m.SetFieldUInt64(b.field+stats.Suffixes[8], s.Count)
		m.SetFieldUInt64(b.field+stats.Suffixes[9], s.PoolSize)
		result = append(result, m)
	}
	sortBySecond(result)
	return result
}
