package apiwire

import (
	"bytes"
	"encoding/json"
	"errors"
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

// errSlow is scanPoints' signal to take the generic path; it is never returned to a caller.
var errSlow = errors.New("apiwire: not a plain point list")

// scanPoints appends the points of b, a JSON array of [integer, value] pairs, to pts; ok is
// false for anything it does not read (another shape, null, whitespace inside a literal,
// escapes, an error), which the caller then decodes generically. A value's literal is kept
// in Number.Raw only where series.AppendFloat would not write it back byte for byte, so
// re-encoding gives the bytes decoded.
func scanPoints(b []byte, pts []Point) (_ []Point, ok bool) {
	s := pointScanner{b: b}
	if err := s.scan(&pts); err != nil {
		return nil, false
	}
	return pts, true
}

type pointScanner struct {
	b   []byte
	i   int
	buf [32]byte
}

func (s *pointScanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *pointScanner) eat(c byte) bool {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// token returns the bytes up to the next ',', ']' or whitespace.
func (s *pointScanner) token() []byte {
	s.ws()
	j := s.i
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ',', ']', ' ', '\t', '\n', '\r':
			return s.b[j:s.i]
		}
		s.i++
	}
	return s.b[j:s.i]
}

func (s *pointScanner) scan(pts *[]Point) error {
	if !s.eat('[') {
		return errSlow
	}
	if s.eat(']') {
		s.ws()
		if s.i != len(s.b) {
			return errSlow
		}
		if *pts == nil {
			*pts = []Point{}
		}
		return nil
	}
	for {
		if !s.eat('[') {
			return errSlow
		}
		tsLit := s.token()
		if !isJSONNumber(tsLit) {
			return errSlow
		}
		ts, err := strconv.ParseInt(string(tsLit), 10, 64)
		if err != nil {
			return errSlow // not an integer, or beyond int64: the generic path's error
		}
		if !s.eat(',') {
			return errSlow
		}
		v, err := s.value()
		if err != nil {
			return err
		}
		if !s.eat(']') {
			return errSlow
		}
		*pts = append(*pts, Point{TS: ts, Value: v})
		if s.eat(']') {
			break
		}
		if !s.eat(',') {
			return errSlow
		}
	}
	s.ws()
	if s.i != len(s.b) {
		return errSlow
	}
	return nil
}

// value reads a point's value as Number.UnmarshalJSON would, without keeping a literal that
// series.AppendFloat writes back unchanged.
func (s *pointScanner) value() (Number, error) {
	lit := s.token()
	var n Number
	if len(lit) > 0 && (lit[0] == '"' || lit[0] == 'n') {
		if err := n.UnmarshalJSON(lit); err != nil {
			return n, errSlow
		}
		return n, nil
	}
	if !isJSONNumber(lit) {
		return n, errSlow
	}
	f, err := strconv.ParseFloat(string(lit), 64)
	if err != nil {
		return n, errSlow // out of range: the generic path keeps the literal
	}
	n = Number{F: f, Valid: true}
	if !bytes.Equal(series.AppendFloat(s.buf[:0], f), lit) {
		n.Raw = string(lit)
	}
	return n, nil
}
