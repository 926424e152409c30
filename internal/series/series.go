// Package series defines the agent's data model shared by every collector, the history store and
// the query layer: a series' identity (its labels), its kind, and the Sink that a scan is written
// into.
//
// A series is identified by its label set. Its canonical Key is the JSON object of its labels with
// sorted keys and no spaces, so a key is both a stable map key and parseable back into labels
// (history kept across restarts remembers series by key alone).
package series

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"unsafe"
)

// Kind is the type of a series' values.
type Kind uint8

// The kinds. Counter, Level and Float values travel as 64 raw bits (see Sink.Put).
const (
	Counter Kind = 1 // uint64, ever growing; a decrease is a reset
	Level   Kind = 2 // int64 level
	Float   Kind = 3 // float64 level, bits as math.Float64bits
	State   Kind = 4 // text with the unix-ms time it was entered; no history is kept
)

// String returns the name used in the HTTP API: counter, level, float or state.
func (k Kind) String() string {
	switch k {
	case Counter:
		return "counter"
	case Level:
		return "level"
	case Float:
		return "float"
	case State:
		return "state"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// ParseKind is the inverse of Kind.String.
func ParseKind(s string) (Kind, error) {
	switch s {
	case "counter":
		return Counter, nil
	case "level":
		return Level, nil
	case "float":
		return Float, nil
	case "state":
		return State, nil
	}
	return 0, fmt.Errorf("unknown series kind %q", s)
}

// MarshalText implements encoding.TextMarshaler.
func (k Kind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (k *Kind) UnmarshalText(b []byte) error {
	v, err := ParseKind(string(b))
	*k = v
	return err
}

// Labels is a series' label set. A Labels map handed to a Sink is owned by the Sink afterwards
// and must not be modified.
type Labels map[string]string

// Key returns the canonical identity of l: a JSON object with sorted keys and no spaces. Invalid
// UTF-8 in a name or value is written as U+FFFD, so the key is always valid JSON.
func (l Labels) Key() string {
	var small [8]string
	keys := small[:0]
	n := 2
	for k, v := range l {
		keys = append(keys, k)
		n += len(k) + len(v) + 6
	}
	sort.Strings(keys)
	b := make([]byte, 0, n)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendJSONString(b, k)
		b = append(b, ':')
		b = AppendJSONString(b, l[k])
	}
	b = append(b, '}')
	// b is not used again: the key shares its bytes instead of copying them (one allocation
	// per key, where every new series makes one).
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// Clone returns a copy of l that the caller may modify.
func (l Labels) Clone() Labels {
	c := make(Labels, len(l)+1)
	for k, v := range l {
		c[k] = v
	}
	return c
}

// ParseKey parses a Key back into labels.
func ParseKey(key string) (Labels, error) {
	var l Labels
	if err := json.Unmarshal([]byte(key), &l); err != nil {
		return nil, fmt.Errorf("parse series key: %w", err)
	}
	if l == nil {
		return nil, errors.New("parse series key: not an object")
	}
	return l, nil
}

// Ref is a registered series: the handle a collector keeps between scans so that writing a value
// costs no lookup. Refs are made by Sink.Series; Labels, Kind and Key never change after that
// (the Sink neither changes nor clears them). ID belongs to the Sink (it may re-number a Ref
// whose series went unwritten for a while or whose history expired: the next write through it
// finds the series again by Key); collectors must not touch it.
type Ref struct {
	Labels Labels
	Key    string
	Kind   Kind
	ID     int32
}

// Sink receives the samples of one scan. A Sink is used by one scan at a time: collectors of the
// same scan run sequentially or synchronise among themselves; Sink methods are not safe for
// concurrent use.
type Sink interface {
	// Series returns the Ref of the series with these labels and kind, registering it on first
	// use. The Sink keeps labels; the caller must not modify the map afterwards. Collectors
	// should cache the Ref for as long as the thing it measures lives.
	Series(labels Labels, kind Kind) *Ref
	// Put records the value of r for the current scan. bits is the uint64 of a Counter, the
	// int64 of a Level converted to uint64, or math.Float64bits of a Float.
	Put(r *Ref, bits uint64)
	// PutState records the current value of a State series: its text and the unix-ms time the
	// state was entered (0: no state).
	PutState(r *Ref, sinceMs int64, text string)
	// Problem reports that source (a file path, a pid, a collector name) could not be read in
	// this scan and why. The agent logs each distinct (source, reason) once and lists the
	// problems of the latest scan in /api/v1/status. A problem does not stop the scan.
	Problem(source, reason string)
}

// Batch is a group of series that a collector writes together at every scan through a
// BatchSink (an application's values file). The collector keeps one Batch per group between
// scans, Refs holding the group's series in the order of its values; it may change Refs (the
// Sink notices). Sink belongs to the BatchSink, which keeps there how to find the group's
// series again without reading each Ref, and which it drops with the Batch; collectors must
// not touch it (as Ref.ID). A Batch is used by one scan at a time, like the Sink.
type Batch struct {
	Refs []*Ref
	Sink any
}

// BatchSink is a Sink that also takes the points of many series at once, for a collector that
// has a group's values together. PutBatch(b, bits) is Put(b.Refs[i], bits[i]) for each i,
// except that State Refs are skipped; bits is at least as long as b.Refs. Same goroutine rules
// as Put.
type BatchSink interface {
	Sink
	PutBatch(b *Batch, bits []uint64)
}

// Collector reads one kind of thing (the machine, processes, applications' files, plugins) into
// a Sink. Collect is called once per scan from the scan goroutine, never concurrently with
// itself; it must return promptly when ctx is done. A returned error means the whole collector
// failed for this scan; per-item failures are reported with Sink.Problem instead.
type Collector interface {
	Collect(ctx context.Context, sink Sink) error
}

// Sample is the latest value of one series as queries and exports see it. Its JSON form is the
// series object of the HTTP API: {"labels", "kind", "value", "ts"} plus "rate" for counters (when
// known) and "text", "since" for states.
type Sample struct {
	Labels  Labels
	Kind    Kind
	TS      int64   // unix ms of the scan that read it
	Bits    uint64  // raw value, as in Sink.Put
	Rate    float64 // per second, counters only
	HasRate bool
	Text    string // states only
	Since   int64  // states only: unix ms the state was entered, 0 for none
}

// Value returns the sample's value as a JSON-ready Go value: uint64, int64, float64 or, for a
// state, the text.
func (s *Sample) Value() any {
	return Decode(s.Kind, s.Bits)
}

// Float returns the value as a float64 (a state's value is its Since time).
func (s *Sample) Float() float64 {
	return ToFloat(s.Kind, s.Bits)
}

// Decode turns raw bits of kind k into uint64, int64 or float64.
func Decode(k Kind, bits uint64) any {
	switch k {
	case Counter:
		return bits
	case Level:
		return int64(bits)
	default:
		return math.Float64frombits(bits)
	}
}

// ToFloat converts raw bits of kind k to float64.
func ToFloat(k Kind, bits uint64) float64 {
	switch k {
	case Counter:
		return float64(bits)
	case Level:
		return float64(int64(bits))
	default:
		return math.Float64frombits(bits)
	}
}

// SourceLabel and SourcePush make the label source="push" that every series pushed to the
// agent (line protocol, statsd) carries and no collected series does: a push can never take the
// key of a machine, process or application series, and the registry keeps pushed series in a
// budget of their own.
const (
	SourceLabel = "source"
	SourcePush  = "push"
	// SourceRule marks the series recorded by Prometheus rule files (internal/promrules):
	// source="rule", which no collected or pushed series carries.
	SourceRule = "rule"
)
