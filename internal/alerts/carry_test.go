package alerts

import (
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/registry"
	"github.com/cantal-go/cantal/internal/selector"
	"github.com/cantal-go/cantal/internal/series"
)

// TestCarryKeepsUnchangedRulesState: a new engine (a reload) that carries the old one's state
// keeps an unchanged rule's alert firing since its time, while a changed rule starts pending.
func TestCarryKeepsUnchangedRulesState(t *testing.T) {
	hot := Rule{Name: "hot", Selector: selector.MustParse(`{metric="temp"}`), Op: OpGT, Threshold: 10, For: 2 * time.Second}
	warm := Rule{Name: "warm", Selector: selector.MustParse(`{metric="temp"}`), Op: OpGT, Threshold: 5, For: 2 * time.Second}
	r := newRig(t, Config{Node: "n1", Rules: []Rule{hot, warm}, RematchScans: 1})
	put := func(reg *registry.Registry) { float(reg, series.Labels{"metric": "temp"}, 20) }
	var s *Snapshot
	for range 4 {
		s = r.scan(put)
	}
	if len(s.Alerts) != 2 || s.Alerts[0].State != "firing" || s.Alerts[1].State != "firing" {
		t.Fatalf("before the reload: %+v; want both firing", s.Alerts)
	}
	since := s.Alerts[0].SinceMs

	warm.Threshold = 6 // changed: starts afresh
	cool := Rule{Name: "cool", Selector: selector.MustParse(`{metric="temp"}`), Op: OpGT, Threshold: 1}
	next := New(Config{Node: "n1", Rules: []Rule{cool, hot, warm}, RematchScans: 1})
	next.Carry(r.eng)
	r.eng = next
	s = r.scan(put)
	got := map[string]Alert{}
	for _, a := range s.Alerts {
		got[a.Name] = a
	}
	if a := got["hot"]; a.State != "firing" || a.SinceMs != since {
		t.Errorf("hot after the reload: %+v; want firing since %d", a, since)
	}
	if a := got["warm"]; a.State != "pending" || a.SinceMs != r.ts {
		t.Errorf("warm (changed) after the reload: %+v; want pending since %d", a, r.ts)
	}
	if a := got["cool"]; a.State != "firing" || a.SinceMs != r.ts {
		t.Errorf("cool (new, for 0) after the reload: %+v; want firing since %d", a, r.ts)
	}
}
