package remote

import (
	"encoding/json"
	"errors"
	"math"
	"strconv"

	"github.com/cantal-go/cantal/internal/apiwire"
	"github.com/cantal-go/cantal/internal/series"
)

// wireMsg is a message of a peer's /api/v1/ws: a history chunk, an update or an error for the
// subscription named by ID.
type wireMsg struct {
	Type   string       `json:"type"`
	ID     string       `json:"id"`
	Error  string       `json:"error"`
	TS     int64        `json:"ts"`
	Series []wireSeries `json:"series"`
}

// wireSeries is one series of a wireMsg: points in a history chunk, the latest sample in an
// update.
type wireSeries struct {
	Labels series.Labels   `json:"labels"`
	Kind   series.Kind     `json:"kind"`
	Value  json.RawMessage `json:"value"`
	TS     int64           `json:"ts"`
	Rate   apiwire.Number  `json:"rate"` // absent when the sample has none; "NaN" and ±Inf as strings
	Text   string          `json:"text"`
	Since  int64           `json:"since"`
	Fn     string          `json:"fn"`
	Points wirePoints      `json:"points"`
}

// wirePoints are the points of a history chunk, [[ts, value], ...]: ts in unix ms, value a JSON
// number or one of the strings "NaN", "+Inf", "-Inf" (series.AppendFloat). The array decodes
// itself in one pass, without boxing each number in an interface: a new subscription's chunk is
// 150 points per series at the default interval, and a first cluster query decodes one chunk
// per peer.
type wirePoints []wirePoint

// wirePoint is one point of a history chunk.
type wirePoint struct {
	TS    int64
	Value float64
}

// errBadPoint is a history point that is not [ts, value].
var errBadPoint = errors.New("bad history point: want [unix ms, number]")

// UnmarshalJSON decodes the array (null: none). encoding/json hands it one valid JSON value.
func (ps *wirePoints) UnmarshalJSON(b []byte) error {
	d := pointDecoder{b: b}
	d.space()
	if d.lit("null") {
		*ps = nil
		return nil
	}
	if !d.byte('[') {
		return errBadPoint
	}
	out := (*ps)[:0]
	d.space()
	if d.byte(']') {
		*ps = out
		return nil
	}
	for {
		var p wirePoint
		if err := d.point(&p); err != nil {
			return err
		}
		out = append(out, p)
		d.space()
		if d.byte(']') {
			break
		}
		if !d.byte(',') {
			return errBadPoint
		}
		d.space()
	}
	*ps = out
	return nil
}

// pointDecoder reads wirePoints from valid JSON.
type pointDecoder struct {
	b []byte
	i int
}

func (d *pointDecoder) space() {
	for d.i < len(d.b) && (d.b[d.i] == ' ' || d.b[d.i] == '\t' || d.b[d.i] == '\n' || d.b[d.i] == '\r') {
		d.i++
	}
}

func (d *pointDecoder) byte(c byte) bool {
	if d.i < len(d.b) && d.b[d.i] == c {
		d.i++
		return true
	}
	return false
}

func (d *pointDecoder) lit(s string) bool {
	if len(d.b)-d.i >= len(s) && string(d.b[d.i:d.i+len(s)]) == s {
		d.i += len(s)
		return true
	}
	return false
}

// token returns the number at d.i (digits, sign, point, exponent).
func (d *pointDecoder) token() []byte {
	j := d.i
	for j < len(d.b) {
		c := d.b[j]
		if c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E' {
			j++
			continue
		}
		break
	}
	t := d.b[d.i:j]
	d.i = j
	return t
}

// point reads [ts, value].
func (d *pointDecoder) point(p *wirePoint) error {
	if !d.byte('[') {
		return errBadPoint
	}
	d.space()
	ts := d.token()
	if n, err := strconv.ParseInt(string(ts), 10, 64); err == nil {
		p.TS = n
	} else if f, err := strconv.ParseFloat(string(ts), 64); err == nil && f == math.Trunc(f) && math.Abs(f) < 1<<62 {
		p.TS = int64(f)
	} else {
		return errBadPoint
	}
	d.space()
	if !d.byte(',') {
		return errBadPoint
	}
	d.space()
	switch {
	case d.lit(`"NaN"`):
		p.Value = math.NaN()
	case d.lit(`"+Inf"`):
		p.Value = math.Inf(1)
	case d.lit(`"-Inf"`):
		p.Value = math.Inf(-1)
	default:
		f, err := strconv.ParseFloat(string(d.token()), 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return errBadPoint
		}
		p.Value = f
	}
	d.space()
	if !d.byte(']') {
		return errBadPoint
	}
	return nil
}

// sample returns the update's sample, and its value as a float.
func (ws *wireSeries) sample() (series.Sample, float64) {
	smp := series.Sample{Labels: ws.Labels, Kind: ws.Kind, TS: ws.TS, Text: ws.Text, Since: ws.Since}
	var v float64
	if ws.Kind != series.State {
		var n apiwire.Number // a number, or "NaN", "+Inf", "-Inf"; anything else is 0
		if n.UnmarshalJSON(ws.Value) == nil {
			v = n.F
		}
		smp.Bits = exactBits(ws.Kind, ws.Value, v)
	}
	if ws.Rate.Valid {
		smp.Rate, smp.HasRate = ws.Rate.F, true
	}
	return smp, v
}

// exactBits turns a JSON number back into the raw bits of kind k, exactly for integers.
func exactBits(k series.Kind, raw json.RawMessage, v float64) uint64 {
	switch k {
	case series.Counter:
		if u, err := strconv.ParseUint(string(raw), 10, 64); err == nil {
			return u
		}
	case series.Level:
		if i, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
			return uint64(i)
		}
	}
	return floatBits(k, v)
}

// floatBits turns a JSON number back into the raw bits of kind k.
func floatBits(k series.Kind, v float64) uint64 {
	switch k {
	case series.Counter:
		return uint64(v)
	case series.Level:
		return uint64(int64(v))
	}
	return math.Float64bits(v)
}

func withNode(l series.Labels, node string) series.Labels {
	c := l.Clone()
	c["node"] = node
	return c
}

// WithNode returns a copy of l with the node label set.
func WithNode(l series.Labels, node string) series.Labels { return withNode(l, node) }
