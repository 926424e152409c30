package ingest

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/cantal-go/cantal/internal/series"
	"github.com/influxdata/line-protocol/v2/lineprotocol"
)

// Precision is the unit of the timestamps of a /write body, as named by InfluxDB's `precision`
// parameter.
type Precision int64

// The precisions of InfluxDB v1 (n, u, ms, s, m, h) and v2 (ns, us, ms, s). The value is the
// number of nanoseconds of one unit.
const (
	Nanosecond  Precision = 1
	Microsecond Precision = 1e3
	Millisecond Precision = 1e6
	Second      Precision = 1e9
	Minute      Precision = 60e9
	Hour        Precision = 3600e9
)

// ParsePrecision parses the `precision` parameter of an InfluxDB write request: "", "n", "ns"
// (nanoseconds, the default), "u", "us", "µ", "µs", "ms", "s", "m" or "h".
func ParsePrecision(s string) (Precision, error) {
	switch s {
	case "", "n", "ns":
		return Nanosecond, nil
	case "u", "us", "µ", "µs":
		return Microsecond, nil
	case "ms":
		return Millisecond, nil
	case "s":
		return Second, nil
	case "m":
		return Minute, nil
	case "h":
		return Hour, nil
	}
	return 0, fmt.Errorf("invalid precision %q (want ns, u, ms, s, m or h)", s)
}

// Point is one field of one line of line protocol, turned into a series value.
type Point struct {
	Line   int    // one-based line number in the body
	Metric string // "<measurement>.<field>"
	Tags   []kv   // sorted by key, shared by the points of one line
	Kind   series.Kind
	Bits   uint64 // as in series.Sink.Put
	Text   string // State (string field) only
	TS     int64  // unix ms
}

// Labels returns the series' labels: {"metric": Metric, tag...}.
func (p *Point) Labels() series.Labels {
	l := make(series.Labels, len(p.Tags)+1)
	for _, t := range p.Tags {
		l[t.k] = t.v
	}
	l["metric"] = p.Metric
	return l
}

// LineError is the reason one line of a body was rejected.
type LineError struct {
	Line int    // one-based line number in the body
	Text string // the line, cut to 120 bytes
	Err  error
}

// Error implements error in InfluxDB's words: "unable to parse '<line>': <reason>".
func (e *LineError) Error() string {
	return fmt.Sprintf("line %d: unable to parse '%s': %v", e.Line, e.Text, e.Err)
}

// Unwrap returns the reason.
func (e *LineError) Unwrap() error { return e.Err }

// maxLineText is how much of a bad line an error message quotes.
const maxLineText = 120

// ParseLines decodes an InfluxDB line-protocol body into points, one per field, in order.
// Lines without a timestamp get nowNs. Each bad line is reported once, with its one-based line
// number, and yields no point: the valid lines of the same body are still returned. Blank lines
// and comments (#) are skipped. A line whose string field spans physical lines is numbered by
// the line it starts on.
//
// Field types map to kinds: float → Float, integer (i) → Level, unsigned (u) → Counter,
// boolean → Level 0/1, string → State. A tag named "metric" is rejected (the label is the
// series' name), as are duplicate tag or field keys and non-UTF-8 text.
func ParseLines(body []byte, prec Precision, nowNs int64) ([]Point, []*LineError) {
	var (
		points []Point
		errs   []*LineError
		sc     = lineScanner{buf: body, line: 1}
	)
	for {
		entry, line, ok := sc.next()
		if !ok {
			break
		}
		start := len(points)
		var err error
		points, err = parseEntry(points, entry, line, prec, nowNs)
		if err != nil {
			points = points[:start]
			errs = append(errs, &LineError{Line: lineOf(err, line), Text: cut(entry), Err: stripPos(err)})
		}
	}
	return points, errs
}

type kv struct{ k, v string }

