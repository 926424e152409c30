package alerts

import (
	"fmt"
	"log/slog"
	"math"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/registry"
	"github.com/cantal-go/cantal/internal/selector"
	"github.com/cantal-go/cantal/internal/series"
)

// rig is a registry scanned by hand, one second apart, with an Engine evaluated after each scan.
type rig struct {
	t    *testing.T
	hist *history.Store
	reg  *registry.Registry
	eng  *Engine
	ts   int64
}

func newRig(t *testing.T, cfg Config) *rig {
	h := history.New(history.Options{Retention: time.Hour, Interval: time.Second})
	return &rig{t: t, hist: h, reg: registry.New(h, time.Hour, slog.New(slog.DiscardHandler)), eng: New(cfg), ts: 1_700_000_000_000}
}

// scan runs one scan writing what put writes, then evaluates.
func (r *rig) scan(put func(reg *registry.Registry)) *Snapshot {
	r.ts += 1000
	r.reg.Begin(r.ts)
	put(r.reg)
	r.reg.Commit()
	r.eng.Eval(r.reg.View(), r.hist)
	return r.eng.Alerts()
}

func float(reg *registry.Registry, l series.Labels, v float64) {
	reg.Put(reg.Series(l, series.Float), math.Float64bits(v))
}

func TestThresholdPendingFiringResolved(t *testing.T) {
	rule := Rule{Name: "hot", Selector: selector.MustParse(`{metric="temp"}`), Op: OpGT, Threshold: 10,
		For: 3 * time.Second, Severity: "critical", Summary: "too hot"}
	r := newRig(t, Config{Node: "n1", Rules: []Rule{rule}, RematchScans: 1})
	temp := 5.0
	put := func(reg *registry.Registry) {
		float(reg, series.Labels{"metric": "temp", "room": "a"}, temp)
		float(reg, series.Labels{"metric": "other"}, 100)
	}
	if s := r.scan(put); len(s.Alerts) != 0 {
		t.Fatalf("under the threshold: %+v; want no alert", s.Alerts)
	}
	temp = 11
	s := r.scan(put)
	crossed := r.ts
	if len(s.Alerts) != 1 {
		t.Fatalf("over the threshold: %d alerts; want 1", len(s.Alerts))
	}
	a := s.Alerts[0]
	if a.State != "pending" || a.SinceMs != crossed || a.Value != 11 || a.Node != "n1" || a.Labels["room"] != "a" ||
		a.Severity != "critical" || a.Op != ">" || a.Threshold != 10 || a.Summary != "too hot" {
		t.Fatalf("first scan over: %+v; want pending since %d", a, crossed)
	}
	for i := 0; i < 2; i++ {
		if s = r.scan(put); len(s.Alerts) != 1 || s.Alerts[0].State != "pending" {
			t.Fatalf("%d s over (for 3s): %+v; want pending", i+1, s.Alerts)
		}
	}
	s = r.scan(put)
	if len(s.Alerts) != 1 || s.Alerts[0].State != "firing" || s.Alerts[0].SinceMs != r.ts {
		t.Fatalf("3 s over: %+v; want firing since %d", s.Alerts, r.ts)
	}
	firingSince := r.ts
	if s = r.scan(put); s.Alerts[0].State != "firing" || s.Alerts[0].SinceMs != firingSince {
		t.Fatalf("still over: %+v; want firing since %d", s.Alerts, firingSince)
	}
	temp = 9
	if s = r.scan(put); len(s.Alerts) != 0 {
		t.Fatalf("back under: %+v; want resolved", s.Alerts)
	}
	// A new crossing starts pending again, from its own time.
	temp = 12
	if s = r.scan(put); len(s.Alerts) != 1 || s.Alerts[0].State != "pending" || s.Alerts[0].SinceMs != r.ts {
		t.Fatalf("crossed again: %+v; want pending since %d", s.Alerts, r.ts)
	}
}

