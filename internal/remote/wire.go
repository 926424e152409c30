package remote

import (
	"encoding/json"
	"math"
	"strconv"

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
	Rate   *float64        `json:"rate"`
	Text   string          `json:"text"`
	Since  int64           `json:"since"`
	Fn     string          `json:"fn"`
	Points [][2]any        `json:"points"`
}

// sample returns the update's sample, and its value as a float.
func (ws *wireSeries) sample() (series.Sample, float64) {
	smp := series.Sample{Labels: ws.Labels, Kind: ws.Kind, TS: ws.TS, Text: ws.Text, Since: ws.Since}
	v := parseNum(ws.Value)
	if ws.Kind != series.State {
		smp.Bits = exactBits(ws.Kind, ws.Value, v)
	}
	if ws.Rate != nil {
		smp.Rate, smp.HasRate = *ws.Rate, true
	}
	return smp, v
}

func parseNum(raw json.RawMessage) float64 {
	var f float64
	if json.Unmarshal(raw, &f) == nil {
		return f
	}
	var str string
	json.Unmarshal(raw, &str)
	return parseFloatString(str)
}

func anyNum(v any) float64 {
	switch x := v.(type) {
	case float64:
		return x
	case string:
		return parseFloatString(x)
	}
	return 0
}

func parseFloatString(s string) float64 {
	switch s {
	case "NaN":
		return math.NaN()
	case "+Inf":
		return math.Inf(1)
	case "-Inf":
		return math.Inf(-1)
	}
	f, _ := strconv.ParseFloat(s, 64)
	return f
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
