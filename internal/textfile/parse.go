package textfile

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Type is a family's type as its TYPE line says (untyped when it has none). The lines of a
// histogram or summary are families of their own here (<name>_bucket, <name>_sum,
// <name>_count, <name> with quantile): Untyped.
type Type uint8

// The types.
const (
	Untyped Type = iota
	Counter
	Gauge
)

// Label is one label pair.
type Label struct{ Name, Value string }

// Sample is one line of a file: a series and its value.
type Sample struct {
	Name   string
	Labels []Label // sorted by name; empty values left out (Prometheus treats them as absent)
	Value  float64
	key    string // seriesKey of Name and Labels
}

// File is a parsed file: its samples, in the order of their families' names, and the type of
// each family written.
type File struct {
	Samples []Sample
	Types   map[string]Type
	Help    map[string]string // families with a HELP line
}

// Reserved label names a file may not use: "metric" names a series in Cantal and "textfile"
// says which file a series came from. A label source="push" is refused too: it marks pushed
// series (series.SourceLabel).
const (
	MetricLabel   = "metric"
	TextfileLabel = "textfile"
)

// ParseError is a file the parser refused: Line is its line number when known (0 if not).
// Its message never quotes the file.
type ParseError struct {
	Line int
	Msg  string
}

func (e *ParseError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
	}
	return e.Msg
}

// Parse parses a whole file in the Prometheus text format 0.0.4 with prometheus/common's
// parser (legacy metric and label names, as node_exporter 1.5), all or nothing: any error
// refuses the whole file. Beyond what the parser refuses (malformed lines, a second HELP or
// TYPE line of a family), Parse refuses, as node_exporter does, samples with client-side
// timestamps, and, for Cantal, the same series twice and the reserved labels (MetricLabel,
// TextfileLabel, source="push"). Errors never quote the file.
func Parse(b []byte) (*File, error) {
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(b))
	if err != nil {
		var pe expfmt.ParseError
		if errors.As(err, &pe) {
			return nil, &ParseError{Line: pe.Line, Msg: "not in the Prometheus text format"}
		}
		return nil, &ParseError{Msg: "not in the Prometheus text format"}
	}
	names := make([]string, 0, len(fams))
	for n := range fams {
		names = append(names, n)
	}
	slices.Sort(names)
	f := &File{Types: make(map[string]Type, len(fams)), Help: map[string]string{}}
	seen := map[string]bool{}
	for _, name := range names {
		mf := fams[name]
		for _, m := range mf.GetMetric() {
			if m.TimestampMs != nil {
				return nil, &ParseError{Msg: "family " + name + " has client-side timestamps, which are not supported"}
			}
			var ls []Label
			for _, lp := range m.GetLabel() {
				n, v := lp.GetName(), lp.GetValue()
				if n == MetricLabel || n == TextfileLabel || (n == "source" && v == "push") {
					return nil, &ParseError{Msg: "family " + name + " uses the reserved label " + strconv.Quote(n)}
				}
				if v != "" {
					ls = append(ls, Label{n, v})
				}
			}
			slices.SortFunc(ls, func(a, b Label) int { return strings.Compare(a.Name, b.Name) })
			add := func(n string, extra *Label, v float64, typ Type) error {
				l := ls
				if extra != nil {
					l = append(slices.Clone(ls), *extra)
					slices.SortFunc(l, func(a, b Label) int { return strings.Compare(a.Name, b.Name) })
				}
				k := seriesKey(n, l)
				if seen[k] {
					return &ParseError{Msg: "family " + n + " has the same series twice"}
				}
				seen[k] = true
				if t, ok := f.Types[n]; ok && t != typ {
					return &ParseError{Msg: "family " + n + " is written with two types"}
				}
				f.Types[n] = typ
				f.Samples = append(f.Samples, Sample{Name: n, Labels: l, Value: v, key: k})
				return nil
			}
			var err error
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				err = add(name, nil, m.GetCounter().GetValue(), Counter)
			case dto.MetricType_GAUGE:
				err = add(name, nil, m.GetGauge().GetValue(), Gauge)
			case dto.MetricType_SUMMARY:
				s := m.GetSummary()
				for _, q := range s.GetQuantile() {
					if err = add(name, &Label{"quantile", formatFloat(q.GetQuantile())}, q.GetValue(), Untyped); err != nil {
						break
					}
				}
				if err == nil {
					err = add(name+"_sum", nil, s.GetSampleSum(), Untyped)
				}
				if err == nil {
					err = add(name+"_count", nil, float64(s.GetSampleCount()), Untyped)
				}
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				for _, bk := range h.GetBucket() {
					if err = add(name+"_bucket", &Label{"le", formatFloat(bk.GetUpperBound())}, float64(bk.GetCumulativeCount()), Untyped); err != nil {
						break
					}
				}
				if err == nil {
					err = add(name+"_sum", nil, h.GetSampleSum(), Untyped)
				}
				if err == nil {
					err = add(name+"_count", nil, float64(h.GetSampleCount()), Untyped)
				}
			default:
				err = add(name, nil, m.GetUntyped().GetValue(), Untyped)
			}
			if err != nil {
				return nil, err
			}
		}
		if mf.Help != nil && (mf.GetType() == dto.MetricType_COUNTER || mf.GetType() == dto.MetricType_GAUGE || mf.GetType() == dto.MetricType_UNTYPED) {
			f.Help[name] = mf.GetHelp()
		}
	}
	return f, nil
}

// formatFloat writes a bound or quantile as Prometheus' client libraries do: "+Inf", "0.5".
func formatFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// seriesKey identifies a series by its name and sorted labels.
func seriesKey(name string, ls []Label) string {
	var b strings.Builder
	b.WriteString(name)
	for _, l := range ls {
		b.WriteByte(0)
		b.WriteString(l.Name)
		b.WriteByte(0)
		b.WriteString(l.Value)
	}
	return b.String()
}
