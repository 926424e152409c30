// Package export encodes the agent's latest samples for other monitoring systems: the
// Prometheus text exposition format 0.0.4 and OpenMetrics 1.0 (chosen by content negotiation)
// and InfluxDB line protocol.
//
// # Prometheus names
//
// Names come from a promname.Mapper (internal/promname; docs/metrics.md, "Prometheus names",
// has the whole table). The machine's series are named as node_exporter 1.5 names them
// (node_cpu_seconds_total{cpu,mode}, node_memory_MemAvailable_bytes, node_load1, ...), with
// node_exporter's types and base units; node_time_seconds is written with the scan time of the
// machine's series. The agent's own machine series without a node_exporter equivalent get
// "cantal_" names (cantal_tcp_sockets{state}, cantal_cgroup_cpu_seconds_total{cgroup,mode}).
//
// Applications' series (shm files, rrdd plugins, pushed series) are named from their "metric"
// label by promname.Name: requests.number → requests_number, fooBar → foo_bar; counters get
// "_total"; other labels are labels, named the same way; empty values are left out. When
// different original names map to one application family, each sample also carries the label
// cantal_metric="<original name>" so that no two samples collide. A family whose name is taken
// by a family of another type takes the suffix "_<type>" ("_gauge"), by a machine family "_app".
// Counters are counters, levels and floats gauges. A state is an info-like gauge: the series'
// labels plus state="<text>", value 1; a series with no state (since 0) is left out.
//
// A statsd timer (internal/ingest: pushed series <name>.count, .sum and the percentiles
// .median, .p90, ... of one label set) is a summary <name>: quantile="0.5", "0.9", ... from the
// percentiles, which cover the values of the latest scan interval, and <name>_sum and
// <name>_count over every value received; its .min, .max and .mean stay gauges.
//
// # Process groups
//
// Per-process series are summed per group, as process-exporter does: the group of a process
// is its Cantal application (the appname label of its applications' series), else its cgroup,
// else its command name; the label groupname names it. The families are
// cantal_process_cpu_seconds_total{groupname,mode}, cantal_process_memory_bytes{groupname,
// memtype=resident|virtual|swapped}, cantal_process_num_threads, cantal_process_read_bytes_total,
// cantal_process_write_bytes_total and cantal_process_num_procs{groupname} (processes with
// series). A group's counters never go down when a member exits: the last values of members
// gone since are kept in the group's sum (for 10 minutes after the group's last member is gone),
// so rate() sees no false reset. That state is kept only for callers who see every series; for a
// caller restricted by Options.Visible the sums are of the processes it sees. Options.PerPID
// exports the same families per pid instead (labels pid, process, cgroup) and no num_procs.
//
// HELP of a machine family is node_exporter's; of an application family it names the original
// metric. Timestamps are left out unless Options.Timestamps is set (the agent sets it unless
// --metrics-no-timestamps: its samples were read at their scan, not at the scrape).
package export

import (
	"context"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/cantal-go/cantal/internal/buildinfo"
	"github.com/cantal-go/cantal/internal/promname"
	"github.com/cantal-go/cantal/internal/series"
	dto "github.com/prometheus/client_model/go"
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
	// PerPID exports per-process series per pid (labels pid, process, cgroup) instead of per
	// group (label groupname, see the package comment).
	PerPID bool
	// Visible, read by PrometheusHandler only, returns for a request's context the predicate of
	// the samples its caller may see, or nil for every sample (the agent's
	// api.Server.SeriesVisible). nil: every sample.
	Visible func(ctx context.Context) func(series.Labels) bool
	// Mapper names the series; nil: a Mapper with default options, made at first use.
	Mapper *promname.Mapper
	// BuildInfo, read by PrometheusHandler only, when set makes every exposition begin with
	// the gauge cantal_build_info{version,revision,goversion} 1, as Prometheus's build_info.
	BuildInfo *buildinfo.Info

	// Gather, when set, returns families written after the series' (the agent's process_*
	// self-metrics); called once per exposition, from its goroutine.
	Gather func() []*dto.MetricFamily
}

