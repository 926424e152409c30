package export

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/cantal-go/cantal/internal/series"
	"github.com/influxdata/line-protocol/v2/lineprotocol"
)

// Influx encodes samples as InfluxDB line protocol. The zero value writes nanosecond
// timestamps and integer counters, which InfluxDB 1.x and Telegraf's influx parser accept.
// An Influx is not safe for concurrent use; keep one per goroutine.
//
// The "metric" label is split at its last dot into measurement and field (requests.number →
// measurement "requests", field "number"; a name without a dot is measurement <name>, field
// "value"), so that line-protocol pushed to the agent's /write (which names series
// <measurement>.<field>) comes out as it went in. The other labels are tags. Samples with the
// same measurement, tags and timestamp share one line. Kinds: counter → integer (unsigned with
// Unsigned; a counter above 2⁶³-1 is written as 2⁶³-1 otherwise), level → integer, float →
// float (NaN and infinities, which line protocol cannot carry, are left out), state → string
// field with the text (series with no state left out). Text that line protocol cannot carry
// (control characters, invalid UTF-8, a trailing backslash) is replaced by "_".
type Influx struct {
	// Precision of timestamps. Default nanoseconds (Telegraf's influx parser assumes them).
	Precision lineprotocol.Precision
	// Unsigned writes counters as unsigned integers (InfluxDB 2.x, ECS), not integers.
	Unsigned bool
	// SkipStates leaves state series out.
	SkipStates bool
	// HostTag and Host, when both are set, add the tag HostTag=Host to every line (as
	// Telegraf's host tag names the machine), unless the sample has a label of that name
	// already: a pushed series keeps the host it was sent with.
	HostTag, Host string
	// Visible, read by InfluxHandler only, is as Options.Visible: the samples a request's
	// caller may see.
	Visible func(ctx context.Context) func(series.Labels) bool

	enc    lineprotocol.Encoder
	groups map[string]int
	lines  []influxLine
	order  []int32
	keys   []string
	keyBuf []byte
	tags   []tagKV
}

type influxLine struct {
	measurement string
	sample      int32 // the first sample: its tags and timestamp are the line's
	first       int32
	count       int32
}

type tagKV struct{ k, v string }

func splitMetric(m string) (measurement, field string) {
	i := strings.LastIndexByte(m, '.')
	if i <= 0 || i == len(m)-1 {
		return m, "value"
	}
	return m[:i], m[i+1:]
}

// lpSafe makes s encodable as a line-protocol measurement, key or tag value.
func lpSafe(s string) string {
	ok := s != "" && utf8.ValidString(s) && s[len(s)-1] != '\\'
	for i := 0; ok && i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			ok = false
		}
	}
	if ok {
		return s
	}
	s = strings.ToValidUTF8(s, "_")
	b := []byte(s)
	for i, c := range b {
		if c < 0x20 || c == 0x7f {
			b[i] = '_'
		}
	}
	if len(b) == 0 {
		return "_"
	}
	if b[len(b)-1] == '\\' {
		b = append(b, '_')
	}
	return string(b)
}

func (e *Influx) skip(s *series.Sample) bool {
	switch s.Kind {
	case series.Counter, series.Level:
		return false
	case series.Float:
		f := math.Float64frombits(s.Bits)
		return math.IsNaN(f) || math.IsInf(f, 0)
	case series.State:
		return e.SkipStates || s.Since == 0
	}
	return true
}

// Append appends the line protocol of samples to dst and returns it. Lines appear in the order
// their first sample appears.
func (e *Influx) Append(dst []byte, samples []series.Sample) ([]byte, error) {
	if e.groups == nil {
		e.groups = make(map[string]int, 1024)
	} else {
		clear(e.groups)
	}
	e.lines = e.lines[:0]
	grp := make([]int32, len(samples))
	for i := range samples {
		s := &samples[i]
		grp[i] = -1
		if e.skip(s) {
			continue
		}
		measurement, _ := splitMetric(s.Labels["metric"])
		e.keyBuf = binary.AppendVarint(e.keyBuf[:0], s.TS)
		e.keyBuf = binary.AppendUvarint(e.keyBuf, uint64(len(measurement)))
		e.keyBuf = append(e.keyBuf, measurement...)
		e.sortedTags(s.Labels)
		for _, t := range e.tags {
			e.keyBuf = binary.AppendUvarint(e.keyBuf, uint64(len(t.k)))
			e.keyBuf = append(e.keyBuf, t.k...)
			e.keyBuf = binary.AppendUvarint(e.keyBuf, uint64(len(t.v)))
			e.keyBuf = append(e.keyBuf, t.v...)
		}
		idx, ok := e.groups[string(e.keyBuf)]
		if !ok {
			idx = len(e.lines)
			e.groups[string(e.keyBuf)] = idx
			e.lines = append(e.lines, influxLine{measurement: measurement, sample: int32(i)})
		}
		e.lines[idx].count++
		grp[i] = int32(idx)
	}
	pos := int32(0)
	for i := range e.lines {
		e.lines[i].first = pos
		pos += e.lines[i].count
	}
	e.order = slices.Grow(e.order[:0], int(pos))[:pos]
	next := make([]int32, len(e.lines))
	for i := range e.lines {
		next[i] = e.lines[i].first
	}
	for i, g := range grp {
		if g >= 0 {
			e.order[next[g]] = int32(i)
			next[g]++
		}
	}

	e.enc.SetBuffer(dst)
	e.enc.SetPrecision(e.Precision)
	for i := range e.lines {
		ln := &e.lines[i]
		first := &samples[ln.sample]
		e.enc.StartLine(lpSafe(ln.measurement))
		e.sortedTags(first.Labels)
		for _, t := range e.tags {
			e.enc.AddTag(t.k, t.v)
		}
		for _, si := range e.order[ln.first : ln.first+ln.count] {
			s := &samples[si]
			_, field := splitMetric(s.Labels["metric"])
			e.enc.AddField(lpSafe(field), e.value(s))
		}
		e.enc.EndLine(time.UnixMilli(first.TS))
		if err := e.enc.Err(); err != nil {
			// Cannot happen for sanitised input; report rather than emit a broken body.
			return dst, fmt.Errorf("encode line protocol: %w", err)
		}
	}
	return e.enc.Bytes(), nil
}

