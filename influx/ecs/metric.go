package ecs

import (
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	"github.com/influxdata/line-protocol/v2/lineprotocol"
)

// Tag is one tag of a Metric, as in ECS.
type Tag struct {
	name  string
	value string
}

// TagsType is a Metric's tags, in the order they were added.
type TagsType []Tag

// FieldsType is a Metric's fields by key; the values are int64, uint64 or float64.
type FieldsType map[string]any

type kind uint8

const (
	kindInt kind = iota + 1
	kindUint
	kindFloat
)

func (k kind) String() string {
	switch k {
	case kindInt:
		return "int64"
	case kindUint:
		return "uint64"
	}
	return "float64"
}

type field struct {
	key  string
	kind kind
	bits uint64
}

func (f field) float() float64 {
	switch f.kind {
	case kindInt:
		return float64(int64(f.bits))
	case kindUint:
		return float64(f.bits)
	}
	return math.Float64frombits(f.bits)
}

func (f field) any() any {
	switch f.kind {
	case kindInt:
		return int64(f.bits)
	case kindUint:
		return f.bits
	}
	return math.Float64frombits(f.bits)
}

func (f field) finite() bool {
	if f.kind != kindFloat {
		return true
	}
	v := math.Float64frombits(f.bits)
	return !math.IsNaN(v) && !math.IsInf(v, 0)
}

// Metric is one point being built: a measurement name, tags in the order they were added (a
// key may repeat, as in ECS), fields and a timestamp. Setting a field again replaces its
// value and type. Unlike ECS's, a Metric is copied by Send and SendHistogrammable, so it may
// be changed and sent again as soon as they return.
type Metric struct {
	name      string
	tags      TagsType
	fields    []field // in the order first set; ECS keeps a map, whose order Format randomises
	timestamp time.Time
}

// NewMetric returns a metric named name. It accepts both forms ECS has had:
//
//   - NewMetric(name, timestamp), the form of the ECS design document: no tags, that
//     timestamp (further timestamps are ignored);
//   - NewMetric(name), the later form: timestamp time.Now() and the tag subsystem=ECS, which
//     Telegraf uses to route ECS's metrics to their bucket.
func NewMetric(name string, timestamp ...time.Time) Metric {
	if len(timestamp) > 0 {
		return NewDefaultMetric(name, timestamp[0])
	}
	m := NewDefaultMetric(name, time.Now())
	m.AddTag("subsystem", "ECS")
	return m
}

// NewDefaultMetric returns a metric with no tags and no fields.
func NewDefaultMetric(name string, timestamp time.Time) Metric {
	return Metric{name: name, timestamp: timestamp}
}

// AddTag appends a tag. Tags are neither sorted nor deduplicated, as in ECS: two metrics
// with the same tags in another order aggregate separately, and a line whose tag keys are
// not in increasing order cannot be encoded (see Format).
func (metric *Metric) AddTag(tagName string, value string) {
	metric.tags = append(metric.tags, Tag{name: tagName, value: value})
}

func (metric *Metric) setField(key string, k kind, bits uint64) {
	for i := range metric.fields {
		if metric.fields[i].key == key {
			metric.fields[i].kind, metric.fields[i].bits = k, bits
			return
		}
	}
	metric.fields = append(metric.fields, field{key, k, bits})
}

// SetFieldInt64 sets field fieldName to an integer (written 1i).
func (metric *Metric) SetFieldInt64(fieldName string, field int64) {
	metric.setField(fieldName, kindInt, uint64(field))
}

// SetFieldUInt64 sets field fieldName to an unsigned integer (written 1u).
func (metric *Metric) SetFieldUInt64(fieldName string, field uint64) {
	metric.setField(fieldName, kindUint, field)
}

// SetFieldFloat64 sets field fieldName to a float (written 1). NaN and ±Inf cannot be
// written in line protocol: Send discards a metric carrying one, and Format fails on it.
func (metric *Metric) SetFieldFloat64(fieldName string, field float64) {
	metric.setField(fieldName, kindFloat, math.Float64bits(field))
}

