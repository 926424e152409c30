package promstore

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql/parser"

	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/registry"
	"github.com/cantal-go/cantal/internal/series"
)

// manyOthers writes scans 2 s apart from t0 of the series of fill plus n application
// gauges of another name (others_N{worker}); it returns the registry and its store.
func manyOthers(t testing.TB, t0 int64, scans, n int) (*registry.Registry, *history.Store) {
	t.Helper()
	hist := history.New(history.Options{})
	reg := registry.New(hist, time.Hour, nil)
	load := reg.Series(series.Labels{"metric": "system.load_avg_1min"}, series.Float)
	refs := make([]*series.Ref, n)
	for i := range refs {
		refs[i] = reg.Series(series.Labels{"metric": fmt.Sprintf("others%d", i%50), "appname": "bulk", "worker": fmt.Sprint(i)}, series.Level)
	}
	for j := range scans {
		reg.Begin(t0 + int64(j)*2000)
		reg.Put(load, 0)
		for _, r := range refs {
			reg.Put(r, uint64(j))
		}
		reg.Commit()
	}
	return reg, hist
}

// unversioned hides a catalog's Version: its Storage walks every series (the old way).
type unversioned struct{ Catalog }

// TestSelectorReadsOnlyIndexedSeries: a selector naming a metric, or an equality on a label,
// tests only the series with that name or pair, not the 10 000 others held.
func TestSelectorReadsOnlyIndexedSeries(t *testing.T) {
	const t0 = 1_700_000_000_000
	reg, hist := manyOthers(t, t0, 3, 10000)
	st := New(hist, RegistryCatalog(reg), Options{Instance: "n1:22682", Node: "n1"})
	end := int64(t0 + 2*2000)
	for _, c := range []struct {
		expr        string
		want, limit int
	}{
		{`node_load1`, 1, 1},
		{`{__name__="others7"}`, 200, 200},
		{`others7{worker="7"}`, 1, 1},
		{`{worker="42"}`, 1, 1},
		{`{__name__=~"others(1|2)"}`, 400, 400},
		{`{__name__=~"others1.*"}`, 11 * 200, 11 * 200},
	} {
		st.tested.Store(0)
		v := instant(t, st, c.expr, end)
		if len(v) != c.want {
			t.Errorf("%s: %d series, want %d", c.expr, len(v), c.want)
		}
		if n := st.tested.Load(); n > int64(c.limit) {
			t.Errorf("%s tested %d series, want at most %d", c.expr, n, c.limit)
		}
	}
	if b := st.idxBuilds.Load(); b != 1 {
		t.Errorf("index built %d times for one registry version, want 1", b)
	}
	// A new series makes a new version: the next query sees it.
	r := reg.Series(series.Labels{"metric": "late", "appname": "x"}, series.Level)
	reg.Begin(end + 2000)
	reg.Put(r, 5)
	reg.Commit()
	if v := instant(t, st, `late`, end+2000); len(v) != 1 || v[0].F != 5 {
		t.Fatalf("series registered after the index: %v", v)
	}
}

// TestIndexSelectsAsWalk: through the index, every kind of selector finds the same series as
// the walk of every series does.
func TestIndexSelectsAsWalk(t *testing.T) {
	const t0 = 1_700_000_000_000
	reg, hist := manyOthers(t, t0, 3, 500)
	idx := New(hist, RegistryCatalog(reg), Options{Instance: "n1:22682", Node: "n1"})
	walk := New(hist, unversioned{RegistryCatalog(reg)}, Options{Instance: "n1:22682", Node: "n1"})
	end := int64(t0 + 2*2000)
	for _, sel := range []string{
		`node_load1`, `{__name__="others3"}`, `{__name__!="others3"}`, `{__name__=~"others3|others4"}`,
		`{__name__=~"others.*",worker=~"1.?"}`, `{__name__=~".+"}`, `{worker=""}`, `{worker!=""}`,
		`{worker=~"4|44|444|x"}`, `{worker!~"4.*"}`, `{appname="bulk",worker="3"}`, `{node="n1"}`,
		`{node="n2"}`, `{worker=~""}`, `{__name__=~"nope.*"}`, `{instance=~"n1:.*",__name__="node_load1"}`,
	} {
		ms, err := parser.NewParser(parser.Options{}).ParseMetricSelector(sel)
		if err != nil {
			t.Fatal(err)
		}
		list := func(st *Storage) []string {
			q, _ := st.Querier(t0, end)
			ss := q.Select(context.Background(), true, nil, ms...)
			var out []string
			for ss.Next() {
				out = append(out, ss.At().Labels().String())
			}
			if ss.Err() != nil {
				t.Fatal(ss.Err())
			}
			return out
		}
		a, b := list(idx), list(walk)
		if !slices.Equal(a, b) {
			t.Errorf("%s: index found %d series, walk %d", sel, len(a), len(b))
		}
	}
}