// Prom encodes samples in the Prometheus text or OpenMetrics format. The zero value is ready to
// use. It keeps buffers and the process groups' counter state (see the package comment) between
// calls, so keep one per goroutine and feed it the same source (a Prom is not safe for
// concurrent use; PrometheusHandler shares the group state of its Proms under a lock).
type Prom struct {
	Options

	groups *groupState // nil: made at first use; PrometheusHandler sets a shared one

	mapped []promname.Series // per sample
	famIdx map[string]int32  // family by name as written in the text format
	famOM  map[string]int32  // family by OpenMetrics family name
	famRes map[famKey]int32  // family of a mapped name, type and machine flag
	fams   []family
	items  []item
	order  []int32 // item indices grouped by family
	grp    []groupItem
	grpIdx map[string]int32
	appOf  map[string]string // pid → appname
	timers []timerParts
	tIdx   map[string]int32
	key    []byte
	lbuf   []promname.Label
	extra  promname.Series // scratch of MapExtra
}

type family struct {
	name    string // sample name; for OpenMetrics counters, name minus "_total" is the family
	typ     promname.Type
	machine bool
	help    string
	orig    string // first original metric name
	multi   bool   // more than one original metric name (applications' series only)
	first   int32  // index of first item in order
	count   int32
	states  bool
}

// item is one line to write: a sample (sample ≥ 0) or a group's sum (grp ≥ 0).
type item struct {
	fam    int32
	sample int32
	grp    int32
	part   int8   // a statsd timer's summary: partQuantile, partSum, partCount; else 0
	q      string // quantile label of a partQuantile
}

// The lines of a summary.
const (
	partQuantile = 1 + iota
	partSum
	partCount
)

// timerParts are the series of one statsd timer (internal/ingest): <base>.count, .sum and the
// percentiles (.median, .p90, ...) of one label set, written as the summary <base>.
type timerParts struct {
	base       string
	count, sum int32
	qs         []timerQuantile
}

type timerQuantile struct {
	q   string
	idx int32
}

// groupItem is the sum of a process group's series of one family and label set.
type groupItem struct {
	s       promname.Series
	v       float64
	ts      int64
	counter bool
	key     string
}

// Append appends the exposition of samples in format f to dst and returns it. Samples of one
// family are written together, in the order the family first appears (the machine's families
// first), so the output is deterministic for a given input order.
func (e *Prom) Append(dst []byte, samples []series.Sample, f Format) []byte {
	return e.append(dst, samples, f, true)
}