func parseEntry(points []Point, entry []byte, line int, prec Precision, nowNs int64) ([]Point, error) {
	var tags []kv
	dec := lineprotocol.NewDecoderWithBytes(entry)
	if !dec.Next() {
		return points, errors.New("empty line")
	}
	m, err := dec.Measurement()
	if err != nil {
		return points, err
	}
	if !utf8.Valid(m) {
		return points, errors.New("measurement is not valid UTF-8")
	}
	measurement := string(m)
	for {
		k, v, err := dec.NextTag()
		if err != nil {
			return points, err
		}
		if k == nil {
			break
		}
		if !utf8.Valid(k) || !utf8.Valid(v) {
			return points, fmt.Errorf("tag %q is not valid UTF-8", k)
		}
		if string(k) == "metric" {
			return points, errors.New(`tag key "metric" is reserved for the series name`)
		}
		for _, t := range tags {
			if t.k == string(k) {
				return points, fmt.Errorf("duplicate tag key %q", k)
			}
		}
		tags = append(tags, kv{string(k), string(v)})
	}
	sortTags(tags)
	first := len(points)
	for {
		k, v, err := dec.NextField()
		if err != nil {
			return points, err
		}
		if k == nil {
			break
		}
		if !utf8.Valid(k) {
			return points, fmt.Errorf("field key %q is not valid UTF-8", k)
		}
		name := measurement + "." + string(k)
		for _, p := range points[first:] {
			if p.Metric == name {
				return points, fmt.Errorf("duplicate field key %q", k)
			}
		}
		p := Point{Line: line, Metric: name, Tags: tags}
		switch v.Kind() {
		case lineprotocol.Float:
			p.Kind, p.Bits = series.Float, math.Float64bits(v.FloatV())
		case lineprotocol.Int:
			p.Kind, p.Bits = series.Level, uint64(v.IntV())
		case lineprotocol.Uint:
			p.Kind, p.Bits = series.Counter, v.UintV()
		case lineprotocol.Bool:
			p.Kind = series.Level
			if v.BoolV() {
				p.Bits = 1
			}
		case lineprotocol.String:
			s := v.StringV()
			if !utf8.ValidString(s) {
				return points, fmt.Errorf("field %q is not valid UTF-8", k)
			}
			p.Kind, p.Text = series.State, s
		default:
			return points, fmt.Errorf("field %q has unknown type", k)
		}
		points = append(points, p)
	}
	if len(points) == first {
		return points, errors.New("no fields")
	}
	tb, err := dec.TimeBytes()
	if err != nil {
		return points, err
	}
	ns := nowNs
	if tb != nil {
		ts, err := strconv.ParseInt(string(tb), 10, 64)
		if err != nil {
			return points, fmt.Errorf("invalid timestamp %q: %w", tb, err)
		}
		if ts > math.MaxInt64/int64(prec) || ts < math.MinInt64/int64(prec) {
			return points, fmt.Errorf("timestamp %d%s out of range", ts, precName(prec))
		}
		ns = ts * int64(prec)
	}
	if dec.Next() {
		// The scanner split the body where the decoder sees more than one entry: a stray
		// newline inside a quoted string the scanner did not recognise as such.
		return points, errors.New("unexpected text after the timestamp")
	}
	ms := ns / 1e6
	for i := first; i < len(points); i++ {
		points[i].TS = ms
	}
	return points, nil
}

func precName(p Precision) string {
	switch p {
	case Nanosecond:
		return "ns"
	case Microsecond:
		return "us"
	case Millisecond:
		return "ms"
	case Second:
		return "s"
	case Minute:
		return "m"
	case Hour:
		return "h"
	}
	return "?"
}

// lineOf returns the body line of err: the decoder numbers lines within the entry.
func lineOf(err error, entryLine int) int {
	var de *lineprotocol.DecodeError
	if errors.As(err, &de) && de.Line >= 1 {
		return entryLine + int(de.Line) - 1
	}
	return entryLine
}

// stripPos returns the reason of a decoder error without its entry-relative position.
func stripPos(err error) error {
	var de *lineprotocol.DecodeError
	if errors.As(err, &de) {
		return fmt.Errorf("column %d: %w", de.Column, de.Err)
	}
	return err
}

func cut(b []byte) string {
	b = bytes.TrimRight(b, "\r\n")
	if len(b) > maxLineText {
		b = b[:maxLineText]
		for len(b) > 0 && !utf8.Valid(b) {
			b = b[:len(b)-1]
		}
		return string(b) + "..."
	}
	return string(b)
}

// lineScanner splits a line-protocol body into entries the way InfluxDB 1.x does: at newlines,
// except inside a double-quoted string field value. Blank lines and comments are skipped.
type lineScanner struct {
	buf  []byte
	pos  int
	line int // line number at pos
}

func (s *lineScanner) next() (entry []byte, line int, ok bool) {
	for s.pos < len(s.buf) {
		// Skip leading blanks, then blank lines and comments.
		i := s.pos
		for i < len(s.buf) && (s.buf[i] == ' ' || s.buf[i] == '\t' || s.buf[i] == '\r') {
			i++
		}
		if i == len(s.buf) {
			s.pos = i
			return nil, 0, false
		}
		if s.buf[i] == '\n' || s.buf[i] == '#' {
			j := bytes.IndexByte(s.buf[i:], '\n')
			if j < 0 {
				s.pos = len(s.buf)
				return nil, 0, false
			}
			s.pos = i + j + 1
			s.line++
			continue
		}
		start, line := i, s.line
		end, newlines := scanEntry(s.buf, i)
		s.line += newlines
		s.pos = end
		if end < len(s.buf) { // at '\n'
			s.pos++
			s.line++
		}
		return s.buf[start:end], line, true
	}
	return nil, 0, false
}

// scanEntry returns the end of the entry starting at i (the index of its terminating newline,
// or len(buf)) and how many newlines it holds inside quoted strings. It follows InfluxDB 1.x's
// scanLine: a double quote opens or closes a string only in the field section, in a value.
func scanEntry(buf []byte, i int) (end, newlines int) {
	var quoted, fields bool
	var equals, commas int
	for i < len(buf) {
		c := buf[i]
		if c == '\\' && i+1 < len(buf) && buf[i+1] != '\n' {
			i += 2
			continue
		}
		if c == ' ' && !quoted {
			fields = true
		}
		if fields && !quoted && c == '=' {
			equals++
		} else if fields && !quoted && c == ',' {
			commas++
		} else if fields && c == '"' && equals > commas {
			quoted = !quoted
		} else if c == '\n' {
			if !quoted {
				return i, newlines
			}
			newlines++
		}
		i++
	}
	return i, newlines
}