// TestIndexFollowsChurn: as the registry forgets series and gives their slots to new ones of
// other names and labels, the index kept in place finds the new series under their names and
// labels and no longer the forgotten ones, as the walk of every series does; and each update
// handles only the slots that changed.
func TestIndexFollowsChurn(t *testing.T) {
	const t0 = 1_700_000_000_000
	hist := history.New(history.Options{})
	reg := registry.New(hist, time.Hour, slog.New(slog.DiscardHandler))
	reg.SetMaxSeries(40) // a scan leaving more forgets the series written longest ago, down to 38
	idx := New(hist, RegistryCatalog(reg), Options{Instance: "n1:22682", Node: "n1"})
	walk := New(hist, unversioned{RegistryCatalog(reg)}, Options{Instance: "n1:22682", Node: "n1"})
	ts := int64(t0)
	var live []*series.Ref
	scan := func(gen, n int) {
		reg.Begin(ts)
		for i := range n {
			live = append(live, reg.Series(series.Labels{"metric": fmt.Sprintf("gen%d", gen), "appname": "churn", "pid": fmt.Sprint(gen*1000 + i)}, series.Level))
		}
		for _, r := range live[len(live)-n:] {
			reg.Put(r, uint64(gen))
		}
		reg.Commit()
		ts += 2000
	}
	list := func(st *Storage, sel string) []string {
		t.Helper()
		ms, err := parser.NewParser(parser.Options{}).ParseMetricSelector(sel)
		if err != nil {
			t.Fatal(err)
		}
		q, _ := st.Querier(t0, ts)
		ss := q.Select(context.Background(), true, nil, ms...)
		var out []string
		for ss.Next() {
			out = append(out, ss.At().Labels().String())
		}
		if ss.Err() != nil {
			t.Fatal(ss.Err())
		}
		return out
	}
	scan(0, 40)
	if n := len(list(idx, `gen0`)); n != 40 {
		t.Fatalf("gen0: %d series, want 40", n)
	}
	changed := idx.idxChanged.Load()
	for gen := 1; gen <= 6; gen++ {
		scan(gen, 5) // 45 series: the 7 written longest ago go, their slots taken by the next ones
		for _, sel := range []string{`{__name__=~"gen.*"}`, `gen0`, fmt.Sprintf(`gen%d`, gen), fmt.Sprintf(`gen%d`, gen-1),
			`{pid="3"}`, fmt.Sprintf(`{pid="%d"}`, gen*1000+4), `{pid=~"1.*|2.*"}`, `{appname="churn",pid!="5"}`} {
			a, b := list(idx, sel), list(walk, sel)
			if !slices.Equal(a, b) {
				t.Errorf("after scan %d, %s: index found %v, walk %v", gen, sel, a, b)
			}
		}
		if n := len(list(idx, fmt.Sprintf(`gen%d`, gen))); n != 5 {
			t.Errorf("gen%d: %d series, want the 5 registered", gen, n)
		}
		if n := len(list(idx, `{__name__=~"gen.*"}`)); n > 40 {
			t.Errorf("after scan %d: %d series listed, the registry keeps at most 40", gen, n)
		}
		// Only the slots of series registered or forgotten were looked at again: the 5 new
		// ones and the 7 forgotten (some in the same slots).
		if d := idx.idxChanged.Load() - changed; d > 12 {
			t.Errorf("scan %d: the index handled %d changed slots, want at most 12", gen, d)
		}
		changed = idx.idxChanged.Load()
	}
	if v := reg.View(); v.Evicted == 0 {
		t.Fatalf("no series forgotten: the test did not churn")
	}
}

// TestIndexUnderChurnWithConcurrentQueries: queries run while scans register and forget series
// (run with -race): each finds the series that stay, once each, and never one twice.
func TestIndexUnderChurnWithConcurrentQueries(t *testing.T) {
	const t0 = 1_700_000_000_000
	hist := history.New(history.Options{})
	reg := registry.New(hist, time.Hour, slog.New(slog.DiscardHandler))
	reg.SetMaxSeries(60)
	st := New(hist, RegistryCatalog(reg), Options{Instance: "n1:22682", Node: "n1"})
	stay := reg.Series(series.Labels{"metric": "stay", "appname": "churn"}, series.Level)
	var ts atomic.Int64
	ts.Store(t0)
	scan := func(gen int) {
		reg.Begin(ts.Load())
		reg.Put(stay, 1)
		for i := range 10 {
			reg.Put(reg.Series(series.Labels{"metric": fmt.Sprintf("gen%d", gen%7), "appname": "churn", "pid": fmt.Sprint(gen*100 + i)}, series.Level), 1)
		}
		reg.Commit()
		ts.Add(2000)
	}
	scan(0)
	done := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sels := []string{`stay`, `{appname="churn"}`, `{__name__=~"gen.*|stay"}`, `{pid!="3"}`}
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				ms, _ := parser.NewParser(parser.Options{}).ParseMetricSelector(sels[(i+w)%len(sels)])
				q, _ := st.Querier(t0, ts.Load())
				ss := q.Select(context.Background(), true, nil, ms...)
				seen := map[string]bool{}
				found := false
				for ss.Next() {
					l := ss.At().Labels().String()
					if seen[l] {
						t.Errorf("%v: %s listed twice", ms, l)
					}
					seen[l] = true
					found = found || ss.At().Labels().Get("__name__") == "stay"
				}
				if !found && (i+w)%len(sels) != 3 {
					t.Errorf("%v: the series that stays is missing", ms)
				}
			}
		}()
	}
	for gen := 1; gen <= 60; gen++ {
		scan(gen)
	}
	close(done)
	wg.Wait()
	if reg.View().Evicted == 0 {
		t.Fatal("no series forgotten: the test did not churn")
	}
}
