package ingest

import (
	"bytes"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/cantal-go/cantal/internal/series"
)

// statsdType is the type of a statsd metric.
type statsdType byte

// The statsd types. Histograms (h) and distributions (d) are aggregated as timers.
const (
	statsdCounter statsdType = 'c'
	statsdGauge   statsdType = 'g'
	statsdTimer   statsdType = 't'
	statsdSet     statsdType = 's'
)

func (t statsdType) String() string {
	switch t {
	case statsdCounter:
		return "counter"
	case statsdGauge:
		return "gauge"
	case statsdTimer:
		return "timer"
	case statsdSet:
		return "set"
	}
	return "type(" + strconv.Itoa(int(t)) + ")"
}

// StatsdLine is one parsed statsd line: name:value[:value...]|type[|@rate][|#tag:v,...].
type StatsdLine struct {
	Name   string
	Type   statsdType
	Values []string // raw values (numbers, except for sets); several with DogStatsD v1.1 packing
	Rate   float64  // sample rate in (0, 1]; 1 when absent
	Tags   []kv     // DogStatsD tags sorted by key; a bare tag "k" has the value ""
}

// ParseStatsdLine parses one statsd line (without its newline) into l, reusing l's slices.
//
// Accepted: Etsy statsd `name:value|c|@rate`, `|g` (a leading + or - makes a gauge a delta),
// `|ms`, `|h`, `|d`, `|s`; DogStatsD `|#k:v,k2:v2` tags, `:v1:v2` packed values, and the
// `|c:container` and `|T<unix>` sections (read and ignored). Events (_e{) and service checks
// (_sc|) are refused.
func ParseStatsdLine(line []byte, l *StatsdLine) error {
	l.Values, l.Tags, l.Rate = l.Values[:0], l.Tags[:0], 1
	if !utf8.Valid(line) {
		return errors.New("not valid UTF-8")
	}
	if bytes.HasPrefix(line, []byte("_e{")) || bytes.HasPrefix(line, []byte("_sc|")) {
		return errors.New("DogStatsD events and service checks are not supported")
	}
	bar := bytes.IndexByte(line, '|')
	if bar < 0 {
		return errors.New("missing '|type'")
	}
	nv := line[:bar]
	colon := bytes.IndexByte(nv, ':')
	if colon <= 0 {
		return errors.New("missing 'name:' before the value")
	}
	name := nv[:colon]
	for _, c := range name {
		if c < 0x20 || c == 0x7f || c == '|' || c == '#' || c == '@' {
			return fmt.Errorf("invalid character %q in name", c)
		}
	}
	rest := line[bar+1:]
	sec, rest, _ := bytes.Cut(rest, []byte("|"))
	switch string(sec) {
	case "c":
		l.Type = statsdCounter
	case "g":
		l.Type = statsdGauge
	case "ms", "h", "d":
		l.Type = statsdTimer
	case "s":
		l.Type = statsdSet
	default:
		return fmt.Errorf("unknown type %s", quote(sec))
	}
	for v := range bytes.SplitSeq(nv[colon+1:], []byte(":")) {
		if len(v) == 0 {
			return errors.New("empty value")
		}
		if l.Type != statsdSet {
			if err := checkNumber(v, l.Type == statsdGauge); err != nil {
				return err
			}
		}
		l.Values = append(l.Values, string(v))
	}
	for len(rest) > 0 {
		sec, rest, _ = bytes.Cut(rest, []byte("|"))
		switch {
		case len(sec) > 1 && sec[0] == '@':
			r, err := strconv.ParseFloat(string(sec[1:]), 64)
			if err != nil || !(r > 0 && r <= 1) {
				return fmt.Errorf("invalid sample rate %s (want a number in (0, 1])", quote(sec[1:]))
			}
			l.Rate = r
		case len(sec) > 0 && sec[0] == '#':
			for t := range bytes.SplitSeq(sec[1:], []byte(",")) {
				if len(t) == 0 {
					continue
				}
				k, v, _ := bytes.Cut(t, []byte(":"))
				if len(k) == 0 {
					return fmt.Errorf("empty tag key in %s", quote(t))
				}
				if string(k) == "metric" {
					return errors.New(`tag key "metric" is reserved for the series name`)
				}
				l.Tags = append(l.Tags, kv{string(k), string(v)})
			}
		case bytes.HasPrefix(sec, []byte("c:")), len(sec) > 1 && sec[0] == 'T':
			// DogStatsD container id and timestamp: ignored.
		default:
			return fmt.Errorf("unknown section %s", quote(sec))
		}
	}
	sortTags(l.Tags)
	for i := 1; i < len(l.Tags); i++ {
		if l.Tags[i].k == l.Tags[i-1].k {
			return fmt.Errorf("duplicate tag key %s", quote(l.Tags[i].k))
		}
	}
	l.Name = string(name)
	return nil
}