// GetFields returns a copy of the fields. (ECS's GetFields writes into a nil map and
// panics as soon as the metric has a field.)
func (metric *Metric) GetFields() (fields FieldsType) {
	fields = make(FieldsType, len(metric.fields))
	for _, f := range metric.fields {
		fields[f.key] = f.any()
	}
	return fields
}

// MergeFields adds other's fields to metric's: a field metric lacks is added, one it has is
// summed (integers wrap as in Go; a float sum beyond ±MaxFloat64 is clamped to it, where ECS
// keeps ±Inf and then cannot format it). A field whose type differs between the two is left
// as it is (ECS panics).
func (metric *Metric) MergeFields(other *Metric) {
	for _, f := range other.fields {
		if i := metric.field(f.key); i >= 0 {
			metric.fields[i].add(f)
		} else {
			metric.fields = append(metric.fields, f)
		}
	}
}

// conflict returns the first field of other that metric has with another type.
func (metric *Metric) conflict(other *Metric) (field, field, bool) {
	for _, f := range other.fields {
		if i := metric.field(f.key); i >= 0 && metric.fields[i].kind != f.kind {
			return metric.fields[i], f, true
		}
	}
	return field{}, field{}, false
}

func (metric *Metric) field(key string) int {
	for i := range metric.fields {
		if metric.fields[i].key == key {
			return i
		}
	}
	return -1
}

func (f *field) add(g field) {
	if f.kind != g.kind {
		return
	}
	switch f.kind {
	case kindInt, kindUint:
		f.bits += g.bits // two's complement: the same wrapping sum for both
	case kindFloat:
		sum := math.Float64frombits(f.bits) + math.Float64frombits(g.bits)
		f.bits = math.Float64bits(max(min(sum, math.MaxFloat64), -math.MaxFloat64))
	}
}

// checkFinite reports the first NaN or infinite field.
func (metric *Metric) checkFinite() error {
	for _, f := range metric.fields {
		if !f.finite() {
			return fmt.Errorf("%s: field %s is %v", metric.name, f.key, f.float())
		}
	}
	return nil
}

// clone returns a copy of metric sharing no memory with it.
func (metric *Metric) clone() Metric {
	return Metric{name: metric.name, tags: slices.Clip(slices.Clone(metric.tags)),
		fields: slices.Clip(slices.Clone(metric.fields)), timestamp: metric.timestamp}
}

// Format writes metrics to writer in line protocol, one line each, as ECS's Format does:
// tags in the order they were added, fields in the order they were first set (ECS: in map
// order, which changes from call to call), the timestamp in nanoseconds, or none for a zero
// timestamp. Like ECS, it is all or nothing: if any metric cannot be encoded (no field; an
// empty or invalid name; tag keys repeated or not in increasing order; a NaN or infinite
// float, on which ECS panics), Format writes nothing and returns the first error.
func Format(writer io.Writer, metrics []Metric) error {
	var enc lineprotocol.Encoder
	var nonFinite error
	for i := range metrics {
		m := &metrics[i]
		enc.StartLine(m.name)
		for _, t := range m.tags {
			enc.AddTag(t.name, t.value)
		}
		for _, f := range m.fields {
			switch f.kind {
			case kindInt:
				enc.AddField(f.key, lineprotocol.IntValue(int64(f.bits)))
			case kindUint:
				enc.AddField(f.key, lineprotocol.UintValue(f.bits))
			default:
				v, ok := lineprotocol.FloatValue(math.Float64frombits(f.bits))
				if !ok {
					if nonFinite == nil {
						nonFinite = fmt.Errorf("encoding point %d: field %s of %s is %v", i, f.key, m.name, f.float())
					}
					continue
				}
				enc.AddField(f.key, v)
			}
		}
		enc.EndLine(m.timestamp)
	}
	if err := enc.Err(); err != nil {
		return err
	}
	if nonFinite != nil {
		return nonFinite
	}
	_, err := writer.Write(enc.Bytes())
	return err
}
