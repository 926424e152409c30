// Package export encodes the agent's latest samples for other monitoring systems: the
// Prometheus text exposition format 0.0.4 and OpenMetrics 1.0 (chosen by content negotiation)
// and InfluxDB line protocol.
//
// # Prometheus names
//
// A sample's name comes from its "metric" label: ASCII letters are lower-cased with camelCase
// turned into snake_case (fooBar → foo_bar, HTTPServer → http_server), every character other
// than a letter, digit or underscore becomes "_" (requests.number → requests_number, colons
// included: they are reserved for recording rules), and a leading digit gets a "_" prefix.
// Counters get the "_total" suffix (requests.number → requests_number_total) unless they
// already have it; a name starting with "__", reserved by Prometheus, gets the prefix "metric".
// The other labels become labels, named the same way (a name starting with "__" gets the
// prefix "label"; a name that collides with another of
// the same sample after this gets "_" appended); empty values are left out, as Prometheus
// treats them as absent. When different original names map to one family, each sample also
// carries the label cantal_metric="<original name>" so that no two samples collide.
//
// Counters are counters, levels and floats are gauges. A state is an info-like gauge: the
// series' labels plus state="<text>", value 1; a series with no state (since 0) is left out.
// HELP names the original metric. Timestamps are left out unless Options.Timestamps is set,
// as exporters are advised: Prometheus stamps the scrape.
package export

import (
	"context"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/cantal-go/cantal/internal/series"
)

// Format is an exposition format.
type Format int

// The formats.
const (
	FormatText        Format = iota // Prometheus text 0.0.4
	FormatOpenMetrics               // OpenMetrics 1.0.0
)

// ContentType returns the media type a response in f carries.
func (f Format) ContentType() string {
	if f == FormatOpenMetrics {
		return "application/openmetrics-text; version=1.0.0; charset=utf-8"
	}
	return "text/plain; version=0.0.4; charset=utf-8"
}

// Negotiate picks the format for an Accept header: OpenMetrics when it is accepted with a
// quality at least that of text/plain (as Prometheus asks), text otherwise.
func Negotiate(accept string) Format {
	om, text := -1.0, -1.0
	for part := range strings.SplitSeq(accept, ",") {
		fields := strings.Split(part, ";")
		mt := strings.ToLower(strings.TrimSpace(fields[0]))
		q := 1.0
		version := ""
		for _, p := range fields[1:] {
			k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
			switch strings.ToLower(strings.TrimSpace(k)) {
			case "q":
				if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
					q = f
				}
			case "version":
				version = strings.TrimSpace(v)
			}
		}
		switch mt {
		case "application/openmetrics-text":
			if (version == "" || version == "1.0.0" || version == "0.0.1") && q > 0 && q > om {
				om = q
			}
		case "text/plain", "*/*", "text/*":
			if q > text {
				text = q
			}
		}
	}
	if om > 0 && om >= text {
		return FormatOpenMetrics
	}
	return FormatText
}

// Options tune an exposition.
type Options struct {
	// Timestamps adds each sample's scan time (unix ms) to its line.
	Timestamps bool
	// SkipStates leaves state series out.
	SkipStates bool
	// Visible, read by PrometheusHandler only, returns for a request's context the predicate of
	// the samples its caller may see, or nil for every sample (the agent's
	// api.Server.SeriesVisible). nil: every sample.
	Visible func(ctx context.Context) func(series.Labels) bool
}

// Prom encodes samples in the Prometheus text or OpenMetrics format. The zero value is ready to
// use. It caches name translations between calls, so keep one per goroutine (a Prom is not safe
// for concurrent use).
type Prom struct {
	Options

	names  [3]map[string]string // metric (0), label (1) or counter (2) name → Prometheus name
	famIdx [2]map[string]int    // gauge (0) and counter (1) families by name
	fams   []family
	order  []int32 // sample indices grouped by family
	keys   []string
	seen   []string
}

type family struct {
	name   string // sample name; for OpenMetrics counters, name minus "_total" is the family
	kind   series.Kind
	orig   string // first original metric name
	multi  bool   // more than one original metric name
	first  int32  // index of first sample in order
	count  int32
	states bool
}

// maxCachedNames bounds the name cache; it is cleared when full.
const maxCachedNames = 1 << 17

func (e *Prom) name(s string, metric bool) string {
	c := 0
	if !metric {
		c = 1
	}
	return e.cached(c, s)
}

// counterName returns the Prometheus name of a counter: its metric name with "_total".
func (e *Prom) counterName(s string) string { return e.cached(2, s) }