func (e *Prom) append(dst []byte, samples []series.Sample, f Format, trackGroups bool) []byte {
	if e.Mapper == nil {
		e.Mapper = promname.New(promname.Options{})
	}
	if e.groups == nil {
		e.groups = newGroupState()
	}
	if e.famIdx == nil {
		e.famIdx = make(map[string]int32, 256)
		e.famOM = make(map[string]int32, 256)
		e.famRes = make(map[famKey]int32, 256)
		e.grpIdx = make(map[string]int32, 256)
		e.appOf = make(map[string]string, 64)
		e.tIdx = make(map[string]int32, 16)
	} else {
		clear(e.tIdx)
		clear(e.famIdx)
		clear(e.famOM)
		clear(e.famRes)
		clear(e.grpIdx)
		clear(e.appOf)
	}
	e.fams, e.items, e.grp, e.timers = e.fams[:0], e.items[:0], e.grp[:0], e.timers[:0]
	if cap(e.mapped) < len(samples) {
		e.mapped = append(e.mapped[:cap(e.mapped)], make([]promname.Series, len(samples)-cap(e.mapped))...)
	}
	e.mapped = e.mapped[:len(samples)]
	// Pass 1: map every sample; note the applications' pids.
	ok := make([]bool, len(samples))
	var timeTS int64 = -1
	for i := range samples {
		s := &samples[i]
		if s.Kind == series.State && (e.SkipStates || s.Since == 0) {
			continue
		}
		ok[i] = e.Mapper.MapInto(&e.mapped[i], s.Labels, s.Kind)
		if !ok[i] {
			continue
		}
		if e.mapped[i].Clock && timeTS < 0 {
			timeTS = s.TS
		}
		if e.mapped[i].Machine && s.Kind == series.State {
			if v, ok := e.Mapper.MapExtra(&e.extra, s.Labels, s.Kind); ok {
				x := e.extra
				x.Labels = slices.Clone(e.extra.Labels)
				e.grp = append(e.grp, groupItem{s: x, v: v, ts: s.TS})
			}
		}
		if s.Labels["container_id"] != "" && e.Mapper.MapTwin(&e.extra, &e.mapped[i], s.Labels, s.Kind) {
			x := e.extra // a container's series under cAdvisor's name too
			x.Labels = slices.Clone(e.extra.Labels)
			e.grp = append(e.grp, groupItem{s: x, v: x.Value(series.ToFloat(s.Kind, s.Bits)), ts: s.TS})
		}
		if !e.mapped[i].Machine && s.Labels["source"] == "push" {
			e.timerPart(s, &e.mapped[i], int32(i))
		}
		if a := s.Labels["appname"]; a != "" && !e.mapped[i].Machine {
			if p := s.Labels["pid"]; p != "" {
				e.appOf[p] = a
			}
		}
	}
	// statsd timers with their count and sum become summaries.
	for ti := range e.timers {
		tp := &e.timers[ti]
		if tp.count < 0 || tp.sum < 0 {
			continue
		}
		ok[tp.count], ok[tp.sum] = false, false
		for _, q := range tp.qs {
			ok[q.idx] = false
		}
	}
	// Pass 2: families, the machine's first, then applications'; process series go to their
	// groups unless per pid.
	var tr *groupTracker
	if !e.PerPID && trackGroups {
		tr = e.groups.begin()
	}
	for pass := 0; pass < 2; pass++ {
		for i := range samples {
			if !ok[i] {
				continue
			}
			ms := &e.mapped[i]
			if ms.Machine != (pass == 0) {
				continue
			}
			if ms.Process && !e.PerPID {
				e.addToGroup(&samples[i], ms, tr)
				continue
			}
			fi := e.family(ms, samples[i].Labels["metric"], samples[i].Kind == series.State && !ms.Machine)
			e.items = append(e.items, item{fam: fi, sample: int32(i), grp: -1})
		}
		if pass == 0 {
			if tr != nil {
				e.groups.end(tr)
				for g := range e.grp {
					if e.grp[g].counter {
						e.grp[g].v += tr.offset(e.grp[g].key)
					}
				}
				e.groups.done()
			}
			for g := range e.grp {
				fi := e.family(&e.grp[g].s, "", false)
				e.items = append(e.items, item{fam: fi, sample: -1, grp: int32(g)})
			}
			if timeTS >= 0 {
				ts := promname.TimeSeries()
				e.grp = append(e.grp, groupItem{s: ts, v: float64(timeTS) / 1000, ts: timeTS})
				fi := e.family(&e.grp[len(e.grp)-1].s, "", false)
				e.items = append(e.items, item{fam: fi, sample: -1, grp: int32(len(e.grp) - 1)})
			}
		}
	}
	for ti := range e.timers {
		tp := &e.timers[ti]
		if tp.count < 0 || tp.sum < 0 {
			continue
		}
		sum := promname.Series{Name: e.Mapper.AppName(tp.base), Type: promname.Summary}
		fi := e.family(&sum, tp.base, false)
		for _, q := range tp.qs {
			e.items = append(e.items, item{fam: fi, sample: q.idx, grp: -1, part: partQuantile, q: q.q})
		}
		e.items = append(e.items, item{fam: fi, sample: tp.sum, grp: -1, part: partSum},
			item{fam: fi, sample: tp.count, grp: -1, part: partCount})
		e.fams[fi].count += int32(len(tp.qs)) + 1 // family counted one line
	}
	// Pass 3: group items by family (counting sort).
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
	for i := range e.items {
		fi := e.items[i].fam
		e.order[next[fi]] = int32(i)
		next[fi]++
	}
	// Pass 4: write.
	for i := range e.fams {
		fm := &e.fams[i]
		dst = e.appendHeader(dst, fm, f)
		for _, ii := range e.order[fm.first : fm.first+fm.count] {
			it := &e.items[ii]
			switch {
			case it.part != 0:
				dst = e.appendSummaryLine(dst, fm, it, &e.mapped[it.sample], &samples[it.sample], f)
			case it.sample >= 0:
				dst = e.appendSample(dst, fm, &e.mapped[it.sample], &samples[it.sample], f)
			default:
				g := &e.grp[it.grp]
				dst = e.appendLine(dst, fm, g.s.Labels, "", "", g.ts, f)
				dst = appendFloat(dst, g.v)
				dst = e.appendEnd(dst, g.ts, f)
			}
		}
	}
	dst = e.appendGathered(dst, f)
	if f == FormatOpenMetrics {
		dst = append(dst, "# EOF\n"...)
	}
	return dst
}

