package promstore

import (
	"context"
	"fmt"
	"slices"
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
