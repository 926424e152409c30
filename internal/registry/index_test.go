package registry

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/selector"
	"github.com/cantal-go/cantal/internal/series"
)

// selected returns the keys Select passes, failing on a series passed twice or out of slot
// order.
func selected(t *testing.T, v *View, sel *selector.Selector, fromMs int64, live bool) []string {
	t.Helper()
	var keys []string
	last := int32(-1)
	v.Select(sel, fromMs, live, func(h Handle) bool {
		if !live && h.Kind() == series.State {
			return true // no history: the window's answers leave states out
		}
		if h.slot <= last {
			t.Fatalf("Select %s: slot %d after %d (a series twice, or out of order)", sel, h.slot, last)
		}
		last = h.slot
		keys = append(keys, h.Key())
		return true
	})
	return keys
}

// reference is what Select must pass, found the slow way: every series of the view that sel
// selects and that has a point at or after fromMs (live: that the view's scan wrote).
func reference(v *View, hist *history.Store, sel *selector.Selector, fromMs int64, live bool) []string {
	var keys []string
	v.Each(func(h Handle) bool {
		if !sel.Match(h.Labels()) {
			return true
		}
		if live {
			if h.Live() {
				keys = append(keys, h.Key())
			}
			return true
		}
		if h.Kind() == series.State {
			return true
		}
		if p, ok := hist.Latest(h.HistoryID()); ok && p.TS >= fromMs {
			keys = append(keys, h.Key())
		}
		return true
	})
	return keys
}

// TestSelectWindow: a series that stopped within the window is still selected (its points are
// there to draw); one whose last point is before the window is not; live selects only what the
// latest scan wrote.
func TestSelectWindow(t *testing.T) {
	r, _ := newReg(t, time.Hour)
	base := int64(1_700_000_000_000)
	a := r.Series(series.Labels{"metric": "m", "pid": "1"}, series.Level)
	b := r.Series(series.Labels{"metric": "m", "pid": "2"}, series.Level)
	c := r.Series(series.Labels{"metric": "m", "pid": "3"}, series.Level)
	for i := int64(0); i < 100; i++ {
		r.Begin(base + i*1000)
		r.Put(a, 1)
		if i < 60 {
			r.Put(b, 2) // dies at 59 s: within a 60 s window at the end
		}
		if i < 10 {
			r.Put(c, 3) // dies at 9 s: before it
		}
		r.Commit()
	}
	v := r.View()
	now := base + 99_000
	for _, s := range []string{"m", `{pid=~"1|2|3"}`, `{metric=~"m|n"}`, `{metric=~".+", pid!="9"}`, `{}`} {
		sel := selector.MustParse(s)
		want := []string{a.Key, b.Key}
		if got := selected(t, v, sel, now-60_000, false); !slices.Equal(got, want) {
			t.Errorf("%s over the last 60 s: %q, want %q", s, got, want)
		}
		if got := selected(t, v, sel, now-9_000, false); !slices.Equal(got, []string{a.Key}) {
			t.Errorf("%s over the last 9 s (b's last point %s before): %q, want %q", s, newestStep+31*time.Second, got, a.Key)
		}
		if got := selected(t, v, sel, base, false); !slices.Equal(got, []string{a.Key, b.Key, c.Key}) {
			t.Errorf("%s over the whole hour: %q, want all three", s, got)
		}
		if got := selected(t, v, sel, 0, true); !slices.Equal(got, []string{a.Key}) {
			t.Errorf("%s live: %q, want %q", s, got, a.Key)
		}
	}
	if got := selected(t, v, selector.MustParse("n"), base, false); len(got) != 0 {
		t.Errorf("a name no series has selected %q", got)
	}
	if got := selected(t, v, selector.MustParse(`m{pid="2"}`), now-60_000, false); !slices.Equal(got, []string{b.Key}) {
		t.Errorf(`m{pid="2"}: %q`, got)
	}
}