func (e *Prom) cached(c int, s string) string {
	if n, ok := e.names[c][s]; ok {
		return n
	}
	if e.names[c] == nil || len(e.names[c]) >= maxCachedNames {
		e.names[c] = make(map[string]string, 1024)
	}
	var n string
	switch c {
	case 0, 1:
		n = promName(s, c == 0)
	case 2:
		n = promName(s, true)
		if !strings.HasSuffix(n, "_total") {
			n += "_total"
			if strings.HasPrefix(n, "__") { // "_" + "_total"
				n = "metric" + n
			}
		}
	}
	e.names[c][s] = n
	return n
}

// promName converts s to a Prometheus metric or label name (see the package comment).
func promName(s string, metric bool) string {
	var b strings.Builder
	b.Grow(len(s) + 4)
	prev := byte(0) // previous input byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'A' && c <= 'Z':
			lower := c + ('a' - 'A')
			nextLower := i+1 < len(s) && s[i+1] >= 'a' && s[i+1] <= 'z'
			if b.Len() > 0 && ((prev >= 'a' && prev <= 'z') || (prev >= '0' && prev <= '9') ||
				(prev >= 'A' && prev <= 'Z' && nextLower)) {
				b.WriteByte('_')
			}
			b.WriteByte(lower)
		case c >= 'a' && c <= 'z', c == '_':
			b.WriteByte(c)
		case c >= '0' && c <= '9':
			if b.Len() == 0 {
				b.WriteByte('_')
			}
			b.WriteByte(c)
		case c >= utf8.RuneSelf:
			_, size := utf8.DecodeRuneInString(s[i:])
			i += size - 1
			b.WriteByte('_')
		default:
			b.WriteByte('_')
		}
		prev = c
	}
	n := b.String()
	if n == "" {
		n = "_"
	}
	if strings.HasPrefix(n, "__") { // reserved for Prometheus' own use
		if metric {
			n = "metric" + n
		} else {
			n = "label" + n
		}
	}
	return n
}

// Append appends the exposition of samples in format f to dst and returns it. Samples of one
// family are written together, in the order the family first appears, so the output is
// deterministic for a given input order.
func (e *Prom) Append(dst []byte, samples []series.Sample, f Format) []byte {
	for i := range e.famIdx {
		if e.famIdx[i] == nil {
			e.famIdx[i] = make(map[string]int, 256)
		} else {
			clear(e.famIdx[i])
		}
	}
	e.fams = e.fams[:0]
	// Pass 1: family of every sample.
	fam := make([]int32, len(samples))
	for i := range samples {
		s := &samples[i]
		fam[i] = -1
		if s.Kind == series.State && (e.SkipStates || s.Since == 0) {
			continue
		}
		if s.Kind < series.Counter || s.Kind > series.State {
			continue
		}
		orig := s.Labels["metric"]
		var name string
		kind, fi := s.Kind, 1
		if kind == series.Counter {
			name = e.counterName(orig)
		} else {
			name = e.name(orig, true)
			kind, fi = series.Float, 0 // one gauge family for levels, floats and states
		}
		idx, ok := e.famIdx[fi][name]
		if !ok {
			idx = len(e.fams)
			e.famIdx[fi][name] = idx
			e.fams = append(e.fams, family{name: name, kind: kind, orig: orig})
		}
		fm := &e.fams[idx]
		fm.count++
		if s.Kind == series.State {
			fm.states = true
		}
		if fm.orig != orig {
			fm.multi = true
		}
		fam[i] = int32(idx)
	}
	// A gauge family and a counter family of the same name: rename the gauge one.
	for i := range e.fams {
		fm := &e.fams[i]
		if fm.kind != series.Counter {
			_, clash := e.famIdx[1][fm.name]
			_, clashOM := e.famIdx[1][fm.name+"_total"] // OpenMetrics family names
			if clash || clashOM {
				fm.name += "_gauge"
			}
		}
	}
	// Pass 2: group sample indices by family (counting sort).
	pos := int32(0)
	for i := range e.fams {
		e.fams[i].first = pos
		pos += e.fams[i].count
	}
	e.order = slices.Grow(e.order[:0], int(pos))[:pos]
	next := make([]int32, len(e.fams))
	for i := range e.fams {
		next[i] = e.fams[i].first
	}
	for i, fi := range fam {
		if fi >= 0 {
			e.order[next[fi]] = int32(i)
			next[fi]++
		}
	}
	// Pass 3: write.
	for i := range e.fams {
		fm := &e.fams[i]
		dst = e.appendHeader(dst, fm, f)
		for _, si := range e.order[fm.first : fm.first+fm.count] {
			dst = e.appendSample(dst, fm, &samples[si], f)
		}
	}
	if f == FormatOpenMetrics {
		dst = append(dst, "# EOF\n"...)
	}
	return dst
}

