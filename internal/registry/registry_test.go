package registry

import (
	"bytes"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/series"
)

func newReg(t *testing.T, retention time.Duration) (*Registry, *bytes.Buffer) {
	t.Helper()
	var logs bytes.Buffer
	h := history.New(history.Options{Retention: retention, Interval: time.Second})
	return New(h, retention, slog.New(slog.NewTextHandler(&logs, nil))), &logs
}

func latest(t *testing.T, r *Registry, key string) (series.Sample, bool, bool) {
	t.Helper()
	var out series.Sample
	var ok, live, found bool
	r.View().Each(func(h Handle) bool {
		if h.Key() == key {
			found = true
			live = h.Live()
			out, ok = h.Latest(r.History(), nil)
			return false
		}
		return true
	})
	if !found {
		return out, false, false
	}
	return out, ok, live
}

func TestScanCycle(t *testing.T) {
	r, _ := newReg(t, time.Hour)
	c := r.Series(series.Labels{"metric": "c"}, series.Counter)
	f := r.Series(series.Labels{"metric": "f"}, series.Float)
	s := r.Series(series.Labels{"metric": "s"}, series.State)
	if again := r.Series(series.Labels{"metric": "c"}, series.Counter); again != c {
		t.Fatalf("Series twice returned two Refs")
	}
	base := int64(1_700_000_000_000)
	for i := int64(0); i < 3; i++ {
		r.Begin(base + i*1000)
		r.Put(c, uint64(100+10*i))
		r.Put(f, math.Float64bits(1.5))
		r.PutState(s, base, "up")
		r.Commit()
	}
	if v := r.View(); v.Live != 3 {
		t.Errorf("View.Live = %d; want 3", v.Live)
	}
	smp, ok, live := latest(t, r, c.Key)
	if !ok || !live || smp.Bits != 120 || !smp.HasRate || smp.Rate != 10 || smp.TS != base+2000 {
		t.Errorf("counter latest = %+v ok=%v live=%v; want 120 at +2s with rate 10", smp, ok, live)
	}
	smp, ok, _ = latest(t, r, f.Key)
	if !ok || math.Float64frombits(smp.Bits) != 1.5 {
		t.Errorf("float latest = %+v; want 1.5", smp)
	}
	smp, ok, _ = latest(t, r, s.Key)
	if !ok || smp.Text != "up" || smp.Since != base {
		t.Errorf("state latest = %+v; want up since base", smp)
	}
	// A scan without the counter: it is no longer live, its value stays in history.
	r.Begin(base + 3000)
	r.Put(f, math.Float64bits(2))
	r.Commit()
	if _, ok, live := latest(t, r, c.Key); !ok || live {
		t.Errorf("counter after a scan without it: ok=%v live=%v; want ok, not live", ok, live)
	}
	if v := r.View(); v.Len() != 3 || v.TS != base+3000 || v.Live != 1 {
		t.Errorf("view has %d series (%d live) at %d; want 3 (1 live) at %d", v.Len(), v.Live, v.TS, base+3000)
	}
}

func TestKindConflict(t *testing.T) {
	r, _ := newReg(t, time.Hour)
	r.Begin(1000)
	a := r.Series(series.Labels{"metric": "x"}, series.Counter)
	b := r.Series(series.Labels{"metric": "x"}, series.Level)
	r.Put(a, 1)
	r.Put(b, 2) // dropped: the key belongs to a counter
	r.Commit()
	if b.ID != -1 {
		t.Errorf("conflicting Ref got an ID")
	}
	if p := r.View().Problems; len(p) != 1 || !strings.Contains(p[0].Reason, "changed kind") {
		t.Errorf("problems = %+v; want one about the kind change", p)
	}
	smp, ok, _ := latest(t, r, a.Key)
	if !ok || smp.Bits != 1 || smp.Kind != series.Counter {
		t.Errorf("x = %+v; want the counter's 1", smp)
	}
}

