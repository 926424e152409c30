package alerts

import (
	"log/slog"
	"math"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/registry"
	"github.com/cantal-go/cantal/internal/series"
)

// PeerState is a peer as the node-down rule sees it: its name, address, membership status
// (alive, suspect, dead or left), when it was last seen and when its status last changed (unix
// ms; 0: never).
type PeerState struct {
	Name, Addr, Status  string
	LastSeenMs, SinceMs int64
}

// Defaults of Config's zero fields.
const (
	DefaultMaxSeriesPerRule = 1000
	DefaultStale            = 5 * time.Minute
	DefaultRematchScans     = 5
	// fsRematchScans: without selector rules, the pass over the series that finds new mounts'
	// fs.avail and fs.size runs at most this often (a new mount is seen within a minute).
	fsRematchScans = 30
)

// Names of the built-in rules.
const (
	RuleCPU        = "cpu_busy"
	RuleMemory     = "memory_low"
	RuleFilesystem = "filesystem_full"
	RuleNodeDown   = "node_down"
)

// Config configures an Engine. Thresholds of the built-in rules are percentages; 0 turns the
// rule off.
type Config struct {
	Node     string  // the local node's name, each alert's node
	Rules    []Rule  // the rules file's rules
	CPUBusy  float64 // cpu_busy: CPU busy (all CPUs, not idle nor iowait) above this %
	MemAvail float64 // memory_low: memory.MemAvailable below this % of memory.MemTotal
	FSAvail  float64 // filesystem_full: a mount's fs.avail below this % of its fs.size
	For      time.Duration
	// NodeDown turns node_down on: a peer that is suspect or dead and was last seen at least
	// NodeDownFor ago; its value is the seconds since it was last seen (since its status
	// changed, for a peer never seen). Peers returns the membership (nil without a cluster); it
	// is called from Eval.
	NodeDown    bool
	NodeDownFor time.Duration
	Peers       func() []PeerState
	// MaxSeriesPerRule bounds the series one rule evaluates (0: DefaultMaxSeriesPerRule); the
	// matches beyond it are left out and the rule is reported truncated.
	MaxSeriesPerRule int
	// Stale is how old a series' latest point may be and still count (0: DefaultStale, as
	// Prometheus's lookback): a series not written for longer raises nothing.
	Stale time.Duration
	// RematchScans: new series are matched against the rules at most every RematchScans scans
	// (0: DefaultRematchScans), so process churn does not cost a pass over every series per scan.
	RematchScans int
	Log          *slog.Logger
}

// Alert is one pending or firing alert, as /api/v1/alerts answers it.
type Alert struct {
	Name      string        `json:"name"`
	State     string        `json:"state"` // pending or firing
	Severity  string        `json:"severity"`
	Node      string        `json:"node"`
	Labels    series.Labels `json:"labels"` // the series' labels (read-only: shared)
	Value     float64       `json:"value"`
	Op        string        `json:"op"`
	Threshold float64       `json:"threshold"`
	SinceMs   int64         `json:"since_ms"` // when it entered its state (unix ms, scan time)
	Summary   string        `json:"summary"`
}

// Snapshot is what one evaluation published: the scan time and the alerts, firing first.
type Snapshot struct {
	TS     int64
	Alerts []Alert
	// Truncated names the rules that matched more than MaxSeriesPerRule series.
	Truncated []string
}

type kind uint8

const (
	kindUser kind = iota
	kindCPU
	kindMemory
	kindFS
	kindNodeDown
)

type match struct {
	key    string
	labels series.Labels
	kind   series.Kind
	hid    history.ID
}

type fsPair struct {
	labels      series.Labels // the mount's labels, without metric
	avail, size match
	hasA, hasS  bool
}

type rule struct {
	Rule
	kind      kind
	matches   []match
	truncated bool
}

type instKey struct {
	rule int
	key  string
}

type inst struct {
	since  int64 // when the condition started holding
	firing int64 // when it started firing; 0 while pending
}

