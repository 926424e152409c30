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

	// OTLP: acc adds Bits to the series' running total (a delta sum); hist holds a histogram
	// point's buckets (on its count series), kept when histDelta is false.
	acc       bool
	hist      []bucket
	histDelta bool
}

// Labels returns the labels the line gives the series: {"metric": Metric, tag...}. A Push adds
// source="push" to them.
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
	Text string // the line, cut to 64 bytes
	Err  error
}

// Error implements error in InfluxDB's words: "unable to parse '<line>': <reason>".
func (e *LineError) Error() string {
	return fmt.Sprintf("line %d: unable to parse '%s': %v", e.Line, e.Text, e.Err)
}

// Unwrap returns the reason.
func (e *LineError) Unwrap() error { return e.Err }

// maxLineText is how much of a bad line an error message quotes, and maxQuote how much of a
// name or token.
const (
	maxLineText = 64
	maxQuote    = 64
)

// maxReason bounds the text of a reason given by the line-protocol decoder, which quotes the
// keys and tokens it trips on whatever their length.
const maxReason = 160

// ParseLines decodes an InfluxDB line-protocol body into points, one per field, in order.
// Lines without a timestamp get nowNs. Each bad line is reported once, with its one-based line
// number, and yields no point: the valid lines of the same body are still returned. Blank lines
// and comments (#) are skipped. A line whose string field spans physical lines is numbered by
// the line it starts on.
//
// Field types map to kinds: float → Float, integer (i) → Level, unsigned (u) → Counter,
// boolean → Level 0/1, string → State. A tag named "metric" is rejected (the label is the
// series' name), as are duplicate tag or field keys and non-UTF-8 text.
//
// ParseLines holds the whole body and every point; it applies none of a Push's limits. The
// /write handler decodes a body as it arrives instead, with the same rules plus the limits of
// Config and the "source" tag rule (see the package doc).
func ParseLines(body []byte, prec Precision, nowNs int64) ([]Point, []*LineError) {
	var (
		points []Point
		errs   []*LineError
		line   = 1
	)
	for len(body) > 0 {
		adv, entry, before, after, _ := splitEntry(body, true)
		body = body[adv:]
		line += before
		if entry != nil {
			start := len(points)
			var err error
			points, err = parseEntry(points, entry, line, prec, nowNs, nil)
			if err != nil {
				points = points[:start]
				errs = append(errs, &LineError{Line: lineOf(err, line), Text: cut(entry), Err: reason(err)})
			}
		}
		line += after
	}
	return points, errs
}

type kv struct{ k, v string }

// parseEntry appends the points of one entry (a line) to points. rules, when not nil, are the
// limits of a Push, applied as the line is read.
func parseEntry(points []Point, entry []byte, line int, prec Precision, nowNs int64, rules *labelRules) ([]Point, error) {
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
		if rules != nil {
			keep, err := tagRule(rules, k, v)
			if err != nil {
				return points, err
			}
			if !keep {
				continue
			}
		}
		if !utf8.Valid(k) || !utf8.Valid(v) {
			return points, fmt.Errorf("tag %s is not valid UTF-8", quote(k))
		}
		if string(k) == "metric" {
			return points, errors.New(`tag key "metric" is reserved for the series name`)
		}
		for _, t := range tags {
			if t.k == string(k) {
				return points, fmt.Errorf("duplicate tag key %s", quote(k))
			}
		}
		tags = append(tags, kv{string(k), string(v)})
		if rules != nil {
			if err := rules.count(len(tags)); err != nil {
				return points, err
			}
		}
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
			return points, fmt.Errorf("field key %s is not valid UTF-8", quote(k))
		}
		if rules != nil {
			if err := rules.metric(len(measurement) + 1 + len(k)); err != nil {
				return points, err
			}
		}
		name := measurement + "." + string(k)
		for _, p := range points[first:] {
			if p.Metric == name {
				return points, fmt.Errorf("duplicate field key %s", quote(k))
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
			if rules != nil && len(s) > rules.maxValue {
				return points, fmt.Errorf("string field %s: %d bytes exceeds the limit of %d", quote(k), len(s), rules.maxValue)
			}
			if !utf8.ValidString(s) {
				return points, fmt.Errorf("field %s is not valid UTF-8", quote(k))
			}
			p.Kind, p.Text = series.State, s
		default:
			return points, fmt.Errorf("field %s has unknown type", quote(k))
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
			return points, fmt.Errorf("invalid timestamp %s", quote(tb))
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

// reason returns the reason of a parse error without the decoder's entry-relative position,
// its text cut to maxReason bytes: the decoder quotes the keys and tokens it trips on.
func reason(err error) error {
	var de *lineprotocol.DecodeError
	if errors.As(err, &de) {
		err = fmt.Errorf("column %d: %w", de.Column, de.Err)
	}
	if s := err.Error(); len(s) > maxReason {
		return errors.New(cutString(s, maxReason) + "...")
	}
	return err
}

// quote returns b quoted as by %q, cut to maxQuote bytes (then followed by "...").
func quote[T ~string | ~[]byte](b T) string {
	if len(b) > maxQuote {
		return strconv.Quote(cutString(string(b[:maxQuote]), maxQuote)) + "..."
	}
	return strconv.Quote(string(b))
}

// cutString returns s cut to at most n bytes, at a UTF-8 boundary when s is valid UTF-8.
func cutString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for i := 0; i < utf8.UTFMax && len(s) > 0 && !utf8.ValidString(s); i++ {
		s = s[:len(s)-1]
	}
	return s
}

func cut(b []byte) string {
	b = bytes.TrimRight(b, "\r\n")
	if len(b) > maxLineText {
		return cutString(string(b[:maxLineText]), maxLineText) + "..."
	}
	return string(b)
}

// splitEntry finds the first entry (a line of line protocol) in buf the way InfluxDB 1.x splits a
// body: at newlines, except inside a double-quoted string field value. Leading blanks, blank
// lines and comments (#) before it are skipped. It returns the bytes to advance past the entry
// and its terminating newline, the entry (nil when buf holds none), the newlines skipped before
// it and those inside and after it. When atEOF is false, buf may end in the middle of an entry
// or comment: then entry is nil, advance covers what was skipped before it, and more is true
// (call again with more input).
func splitEntry(buf []byte, atEOF bool) (advance int, entry []byte, before, after int, more bool) {
	i := 0
	for {
		for i < len(buf) && (buf[i] == ' ' || buf[i] == '\t' || buf[i] == '\r') {
			i++
		}
		if i == len(buf) {
			return i, nil, before, 0, !atEOF
		}
		switch buf[i] {
		case '\n':
			i++
			before++
			continue
		case '#':
			j := bytes.IndexByte(buf[i:], '\n')
			if j < 0 {
				if atEOF {
					return len(buf), nil, before, 0, false
				}
				return i, nil, before, 0, true
			}
			i += j + 1
			before++
			continue
		}
		end, newlines := scanEntry(buf, i)
		switch {
		case end < len(buf): // at '\n'
			return end + 1, buf[i:end], before, newlines + 1, false
		case atEOF:
			return end, buf[i:end], before, newlines, false
		}
		return i, nil, before, 0, true
	}
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