func TestProblemsLoggedOnce(t *testing.T) {
	r, logs := newReg(t, time.Hour)
	for i := int64(1); i <= 3; i++ {
		r.Begin(i * 1000)
		r.Problem("/f", "refused")
		r.Commit()
	}
	if n := strings.Count(logs.String(), "refused"); n != 1 {
		t.Errorf("a problem seen in 3 scans was logged %d times; want 1", n)
	}
	r.Begin(4000)
	r.Commit() // gone
	if len(r.View().Problems) != 0 {
		t.Errorf("problems of a clean scan = %v", r.View().Problems)
	}
	r.Begin(5000)
	r.Problem("/f", "refused")
	r.Commit()
	if n := strings.Count(logs.String(), "refused"); n != 2 {
		t.Errorf("a problem that came back was logged %d times in all; want 2", n)
	}
}

// TestExpiredRefReattaches: a collector holding a Ref whose series expired can keep using it.
func TestExpiredRefReattaches(t *testing.T) {
	r, _ := newReg(t, 10*time.Second)
	c := r.Series(series.Labels{"metric": "c"}, series.Counter)
	st := r.Series(series.Labels{"metric": "s"}, series.State)
	r.Begin(1000)
	r.Put(c, 1)
	r.PutState(st, 1, "a")
	r.Commit()
	// Long silence: scans without them until the history and the state expire.
	for ts := int64(2000); ts <= 200_000; ts += 1000 { // several segments of 64 scans
		r.Begin(ts)
		r.Commit()
	}
	if c.ID != -1 || st.ID != -1 {
		t.Fatalf("after the retention the Refs are still attached (ids %d, %d)", c.ID, st.ID)
	}
	if n := r.View().Len(); n != 0 {
		t.Fatalf("view still has %d series", n)
	}
	r.Begin(201_000)
	r.Put(c, 5)
	r.PutState(st, 2, "b")
	r.Commit()
	if smp, ok, live := latest(t, r, c.Key); !ok || !live || smp.Bits != 5 {
		t.Errorf("re-attached counter = %+v ok=%v live=%v; want 5", smp, ok, live)
	}
	if smp, ok, _ := latest(t, r, st.Key); !ok || smp.Text != "b" {
		t.Errorf("re-attached state = %+v; want b", smp)
	}
}

func TestLoadedHistoryIsKnown(t *testing.T) {
	h := history.New(history.Options{Retention: time.Hour, Interval: time.Second})
	labels := series.Labels{"metric": "old", "pid": "1"}
	id, err := h.Series(labels.Key(), series.Level)
	if err != nil {
		t.Fatal(err)
	}
	h.Begin(1000)
	h.Add(id, 7)
	h.Commit()
	r := New(h, time.Hour, slog.New(slog.DiscardHandler))
	smp, ok, live := latest(t, r, labels.Key())
	if !ok || live || smp.Bits != 7 || smp.Labels["pid"] != "1" {
		t.Errorf("series from history = %+v ok=%v live=%v; want 7, not live", smp, ok, live)
	}
	// A collector registering the same labels gets that series, not a new one.
	ref := r.Series(series.Labels{"pid": "1", "metric": "old"}, series.Level)
	if r.View().Len() != 1 || ref.Key != labels.Key() {
		t.Errorf("re-registering a loaded series made another")
	}
}

func TestSubscribe(t *testing.T) {
	r, _ := newReg(t, time.Hour)
	ch := make(chan *View, 1)
	cancel := r.Subscribe(ch)
	r.Begin(1000)
	r.Commit()
	select {
	case v := <-ch:
		if v.TS != 1000 {
			t.Errorf("view ts = %d; want 1000", v.TS)
		}
	default:
		t.Fatal("no view after Commit")
	}
	// A full channel never blocks the scanner.
	r.Begin(2000)
	r.Commit()
	r.Begin(3000)
	r.Commit()
	cancel()
	r.Begin(4000)
	r.Commit()
	if v := <-ch; v.TS != 2000 {
		t.Errorf("kept view ts = %d; want 2000 (later ones dropped, none after cancel)", v.TS)
	}
}