// Engine evaluates the rules. Eval is called by one goroutine (the scan's); Alerts by any.
type Engine struct {
	cfg   Config
	rules []*rule

	// Built-in rules' series, found by rematch.
	cpu  map[string]match // mode → counter
	mem  [2]match         // MemAvailable, MemTotal
	memN [2]bool
	fs   map[string]*fsPair

	insts       map[instKey]*inst
	seen        map[instKey]bool
	hasUser     bool  // there are selector rules
	lastRematch int64 // rematches done
	sinceMatch  int   // scans since the last rematch
	needMatch   bool  // series were added or a match is gone since the last rematch
	scratch     [2]history.Point

	snap atomic.Pointer[Snapshot]
}

var cpuBusyModes = map[string]bool{"user": true, "nice": true, "system": true, "idle": true, "iowait": true, "irq": true, "softirq": true, "steal": true}

// New returns an Engine for cfg.
func New(cfg Config) *Engine {
	if cfg.MaxSeriesPerRule <= 0 {
		cfg.MaxSeriesPerRule = DefaultMaxSeriesPerRule
	}
	if cfg.Stale <= 0 {
		cfg.Stale = DefaultStale
	}
	if cfg.RematchScans <= 0 {
		cfg.RematchScans = DefaultRematchScans
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	e := &Engine{cfg: cfg, insts: map[instKey]*inst{}, seen: map[instKey]bool{}, needMatch: true}
	if cfg.CPUBusy > 0 {
		e.rules = append(e.rules, &rule{kind: kindCPU, Rule: Rule{Name: RuleCPU, Op: OpGT, Threshold: cfg.CPUBusy, For: cfg.For,
			Severity: "warning", Summary: "CPU busy (all CPUs) above threshold %"}})
	}
	if cfg.MemAvail > 0 {
		e.rules = append(e.rules, &rule{kind: kindMemory, Rule: Rule{Name: RuleMemory, Op: OpLT, Threshold: cfg.MemAvail, For: cfg.For,
			Severity: "warning", Summary: "memory available below threshold % of total"}})
	}
	if cfg.FSAvail > 0 {
		e.rules = append(e.rules, &rule{kind: kindFS, Rule: Rule{Name: RuleFilesystem, Op: OpLT, Threshold: cfg.FSAvail, For: cfg.For,
			Severity: "critical", Summary: "filesystem space available below threshold % of its size"}})
	}
	if cfg.NodeDown {
		e.rules = append(e.rules, &rule{kind: kindNodeDown, Rule: Rule{Name: RuleNodeDown, Op: OpGE, Threshold: cfg.NodeDownFor.Seconds(),
			Severity: "critical", Summary: "peer is suspect or dead in the cluster membership; value: seconds since it was last seen"}})
	}
	for _, r := range cfg.Rules {
		e.rules = append(e.rules, &rule{kind: kindUser, Rule: r})
		e.hasUser = true
	}
	e.snap.Store(&Snapshot{})
	return e
}

// Alerts returns the latest evaluation's snapshot. Safe for concurrent use; the caller must not
// modify it.
func (e *Engine) Alerts() *Snapshot { return e.snap.Load() }

// Eval evaluates every rule over view (the scan just committed) and publishes the alerts. Only
// one goroutine may call it.
func (e *Engine) Eval(v *registry.View, hist *history.Store) {
	now := v.TS
	e.sinceMatch++
	if v.Added > 0 {
		e.needMatch = true
	}
	every := e.cfg.RematchScans
	if !e.hasUser {
		every = max(every, fsRematchScans) // only mounts to find: they come and go rarely
	}
	if e.lastRematch == 0 || e.needMatch && e.sinceMatch >= every {
		e.rematch(v, hist, now)
	}
	clear(e.seen)
	var out []Alert
	var truncated []string
	for i, r := range e.rules {
		if r.truncated {
			truncated = append(truncated, r.Name)
		}
		e.evalRule(i, r, hist, now, func(key string, labels series.Labels, val float64) {
			k := instKey{i, key}
			e.seen[k] = true
			in := e.insts[k]
			if in == nil {
				in = &inst{since: now}
				e.insts[k] = in
			}
			a := Alert{Name: r.Name, State: "pending", Severity: r.Severity, Node: e.cfg.Node, Labels: labels,
				Value: val, Op: r.Op.String(), Threshold: r.Threshold, SinceMs: in.since, Summary: r.Summary}
			if in.firing == 0 && time.Duration(now-in.since)*time.Millisecond >= r.For {
				in.firing = now
			}
			if in.firing != 0 {
				a.State, a.SinceMs = "firing", in.firing
			}
			out = append(out, a)
		})
	}
	for k := range e.insts {
		if !e.seen[k] {
			delete(e.insts, k) // resolved
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := &out[i], &out[j]
		if a.State != b.State {
			return a.State == "firing"
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.Labels.Key() < b.Labels.Key()
	})
	e.snap.Store(&Snapshot{TS: now, Alerts: out, Truncated: truncated})
}

// evalRule calls hold for every instance of r whose condition holds at now.
func (e *Engine) evalRule(i int, r *rule, hist *history.Store, now int64, hold func(key string, l series.Labels, v float64)) {
	check := func(key string, l series.Labels, v float64) {
		if !math.IsNaN(v) && !math.IsInf(v, 0) && r.Op.Holds(v, r.Threshold) {
			hold(key, l, v)
		}
	}
	switch r.kind {
	case kindUser:
		for _, m := range r.matches {
			if v, ok := e.value(hist, m, r.Fn, now); ok {
				check(m.key, m.labels, v)
			}
		}
	case kindCPU:
		var total, idle float64
		n := 0
		for mode, m := range e.cpu {
			rate, ok := e.value(hist, m, FnRate, now)
			if !ok {
				return
			}
			total += rate
			if mode == "idle" || mode == "iowait" {
				idle += rate
			}
			n++
		}
		if n == 0 || total <= 0 {
			return
		}
		check("", series.Labels{"metric": "cpu.busy_pct"}, 100*(total-idle)/total)
	case kindMemory:
		if !e.memN[0] || !e.memN[1] {
			return
		}
		av, ok1 := e.value(hist, e.mem[0], FnValue, now)
		tot, ok2 := e.value(hist, e.mem[1], FnValue, now)
		if ok1 && ok2 && tot > 0 {
			check("", series.Labels{"metric": "memory.available_pct"}, 100*av/tot)
		}
	case kindFS:
		for key, p := range e.fs {
			if !p.hasA || !p.hasS {
				continue
			}
			av, ok1 := e.value(hist, p.avail, FnValue, now)
			size, ok2 := e.value(hist, p.size, FnValue, now)
			if ok1 && ok2 && size > 0 {
				check(key, p.labels, 100*av/size)
			}
		}
	case kindNodeDown:
		if e.cfg.Peers == nil {
			return
		}
		for _, p := range e.cfg.Peers() {
			if p.Status != "suspect" && p.Status != "dead" {
				continue
			}
			seen := p.LastSeenMs
			if seen == 0 {
				seen = p.SinceMs
			}
			if seen == 0 || seen > now {
				continue // no time to count from: never raised rather than raised with a made-up value
			}
			name := p.Name
			if name == "" {
				name = p.Addr
			}
			check(name, series.Labels{"peer": name, "addr": p.Addr, "status": p.Status}, float64(now-seen)/1000)
		}
	}
}

// value reads m's latest value (or rate) at now: false when it has none within Stale, when
// the series is gone (its history ID now names another series; a rematch is then asked for),
// or for a rate of something other than a counter.
func (e *Engine) value(hist *history.Store, m match, fn Fn, now int64) (float64, bool) {
	if id, _, ok := hist.Lookup(m.key); !ok || id != m.hid {
		e.needMatch = true
		return 0, false
	}
	horizon := now - e.cfg.Stale.Milliseconds()
	if fn == FnRate {
		if m.kind != series.Counter {
			return 0, false
		}
		pts := hist.Last(m.hid, 2, e.scratch[:0])
		if len(pts) != 2 || pts[1].TS < horizon {
			return 0, false
		}
		return history.Rate(pts[0], pts[1])
	}
	p, ok := hist.Latest(m.hid)
	if !ok || p.TS < horizon {
		return 0, false
	}
	switch m.kind {
	case series.Counter:
		return float64(p.Bits), true
	case series.Level:
		return float64(int64(p.Bits)), true
	case series.Float:
		return math.Float64frombits(p.Bits), true
	}
	return 0, false
}

// rematch finds the series of every rule in v: the machine's CPU and memory series by their
// keys, and the others in one pass over the view's series written within Stale, each matched
// against every selector rule (no pass when no rule needs one).
func (e *Engine) rematch(v *registry.View, hist *history.Store, now int64) {
	e.lastRematch++
	e.sinceMatch, e.needMatch = 0, false
	var users []*rule
	wantCPU, wantMem, wantFS := false, false, false
	for _, r := range e.rules {
		switch r.kind {
		case kindUser:
			r.matches, r.truncated = r.matches[:0], false
			users = append(users, r)
		case kindCPU:
			wantCPU = true
		case kindMemory:
			wantMem = true
		case kindFS:
			wantFS = true
		}
	}
	e.cpu, e.memN, e.fs = map[string]match{}, [2]bool{}, map[string]*fsPair{}
	byKey := func(l series.Labels) (match, bool) {
		key := l.Key()
		id, k, ok := hist.Lookup(key)
		return match{key: key, labels: l, kind: k, hid: id}, ok
	}
	if wantCPU {
		for mode := range cpuBusyModes {
			if m, ok := byKey(series.Labels{"metric": "cpu." + mode + "_ms"}); ok && m.kind == series.Counter {
				e.cpu[mode] = m
			}
		}
	}
	if wantMem {
		e.mem[0], e.memN[0] = byKey(series.Labels{"metric": "memory.MemAvailable"})
		e.mem[1], e.memN[1] = byKey(series.Labels{"metric": "memory.MemTotal"})
	}
	if len(users) == 0 && !wantFS {
		return
	}
	horizon := now - e.cfg.Stale.Milliseconds()
	max := e.cfg.MaxSeriesPerRule
	v.Each(func(h registry.Handle) bool {
		k := h.Kind()
		if k == series.State {
			return true
		}
		if len(users) == 0 && !strings.Contains(h.Key(), `"metric":"fs.`) {
			// Only mounts to find: a series whose key does not name an fs.* metric is none of
			// them, and its labels need not be parsed (a key is canonical JSON: series.Labels.Key),
			// nor its latest point looked up.
			return true
		}
		if !h.Live() {
			if p, ok := hist.Latest(h.HistoryID()); !ok || p.TS < horizon {
				return true
			}
		}
		l := h.Labels()
		m := match{key: h.Key(), labels: l, kind: k, hid: h.HistoryID()}
		name := l["metric"]
		if wantFS && (name == "fs.avail" || name == "fs.size") && len(e.fs) < max {
			mount := make(series.Labels, len(l)-1)
			for lk, lv := range l {
				if lk != "metric" {
					mount[lk] = lv
				}
			}
			mk := mount.Key()
			p := e.fs[mk]
			if p == nil {
				p = &fsPair{labels: mount}
				e.fs[mk] = p
			}
			if name == "fs.avail" {
				p.avail, p.hasA = m, true
			} else {
				p.size, p.hasS = m, true
			}
		}
		for _, r := range users {
			if !r.Selector.Match(l) {
				continue
			}
			if len(r.matches) >= max {
				if !r.truncated {
					e.cfg.Log.Warn("alert rule matches more series than it may evaluate; the rest are left out", "rule", r.Name, "max", max)
				}
				r.truncated = true
				continue
			}
			r.matches = append(r.matches, m)
		}
		return true
	})
	sortMatches := func(ms []match) { sort.Slice(ms, func(i, j int) bool { return ms[i].key < ms[j].key }) }
	for _, r := range users {
		sortMatches(r.matches)
	}
}
