package registry

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/series"
)

// TestMaxSeriesNeverEvictsCollectedForPushed is the security issue's finding 7 at the
// registry: thousands of live pushed series beside a few collected ones, some of them not
// written by the latest scans (a disk idle this scan, a process that exited), under a series
// limit far below the total. The limit counts collected series only: no collected series is
// evicted to make room for pushed ones; when the collected ones alone exceed it, only collected
// ones go.
//
// Security finding 7.
func TestMaxSeriesNeverEvictsCollectedForPushed(t *testing.T) {
	r, logs := newReg(t, time.Hour)
	r.SetMaxSeries(20)
	collected := make([]*series.Ref, 10)
	for i := range collected {
		collected[i] = r.Series(series.Labels{"metric": "m", "pid": strconv.Itoa(i)}, series.Counter)
	}
	pushed := make([]*series.Ref, 5000)
	for i := range pushed {
		pushed[i] = r.Series(series.Labels{"metric": "flood" + strconv.Itoa(i), PushLabel: PushValue}, series.Float)
	}
	ts := int64(1_700_000_000_000)
	for s := range 5 {
		r.Begin(ts + int64(s)*2000)
		for i, ref := range collected {
			if s == 0 || i < 5 { // series 5..9 are written by the first scan only
				r.Put(ref, uint64(s))
			}
		}
		for _, ref := range pushed {
			r.Put(ref, math.Float64bits(1))
		}
		r.Commit()
	}
	v := r.View()
	if v.Len() != 5010 || v.Pushed != 5000 || v.Evicted != 0 {
		t.Fatalf("view: %d series, %d pushed, %d evicted; want 5010, 5000, 0", v.Len(), v.Pushed, v.Evicted)
	}
	for i, ref := range collected {
		if _, _, ok := r.History().Lookup(ref.Key); !ok {
			t.Errorf("collected series %d evicted from the history", i)
		}
	}
	if strings.Contains(logs.String(), "limit reached") {
		t.Errorf("a limit was reported reached: %s", logs.String())
	}
	// Collected series alone over the limit: the idle collected ones go, down to 95 % of it;
	// no pushed one does.
	more := make([]*series.Ref, 15)
	for i := range more {
		more[i] = r.Series(series.Labels{"metric": "n", "pid": strconv.Itoa(i)}, series.Counter)
	}
	r.Begin(ts + 10_000)
	for _, ref := range append(collected[:5:5], more...) {
		r.Put(ref, 1)
	}
	r.Commit()
	v = r.View()
	if v.Len() != 5000+20 || v.Evicted != 5 || v.EvictedPushed != 0 || v.Pushed != 5000 {
		t.Errorf("view: %d series (%d pushed), %d evicted (%d pushed); want 5020 (5000), the 5 idle collected ones", v.Len(), v.Pushed, v.Evicted, v.EvictedPushed)
	}
	for i, ref := range collected {
		if _, _, ok := r.History().Lookup(ref.Key); ok != (i < 5) {
			t.Errorf("collected series %d in history = %v; want only the idle 5..9 gone", i, ok)
		}
	}
}

// TestPushedBudgetEvictsOldestPushed checks SetMaxPushed: pushed series beyond it, by count or by bytes,
// are evicted with their history, those written longest ago first, never one written by the
// latest scan and never a collected one, however idle.
//
// Security finding 7.
func TestPushedBudgetEvictsOldestPushed(t *testing.T) {
	r, logs := newReg(t, time.Hour)
	r.SetMaxSeries(1000)
	r.SetMaxPushed(100, 0)
	idle := r.Series(series.Labels{"metric": "disk.ops", "device": "sda"}, series.Counter)
	ts := int64(1_700_000_000_000)
	r.Begin(ts)
	r.Put(idle, 1)
	r.Commit()
	var pushed []*series.Ref
	for wave := range 4 { // 4 waves of 60 pushed series, each written by one scan only
		r.Begin(ts + int64(wave+1)*2000)
		for i := range 60 {
			ref := r.Series(series.Labels{"metric": "p", "i": strconv.Itoa(wave*60 + i), PushLabel: PushValue}, series.Level)
			pushed = append(pushed, ref)
			r.Put(ref, 1)
		}
		st := r.Series(series.Labels{"metric": "s", "wave": strconv.Itoa(wave), PushLabel: PushValue}, series.State)
		r.PutState(st, ts, "text")
		r.Commit()
	}
	v := r.View()
	// After wave 1: 122 pushed > 100 → 27 oldest go (the wave-0 state and 26 of its series);
	// after wave 2: 95+61 = 156 → 61 go; after wave 3: 95+61 → 61 go. 95 left, the last
	// wave's 61 among them.
	if v.Pushed != 95 || v.Evicted != 149 || v.EvictedPushed != 149 {
		t.Errorf("view: %d pushed, %d evicted (%d pushed); want 95, 149 (149)", v.Pushed, v.Evicted, v.EvictedPushed)
	}
	for i, ref := range pushed[180:] {
		if _, _, ok := r.History().Lookup(ref.Key); !ok {
			t.Errorf("pushed series %d of the latest scan evicted", 180+i)
		}
	}
	if _, _, ok := r.History().Lookup(idle.Key); !ok {
		t.Error("an idle collected series was evicted for the pushed limit")
	}
	if !strings.Contains(logs.String(), "pushed series limit reached") {
		t.Errorf("the first pushed eviction is not logged: %s", logs.String())
	}
	// Bytes: each pushed series costs its key plus 256 bytes.
	cost := pushedCost(pushed[239].Key)
	r.SetMaxPushed(0, 40*cost)
	r.Begin(ts + 20_000)
	r.Commit()
	if v := r.View(); v.PushedBytes > 40*cost || v.Pushed < 35 || v.Pushed > 38 {
		t.Errorf("after a 40-series byte budget: %d pushed, %d bytes; want about 38 (95 %%), at most %d bytes", v.Pushed, v.PushedBytes, 40*cost)
	}
	if _, _, ok := r.History().Lookup(idle.Key); !ok {
		t.Error("an idle collected series was evicted for the pushed byte limit")
	}
}