// TestMaxSeries checks the series limit: when a scan leaves more series than the limit, the ones
// written longest ago go (with their history) down to 95 % of it, the live ones never do, the
// drop is counted and logged, and a dropped series written again starts a fresh history.
func TestMaxSeries(t *testing.T) {
	r, logs := newReg(t, time.Hour)
	refs := make([]*series.Ref, 150)
	for i := range refs {
		refs[i] = r.Series(series.Labels{"metric": "m", "pid": strconv.Itoa(i)}, series.Level)
	}
	ts := int64(1_700_000_000_000)
	// Series i is written in scans 0..i/10: the low numbers stop first.
	for s := 0; s < 15; s++ {
		r.Begin(ts + int64(s)*1000)
		for i, ref := range refs {
			if i/10 >= s {
				r.Put(ref, uint64(s))
			}
		}
		r.Commit()
	}
	r.SetMaxSeries(100)
	r.Begin(ts + 15_000)
	for _, ref := range refs[140:] {
		r.Put(ref, 15)
	}
	r.Commit()
	v := r.View()
	if v.Len() != 95 || v.Evicted != 55 || v.EvictedNow != 55 {
		t.Fatalf("after the limit: %d series, %d evicted (%d now); want 95, 55 (55)", v.Len(), v.Evicted, v.EvictedNow)
	}
	for i := range refs {
		_, _, found := r.History().Lookup(refs[i].Key)
		if (i < 50 && found) || (i >= 60 && !found) {
			t.Errorf("series %d in history = %v; the 55 written longest ago go", i, found)
		}
	}
	if !strings.Contains(logs.String(), "series limit reached") {
		t.Errorf("the first eviction is not logged: %q", logs.String())
	}
	// A live set larger than the limit is kept whole.
	r.Begin(ts + 20_000)
	for _, ref := range refs {
		r.Put(ref, 7)
	}
	r.Commit()
	if v := r.View(); v.Len() != 150 || v.EvictedNow != 0 {
		t.Fatalf("150 live series: %d kept, %d evicted now; want 150, 0", v.Len(), v.EvictedNow)
	}
	pts := 0
	r.History().Range(mustID(t, r, refs[0].Key), 0, math.MaxInt64, func(int64, uint64) bool { pts++; return true })
	if pts != 1 {
		t.Errorf("an evicted series written again has %d points; want 1 (a fresh history)", pts)
	}
}

func mustID(t *testing.T, r *Registry, key string) history.ID {
	t.Helper()
	id, _, ok := r.History().Lookup(key)
	if !ok {
		t.Fatalf("%s not in history", key)
	}
	return id
}

// TestEvictCutoff checks evictCutoff against a sort, on ages with many repeats (scan times) and
// without, for every wanted count.
func TestEvictCutoff(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, spread := range []int{1, 3, 40, 1 << 30} {
		for _, n := range []int{1, 2, 17, 100, 1000} {
			ages := make([]int64, n)
			for i := range ages {
				ages[i] = int64(rng.IntN(spread)) * 2000
			}
			sorted := slices.Clone(ages)
			slices.Sort(sorted)
			for want := 1; want <= n+1; want += 1 + n/50 {
				cut, older := evictCutoff(slices.Clone(ages), want)
				k := min(want, n) - 1
				if cut != sorted[k] {
					t.Fatalf("spread %d, n %d, want %d: cut %d; want %d", spread, n, want, cut, sorted[k])
				}
				if o, _ := slices.BinarySearch(sorted, cut); older != o {
					t.Fatalf("spread %d, n %d, want %d: %d older; want %d", spread, n, want, older, o)
				}
			}
		}
	}
}

