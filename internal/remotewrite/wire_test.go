package remotewrite

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/golang/snappy"
	"google.golang.org/protobuf/encoding/protowire"
)

// sample and tseries are a decoded WriteRequest, for tests.
type sample struct {
	TS int64
	V  float64
}

type tseries struct {
	Labels  []Label
	Samples []sample
}

// decodeRequest decodes a snappy-compressed remote-write 1.0 WriteRequest with protowire: an
// independent reading of the wire format (the bench module checks it against prompb too).
func decodeRequest(body []byte) ([]tseries, error) {
	b, err := snappy.Decode(nil, body)
	if err != nil {
		return nil, fmt.Errorf("snappy: %w", err)
	}
	var out []tseries
	err = eachField(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if num != 1 || typ != protowire.BytesType {
			return nil
		}
		var ts tseries
		err := eachField(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
			switch {
			case num == 1 && typ == protowire.BytesType:
				var l Label
				err := eachField(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
					if typ != protowire.BytesType {
						return errors.New("label field not bytes")
					}
					if num == 1 {
						l.Name = string(v)
					} else if num == 2 {
						l.Value = string(v)
					}
					return nil
				})
				ts.Labels = append(ts.Labels, l)
				return err
			case num == 2 && typ == protowire.BytesType:
				var s sample
				err := eachField(v, func(num protowire.Number, typ protowire.Type, _ []byte, x uint64) error {
					switch {
					case num == 1 && typ == protowire.Fixed64Type:
						s.V = math.Float64frombits(x)
					case num == 2 && typ == protowire.VarintType:
						s.TS = int64(x)
					default:
						return errors.New("unexpected sample field")
					}
					return nil
				})
				ts.Samples = append(ts.Samples, s)
				return err
			}
			return nil
		})
		out = append(out, ts)
		return err
	})
	return out, err
}

func eachField(b []byte, fn func(protowire.Number, protowire.Type, []byte, uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var v []byte
		var x uint64
		switch typ {
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		case protowire.Fixed64Type:
			x, n = protowire.ConsumeFixed64(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if err := fn(num, typ, v, x); err != nil {
			return err
		}
	}
	return nil
}

func TestWireRoundTrip(t *testing.T) {
	lbls := []Label{{"__name__", "up"}, {"instance", "n:22682"}, {"job", "ü"}}
	enc := AppendLabels(nil, lbls)
	var req []byte
	req = AppendSeries1(req, enc, 1700000000123, 42.5)
	if got, want := len(req), SeriesSize(len(enc), 1700000000123); got != want {
		t.Errorf("AppendSeries1 wrote %d bytes; SeriesSize says %d", got, want)
	}
	req = AppendSeries(req, enc, []int64{1, 2, -3}, []float64{math.Inf(1), math.Float64frombits(staleNaN), -0.0})
	got, err := decodeRequest(Compress(nil, req))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("decoded %d series; want 2", len(got))
	}
	for _, ts := range got {
		if fmt.Sprint(ts.Labels) != fmt.Sprint(lbls) {
			t.Errorf("labels %v; want %v", ts.Labels, lbls)
		}
	}
	if s := got[0].Samples; len(s) != 1 || s[0].TS != 1700000000123 || s[0].V != 42.5 {
		t.Errorf("first series samples %v", s)
	}
	s := got[1].Samples
	if len(s) != 3 || s[0].TS != 1 || !math.IsInf(s[0].V, 1) || s[2].TS != -3 || math.Float64bits(s[2].V) != math.Float64bits(-0.0) {
		t.Errorf("second series samples %v", s)
	}
	if b := math.Float64bits(s[1].V); b == staleNaN || !math.IsNaN(s[1].V) {
		t.Errorf("a NaN was sent as %#x; want a NaN that is not the staleness marker", b)
	}
}

func BenchmarkAppendSeries1(b *testing.B) {
	enc := AppendLabels(nil, []Label{{"__name__", "node_cpu_seconds_total"}, {"cpu", "0"}, {"instance", "node1:22682"}, {"mode", "user"}, {"node", "node1"}})
	buf := make([]byte, 0, 1<<20)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if len(buf) > 1<<19 {
			buf = buf[:0]
		}
		buf = AppendSeries1(buf, enc, 1700000000000+int64(i)*2000, float64(i))
	}
}
