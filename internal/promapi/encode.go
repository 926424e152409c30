package promapi

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/cantal-go/cantal/internal/apiwire"
)

// The answers of query and query_range, written by hand: encoding/json spent four fifths of a
// 100-series, 1800-step query_range on them (reflection and a call of FPoint.MarshalJSON per
// point, each compacted, then the whole answer compacted again inside the envelope). The bytes
// are those encoding/json wrote (TestEncodeAsEncodingJSON): label sets through json.Marshal
// (its escaping), timestamps as its float64 encoding of seconds, values as FPoint.MarshalJSON
// writes them ('f' format, shortest, in a string).

// appendResult appends the JSON of a query's value (json.Marshal(v) for a value other than a
// float matrix, vector or scalar).
func appendResult(b []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case promql.Matrix:
		for _, s := range v {
			if len(s.Histograms) > 0 {
				return appendMarshal(b, v)
			}
		}
		b = append(b, '[')
		for i, s := range v {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendMetric(b, s.Metric); err != nil {
				return nil, err
			}
			if len(s.Floats) > 0 {
				b = append(b, `,"values":[`...)
				for k, p := range s.Floats {
					if k > 0 {
						b = append(b, ',')
					}
					b = appendPoint(b, p.T, p.F)
				}
				b = append(b, ']')
			}
			b = append(b, '}')
		}
		return append(b, ']'), nil
	case promql.Vector:
		for _, s := range v {
			if s.H != nil {
				return appendMarshal(b, v)
			}
		}
		b = append(b, '[')
		for i, s := range v {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendMetric(b, s.Metric); err != nil {
				return nil, err
			}
			b = append(b, `,"value":`...)
			b = appendPoint(b, s.T, s.F)
			b = append(b, '}')
		}
		return append(b, ']'), nil
	case promql.Scalar:
		return appendPoint(b, v.T, v.V), nil
	}
	return appendMarshal(b, v)
}

func appendMarshal(b []byte, v any) ([]byte, error) {
	j, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, j...), nil
}

// appendMetric appends `{"metric":` and the label set.
func appendMetric(b []byte, m json.Marshaler) ([]byte, error) {
	j, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	b = append(b, `{"metric":`...)
	return append(b, j...), nil
}

// appendPoint appends [seconds,"value"].
func appendPoint(b []byte, t int64, f float64) []byte {
	b = append(b, '[')
	b = appendSeconds(b, t)
	b = append(b, ',', '"')
	b = appendValue(b, f)
	return append(b, '"', ']')
}

// appendValue appends f as strconv.AppendFloat(b, f, 'f', -1, 64) does; a whole number below
// 10^15 (a counter, a byte count) as an integer, without formatting a float.
func appendValue(b []byte, f float64) []byte {
	if f >= -1e15 && f <= 1e15 && f == math.Trunc(f) && !(f == 0 && math.Signbit(f)) {
		return strconv.AppendInt(b, int64(f), 10)
	}
	return strconv.AppendFloat(b, f, 'f', -1, 64)
}

// appendSeconds appends a time in milliseconds as encoding/json writes float64(t)/1000. From 0
// to 10^15 ms (15 digits: the nearest float64 of t/1000 has no shorter decimal than t's own)
// that is t's digits with a point before the last three, trailing zeros dropped, written
// without formatting a float (a third of a large answer's time was that); other times go
// through appendJSONFloat.
func appendSeconds(b []byte, t int64) []byte {
	if t < 0 || t >= 1e15 {
		return appendJSONFloat(b, float64(t)/1000)
	}
	b = strconv.AppendInt(b, t/1000, 10)
	ms := t % 1000
	if ms == 0 {
		return b
	}
	d := [3]byte{byte('0' + ms/100), byte('0' + ms/10%10), byte('0' + ms%10)}
	n := 3
	for d[n-1] == '0' {
		n--
	}
	b = append(b, '.')
	return append(b, d[:n]...)
}

// appendJSONFloat appends f as encoding/json writes a float64.
func appendJSONFloat(b []byte, f float64) []byte {
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// peerPart is a query_range answer packed as apiwire's peer part, without its warnings and
// infos (the Handler's wrap appends them).
type peerPart []byte

// peerPartChunk is the most samples one XOR chunk of a peer part holds (a chunk counts them in
// 16 bits).
const peerPartChunk = 1024

// appendPeerPart appends m as apiwire's peer part: its series, their points in XOR chunks.
func appendPeerPart(b []byte, m promql.Matrix) ([]byte, error) {
	b = apiwire.AppendPeerSelectCount(apiwire.AppendPeerSelectHeader(b), len(m))
	var ps apiwire.PeerSeries
	for _, s := range m {
		if len(s.Histograms) > 0 {
			return nil, fmt.Errorf("series %s: histogram samples are not sent to peers", s.Metric)
		}
		ps.Labels, ps.Chunks = ps.Labels[:0], ps.Chunks[:0]
		s.Metric.Range(func(l labels.Label) { ps.Labels = append(ps.Labels, l.Name, l.Value) })
		for i := 0; i < len(s.Floats); i += peerPartChunk {
			c := chunkenc.NewXORChunk()
			app, err := c.Appender()
			if err != nil {
				return nil, err
			}
			for _, p := range s.Floats[i:min(i+peerPartChunk, len(s.Floats))] {
				app.Append(0, p.T, p.F)
			}
			ps.Chunks = append(ps.Chunks, c.Bytes())
		}
		b = apiwire.AppendPeerSeries(b, ps)
	}
	return b, nil
}