// TestColdRefKeepsLabels: a series not written for coldAfter is unlinked from its Ref, but the
// Ref's labels stay as they were (series.Ref promises they never change); readers get the
// labels from the key meanwhile, and the Ref written again, or a new Ref asked for the same
// labels, writes the same series.
func TestColdRefKeepsLabels(t *testing.T) {
	r, _ := newReg(t, time.Hour)
	labels := series.Labels{"metric": "process.threads", "pid": "42", "process": "sleep"}
	ref := r.Series(labels, series.Level)
	ts := int64(1_700_000_000_000)
	r.Begin(ts)
	r.Put(ref, 1)
	r.Commit()
	for range 20 { // 40 s without a write: cold
		ts += 2000
		r.Begin(ts)
		r.Commit()
	}
	if len(ref.Labels) != 3 || ref.Labels["pid"] != "42" || ref.Key != labels.Key() || ref.Kind != series.Level {
		t.Fatalf("cold Ref changed: labels %v, key %s, kind %v", ref.Labels, ref.Key, ref.Kind)
	}
	handleLabels := func() series.Labels {
		var got series.Labels
		r.View().Each(func(h Handle) bool {
			if h.Key() == labels.Key() {
				got = h.Labels()
			}
			return true
		})
		return got
	}
	if got := handleLabels(); got["pid"] != "42" || len(got) != 3 {
		t.Fatalf("cold series' labels as readers see them: %v", got)
	}
	ts += 2000
	r.Begin(ts)
	r.Put(ref, 2) // linked again
	r.Commit()
	again := r.Series(series.Labels{"metric": "process.threads", "pid": "42", "process": "sleep"}, series.Level)
	if again != ref {
		t.Errorf("Series for a linked series' labels gave another Ref")
	}
	if v := r.View(); v.Live != 1 || v.Len() != 1 || v.Added != 0 {
		t.Errorf("after the write: %d live, %d series, %d added; want 1, 1, 0", v.Live, v.Len(), v.Added)
	}
	if got := handleLabels(); got["pid"] != "42" || len(got) != 3 {
		t.Fatalf("labels after the series came back: %v", got)
	}
	pts := points(r, labels.Key(), ts)
	if len(pts) != 2 || pts[0].Bits != 1 || pts[1].Bits != 2 {
		t.Errorf("points %v; want the two written, one series", pts)
	}
	// Cold again, then a new Ref for the same labels (the collector lost the old one).
	for range 20 {
		ts += 2000
		r.Begin(ts)
		r.Commit()
	}
	fresh := r.Series(series.Labels{"metric": "process.threads", "pid": "42", "process": "sleep"}, series.Level)
	ts += 2000
	r.Begin(ts)
	r.Put(fresh, 3)
	r.Put(ref, 4) // the old Ref too: the same series, the last value kept
	r.Commit()
	if v := r.View(); v.Live != 1 || v.Len() != 1 {
		t.Errorf("two Refs of one series: %d live, %d series; want 1, 1", v.Live, v.Len())
	}
	if pts := points(r, labels.Key(), ts); len(pts) != 3 || pts[2].Bits != 4 {
		t.Errorf("points %v; want 1, 2, 4", pts)
	}
}

// points returns the points of the series with key up to toMs.
func points(r *Registry, key string, toMs int64) []history.Point {
	id, _, ok := r.History().Lookup(key)
	if !ok {
		return nil
	}
	var pts []history.Point
	r.History().Range(id, 0, toMs, func(ts int64, bits uint64) bool {
		pts = append(pts, history.Point{TS: ts, Bits: bits})
		return true
	})
	return pts
}

// TestHandleOutlivesItsSeries: a Handle taken from a View keeps describing its series after the
// series is dropped and others take its slot and the memory around it (entries come from slabs,
// and are never reused).
func TestHandleOutlivesItsSeries(t *testing.T) {
	r, _ := newReg(t, time.Hour)
	r.SetMaxSeries(100)
	ts := int64(1_700_000_000_000)
	var old []Handle
	for round := range 5 {
		ts += 2000
		r.Begin(ts)
		for i := range 100 {
			r.Put(r.Series(series.Labels{"metric": "m", "round": strconv.Itoa(round), "i": strconv.Itoa(i)}, series.Counter), uint64(i))
		}
		r.Commit()
		if round == 0 {
			r.View().Each(func(h Handle) bool { old = append(old, h); return true })
		}
	}
	if len(old) != 100 {
		t.Fatalf("%d handles from the first scan; want 100", len(old))
	}
	for _, h := range old {
		l := h.Labels()
		if l["round"] != "0" || h.Key() != l.Key() || h.Kind() != series.Counter {
			t.Fatalf("a handle of the first scan now says key %s, labels %v, kind %v", h.Key(), l, h.Kind())
		}
	}
	if v := r.View(); v.Evicted < 300 {
		t.Errorf("%d evicted; want the first rounds' series gone (at least 300)", v.Evicted)
	}
}