// timerPart notes a pushed series that may be part of a statsd timer.
func (e *Prom) timerPart(s *series.Sample, ms *promname.Series, idx int32) {
	m := s.Labels["metric"]
	dot := strings.LastIndexByte(m, '.')
	if dot <= 0 {
		return
	}
	suffix, q := m[dot+1:], ""
	switch {
	case suffix == "count" && s.Kind == series.Counter, suffix == "sum" && s.Kind == series.Float:
	case suffix == "median" && s.Kind == series.Float:
		q = "0.5"
	case len(suffix) > 1 && suffix[0] == 'p' && s.Kind == series.Float:
		if q = percentQuantile(suffix[1:]); q == "" {
			return
		}
	default:
		return
	}
	e.key = append(e.key[:0], m[:dot]...)
	for _, l := range ms.Labels {
		if l.Name == "quantile" { // the summary's own label: such a timer stays gauges
			return
		}
		e.key = append(e.key, 0xff)
		e.key = append(e.key, l.Name...)
		e.key = append(e.key, 0xfe)
		e.key = append(e.key, l.Value...)
	}
	ti, found := e.tIdx[string(e.key)]
	if !found {
		ti = int32(len(e.timers))
		e.tIdx[string(e.key)] = ti
		e.timers = append(e.timers, timerParts{base: m[:dot], count: -1, sum: -1})
	}
	tp := &e.timers[ti]
	switch suffix {
	case "count":
		tp.count = idx
	case "sum":
		tp.sum = idx
	default:
		tp.qs = append(tp.qs, timerQuantile{q, idx})
	}
}

// percentQuantile turns the percent of a timer's ".p<percent>" series, as internal/ingest
// writes it ("90", "99_9"), into the quantile label ("0.9", "0.999"); "" if it is not one.
func percentQuantile(p string) string {
	whole, frac, _ := strings.Cut(p, "_")
	if whole == "" || len(whole) > 2 {
		return ""
	}
	for _, c := range whole + frac {
		if c < '0' || c > '9' {
			return ""
		}
	}
	if len(whole) == 1 {
		whole = "0" + whole
	}
	q := strings.TrimRight("0."+whole+frac, "0")
	if q == "0." {
		return ""
	}
	return q
}

func (e *Prom) appendSummaryLine(dst []byte, fm *family, it *item, ms *promname.Series, s *series.Sample, f Format) []byte {
	switch it.part {
	case partQuantile:
		dst = e.appendLine(dst, fm, ms.Labels, "quantile", it.q, s.TS, f)
	default:
		name := fm.name
		if it.part == partSum {
			fm.name += "_sum"
		} else {
			fm.name += "_count"
		}
		dst = e.appendLine(dst, fm, ms.Labels, "", "", s.TS, f)
		fm.name = name
	}
	if s.Kind == series.Counter {
		dst = strconv.AppendUint(dst, s.Bits, 10)
	} else {
		dst = appendFloat(dst, series.ToFloat(s.Kind, s.Bits))
	}
	return e.appendEnd(dst, s.TS, f)
}

// family returns the index of the family of ms, making it. A family of the same name but
// another type, or a machine family met by an application's series, makes the later one take
// the suffix "_" + its type ("_gauge", "_counter", ...), then "_app".
func (e *Prom) family(ms *promname.Series, orig string, state bool) int32 {
	rk := famKey{ms.Name, ms.Type, ms.Machine}
	if idx, ok := e.famRes[rk]; ok {
		fm := &e.fams[idx]
		fm.count++
		if state {
			fm.states = true
		}
		if !ms.Machine && fm.orig != orig {
			fm.multi = true
		}
		return idx
	}
	idx := e.familySlow(ms, orig, state)
	e.famRes[rk] = idx
	return idx
}

// famKey is what decides a sample's family.
type famKey struct {
	name    string
	typ     promname.Type
	machine bool
}

