// Package promname names the agent's series as Prometheus sees them: the machine's series as
// node_exporter 1.5 names them (node_cpu_seconds_total{cpu,mode}, node_memory_MemAvailable_bytes,
// node_network_receive_bytes_total{device}, ...), the agent's own machine series that have no
// node_exporter equivalent under promtool-clean "cantal_" names in base units, per-process series
// as cantal_process_* families (grouped by the caller, see Series.Process), the series of
// *.prom files (label TextfileLabel) under their own names, and every other series
// (applications' shm files, rrdd plugins, pushed series) by the generic rule of AppName.
//
// The /metrics export and the remote-write client both use a Mapper, so a series has the same
// name, labels, type and scale wherever it leaves the agent. docs/metrics.md ("Prometheus
// names") lists every mapping.
package promname

import (
	"math"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/prometheus/common/model"

	"github.com/cantal-go/cantal/internal/series"
)

// Type is a Prometheus metric type.
type Type uint8

// The types. Untyped is used only where node_exporter itself says untyped (its netstat and
// vmstat families), so that a family's TYPE line is the same as node_exporter's.
const (
	Untyped Type = iota
	Counter
	Gauge
	// Info is a gauge of value 1 whose information is in its labels: a Cantal state series is
	// exported with its text in the label "state" (see StateLabel).
	Info
	// Summary: quantiles plus _sum and _count (statsd timers, see the export package).
	Summary
)

// String returns the word of the exposition's TYPE line: counter, gauge, untyped or summary.
// Info is "gauge" there (the text format 0.0.4 has no info type).
func (t Type) String() string {
	switch t {
	case Counter:
		return "counter"
	case Gauge, Info:
		return "gauge"
	case Summary:
		return "summary"
	}
	return "untyped"
}

// StateLabel is the label that carries a state series' text (Type Info).
const StateLabel = "state"

// Label is one label pair.
type Label struct{ Name, Value string }

// Series is the Prometheus identity of one Cantal series and how to convert its values.
type Series struct {
	Name   string  // e.g. node_cpu_seconds_total
	Labels []Label // sorted by name, without __name__; for Info the state text is added by the caller
	Type   Type
	// Scale multiplies the stored value into the exported one (milliseconds → seconds: 0.001).
	// Use Value, which divides by 1/Scale when that is an integer so decimal values stay exact.
	Scale float64
	// Clock is set on the series an exporter takes the scan time of for node_time_seconds
	// (TimeSeries), which has no Cantal series of its own: the uptime's.
	Clock bool
	// Process is set for per-process series: Labels then holds pid, process and, when known,
	// cgroup; an exporter that groups processes (the default of /metrics) replaces them by
	// groupname and sums the values of a group.
	Process bool
	// Machine is set for the agent's own machine, cgroup and process series (node_* and
	// cantal_* names), false for applications' series named by AppName.
	Machine bool
	// Help is the HELP text of a machine series; empty for an application's series (the
	// export writes "Cantal metric <name>").
	Help string

	div float64 // 1/Scale when that is an integer, else 0
}

// Value converts a stored value (series.ToFloat of the sample) into the exported value.
func (s *Series) Value(v float64) float64 {
	switch {
	case s.div != 0:
		return v / s.div
	case s.Scale != 1 && s.Scale != 0:
		return v * s.Scale
	}
	return v
}

// Options tune a Mapper.
type Options struct {
	// DiskDevicesExclude reports disk devices left out of node_disk_*, as node_exporter's
	// --collector.diskstats.device-exclude. nil: node_exporter's default
	// (DefaultDiskDeviceExclude: RAM disks, loop devices, floppies and partitions).
	DiskDevicesExclude func(device string) bool
	// NetDevicesExclude reports network interfaces left out of node_network_*_total, as
	// node_exporter's --collector.netdev.device-exclude. nil: node_exporter's default
	// (DefaultNetDeviceExclude: lo).
	NetDevicesExclude func(device string) bool
	// TextfileType returns the type of a family read by the textfile collector
	// (internal/textfile), as its file declares it; nil or false: gauge.
	TextfileType func(name string) (Type, bool)
}