func checkNumber(v []byte, signed bool) error {
	s := v
	if signed && (s[0] == '+' || s[0] == '-') {
		s = s[1:]
		if len(s) == 0 || s[0] == '+' || s[0] == '-' {
			return fmt.Errorf("invalid value %s", quote(v))
		}
	}
	f, err := strconv.ParseFloat(string(s), 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return fmt.Errorf("invalid value %s", quote(v))
	}
	return nil
}

// checkStatsd applies the label rules to a parsed line: the lengths of its name and tags, their
// number, and the "source" tag, which it drops when it says "push".
func (p *Push) checkStatsd(l *StatsdLine) error {
	rules := p.rules()
	n := len(l.Name)
	if l.Type == statsdTimer {
		n += p.timerLong
	}
	if err := rules.metric(n); err != nil {
		return err
	}
	tags := l.Tags[:0]
	for _, t := range l.Tags {
		keep, err := tagRule(rules, t.k, t.v)
		if err != nil {
			return err
		}
		if keep {
			tags = append(tags, t)
		}
	}
	l.Tags = tags
	return rules.count(len(tags))
}

// applyStatsd stores one parsed line. Called with p.mu held.
func (p *Push) applyStatsd(l *StatsdLine, now int64) error {
	if err := p.checkStatsd(l); err != nil {
		return err
	}
	p.keyBuf = appendKey(p.keyBuf[:0], byte(l.Type), l.Name, l.Tags)
	e, ok := p.entries[string(p.keyBuf)]
	if !ok {
		// One name may not be two types with the same tags: a series' kind is fixed.
		for _, t := range []statsdType{statsdCounter, statsdGauge, statsdTimer, statsdSet} {
			if t == l.Type {
				continue
			}
			p.keyBuf[0] = byte(t)
			if _, clash := p.entries[string(p.keyBuf)]; clash {
				return fmt.Errorf("%s is already a %s", quote(l.Name), t)
			}
		}
		p.keyBuf[0] = byte(l.Type)
		// Every series the metric produces counts, with its key.
		n, cost := 1, int64(len(p.keyBuf))+seriesOverhead
		switch l.Type {
		case statsdTimer:
			n = len(p.timerNames)
			cost = int64(n)*cost + int64(p.timerExtra) + prepaid*sampleBytes
		case statsdSet:
			cost += prepaid * setValueBytes
		}
		if err := p.admit(n, cost); err != nil {
			p.stats.Refused++
			return err
		}
		e = &entry{labels: pushLabels(l.Name, l.Tags), stype: l.Type, nseries: n, cost: cost}
		switch l.Type {
		case statsdTimer:
			e.timer = &timerAgg{values: make([]float64, 0, prepaid)}
		case statsdSet:
			e.set, e.setPaid = make(map[uint64]struct{}), prepaid
		}
		p.entries[string(p.keyBuf)] = e
		p.nseries += n
		p.bytes += cost
	}
	e.updated = now
	e.dirty = true
	for _, v := range l.Values {
		switch l.Type {
		case statsdCounter:
			f, _ := strconv.ParseFloat(v, 64)
			e.counter += f / l.Rate
			if e.counter < 0 {
				e.counter = 0
			}
		case statsdGauge:
			f, _ := strconv.ParseFloat(strings.TrimPrefix(v, "+"), 64)
			if v[0] == '+' || v[0] == '-' {
				e.gauge += f
			} else {
				e.gauge = f
			}
		case statsdTimer:
			f, _ := strconv.ParseFloat(v, 64)
			p.timerAdd(e, f, l.Rate)
		case statsdSet:
			p.setAdd(e, v)
		}
	}
	return nil
}

// timerAdd adds a value to a timer. Its sample grows up to MaxTimerSamples while the byte budget
// allows; past that it is a reservoir of the size it has. Called with p.mu held.
func (p *Push) timerAdd(e *entry, v, rate float64) {
	t := e.timer
	limit := p.cfg.MaxTimerSamples
	if n := len(t.values); n == cap(t.values) && n < limit {
		c := min(max(2*n, prepaid), limit)
		grow := int64(c-n) * sampleBytes
		if p.bytes+grow <= p.cfg.MaxBytes {
			t.values = append(make([]float64, 0, c), t.values...)
			e.cost += grow
			p.bytes += grow
		} else {
			limit = max(n, 1)
		}
	}
	t.add(v, rate, limit, p.rand)
}

// setAdd counts a value in a set while MaxSetSize and the byte budget allow. Called with p.mu
// held.
func (p *Push) setAdd(e *entry, v string) {
	h := maphash.String(p.seed, v)
	if _, ok := e.set[h]; ok || len(e.set) >= p.cfg.MaxSetSize {
		return
	}
	if len(e.set) >= e.setPaid {
		if p.bytes+setValueBytes > p.cfg.MaxBytes {
			p.stats.Refused++
			return
		}
		e.setPaid++
		e.cost += setValueBytes
		p.bytes += setValueBytes
	}
	e.set[h] = struct{}{}
}

// rand returns a pseudo-random number (xorshift64*); called with p.mu held.
func (p *Push) rand() uint64 {
	p.rnd ^= p.rnd >> 12
	p.rnd ^= p.rnd << 25
	p.rnd ^= p.rnd >> 27
	return p.rnd * 2685821657736338717
}

