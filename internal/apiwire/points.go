package apiwire

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"

	"github.com/cantal-go/cantal/internal/series"
)

// pointList is a history series' points as decoded: [[unix_ms, value], ...]. Its decoder reads
// the points the agent writes ([integer, number or "NaN"/"+Inf"/"-Inf"], no escapes) in one pass
// with no allocation per point; anything else it hands to Point.UnmarshalJSON, the one
// definition of what a point is, so both paths accept and refuse exactly the same inputs.
type pointList []Point

// UnmarshalJSON implements json.Unmarshaler.
func (l *pointList) UnmarshalJSON(b []byte) error {
	pts := (*l)[:0]
	if n := bytes.Count(b, []byte{']'}) - 1; n > cap(pts) {
		pts = make([]Point, 0, n) // one ']' a point: at most that many
	}
	if pts, ok := scanPoints(b, pts); ok {
		*l = pts
		return nil
	}
	var generic []Point
	if err := json.Unmarshal(b, &generic); err != nil {
		return err
	}
	*l = generic
	return nil
}

// scanPoints appends the points of b, a JSON array of [integer, value] pairs, to pts; ok is
// false for anything it does not read (another shape, null, escapes, an error), which the
// caller then decodes generically. It shares WSPoints' lexer (pointDecoder). A value's literal
// is kept in Number.Raw only where series.AppendFloat would not write it back byte for byte,
// so re-encoding gives the bytes decoded.
func scanPoints(b []byte, pts []Point) (_ []Point, ok bool) {
	d := pointDecoder{b: b}
	d.space()
	if !d.byte('[') {
		return nil, false
	}
	d.space()
	if d.byte(']') {
		if pts == nil {
			pts = []Point{}
		}
		return pts, d.end()
	}
	var buf [32]byte
	for {
		d.space()
		if !d.byte('[') {
			return nil, false
		}
		d.space()
		lit := d.token()
		if !isJSONNumber(lit) {
			return nil, false
		}
		ts, err := strconv.ParseInt(string(lit), 10, 64)
		if err != nil {
			return nil, false // not an integer, or beyond int64: the generic path's error
		}
		d.space()
		if !d.byte(',') {
			return nil, false
		}
		d.space()
		var v Number
		switch {
		case d.lit(`"NaN"`):
			v = Number{F: math.NaN(), Valid: true}
		case d.lit(`"+Inf"`), d.lit(`"Inf"`):
			v = Number{F: math.Inf(1), Valid: true}
		case d.lit(`"-Inf"`):
			v = Number{F: math.Inf(-1), Valid: true}
		case d.lit("null"):
		default:
			lit := d.token()
			if !isJSONNumber(lit) {
				return nil, false
			}
			f, err := strconv.ParseFloat(string(lit), 64)
			if err != nil {
				return nil, false // out of range: the generic path keeps the literal
			}
			v = Number{F: f, Valid: true}
			if !bytes.Equal(series.AppendFloat(buf[:0], f), lit) {
				v.Raw = string(lit)
			}
		}
		d.space()
		if !d.byte(']') {
			return nil, false
		}
		pts = append(pts, Point{TS: ts, Value: v})
		d.space()
		if d.byte(']') {
			return pts, d.end()
		}
		if !d.byte(',') {
			return nil, false
		}
	}
}