// TextfileLabel is the label of the series read from a *.prom file (internal/textfile): its
// path. Such a series, a Float with a valid Prometheus name and label names, is exported under
// its own name and labels, without this one (see Mapper.MapInto).
const TextfileLabel = "textfile"

// Mapper names Cantal series as Prometheus does. It caches the rule of each metric name it
// has seen (bounded); it is safe for concurrent use. Make one with New; the zero value is not
// usable.
type Mapper struct {
	opt Options

	mu    sync.RWMutex
	rules map[string]*rule // by metric name; nil entries: no machine rule
	app   map[appKey]string
}

type appKey struct {
	s    string
	kind uint8 // 0 metric name, 1 label name, 2 counter name, 3 a textfile's HELP (s: its path)
}

// maxCached bounds each cache; it is cleared when full.
const maxCached = 1 << 16

// New returns a Mapper with opt.
func New(opt Options) *Mapper {
	if opt.DiskDevicesExclude == nil {
		opt.DiskDevicesExclude = DefaultDiskDeviceExclude
	}
	if opt.NetDevicesExclude == nil {
		opt.NetDevicesExclude = DefaultNetDeviceExclude
	}
	return &Mapper{opt: opt, rules: make(map[string]*rule, 256), app: make(map[appKey]string, 256)}
}

// Map returns the Prometheus series of the Cantal series with labels l (which include "metric")
// and kind. It reports false for a series that is not exported: the all-CPU cpu.* series
// (node_cpu_seconds_total has only per-CPU series; sum them), a disk device excluded by
// Options.DiskDevicesExclude, an interface excluded by Options.NetDevicesExclude, the netstat
// fields node_exporter leaves out by default. Labels of the result are sorted by name.
func (m *Mapper) Map(l series.Labels, kind series.Kind) (Series, bool) {
	var s Series
	ok := m.MapInto(&s, l, kind)
	return s, ok
}

// MapInto is Map writing into *s, reusing the capacity of s.Labels: a caller mapping many
// series keeps one Series to map them without allocating.
func (m *Mapper) MapInto(s *Series, l series.Labels, kind series.Kind) bool {
	lbuf := s.Labels[:0]
	metric := l["metric"]
	if l[series.SourceLabel] == series.SourceRule {
		return recorded(s, lbuf, l, kind)
	}
	r := m.lookup(metric)
	if r != nil && r.dropBare && len(l) == 1 && (r.kind == 0 || r.kind == kind) {
		return false
	}
	if r != nil && r.matches(l, kind) {
		if r.alt != nil {
			if a := r.alt(l); a != nil {
				r = a
			}
		}
		if r.drop || r.skip(m, l) {
			return false
		}
		*s = r.series()
		if r.self != "" && kind == series.Counter {
			s.Name, s.Type = r.self, Counter
		}
		s.Labels = r.appendLabels(lbuf, l)
		sortLabels(s.Labels)
		return true
	}
	if kind < series.Counter || kind > series.State {
		return false
	}
	if path, ok := l[TextfileLabel]; ok && kind == series.Float && m.textfile(s, lbuf, l, path) {
		return true
	}
	*s = Series{Scale: 1, Labels: lbuf}
	switch kind {
	case series.Counter:
		s.Name, s.Type = m.AppCounterName(metric), Counter
	case series.State:
		s.Name, s.Type = m.AppName(metric), Info
	default:
		s.Name, s.Type = m.AppName(metric), Gauge
	}
	for k, v := range l {
		if k == "metric" || v == "" {
			continue
		}
		s.Labels = append(s.Labels, Label{k, v})
	}
	// Named in the order of the Cantal names; a name taken by an earlier label (or, for a
	// state, "state") gets "_" appended until it is free.
	sortLabels(s.Labels)
	for i := range s.Labels {
		n := m.AppLabel(s.Labels[i].Name)
		for taken(s.Labels[:i], n) || (kind == series.State && n == StateLabel) {
			n += "_"
		}
		s.Labels[i].Name = n
	}
	sortLabels(s.Labels)
	return true
}

func taken(ls []Label, n string) bool {
	for _, l := range ls {
		if l.Name == n {
			return true
		}
	}
	return false
}

func sortLabels(ls []Label) {
	for i := 1; i < len(ls); i++ {
		for j := i; j > 0 && ls[j].Name < ls[j-1].Name; j-- {
			ls[j], ls[j-1] = ls[j-1], ls[j]
		}
	}
}