func (e *Prom) familySlow(ms *promname.Series, orig string, state bool) int32 {
	name := ms.Name
	for {
		// A family is known by its sample name (text format) and its OpenMetrics family name
		// (a counter's without "_total"); either may be taken.
		om := name
		if ms.Type == promname.Counter {
			om = strings.TrimSuffix(name, "_total")
		}
		idx, found := e.famIdx[name]
		if !found {
			idx, found = e.famOM[om]
		}
		if !found {
			idx = int32(len(e.fams))
			e.famIdx[name] = idx
			e.famOM[om] = idx
			e.fams = append(e.fams, family{name: name, typ: ms.Type, machine: ms.Machine, help: ms.Help, orig: orig})
		}
		fm := &e.fams[idx]
		sameType := fm.typ == ms.Type || (fm.typ == promname.Gauge && ms.Type == promname.Info) ||
			(fm.typ == promname.Info && ms.Type == promname.Gauge)
		if fm.name == name && sameType && fm.machine == ms.Machine {
			fm.count++
			if state {
				fm.states = true
			}
			if !ms.Machine && fm.orig != orig {
				fm.multi = true
			}
			return idx
		}
		if !sameType && !strings.HasSuffix(name, "_"+ms.Type.String()) {
			name += "_" + ms.Type.String()
		} else {
			name += "_app"
		}
	}
}

// addToGroup adds a per-process sample to its group's sum. The group of a process is its
// application (label appname of its applications' series), else its cgroup, else its command
// name.
func (e *Prom) addToGroup(s *series.Sample, ms *promname.Series, tr *groupTracker) {
	pid := s.Labels["pid"]
	gname := e.appOf[pid]
	if gname == "" {
		gname = s.Labels["cgroup"]
	}
	if gname == "" {
		gname = s.Labels["process"]
	}
	e.lbuf = e.lbuf[:0]
	for _, l := range ms.Labels {
		if l.Name != "pid" && l.Name != "process" && l.Name != "cgroup" {
			e.lbuf = append(e.lbuf, l)
		}
	}
	e.lbuf = append(e.lbuf, promname.Label{Name: "groupname", Value: gname})
	v := ms.Value(series.ToFloat(s.Kind, s.Bits))
	e.addGroup(ms, e.lbuf, v, s.TS, pid, tr)
	if s.Labels["metric"] == "process.threads" { // every process with series has threads
		e.addGroup(&numProcs, e.lbuf[len(e.lbuf)-1:], 1, s.TS, "", nil)
	}
}

var numProcs = promname.Series{Name: "cantal_process_num_procs", Type: promname.Gauge, Scale: 1, Machine: true,
	Help: "Processes in the group."}

func (e *Prom) addGroup(ms *promname.Series, labels []promname.Label, v float64, ts int64, pid string, tr *groupTracker) {
	e.key = append(e.key[:0], ms.Name...)
	for _, l := range labels {
		e.key = append(e.key, 0xff)
		e.key = append(e.key, l.Name...)
		e.key = append(e.key, 0xfe)
		e.key = append(e.key, l.Value...)
	}
	gi, ok := e.grpIdx[string(e.key)]
	if !ok {
		gi = int32(len(e.grp))
		g := groupItem{s: *ms, ts: ts, counter: ms.Type == promname.Counter, key: string(e.key)}
		g.s.Labels = slices.Clone(labels)
		slices.SortFunc(g.s.Labels, func(a, b promname.Label) int { return strings.Compare(a.Name, b.Name) })
		g.s.Process = false
		e.grp = append(e.grp, g)
		e.grpIdx[g.key] = gi
	}
	g := &e.grp[gi]
	if g.counter && tr != nil {
		tr.member(g.key, pid, v)
	}
	g.v += v
	g.ts = max(g.ts, ts)
}