// TestSelectLatePushedPoint: a series whose only point is a late one (PutAt at a committed
// scan, which does not make it live) is selected by a window that holds that point.
func TestSelectLatePushedPoint(t *testing.T) {
	r, _ := newReg(t, time.Hour)
	base := int64(1_700_000_000_000)
	other := r.Series(series.Labels{"metric": "x"}, series.Level)
	for i := int64(0); i < 5; i++ {
		r.Begin(base + i*1000)
		r.Put(other, 1)
		r.Commit()
	}
	r.Begin(base + 5000)
	ref := r.Series(series.Labels{"metric": "pushed", PushLabel: PushValue}, series.Level)
	at, err := r.PutAt(ref, base+2500, 7)
	if err != nil || at != base+3000 {
		t.Fatalf("PutAt: %d, %v; want the scan at +3 s", at, err)
	}
	r.Put(other, 1)
	r.Commit()
	got := selected(t, r.View(), selector.MustParse("pushed"), base+2000, false)
	if !slices.Equal(got, []string{ref.Key}) {
		t.Fatalf("late point at +3 s, window from +2 s: %q, want %q", got, ref.Key)
	}
	if got := selected(t, r.View(), selector.MustParse("pushed"), base+4000+newestStep.Milliseconds(), false); len(got) != 0 {
		t.Fatalf("window from %s after the only point: %q", newestStep, got)
	}
}

// TestSelectLoadedHistory: series known only from the history (a loaded snapshot) are indexed
// by their newest point: a window after it leaves them out, one holding it does not.
func TestSelectLoadedHistory(t *testing.T) {
	h := history.New(history.Options{Retention: time.Hour, Interval: time.Second, BlockScans: 8})
	base := int64(1_700_000_000_000)
	old, _ := h.Series(series.Labels{"metric": "m", "pid": "1"}.Key(), series.Level)
	recent, _ := h.Series(series.Labels{"metric": "m", "pid": "2"}.Key(), series.Level)
	for i := int64(0); i < 100; i++ { // closed segments and an open one
		h.Begin(base + i*1000)
		if i < 5 {
			h.Add(old, 1)
		}
		h.Add(recent, 2)
		h.Commit()
	}
	r := New(h, time.Hour, slog.New(slog.DiscardHandler))
	v := r.View()
	sel := selector.MustParse("m")
	if got, want := selected(t, v, sel, base+40_000, false), []string{series.Labels{"metric": "m", "pid": "2"}.Key()}; !slices.Equal(got, want) {
		t.Errorf("window from +40 s: %q, want %q", got, want)
	}
	if got := selected(t, v, sel, base+4000, false); len(got) != 2 {
		t.Errorf("window from +4 s (the old series' last point): %q, want both", got)
	}
}