func TestForZeroFiresAtOnce(t *testing.T) {
	rule := Rule{Name: "x", Selector: selector.MustParse(`x`), Op: OpGE, Threshold: 10}
	r := newRig(t, Config{Rules: []Rule{rule}})
	s := r.scan(func(reg *registry.Registry) { float(reg, series.Labels{"metric": "x"}, 10) })
	if len(s.Alerts) != 1 || s.Alerts[0].State != "firing" {
		t.Fatalf("for 0, value at the threshold of >=: %+v; want firing", s.Alerts)
	}
}

func TestRateOfCounter(t *testing.T) {
	rule := Rule{Name: "busy", Selector: selector.MustParse(`req`), Fn: FnRate, Op: OpGT, Threshold: 50}
	r := newRig(t, Config{Rules: []Rule{rule}})
	var n uint64
	step := uint64(10)
	put := func(reg *registry.Registry) {
		n += step
		reg.Put(reg.Series(series.Labels{"metric": "req"}, series.Counter), n)
	}
	r.scan(put)
	if s := r.scan(put); len(s.Alerts) != 0 {
		t.Fatalf("10/s: %+v; want none", s.Alerts)
	}
	step = 100
	if s := r.scan(put); len(s.Alerts) != 1 || s.Alerts[0].Value != 100 {
		t.Fatalf("100/s: %+v; want one alert of value 100", s.Alerts)
	}
}

func TestSeriesAddedLaterIsMatched(t *testing.T) {
	rule := Rule{Name: "x", Selector: selector.MustParse(`x`), Op: OpGT, Threshold: 1}
	r := newRig(t, Config{Rules: []Rule{rule}, RematchScans: 3})
	empty := func(*registry.Registry) {}
	r.scan(empty)
	withX := func(reg *registry.Registry) { float(reg, series.Labels{"metric": "x"}, 5) }
	got := -1
	for i := 0; i < 4; i++ {
		if s := r.scan(withX); len(s.Alerts) == 1 {
			got = i
			break
		}
	}
	if got < 0 {
		t.Fatalf("a series added after the start never matched within RematchScans scans")
	}
}

func TestStaleSeriesRaisesNothing(t *testing.T) {
	rule := Rule{Name: "x", Selector: selector.MustParse(`x`), Op: OpGT, Threshold: 1}
	r := newRig(t, Config{Rules: []Rule{rule}, Stale: 3 * time.Second, RematchScans: 1})
	s := r.scan(func(reg *registry.Registry) { float(reg, series.Labels{"metric": "x"}, 5) })
	if len(s.Alerts) != 1 {
		t.Fatalf("written: %d alerts; want 1", len(s.Alerts))
	}
	for i := 0; i < 4; i++ {
		s = r.scan(func(*registry.Registry) {})
	}
	if len(s.Alerts) != 0 {
		t.Fatalf("not written for 4 s with Stale 3s: %+v; want none", s.Alerts)
	}
}

func TestMaxSeriesPerRule(t *testing.T) {
	rule := Rule{Name: "x", Selector: selector.MustParse(`x`), Op: OpGT, Threshold: 1}
	r := newRig(t, Config{Rules: []Rule{rule}, MaxSeriesPerRule: 3})
	s := r.scan(func(reg *registry.Registry) {
		for i := range 10 {
			float(reg, series.Labels{"metric": "x", "i": fmt.Sprint(i)}, 5)
		}
	})
	if len(s.Alerts) != 3 || len(s.Truncated) != 1 || s.Truncated[0] != "x" {
		t.Fatalf("10 matches, budget 3: %d alerts, truncated %v; want 3 and [x]", len(s.Alerts), s.Truncated)
	}
}