func (e *Prom) appendHeader(dst []byte, fm *family, f Format) []byte {
	famName := fm.name
	typ := fm.typ.String()
	switch {
	case fm.typ == promname.Counter && f == FormatOpenMetrics && !strings.HasSuffix(famName, "_total"):
		// A counter named without _total (a textfile's: the text format allows it) cannot be an
		// OpenMetrics counter, whose samples end in _total: it is unknown there.
		typ = "unknown"
	case fm.typ == promname.Counter && f == FormatOpenMetrics:
		famName = strings.TrimSuffix(famName, "_total")
	case fm.typ == promname.Untyped && f == FormatOpenMetrics:
		typ = "unknown"
	}
	dst = append(dst, "# HELP "...)
	dst = append(dst, famName...)
	dst = append(dst, ' ')
	if fm.help != "" {
		dst = appendEscaped(dst, fm.help, f == FormatOpenMetrics)
	} else {
		dst = append(dst, "Cantal metric "...)
		help := fm.orig
		if fm.multi {
			help += " and others"
		}
		dst = appendEscaped(dst, help, f == FormatOpenMetrics)
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

// appendLine writes a sample's name and labels and the space before its value; extraName (if
// not empty) is one more label.
func (e *Prom) appendLine(dst []byte, fm *family, labels []promname.Label, extraName, extraValue string, ts int64, f Format) []byte {
	dst = append(dst, fm.name...)
	n := 0
	for _, l := range labels {
		name := l.Name
		if fm.multi && name == "cantal_metric" {
			name = "cantal_metric_"
		}
		dst = appendLabel(dst, n, name, l.Value)
		n++
	}
	if extraName != "" {
		dst = appendLabel(dst, n, extraName, extraValue)
		n++
	}
	if n > 0 {
		dst = append(dst, '}')
	}
	return append(dst, ' ')
}

func (e *Prom) appendEnd(dst []byte, ts int64, f Format) []byte {
	if e.Timestamps {
		dst = append(dst, ' ')
		if f == FormatOpenMetrics { // seconds, with the milliseconds as decimals
			dst = appendMillisAsSeconds(dst, ts)
		} else {
			dst = strconv.AppendInt(dst, ts, 10)
		}
	}
	return append(dst, '\n')
}

func (e *Prom) appendSample(dst []byte, fm *family, ms *promname.Series, s *series.Sample, f Format) []byte {
	switch {
	case s.Kind == series.State && ms.Machine: // an info series: its labels say it all
		dst = e.appendLine(dst, fm, ms.Labels, "", "", s.TS, f)
	case s.Kind == series.State:
		if fm.multi {
			// cantal_metric then state: two extra labels.
			dst = e.appendLine(dst, fm, ms.Labels, "cantal_metric", s.Labels["metric"], s.TS, f)
			dst = dst[:len(dst)-2] // "} "
			dst = appendLabel(dst, 1, promname.StateLabel, s.Text)
			dst = append(dst, "} "...)
		} else {
			dst = e.appendLine(dst, fm, ms.Labels, promname.StateLabel, s.Text, s.TS, f)
		}
	case fm.multi:
		dst = e.appendLine(dst, fm, ms.Labels, "cantal_metric", s.Labels["metric"], s.TS, f)
	default:
		dst = e.appendLine(dst, fm, ms.Labels, "", "", s.TS, f)
	}
	exact := ms.Scale == 1
	switch {
	case s.Kind == series.State:
		dst = append(dst, '1')
	case exact && s.Kind == series.Counter:
		dst = strconv.AppendUint(dst, s.Bits, 10)
	case exact && s.Kind == series.Level:
		dst = strconv.AppendInt(dst, int64(s.Bits), 10)
	default:
		dst = appendFloat(dst, ms.Value(series.ToFloat(s.Kind, s.Bits)))
	}
	return e.appendEnd(dst, s.TS, f)
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

// appendMillisAsSeconds appends unix-ms ts in seconds: 1700000000123 → 1700000000.123,
// 1700000000000 → 1700000000.
func appendMillisAsSeconds(dst []byte, ts int64) []byte {
	if ts < 0 {
		return strconv.AppendFloat(dst, float64(ts)/1000, 'f', -1, 64)
	}
	dst = strconv.AppendInt(dst, ts/1000, 10)
	ms := ts % 1000
	if ms == 0 {
		return dst
	}
	dst = append(dst, '.', byte('0'+ms/100), byte('0'+ms/10%10), byte('0'+ms%10))
	for dst[len(dst)-1] == '0' {
		dst = dst[:len(dst)-1]
	}
	return dst
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
	if opts.Mapper == nil {
		opts.Mapper = promname.New(promname.Options{})
	}
	return &promHandler{source: source, opts: opts, groups: newGroupState(), preamble: buildInfoFamily(opts.BuildInfo)}
}

// buildInfoFamily is the cantal_build_info family for in (nil: none), the same in the text
// format and OpenMetrics.
func buildInfoFamily(in *buildinfo.Info) []byte {
	if in == nil {
		return nil
	}
	b := []byte("# HELP cantal_build_info A metric with a constant '1' value labeled by version, revision and goversion from which cantal-agent was built.\n# TYPE cantal_build_info gauge\ncantal_build_info")
	b = appendLabel(b, 0, "version", in.Version)
	b = appendLabel(b, 1, "revision", in.Revision)
	b = appendLabel(b, 2, "goversion", in.GoVersion)
	return append(b, "} 1\n"...)
}