func (e *Influx) value(s *series.Sample) lineprotocol.Value {
	switch s.Kind {
	case series.Counter:
		if e.Unsigned {
			return lineprotocol.UintValue(s.Bits)
		}
		return lineprotocol.IntValue(int64(min(s.Bits, math.MaxInt64)))
	case series.Level:
		return lineprotocol.IntValue(int64(s.Bits))
	case series.Float:
		v, _ := lineprotocol.FloatValue(math.Float64frombits(s.Bits))
		return v
	default:
		v, ok := lineprotocol.StringValue(s.Text)
		if !ok {
			v, _ = lineprotocol.StringValue(strings.ToValidUTF8(s.Text, "\uFFFD"))
		}
		return v
	}
}

// sortedTags fills e.tags with the sample's tags, made safe and sorted by key, without the
// metric label and empty values.
func (e *Influx) sortedTags(l series.Labels) {
	e.tags = e.tags[:0]
	for k, v := range l {
		if k == "metric" || v == "" {
			continue
		}
		e.tags = append(e.tags, tagKV{lpSafe(k), lpSafe(v)})
	}
	slices.SortFunc(e.tags, func(a, b tagKV) int { return strings.Compare(a.k, b.k) })
	// Keys made equal by lpSafe: keep the first (the encoder refuses duplicates).
	e.tags = slices.CompactFunc(e.tags, func(a, b tagKV) bool { return a.k == b.k })
	if e.HostTag != "" && e.Host != "" {
		k := lpSafe(e.HostTag)
		i, found := slices.BinarySearchFunc(e.tags, k, func(t tagKV, k string) int { return strings.Compare(t.k, k) })
		if !found {
			e.tags = slices.Insert(e.tags, i, tagKV{k, lpSafe(e.Host)})
		}
	}
}

// InfluxHandler serves the line protocol of the samples source returns at each request (the
// agent's GET /influx, or any configured path such as /ecsmetrics); readable by Telegraf's
// inputs.http with data_format = "influx". Serving is non-destructive: any number of scrapers
// see the same latest values. opts' Precision, Unsigned, SkipStates, HostTag, Host and Visible
// are the options; the handler keeps its own encoders, so it is safe for concurrent use. source is called
// once per request, from the request's goroutine; the handler does not modify what it returns.
func InfluxHandler(source func() []series.Sample, opts Influx) http.Handler {
	h := &influxHandler{source: source, visible: opts.Visible}
	h.pool.New = func() any {
		return &Influx{Precision: opts.Precision, Unsigned: opts.Unsigned, SkipStates: opts.SkipStates,
			HostTag: opts.HostTag, Host: opts.Host}
	}
	return h
}

type influxHandler struct {
	source  func() []series.Sample
	visible func(context.Context) func(series.Labels) bool
	pool    sync.Pool
}

func (h *influxHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, `{"error":"method not allowed: use GET"}`, http.StatusMethodNotAllowed)
		return
	}
	enc := h.pool.Get().(*Influx)
	buf := getBuf()
	samples, kept := visibleSamples(r, h.source(), h.visible)
	out, err := enc.Append(*buf, samples)
	h.pool.Put(enc)
	putSamples(kept)
	if err != nil {
		putBuf(buf)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprintf(w, "{\"error\":%q}\n", err.Error())
		return
	}
	*buf = out
	writeBody(w, r, "text/plain; charset=utf-8", out)
	putBuf(buf)
}
