package apiwire

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/cantal-go/cantal/internal/series"
)

// Series is one series' latest value (/api/v1/metrics, and each node's series in
// /api/v1/cluster/metrics): {"labels", "kind", "value", "ts"} plus "rate" for a counter that
// has one, and "text", "since" for a state (whose "value" is its text).
type Series struct {
	Labels series.Labels // written as series.Labels.Key writes them: sorted, no spaces
	Kind   string        // counter, level, float or state
	Value  Number        // numeric kinds; absent (null) for another kind
	TS     int64         // unix ms of the value
	Rate   Number        // per second; absent when the answer has none
	Text   string        // a state's text
	Since  int64         // a state's timestamp (unix ms, 0: none)
}

// AppendJSON appends s as series.Sample.AppendJSON writes it.
func (s *Series) AppendJSON(b []byte) []byte {
	b = append(b, `{"labels":`...)
	b = append(b, s.Labels.Key()...)
	b = append(b, `,"kind":`...)
	b = series.AppendJSONString(b, s.Kind)
	b = append(b, `,"value":`...)
	if s.Kind == "state" {
		b = series.AppendJSONString(b, s.Text)
	} else {
		b = s.Value.AppendJSON(b)
	}
	b = append(b, `,"ts":`...)
	b = strconv.AppendInt(b, s.TS, 10)
	if s.Rate.Valid {
		b = append(b, `,"rate":`...)
		b = s.Rate.AppendJSON(b)
	}
	if s.Kind == "state" {
		b = append(b, `,"text":`...)
		b = series.AppendJSONString(b, s.Text)
		b = append(b, `,"since":`...)
		b = strconv.AppendInt(b, s.Since, 10)
	}
	return append(b, '}')
}

// MarshalJSON implements json.Marshaler.
func (s Series) MarshalJSON() ([]byte, error) { return s.AppendJSON(nil), nil }

// seriesWire is Series as encoding/json decodes it; lists of series are decoded into it in
// one pass (a Series.UnmarshalJSON per element would scan each element twice).
type seriesWire struct {
	Labels series.Labels   `json:"labels"`
	Kind   string          `json:"kind"`
	Value  json.RawMessage `json:"value"`
	TS     int64           `json:"ts"`
	Rate   Number          `json:"rate"`
	Text   *string         `json:"text"`
	Since  int64           `json:"since"`
}

// series converts w: a state's text from "text", or from "value" when "text" is absent; a
// value that is not a number is an error for the other kinds.
func (w *seriesWire) series() (Series, error) {
	s := Series{Labels: w.Labels, Kind: w.Kind, TS: w.TS, Rate: w.Rate, Since: w.Since}
	switch {
	case w.Kind == "state" && w.Text != nil:
		s.Text = *w.Text
	case w.Kind == "state":
		if len(w.Value) > 0 && string(w.Value) != "null" {
			if err := json.Unmarshal(w.Value, &s.Text); err != nil {
				return s, fmt.Errorf("series: state value: %w", err)
			}
		}
	case len(w.Value) > 0:
		if err := s.Value.UnmarshalJSON(w.Value); err != nil {
			return s, fmt.Errorf("series value: %w", err)
		}
	}
	return s, nil
}