func (e *Prom) appendHeader(dst []byte, fm *family, f Format) []byte {
	famName := fm.name
	typ := "gauge"
	if fm.kind == series.Counter {
		typ = "counter"
		if f == FormatOpenMetrics {
			famName = strings.TrimSuffix(famName, "_total")
		}
	}
	dst = append(dst, "# HELP "...)
	dst = append(dst, famName...)
	dst = append(dst, " Cantal metric "...)
	help := fm.orig
	if fm.multi {
		help += " and others"
	}
	if f == FormatOpenMetrics {
		dst = appendEscaped(dst, help, true)
	} else {
		dst = appendEscaped(dst, help, false)
	}
	if fm.states {
		dst = append(dst, " (state: value 1, text in label state)"...)
	}
	dst = append(dst, "\n# TYPE "...)
	dst = append(dst, famName...)
	dst = append(dst, ' ')
	dst = append(dst, typ...)
	return append(dst, '\n')
}

func (e *Prom) appendSample(dst []byte, fm *family, s *series.Sample, f Format) []byte {
	dst = append(dst, fm.name...)
	// Sorted, translated label names.
	e.keys = e.keys[:0]
	for k, v := range s.Labels {
		if k != "metric" && v != "" {
			e.keys = append(e.keys, k)
		}
	}
	slices.Sort(e.keys)
	e.seen = e.seen[:0]
	if fm.multi {
		e.seen = append(e.seen, "cantal_metric")
	}
	if s.Kind == series.State {
		e.seen = append(e.seen, "state")
	}
	n := 0
	for _, k := range e.keys {
		name := e.name(k, false)
		for slices.Contains(e.seen, name) {
			name += "_"
		}
		e.seen = append(e.seen, name)
		dst = appendLabel(dst, n, name, s.Labels[k])
		n++
	}
	if fm.multi {
		dst = appendLabel(dst, n, "cantal_metric", s.Labels["metric"])
		n++
	}
	if s.Kind == series.State {
		dst = appendLabel(dst, n, "state", s.Text)
		n++
	}
	if n > 0 {
		dst = append(dst, '}')
	}
	dst = append(dst, ' ')
	switch s.Kind {
	case series.Counter:
		dst = strconv.AppendUint(dst, s.Bits, 10)
	case series.Level:
		dst = strconv.AppendInt(dst, int64(s.Bits), 10)
	case series.Float:
		dst = appendFloat(dst, math.Float64frombits(s.Bits))
	case series.State:
		dst = append(dst, '1')
	}
	if e.Timestamps {
		dst = append(dst, ' ')
		if f == FormatOpenMetrics { // seconds
			dst = strconv.AppendFloat(dst, float64(s.TS)/1000, 'f', -1, 64)
		} else {
			dst = strconv.AppendInt(dst, s.TS, 10)
		}
	}
	return append(dst, '\n')
}

// appendLabel appends the n-th (from 0) label pair of a sample.
func appendLabel(dst []byte, n int, name, value string) []byte {
	if n == 0 {
		dst = append(dst, '{')
	} else {
		dst = append(dst, ',')
	}
	dst = append(dst, name...)
	dst = append(dst, `="`...)
	dst = appendEscaped(dst, value, true)
	return append(dst, '"')
}

func appendFloat(dst []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, "NaN"...)
	case math.IsInf(f, 1):
		return append(dst, "+Inf"...)
	case math.IsInf(f, -1):
		return append(dst, "-Inf"...)
	}
	return strconv.AppendFloat(dst, f, 'g', -1, 64)
}

// appendEscaped appends s with backslash, newline and (if quote) double quote escaped, and
// invalid UTF-8 replaced by U+FFFD.
func appendEscaped(dst []byte, s string, quote bool) []byte {
	clean := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= utf8.RuneSelf || c == '\\' || c == '\n' || c == '"' {
			clean = false
			break
		}
	}
	if clean {
		return append(dst, s...)
	}
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				dst = append(dst, "\uFFFD"...)
			} else {
				dst = append(dst, s[i:i+size]...)
			}
			i += size
			continue
		}
		switch {
		case c == '\\':
			dst = append(dst, `\\`...)
		case c == '\n':
			dst = append(dst, `\n`...)
		case c == '"' && quote:
			dst = append(dst, `\"`...)
		default:
			dst = append(dst, c)
		}
		i++
	}
	return dst
}

// PrometheusHandler serves the exposition of the samples source returns at each request, in
// the format the Accept header negotiates (see Negotiate), gzip-compressed when the client
// accepts it, leaving out those opts.Visible refuses for the request. source is called once per
// request, from the request's goroutine; the handler does not modify what it returns.
func PrometheusHandler(source func() []series.Sample, opts Options) http.Handler {
	return &promHandler{source: source, opts: opts}
}
