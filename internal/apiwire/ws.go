package apiwire

import (
	"encoding/json"
	"errors"
	"math"
	"strconv"

	"github.com/cantal-go/cantal/internal/series"
)

// The WebSocket protocol of /api/v1/ws. Messages are JSON text frames; this file holds both
// directions: the client's WSRequest, and the agent's frames, written with AppendWSHead and
// WSErrorFrame (api's handler) and decoded into WSFrame (remote's peer sessions).
//
// Client → agent:
//
//	{"type": "subscribe", "id": "a", "match": "SEL", "history": "5m", "fn": "rate"}
//	{"type": "subscribe", "id": "b", "match": "SEL", "scope": "cluster"}
//	{"type": "unsubscribe", "id": "a"}
//
// Agent → client:
//
//	{"type": "history", "id": "a", "series": [{"labels", "kind", "points"}]}   once, when "history" was asked
//	{"type": "update", "id": "a", "ts": 1700000000000, "series": [series...]} after every scan
//	{"type": "error", "id": "a", "error": "..."}                              a bad request; the connection stays
//
// An update carries the latest value of every live series matching the selector (the series
// objects of /api/v1/metrics). With "scope": "cluster" the subscription covers every node: each
// node's updates are pushed as they arrive from it, as {"type": "update", "id", "node", "ts",
// "series"} with a "node" label on every series (the local node's after each local scan). Its
// "history" comes as one message per node ({"type": "history", "id", "node", "series"}; the
// peers' with their "status"). A subscription lasts until it is unsubscribed or the connection
// closes.

// WSRequest is a client's message. Its members are declared in the order encoding/json
// writes a map's keys, so that remote's requests are the bytes they were when it wrote maps.
type WSRequest struct {
	Fn      string `json:"fn,omitempty"`      // "rate" or empty
	History string `json:"history,omitempty"` // a Go duration: the history to send first
	ID      string `json:"id"`
	Match   string `json:"match,omitempty"`
	Scope   string `json:"scope,omitempty"` // "node" (empty) or "cluster"
	Type    string `json:"type"`            // subscribe or unsubscribe
}

// WSFrame is a message of the agent: a history chunk, an update or an error for the
// subscription named by ID.
type WSFrame struct {
	Type   string     `json:"type"`
	ID     string     `json:"id"`
	Node   string     `json:"node"`
	Status string     `json:"status"`
	Error  string     `json:"error"`
	TS     int64      `json:"ts"`
	Series []WSSeries `json:"series"`
}

// WSSeries is one series of a WSFrame: points in a history chunk, the latest sample in an
// update.
type WSSeries struct {
	Labels series.Labels   `json:"labels"`
	Kind   series.Kind     `json:"kind"`
	Value  json.RawMessage `json:"value"`
	TS     int64           `json:"ts"`
	Rate   Number          `json:"rate"` // absent when the sample has none; "NaN" and ±Inf as strings
	Text   string          `json:"text"`
	Since  int64           `json:"since"`
	Fn     string          `json:"fn"`
	Points WSPoints        `json:"points"`
}

// WSPoints are the points of a history chunk, [[ts, value], ...]: ts in unix ms, value a JSON
// number or one of the strings "NaN", "+Inf", "-Inf" (series.AppendFloat). The array decodes
// itself in one pass, without boxing each number in an interface: a new subscription's chunk is
// 150 points per series at the default interval, and a first cluster query decodes one chunk
// per peer.
type WSPoints []WSPoint

// WSPoint is one point of a history chunk.
type WSPoint struct {
	TS    int64
	Value float64
}

// errBadPoint is a history point that is not [ts, value].
var errBadPoint = errors.New("bad history point: want [unix ms, number]")

// UnmarshalJSON decodes the array (null: none). encoding/json hands it one valid JSON value.
func (ps *WSPoints) UnmarshalJSON(b []byte) error {
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
		var p WSPoint
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

// pointDecoder reads WSPoints, and HistorySeries' points (pointList), from valid JSON.
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

// end reports whether only white space is left.
func (d *pointDecoder) end() bool {
	d.space()
	return d.i == len(d.b)
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
func (d *pointDecoder) point(p *WSPoint) error {
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

// Sample returns the update's sample, and its value as a float.
func (ws *WSSeries) Sample() (series.Sample, float64) {
	smp := series.Sample{Labels: ws.Labels, Kind: ws.Kind, TS: ws.TS, Text: ws.Text, Since: ws.Since}
	var v float64
	if ws.Kind != series.State {
		var n Number // a number, or "NaN", "+Inf", "-Inf"; anything else is 0
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

// WithNode returns a copy of l with the node label set, as cluster answers label a node's
// series.
func WithNode(l series.Labels, node string) series.Labels {
	c := l.Clone()
	c["node"] = node
	return c
}

// AppendWSHead appends the start of a frame, {"type":typ,"id":id and ,"node":node when node
// is not empty (no closing brace). The id is quoted as Go quotes it (strconv.AppendQuote), as
// the agent has always written it.
func AppendWSHead(b []byte, typ, id, node string) []byte {
	b = append(b, `{"type":"`...)
	b = append(b, typ...)
	b = append(b, `","id":`...)
	b = strconv.AppendQuote(b, id)
	if node != "" {
		b = append(b, `,"node":`...)
		b = series.AppendJSONString(b, node)
	}
	return b
}

// WSError is the error frame: a refused request (ID its id, empty when the message could not
// be read) or, with Node, a peer's history not sent.
type WSError struct {
	Error string `json:"error"`
	ID    string `json:"id"`
	Node  string `json:"node,omitempty"`
	Type  string `json:"type"` // always "error"
}

// WSErrorFrame is the frame of an error for id (and node when not empty).
func WSErrorFrame(id, node, msg string) []byte {
	b, _ := json.Marshal(WSError{Error: msg, ID: id, Node: node, Type: "error"})
	return b
}
