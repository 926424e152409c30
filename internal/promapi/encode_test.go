package promapi

import (
	"bytes"
	"encoding/json"
	"math"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
)

// TestEncodeAsEncodingJSON: the answers written by hand are, byte for byte, those encoding/json
// wrote before (values of every kind, label sets that need escaping, warnings and infos).
func TestEncodeAsEncodingJSON(t *testing.T) {
	odd := labels.FromStrings(labels.MetricName, "x_total", "a", `<b>&"q"\`+"\n\u2028é\xff", "empty", "")
	floats := []promql.FPoint{{T: 0, F: 0}, {T: 1, F: math.Copysign(0, -1)}, {T: -1500, F: math.NaN()},
		{T: 1_700_000_000_123, F: math.Inf(1)}, {T: 1_700_000_000_120, F: math.Inf(-1)}, {T: 999, F: 1e-7},
		{T: 1e15, F: 1e21}, {T: -7, F: -123456789.125}, {T: 2, F: 0.1}, {T: 3, F: 5e-324}, {T: 4, F: math.MaxFloat64}}
	values := []parser.Value{
		promql.Matrix{},
		promql.Matrix{{Metric: odd, Floats: floats}, {Metric: labels.FromStrings("b", "c")}, {Metric: labels.EmptyLabels(), Floats: floats[:1]}},
		promql.Vector{},
		promql.Vector{{Metric: odd, T: 1_700_000_000_001, F: 42.5}, {Metric: labels.EmptyLabels(), T: -1, F: math.NaN()}},
		promql.Scalar{T: 1_700_000_000_999, V: -0.5},
		promql.Scalar{T: 5, V: math.Inf(-1)},
		promql.String{T: 12, V: `a "string" <x>`},
	}
	for _, v := range values {
		for _, notes := range [][2][]string{{nil, nil}, {{"w1", "<w2>"}, nil}, {nil, {"i"}}, {{"w"}, {"i1", "i2"}}} {
			old, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			want, err := json.Marshal(response{Status: "success", Data: queryData{ResultType: v.Type(), Result: json.RawMessage(old)},
				Warnings: notes[0], Infos: notes[1]})
			if err != nil {
				t.Fatal(err)
			}
			raw, err := appendResult(nil, v)
			if err != nil {
				t.Fatal(err)
			}
			w := httptest.NewRecorder()
			writeQueryAnswer(w, queryData{ResultType: v.Type(), Result: json.RawMessage(raw)}, notes[0], notes[1])
			if got := w.Body.Bytes(); !bytes.Equal(got, want) {
				t.Errorf("%s %v:\ngot  %s\nwant %s", v.Type(), notes, got, want)
			}
			if ct := w.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
		}
	}
}

// TestAppendSecondsAsEncodingJSON: a time written without formatting a float is the bytes
// encoding/json writes for float64(t)/1000, at the edges of the fast path and across it.
func TestAppendSecondsAsEncodingJSON(t *testing.T) {
	ts := []int64{0, 1, 9, 10, 99, 100, 101, 110, 999, 1000, 1001, 1010, 1100, 59_999, 1_700_000_000_000,
		1_700_000_000_001, 1_700_000_000_010, 1_700_000_000_100, 1_700_000_000_120, 1_795_828_105_552,
		1e15 - 1, 1e15, 1e15 + 1, -1, -1000, -1500, math.MaxInt64, math.MinInt64}
	for i := int64(0); i < 200_000; i++ {
		ts = append(ts, 1_700_000_000_000+i*7919, i*i*104729%1_000_000_000_000_000)
	}
	for _, v := range ts {
		want, err := json.Marshal(float64(v) / 1000)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendSeconds(nil, v); !bytes.Equal(got, want) {
			t.Fatalf("%d ms: %s, encoding/json %s", v, got, want)
		}
	}
}

// FuzzAppendSeconds: any time is written as encoding/json writes it.
func FuzzAppendSeconds(f *testing.F) {
	f.Add(int64(1_700_000_000_123))
	f.Add(int64(-5))
	f.Fuzz(func(t *testing.T, v int64) {
		want, err := json.Marshal(float64(v) / 1000)
		if err != nil {
			t.Fatal(err) // never: an int64 over 1000 is finite
		}
		if got := appendSeconds(nil, v); !bytes.Equal(got, want) {
			t.Fatalf("%d ms: %s, encoding/json %s", v, got, want)
		}
	})
}

// TestAppendValueAsAppendFloat: values written by appendValue are strconv's 'f' bytes, whole
// numbers at the edges of its integer path included.
func TestAppendValueAsAppendFloat(t *testing.T) {
	vs := []float64{0, math.Copysign(0, -1), 1, -1, 0.5, 1e15, -1e15, 1e15 + 1, 1e15 - 1, 1e16, -1e16, 123456789012345,
		math.NaN(), math.Inf(1), math.Inf(-1), 5e-324, math.MaxFloat64, 4503599627370496.5, 9007199254740993}
	for i := range 100_000 {
		vs = append(vs, float64(i*i), float64(i)*1.25, -float64(i)*1e9, float64(i)/3)
	}
	for _, v := range vs {
		if got, want := appendValue(nil, v), strconv.AppendFloat(nil, v, 'f', -1, 64); !bytes.Equal(got, want) {
			t.Fatalf("%v: %s, strconv %s", v, got, want)
		}
	}
}

// FuzzAppendValue: any value is written as strconv's 'f' writes it.
func FuzzAppendValue(f *testing.F) {
	f.Add(1.5)
	f.Add(1e15)
	f.Fuzz(func(t *testing.T, v float64) {
		if got, want := appendValue(nil, v), strconv.AppendFloat(nil, v, 'f', -1, 64); !bytes.Equal(got, want) {
			t.Fatalf("%v: %s, strconv %s", v, got, want)
		}
	})
}