// seriesList converts a decoded list.
func seriesList(ws []seriesWire) ([]Series, error) {
	if ws == nil {
		return nil, nil
	}
	out := make([]Series, len(ws))
	for i := range ws {
		var err error
		if out[i], err = ws[i].series(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// UnmarshalJSON implements json.Unmarshaler. A state's text is taken from "text", or from
// "value" when "text" is absent; a number that is not one is an error.
func (s *Series) UnmarshalJSON(b []byte) error {
	var w seriesWire
	if err := json.Unmarshal(b, &w); err != nil {
		return fmt.Errorf("series: %w", err)
	}
	v, err := w.series()
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// MetricsAnswer is the answer of /api/v1/metrics: {"series": [...]}.
type MetricsAnswer struct {
	Series []Series `json:"series"`
}

// UnmarshalJSON implements json.Unmarshaler, as Series.UnmarshalJSON for each series.
func (a *MetricsAnswer) UnmarshalJSON(b []byte) error {
	var w struct {
		Series []seriesWire `json:"series"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	ss, err := seriesList(w.Series)
	if err != nil {
		return err
	}
	a.Series = ss
	return nil
}

// MarshalJSON implements json.Marshaler (an empty list is [], never null).
func (a MetricsAnswer) MarshalJSON() ([]byte, error) {
	b := append(make([]byte, 0, 64+128*len(a.Series)), `{"series":[`...)
	for i := range a.Series {
		if i > 0 {
			b = append(b, ',')
		}
		b = a.Series[i].AppendJSON(b)
	}
	return append(b, "]}"...), nil
}

// Point is one [unix_ms, value] pair of a history answer.
type Point struct {
	TS    int64
	Value Number
}

// AppendJSON appends [ts,value].
func (p Point) AppendJSON(b []byte) []byte {
	b = append(b, '[')
	b = strconv.AppendInt(b, p.TS, 10)
	b = append(b, ',')
	b = p.Value.AppendJSON(b)
	return append(b, ']')
}

// MarshalJSON implements json.Marshaler.
func (p Point) MarshalJSON() ([]byte, error) { return p.AppendJSON(nil), nil }

// UnmarshalJSON implements json.Unmarshaler: exactly two members, an integer time and a value.
func (p *Point) UnmarshalJSON(b []byte) error {
	var pair []Number
	if err := json.Unmarshal(b, &pair); err != nil {
		return fmt.Errorf("point: %w", err)
	}
	if len(pair) != 2 || !pair[0].Valid || !pair[0].IsInt() {
		return fmt.Errorf("point: want [unix_ms, value]")
	}
	ts, err := strconv.ParseInt(pair[0].Raw, 10, 64)
	if err != nil {
		return fmt.Errorf("point: time: %w", err)
	}
	*p = Point{TS: ts, Value: pair[1]}
	return nil
}

// HistorySeries is one series of a history answer: its points in the window (a gap is a
// missing timestamp), per second when Fn is "rate".
type HistorySeries struct {
	Labels series.Labels `json:"labels"`
	Kind   string        `json:"kind"`
	Fn     string        `json:"fn"` // "rate" when the points are a counter's rates, else ""
	Points []Point       `json:"points"`
}

// appendHead appends {"labels":…,"kind":…[,"fn":…] (no closing brace).
func appendHead(b []byte, l series.Labels, kind, fn string) []byte {
	return AppendSeriesHead(b, l.Key(), kind, fn)
}

// AppendSeriesHead appends the start of a series object of every answer,
// {"labels":…,"kind":…[,"fn":…] (no closing brace), from the labels' key (series.Labels.Key,
// which a registry handle keeps, so the hot routes write it without building it).
func AppendSeriesHead(b []byte, labelsKey, kind, fn string) []byte {
	b = append(b, `{"labels":`...)
	b = append(b, labelsKey...)
	b = append(b, `,"kind":`...)
	b = series.AppendJSONString(b, kind)
	if fn != "" {
		b = append(b, `,"fn":`...)
		b = series.AppendJSONString(b, fn)
	}
	return b
}

// AppendJSON appends s as the history handler writes it.
func (s *HistorySeries) AppendJSON(b []byte) []byte {
	b = appendHead(b, s.Labels, s.Kind, s.Fn)
	b = append(b, `,"points":[`...)
	for i, p := range s.Points {
		if i > 0 {
			b = append(b, ',')
		}
		b = p.AppendJSON(b)
	}
	return append(b, "]}"...)
}

// MarshalJSON implements json.Marshaler.
func (s HistorySeries) MarshalJSON() ([]byte, error) { return s.AppendJSON(nil), nil }

// historySeriesWire is HistorySeries as encoding/json decodes it, with the points read by
// pointList; lists are decoded into it in one pass (as seriesWire).
type historySeriesWire struct {
	Labels series.Labels `json:"labels"`
	Kind   string        `json:"kind"`
	Fn     string        `json:"fn"`
	Points pointList     `json:"points"`
}

func (w *historySeriesWire) series() HistorySeries {
	return HistorySeries{Labels: w.Labels, Kind: w.Kind, Fn: w.Fn, Points: w.Points}
}

// UnmarshalJSON implements json.Unmarshaler. Points are read as Point.UnmarshalJSON reads
// them (see pointList: the agent's own points in one pass); a value's literal is kept in
// Number.Raw only where the value's own encoding would not give it back, so AppendJSON
// writes the bytes decoded.
func (s *HistorySeries) UnmarshalJSON(b []byte) error {
	var w historySeriesWire
	if err := json.Unmarshal(b, &w); err != nil {
		return fmt.Errorf("history series: %w", err)
	}
	*s = w.series()
	return nil
}

// HistoryAnswer is the answer of /api/v1/history: {"series": [...]}.
type HistoryAnswer struct {
	Series []HistorySeries `json:"series"`
}

// AppendHistoryList appends ss as the series array of a history answer, [s,...].
func AppendHistoryList(b []byte, ss []HistorySeries) []byte {
	b = append(b, '[')
	for i := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = ss[i].AppendJSON(b)
	}
	return append(b, ']')
}

// UnmarshalJSON implements json.Unmarshaler, as HistorySeries.UnmarshalJSON for each series,
// in one pass over b (call it directly on a fetched answer: json.Unmarshal would scan b once
// more).
func (a *HistoryAnswer) UnmarshalJSON(b []byte) error {
	var w struct {
		Series []historySeriesWire `json:"series"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return fmt.Errorf("history answer: %w", err)
	}
	a.Series = nil
	if w.Series != nil {
		a.Series = make([]HistorySeries, len(w.Series))
		for i := range w.Series {
			a.Series[i] = w.Series[i].series()
		}
	}
	return nil
}

// MarshalJSON implements json.Marshaler.
func (a HistoryAnswer) MarshalJSON() ([]byte, error) {
	return append(AppendHistoryList([]byte(`{"series":`), a.Series), '}'), nil
}

// StatsSeries is one series of /api/v1/stats: the statistics of its points (or rates) in the
// window. A statistic with no value is NaN.
type StatsSeries struct {
	Labels                                       series.Labels `json:"labels"`
	Kind                                         string        `json:"kind"`
	Fn                                           string        `json:"fn"`
	Count                                        int64         `json:"count"`
	Min, Max, Mean, Median, P90, P95, P99, Slope Number        // Slope: least-squares change per second
}

// AppendJSON appends s as the stats handler writes it.
func (s *StatsSeries) AppendJSON(b []byte) []byte {
	b = appendHead(b, s.Labels, s.Kind, s.Fn)
	b = append(b, `,"count":`...)
	b = strconv.AppendInt(b, s.Count, 10)
	for _, f := range [...]struct {
		name string
		v    Number
	}{{"min", s.Min}, {"max", s.Max}, {"mean", s.Mean}, {"median", s.Median}, {"p90", s.P90}, {"p95", s.P95}, {"p99", s.P99}, {"slope", s.Slope}} {
		b = append(b, `,"`...)
		b = append(b, f.name...)
		b = append(b, `":`...)
		b = f.v.AppendJSON(b)
	}
	return append(b, '}')
}

// MarshalJSON implements json.Marshaler.
func (s StatsSeries) MarshalJSON() ([]byte, error) { return s.AppendJSON(nil), nil }

// StatsAnswer is the answer of /api/v1/stats: {"series": [...]}.
type StatsAnswer struct {
	Series []StatsSeries `json:"series"`
}

// MarshalJSON implements json.Marshaler.
func (a StatsAnswer) MarshalJSON() ([]byte, error) {
	b := []byte(`{"series":[`)
	for i := range a.Series {
		if i > 0 {
			b = append(b, ',')
		}
		b = a.Series[i].AppendJSON(b)
	}
	return append(b, "]}"...), nil
}
