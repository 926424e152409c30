package shm

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
)

// Bits returns the raw 8 bytes of a counter, level or float entry in host byte order, as the
// agent's series.Sink.Put takes them: the uint64 of a counter, the int64 of a level converted to
// uint64, math.Float64bits of a float. values must be at least Layout.Size long (Reader.Read and
// CheckValues guarantee it); Bits does not allocate.
func (e *Entry) Bits(values []byte) uint64 {
	return binary.NativeEndian.Uint64(values[e.Offset : e.Offset+8])
}

// Counter returns the value of a counter entry.
func (e *Entry) Counter(values []byte) uint64 { return e.Bits(values) }

// Level returns the value of a signed level entry.
func (e *Entry) Level(values []byte) int64 { return int64(e.Bits(values)) }

// Float returns the value of a float level entry.
func (e *Entry) Float(values []byte) float64 { return math.Float64frombits(e.Bits(values)) }

// State returns the state of a state entry: the unix-ms time it was entered, or 0 if there is
// no state, and its text, which ends at the first NUL or fills the entry. As in the original
// agent, the text is returned whatever the time, also 0 (a cleared state keeps the text it
// had). text aliases values. text is whatever bytes the application wrote: callers that need
// valid UTF-8 must check or sanitise it. State does not allocate.
func (e *Entry) State(values []byte) (sinceMs int64, text []byte) {
	v := values[e.Offset : e.Offset+e.Size]
	sinceMs = int64(binary.NativeEndian.Uint64(v))
	text = v[8:]
	if i := bytes.IndexByte(text, 0); i >= 0 {
		text = text[:i]
	}
	return sinceMs, text
}

// CheckValues reports an error if values is too short for the layout.
func (l *Layout) CheckValues(values []byte) error {
	if len(values) < l.Size {
		return fmt.Errorf("values are %d bytes, the layout needs %d: %w", len(values), l.Size, ErrShortValues)
	}
	return nil
}
