package influx

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/influxdata/line-protocol/v2/lineprotocol"
)

// Tag is one tag of a Metric.
type Tag struct {
	Key, Value string
}

// Kind is the type of a field value.
type Kind uint8

// The field kinds: line protocol's integer (i), unsigned (u) and float.
const (
	Int Kind = iota + 1
	Uint
	Float
)

// String returns "int", "uint" or "float".
func (k Kind) String() string {
	switch k {
	case Int:
		return "int"
	case Uint:
		return "uint"
	case Float:
		return "float"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Field is one field of a Metric: a key and a typed value.
type Field struct {
	Key  string
	Kind Kind
	bits uint64
}

// Int returns the value of an Int field.
func (f Field) Int() int64 { return int64(f.bits) }

// Uint returns the value of a Uint field.
func (f Field) Uint() uint64 { return f.bits }

// Float returns the value as a float64, whatever its kind.
func (f Field) Float() float64 {
	switch f.Kind {
	case Int:
		return float64(int64(f.bits))
	case Uint:
		return float64(f.bits)
	}
	return math.Float64frombits(f.bits)
}

func (f Field) lpValue() lineprotocol.Value {
	switch f.Kind {
	case Int:
		return lineprotocol.IntValue(int64(f.bits))
	case Uint:
		return lineprotocol.UintValue(f.bits)
	}
	v, _ := lineprotocol.FloatValue(math.Float64frombits(f.bits)) // finite: checked by Send
	return v
}

// Metric is one line-protocol point being built: a measurement, tags, fields and a timestamp.
// Tags are kept sorted by key and fields in the order they were first set; setting an existing
// tag or field key replaces its value.
//
// A Metric is a plain value, not safe for concurrent use. Monitor.Send copies what it needs, so
// a Metric may be reused (see Reset) as soon as Send returns: reusing one keeps its slices and
// makes building and sending a metric allocation-free.
type Metric struct {
	measurement string
	tags        []Tag
	fields      []Field
	ts          time.Time
}

// NewMetric returns a metric with no tags and no fields. A zero ts means "when sent".
func NewMetric(measurement string, ts time.Time) Metric {
	return Metric{measurement: measurement, ts: ts}
}

// Reset empties m for reuse with a new measurement and timestamp, keeping its memory.
func (m *Metric) Reset(measurement string, ts time.Time) {
	m.measurement = measurement
	m.tags = m.tags[:0]
	m.fields = m.fields[:0]
	m.ts = ts
}

// Measurement returns the measurement name.
func (m *Metric) Measurement() string { return m.measurement }

// Timestamp returns the timestamp; zero means "when sent".
func (m *Metric) Timestamp() time.Time { return m.ts }

// SetTimestamp sets the timestamp; zero means "when sent".
func (m *Metric) SetTimestamp(ts time.Time) { m.ts = ts }

// Tags returns the tags sorted by key. The slice belongs to m: do not modify it.
func (m *Metric) Tags() []Tag { return m.tags }

// Fields returns the fields in the order they were first set. The slice belongs to m: do not
// modify it.
func (m *Metric) Fields() []Field { return m.fields }

// AddTag sets tag key to value, replacing the value of an existing key, and keeps the tags
// sorted so that two metrics with the same tags aggregate together whatever order they were
// added in.
func (m *Metric) AddTag(key, value string) {
	i, found := slices.BinarySearchFunc(m.tags, key, func(t Tag, k string) int { return strings.Compare(t.Key, k) })
	if found {
		m.tags[i].Value = value
		return
	}
	m.tags = slices.Insert(m.tags, i, Tag{key, value})
}

func (m *Metric) setField(key string, k Kind, bits uint64) {
	for i := range m.fields {
		if m.fields[i].Key == key {
			m.fields[i].Kind, m.fields[i].bits = k, bits
			return
		}
	}
	m.fields = append(m.fields, Field{key, k, bits})
}

// SetFieldInt64 sets field key to the integer v.
func (m *Metric) SetFieldInt64(key string, v int64) { m.setField(key, Int, uint64(v)) }

// SetFieldUInt64 sets field key to the unsigned integer v.
func (m *Metric) SetFieldUInt64(key string, v uint64) { m.setField(key, Uint, v) }

// SetFieldFloat64 sets field key to the float v. NaN and infinities cannot be sent.
func (m *Metric) SetFieldFloat64(key string, v float64) {
	m.setField(key, Float, math.Float64bits(v))
}

// Errors wrapped by Send, SendHistogrammable and AppendLine.
var (
	ErrInvalidMetric = errors.New("invalid metric")
	ErrFieldType     = errors.New("field type conflict")
	ErrDropped       = errors.New("metric dropped: too many buckets")
)

var (
	minTime = time.Unix(0, math.MinInt64)
	maxTime = time.Unix(0, math.MaxInt64)
)

// check validates what is cheap to check on every send: a measurement, at least one field,
// finite floats, a representable timestamp. Names are checked by checkNames.
func (m *Metric) check() error {
	if m.measurement == "" {
		return fmt.Errorf("%w: empty measurement", ErrInvalidMetric)
	}
	if len(m.fields) == 0 {
		return fmt.Errorf("%w: %s: no fields", ErrInvalidMetric, m.measurement)
	}
	for _, f := range m.fields {
		if f.Kind == Float {
			if v := math.Float64frombits(f.bits); math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("%w: %s: field %s is %v", ErrInvalidMetric, m.measurement, f.Key, v)
			}
		}
	}
	if !m.ts.IsZero() && (m.ts.Before(minTime) || m.ts.After(maxTime)) {
		return fmt.Errorf("%w: %s: timestamp %s out of range", ErrInvalidMetric, m.measurement, m.ts.Format(time.RFC3339))
	}
	return nil
}

// checkNames validates the measurement and tags against the line protocol.
func (m *Metric) checkNames() error {
	if !validName(m.measurement) {
		return fmt.Errorf("%w: measurement %q", ErrInvalidMetric, m.measurement)
	}
	for _, t := range m.tags {
		if !validName(t.Key) || !validName(t.Value) {
			return fmt.Errorf("%w: %s: tag %q=%q", ErrInvalidMetric, m.measurement, t.Key, t.Value)
		}
	}
	return nil
}

func checkFieldKey(measurement, key string) error {
	if !validName(key) {
		return fmt.Errorf("%w: %s: field key %q", ErrInvalidMetric, measurement, key)
	}
	return nil
}

// validName reports whether s can be a line-protocol measurement, tag key, tag value or field
// key: not empty, valid UTF-8, no control characters, no trailing backslash.
func validName(s string) bool {
	if s == "" || !utf8.ValidString(s) || s[len(s)-1] == '\\' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == 0x7f {
			return false
		}
	}
	return true
}

// AppendLine appends m as one line of line protocol (with a newline) to dst. A zero timestamp
// is left out. It fails, leaving dst as it was, if m cannot be encoded.
func (m *Metric) AppendLine(dst []byte) ([]byte, error) {
	if err := m.check(); err != nil {
		return dst, err
	}
	if err := m.checkNames(); err != nil {
		return dst, err
	}
	for _, f := range m.fields {
		if err := checkFieldKey(m.measurement, f.Key); err != nil {
			return dst, err
		}
	}
	var e lineprotocol.Encoder
	e.SetBuffer(dst)
	e.StartLine(m.measurement)
	for _, t := range m.tags {
		e.AddTag(t.Key, t.Value)
	}
	for _, f := range m.fields {
		e.AddField(f.Key, f.lpValue())
	}
	e.EndLine(m.ts)
	if err := e.Err(); err != nil {
		return dst, fmt.Errorf("encode %s: %w", m.measurement, err)
	}
	return e.Bytes(), nil
}

// String returns m in line protocol without the newline, or an error description.
func (m Metric) String() string {
	b, err := m.AppendLine(nil)
	if err != nil {
		return "!" + err.Error()
	}
	return string(b[:len(b)-1])
}