// AppName returns the Prometheus metric name of an application's metric name (see Name).
func (m *Mapper) AppName(metric string) string { return m.cached(appKey{metric, 0}) }

// AppLabel returns the Prometheus label name of an application's label name (see Name).
func (m *Mapper) AppLabel(label string) string { return m.cached(appKey{label, 1}) }

// AppCounterName returns the Prometheus name of an application's counter: AppName with the
// suffix "_total" unless it has it.
func (m *Mapper) AppCounterName(metric string) string { return m.cached(appKey{metric, 2}) }

func (m *Mapper) cached(k appKey) string {
	m.mu.RLock()
	n, ok := m.app[k]
	m.mu.RUnlock()
	if ok {
		return n
	}
	switch k.kind {
	case 0:
		n = Name(k.s, true)
	case 1:
		n = Name(k.s, false)
	case 3: // the HELP of a textfile's family, as node_exporter writes it
		n = "Metric read from " + k.s
	case 2:
		n = Name(k.s, true)
		if !strings.HasSuffix(n, "_total") {
			n += "_total"
			if strings.HasPrefix(n, "__") { // "_" + "_total"
				n = "metric" + n
			}
		}
	}
	m.mu.Lock()
	if len(m.app) >= maxCached {
		clear(m.app)
	}
	m.app[k] = n
	m.mu.Unlock()
	return n
}

// MapExtra maps the second series a Cantal series gives, if it has one, into *s (reusing
// s.Labels) and returns its value: node_os_version, whose value is the major.minor number of
// system.os's version_id label. It reports false for every other series, and for a version_id
// that is not a number.
func (m *Mapper) MapExtra(s *Series, l series.Labels, kind series.Kind) (float64, bool) {
	r := m.lookup(l["metric"])
	if r == nil || r.extra == nil || !r.matches(l, kind) {
		return 0, false
	}
	x := r.extra
	v := l[x.valueOf]
	if i := strings.IndexByte(v, '.'); i >= 0 { // major.minor, as node_exporter
		if j := strings.IndexByte(v[i+1:], '.'); j >= 0 {
			v = v[:i+1+j]
		}
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false
	}
	lbuf := s.Labels[:0]
	*s = x.series()
	s.Labels = x.appendLabels(lbuf, l)
	sortLabels(s.Labels)
	return f, true
}

// MapCAdvisor maps a container's cgroup series (one labelled container_id, see
// internal/containers) into *s (reusing s.Labels) under cAdvisor's name for it
// (container_cpu_usage_seconds_total, container_memory_rss, ...) with cAdvisor's labels: id (the
// cgroup's path), name (the container's name) and image; a Kubernetes container's (labelled
// pod) also container (its Kubernetes name), pod and namespace, as kubelet's cAdvisor labels
// them. It reports false for every other series. The value is s.Value of the series' own.
func (m *Mapper) MapCAdvisor(s *Series, l series.Labels, kind series.Kind) bool {
	r := m.lookup(l["metric"])
	if r == nil || r.cadv == nil || l["container_id"] == "" || !r.matches(l, kind) {
		return false
	}
	lbuf := s.Labels[:0]
	*s = r.cadv.series()
	if pod := l["pod"]; pod != "" {
		lbuf = append(lbuf, Label{"container", l["container"]}, Label{"id", CgroupPath(l["cgroup"])}, Label{"image", l["image"]},
			Label{"name", l["container_id"]}, Label{"namespace", l["namespace"]}, Label{"pod", pod})
	} else {
		lbuf = append(lbuf, Label{"id", CgroupPath(l["cgroup"])}, Label{"image", l["image"]}, Label{"name", l["container"]})
	}
	// The family's own label: a block device (cAdvisor's is its path) or an interface.
	for _, f := range r.cadv.from {
		v := l[f]
		if f == "device" && !strings.Contains(v, ":") {
			v = "/dev/" + v
		}
		lbuf = append(lbuf, Label{f, v})
	}
	s.Labels = lbuf
	if len(r.cadv.from) > 0 {
		sortLabels(s.Labels)
	}
	return true
}