func TestBuiltinRules(t *testing.T) {
	var peers []PeerState
	r := newRig(t, Config{Node: "me", CPUBusy: 90, MemAvail: 10, FSAvail: 10, For: 2 * time.Second,
		NodeDown: true, NodeDownFor: 10 * time.Second, Peers: func() []PeerState { return peers }})
	var cpu [8]uint64
	modes := []string{"user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"}
	busy := uint64(500) // ms of user per second, of 1000 in all
	put := func(reg *registry.Registry) {
		cpu[0] += busy
		cpu[3] += 1000 - busy
		for i, m := range modes {
			reg.Put(reg.Series(series.Labels{"metric": "cpu." + m + "_ms"}, series.Counter), cpu[i])
			reg.Put(reg.Series(series.Labels{"metric": "cpu." + m + "_ms", "cpu": "0"}, series.Counter), 0)
		}
		lv := func(l series.Labels, v int64) { reg.Put(reg.Series(l, series.Level), uint64(v)) }
		lv(series.Labels{"metric": "memory.MemTotal"}, 1000)
		lv(series.Labels{"metric": "memory.MemAvailable"}, 50)
		root := series.Labels{"device": "/dev/vda1", "mountpoint": "/", "fstype": "ext4"}
		data := series.Labels{"device": "/dev/vdb", "mountpoint": "/data", "fstype": "xfs"}
		for _, m := range []struct {
			l           series.Labels
			avail, size int64
		}{{root, 500, 1000}, {data, 20, 1000}} {
			la, ls := m.l.Clone(), m.l.Clone()
			la["metric"], ls["metric"] = "fs.avail", "fs.size"
			lv(la, m.avail)
			lv(ls, m.size)
		}
	}
	r.scan(put)
	// b was last seen 25 s before this scan, d 3 s before it (not yet down), e never seen but
	// dead since 40 s.
	now := r.ts + 1000 // the next scan's time
	peers = []PeerState{{Name: "a", Addr: "10.0.0.1:22682", Status: "alive", LastSeenMs: now - 60_000},
		{Name: "b", Addr: "10.0.0.2:22682", Status: "dead", LastSeenMs: now - 25_000, SinceMs: now - 20_000},
		{Name: "c", Status: "left", LastSeenMs: now - 60_000}, {Name: "d", Status: "suspect", LastSeenMs: now - 3_000},
		{Name: "e", Addr: "10.0.0.5:22682", Status: "dead", SinceMs: now - 40_000}}
	s := r.scan(put)
	names := map[string]Alert{}
	for _, a := range s.Alerts {
		names[a.Name+" "+a.Labels.Key()] = a
	}
	if a, ok := names[`node_down {"addr":"10.0.0.2:22682","peer":"b","status":"dead"}`]; !ok || a.State != "firing" || a.Value != 25 || a.Op != ">=" || a.Threshold != 10 {
		t.Errorf("dead peer b, last seen 25 s ago: %v; want node_down firing at once with value 25 (>= 10 s)", s.Alerts)
	}
	if a, ok := names[`node_down {"addr":"10.0.0.5:22682","peer":"e","status":"dead"}`]; !ok || a.Value != 40 {
		t.Errorf("dead peer e, never seen, dead for 40 s: %v; want node_down at 40", s.Alerts)
	}
	if a, ok := names[`memory_low {"metric":"memory.available_pct"}`]; !ok || a.Value != 5 || a.State != "pending" {
		t.Errorf("5%% available: %v; want memory_low pending at 5", s.Alerts)
	}
	if a, ok := names[`filesystem_full {"device":"/dev/vdb","fstype":"xfs","mountpoint":"/data"}`]; !ok || a.Value != 2 {
		t.Errorf("/data 2%% available: %v; want filesystem_full at 2", s.Alerts)
	}
	if len(s.Alerts) != 4 {
		t.Errorf("%d alerts: %v; want 4 (CPU 50%% busy, / half free, alive and left peers and a peer suspect for 3 s raise nothing)", len(s.Alerts), s.Alerts)
	}
	busy = 950
	r.scan(put)
	r.scan(put)
	s = r.scan(put)
	found := false
	for _, a := range s.Alerts {
		if a.Name == RuleCPU {
			found = true
			if a.State != "firing" || math.Abs(a.Value-95) > 1e-9 {
				t.Errorf("CPU 95%% busy for 2 s: %+v; want firing at 95", a)
			}
		}
		if a.Name == RuleMemory && a.State != "firing" {
			t.Errorf("memory low for 4 s (for 2s): %+v; want firing", a)
		}
	}
	if !found {
		t.Errorf("CPU 95%% busy: no cpu_busy alert in %v", s.Alerts)
	}
	if s.Alerts[0].State != "firing" {
		t.Errorf("alerts not firing first: %v", s.Alerts)
	}
}