// TestSelectMatchesReferenceUnderChurn runs a registry through process churn (series born and
// dying under a handful of names, the history expiring the dead, the series limit evicting, slots
// reused by series of other names) and checks after every scan that Select passes exactly the
// series a full scan of the view finds, for several selectors and windows: an index that kept
// a forgotten series, lost a new one, or listed a reused slot under its old name fails.
func TestSelectMatchesReferenceUnderChurn(t *testing.T) {
	h := history.New(history.Options{Retention: 60 * time.Second, Interval: time.Second, BlockScans: 8})
	r := New(h, 60*time.Second, slog.New(slog.DiscardHandler))
	r.SetMaxSeries(200)
	rng := rand.New(rand.NewPCG(5, 6))
	names := []string{"proc.cpu", "proc.rss", "proc.io", "net.rx", "cgroup.a.cpu", "cgroup.b.cpu"}
	type proc struct {
		refs  []*series.Ref
		death int
	}
	pid := 0
	spawn := func(scan int) *proc {
		pid++
		p := &proc{death: scan + 1 + rng.IntN(20)}
		for _, n := range names[:1+rng.IntN(len(names))] {
			kind := series.Level
			if rng.IntN(10) == 0 {
				kind = series.State
			}
			p.refs = append(p.refs, r.Series(series.Labels{"metric": n, "pid": strconv.Itoa(pid), "job": strconv.Itoa(pid % 3)}, kind))
		}
		return p
	}
	ps := make([]*proc, 12)
	for i := range ps {
		ps[i] = spawn(0)
	}
	sels := []string{"proc.cpu", `{metric=~"proc\\.(cpu|rss)"}`, `{metric=~"cgroup\\..*"}`, `{metric=~"cgroup\\..*", job="1"}`,
		`{job="2"}`, `{pid=~"3|40|41|42|43"}`, `{pid="77", job!="1"}`, `{metric=~"proc\\..*", pid=~"5|6|70|71"}`, `{pid=""}`, `{}`, `{metric!="proc.io"}`, `proc.rss{pid=~"1.*"}`, `{metric=~"nope|net.rx"}`}
	base := int64(1_700_000_000_000)
	const scans = 300
	for s := range scans {
		now := base + int64(s)*1000
		r.Begin(now)
		for i, p := range ps {
			if p.death <= s {
				p = spawn(s)
				ps[i] = p
			}
			for _, ref := range p.refs {
				if ref.Kind == series.State {
					r.PutState(ref, now, "up")
				} else if rng.IntN(8) != 0 { // gaps
					r.Put(ref, uint64(s))
				}
			}
		}
		r.Commit()
		if s%3 != 0 {
			continue
		}
		v := r.View()
		for _, q := range sels {
			sel := selector.MustParse(q)
			for _, from := range []int64{now - 5000, now - 30_000, now - 3_600_000} {
				// Every series with a point in the window, and none without one since
				// from - newestStep.
				got := selected(t, v, sel, from, false)
				want, slack := reference(v, h, sel, from, false), reference(v, h, sel, from-newestStep.Milliseconds(), false)
				for _, k := range want {
					if !slices.Contains(got, k) {
						t.Fatalf("scan %d, %s from now-%d ms: %s, with a point in the window, not selected\n got %q\nwant %q", s, q, now-from, k, got, want)
					}
				}
				for _, k := range got {
					if !slices.Contains(slack, k) {
						t.Fatalf("scan %d, %s from now-%d ms: %s selected, without a point since %d ms before the window\n got %q\nwant %q", s, q, now-from, k, newestStep.Milliseconds(), got, want)
					}
				}
			}
			if got, want := selected(t, v, sel, 0, true), reference(v, h, sel, 0, true); !slices.Equal(got, want) {
				t.Fatalf("scan %d, %s live: got %q, want %q", s, q, got, want)
			}
		}
	}
	if r.evicted == 0 || r.View().Len() < 150 {
		t.Fatalf("the churn did not exercise eviction (%d evicted, %d series)", r.evicted, r.View().Len())
	}
	// The postings lists hold no more than a bounded number of stale entries, and no name
	// without series.
	held := map[*postings]int{}
	for i := range r.nslots {
		if e := r.slots[i].Load(); e != nil {
			held[e.post]++
		}
	}
	for name, p := range r.names {
		a := p.arr.Load()
		if n, k := int(a.n.Load()), held[p]; k == 0 || n > k+max(64, 2*k)+1 {
			t.Errorf("postings of %q: %d entries for %d series", name, n, k)
		}
	}
}

// TestSelectConcurrentWithChurn runs Select on other goroutines while the scanner registers,
// forgets and reuses slots (for the race detector, and for readers that must never see a
// series twice or a series of another name).
func TestSelectConcurrentWithChurn(t *testing.T) {
	h := history.New(history.Options{Retention: 20 * time.Second, Interval: time.Second, BlockScans: 8})
	r := New(h, 20*time.Second, slog.New(slog.DiscardHandler))
	var stop atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for _, q := range []string{`{metric=~"a|c"}`, `{metric=~"a|c|u1.*"}`} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sel := selector.MustParse(q)
			for !stop.Load() {
				last := int32(-1)
				r.View().Select(sel, 0, false, func(h Handle) bool {
					if !sel.Match(h.Labels()) || h.slot <= last {
						errs <- fmt.Errorf("Select passed %s at slot %d after %d", h.Key(), h.slot, last)
						stop.Store(true)
						return false
					}
					last = h.slot
					return true
				})
			}
		}()
	}
	base := int64(1_700_000_000_000)
	for s := range 300 {
		r.Begin(base + int64(s)*1000)
		for i := range 40 {
			n := []string{"a", "b", "c", "u" + strconv.Itoa(s)}[(s+i)%4] // names come and go
			ref := r.Series(series.Labels{"metric": n, "i": strconv.Itoa(s*40 + i)}, series.Level)
			r.Put(ref, 1)
		}
		r.Commit()
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