// MapTwin maps into *s (reusing s.Labels) the cAdvisor series a container's cgroup series is
// exported as beside primary, its Map result (see MapCAdvisor): only a machine series has one.
// /metrics and MapAll decide by it, so that a series has the same twin wherever it leaves.
func (m *Mapper) MapTwin(s *Series, primary *Series, l series.Labels, kind series.Kind) bool {
	return primary.Machine && m.MapCAdvisor(s, l, kind)
}

// MapAll appends to dst every Prometheus series the Cantal series with labels l and kind is
// exported as, as /metrics writes them: Map's, then, for a container's cgroup series, its
// cAdvisor twin (MapTwin). Each has its own Labels. It appends nothing for a series Map does not
// export. The remote-write client names series by it (one Cantal sample, one sample of each).
func (m *Mapper) MapAll(dst []Series, l series.Labels, kind series.Kind) []Series {
	var s Series
	if !m.MapInto(&s, l, kind) {
		return dst
	}
	dst = append(dst, s)
	var t Series
	if m.MapTwin(&t, &s, l, kind) {
		dst = append(dst, t)
	}
	return dst
}

// CgroupPath is the cgroup path of a cgroup name for cAdvisor's id label: "/" and the name's
// dot-separated components ("libpod_parent.libpod-<id>" is "/libpod_parent/libpod-<id>",
// "docker.<id>" is "/docker/<id>"). The agent's names strip systemd's ".slice" and ".scope",
// so under the systemd cgroup driver the path is the name's, not the kernel's.
func CgroupPath(name string) string { return "/" + strings.ReplaceAll(name, ".", "/") }

// Name converts an application's metric name (metric true) or label name to a Prometheus
// name: ASCII letters are lower-cased with camelCase turned into snake_case (fooBar → foo_bar,
// HTTPServer → http_server), every character other than a letter, digit or underscore becomes
// "_" (requests.number → requests_number, colons included: they are reserved for recording
// rules), and a leading digit gets a "_" prefix. A name starting with "__", reserved by
// Prometheus, gets the prefix "metric" (metric names) or "label" (label names).
func Name(s string, metric bool) string {
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

// recorded maps a series recorded by a rule file (source="rule", see internal/promrules)
// back to the series the rule recorded: its name, its labels without source, the Prometheus
// labels "metric" and "source" (held as ":metric" and ":source") under their own names; a
// gauge.
func recorded(s *Series, lbuf []Label, l series.Labels, kind series.Kind) bool {
	if kind != series.Float || l["metric"] == "" {
		return false
	}
	*s = Series{Name: l["metric"], Type: Gauge, Scale: 1, Labels: lbuf, Help: "Recorded by a rule file"}
	for k, v := range l {
		if k == "metric" || k == series.SourceLabel || v == "" {
			continue
		}
		if k == ":metric" || k == ":source" {
			k = k[1:]
		}
		s.Labels = append(s.Labels, Label{k, v})
	}
	sortLabels(s.Labels)
	return true
}

// textfile maps a series of the textfile collector verbatim: its name, its labels but
// TextfileLabel, its family's type. It reports false (the series is named as an application's)
// unless the name and label names are valid Prometheus names not reserved by Prometheus (no
// leading "__", no colon: colons are for recording rules), and the series is not pushed.
func (m *Mapper) textfile(s *Series, lbuf []Label, l series.Labels, path string) bool {
	metric := l["metric"]
	if !model.LegacyValidation.IsValidMetricName(metric) || strings.HasPrefix(metric, "__") || strings.ContainsRune(metric, ':') ||
		l[series.SourceLabel] == series.SourcePush {
		return false
	}
	for k := range l {
		if k != "metric" && (!model.LegacyValidation.IsValidLabelName(k) || strings.HasPrefix(k, "__")) {
			return false
		}
	}
	typ := Gauge
	if m.opt.TextfileType != nil {
		if t, ok := m.opt.TextfileType(metric); ok {
			typ = t
		}
	}
	*s = Series{Name: metric, Type: typ, Scale: 1, Labels: lbuf, Help: m.cached(appKey{path, 3})}
	for k, v := range l {
		if k == "metric" || k == TextfileLabel || v == "" {
			continue
		}
		s.Labels = append(s.Labels, Label{k, v})
	}
	sortLabels(s.Labels)
	return true
}