// timerAgg aggregates the values of a statsd timer or histogram over one scan interval.
type timerAgg struct {
	total    float64 // samples ever received, scaled by 1/rate
	sumTotal float64 // values ever received, each scaled by 1/rate
	n        int     // values seen this interval
	sum      float64
	min, max float64
	values   []float64 // reservoir
	refs     []*series.Ref
}

func (t *timerAgg) add(v, rate float64, maxSamples int, rnd func() uint64) {
	t.total += 1 / rate
	t.sumTotal += v / rate
	if t.n == 0 || v < t.min {
		t.min = v
	}
	if t.n == 0 || v > t.max {
		t.max = v
	}
	t.n++
	t.sum += v
	if len(t.values) < maxSamples {
		t.values = append(t.values, v)
	} else if j := rnd() % uint64(t.n); j < uint64(maxSamples) {
		t.values[j] = v
	}
}

// timerStatNames names the series of a timer after its name: <name>.count (counter: samples
// ever received, scaled by the sample rate), then per interval with samples <name>.min, .max,
// .mean and one per percentile: 0.5 is ".median", others ".p<percent>" (0.9 → p90,
// 0.999 → p99_9), and last <name>.sum (float: the values ever received, each scaled by the
// sample rate, as .count counts them). .count, .sum and the percentiles are what the
// Prometheus export writes as a summary (internal/export).
func timerStatNames(pcts []float64) []string {
	names := []string{"count", "min", "max", "mean"}
	for _, q := range pcts {
		if q == 0.5 {
			names = append(names, "median")
			continue
		}
		s := strconv.FormatFloat(q*100, 'f', -1, 64)
		names = append(names, "p"+strings.ReplaceAll(s, ".", "_"))
	}
	return append(names, "sum")
}

// collectStatsd puts the series of one statsd entry: at the scan after values arrived, and
// nothing (the series held, see registry.Hold) at a scan with nothing new. Called with p.mu
// held.
func (p *Push) collectStatsd(sink TimedSink, e *entry) {
	dirty := e.dirty
	e.dirty = false
	put := func(ref *series.Ref, bits uint64) {
		if dirty {
			sink.Put(ref, bits)
			p.stats.Points++
		} else {
			sink.Hold(ref)
		}
	}
	switch e.stype {
	case statsdCounter:
		if e.ref == nil {
			e.ref = sink.Series(e.labels, series.Counter)
		}
		put(e.ref, uint64(e.counter)) // the increments added up: a cumulative counter
	case statsdGauge:
		if e.ref == nil {
			e.ref = sink.Series(e.labels, series.Float)
		}
		put(e.ref, math.Float64bits(e.gauge))
	case statsdSet:
		if e.ref == nil {
			e.ref = sink.Series(e.labels, series.Level)
		}
		put(e.ref, uint64(len(e.set)))
		clear(e.set)
	case statsdTimer:
		t := e.timer
		if t.refs == nil {
			names := timerStatNames(p.cfg.Percentiles)
			t.refs = make([]*series.Ref, len(names))
			for i, n := range names {
				l := e.labels.Clone()
				l["metric"] = e.labels["metric"] + "." + n
				kind := series.Float
				if i == 0 {
					kind = series.Counter
				}
				t.refs[i] = sink.Series(l, kind)
			}
		}
		if t.n == 0 {
			for _, r := range t.refs {
				sink.Hold(r) // no value this interval: a gap, not an invented value
			}
			return
		}
		sink.Put(t.refs[0], uint64(t.total))
		sort.Float64s(t.values)
		p.stats.Points += uint64(len(t.refs))
		put := func(i int, f float64) { sink.Put(t.refs[i], math.Float64bits(f)) }
		put(1, t.min)
		put(2, t.max)
		put(3, t.sum/float64(t.n))
		for i, q := range p.cfg.Percentiles {
			put(4+i, quantile(t.values, q))
		}
		put(len(t.refs)-1, t.sumTotal)
		t.n, t.sum, t.values = 0, 0, t.values[:0]
	}
}

// quantile returns the q-quantile of sorted values by linear interpolation between closest
// ranks.
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 1 {
		return sorted[0]
	}
	pos := q * float64(len(sorted)-1)
	i := int(pos)
	if i >= len(sorted)-1 {
		return sorted[len(sorted)-1]
	}
	frac := pos - float64(i)
	return sorted[i] + (sorted[i+1]-sorted[i])*frac
}

// handleStatsd parses and stores a packet or chunk of newline-separated statsd lines.
func (p *Push) handleStatsd(data []byte, l *StatsdLine) {
	now := p.cfg.Now().UnixNano()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stats.StatsdPackets++
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		line = bytes.TrimRight(line, "\r")
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		err := ParseStatsdLine(line, l)
		if err == nil {
			err = p.applyStatsd(l, now)
		}
		if err != nil {
			p.stats.StatsdRejected++
			p.badSinceReport++
			p.lastBad = quote(line) + ": " + err.Error()
			continue
		}
		p.stats.StatsdLines++
	}
}
