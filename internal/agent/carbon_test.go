package agent

import (
	"log/slog"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/registry"
	"github.com/cantal-go/cantal/internal/series"
)

func TestCarbonPrefix(t *testing.T) {
	for _, tc := range []struct{ prefix, node, want string }{
		{"{node}", "web1.example.com", "web1_example_com."},
		{"servers.{node}.cantal", "db 2", "servers.db_2.cantal."},
		{"fixed.", "x", "fixed."},
		{"", "x", ""},
	} {
		if got := carbonPrefix(Config{CarbonPrefix: tc.prefix, NodeName: tc.node}); got != tc.want {
			t.Errorf("carbonPrefix(%q, node %q) = %q; want %q", tc.prefix, tc.node, got, tc.want)
		}
	}
}

// TestCarbonSourceLatePush: a pushed point stored late, at a scan the carbon output has already
// read, is read again by the next window; a scanned series' points are read once.
func TestCarbonSourceLatePush(t *testing.T) {
	hist := history.New(history.Options{Retention: time.Hour, Interval: 2 * time.Second})
	reg := registry.New(hist, time.Hour, slog.New(slog.DiscardHandler))
	src := &carbonSource{hist: hist, reg: reg}
	machine := reg.Series(series.Labels{"metric": "m"}, series.Level)
	pushed := reg.Series(series.Labels{"metric": "p", registry.PushLabel: registry.PushValue}, series.Level)
	const t0 = int64(1_700_000_000_000)
	scan := func(ts int64, push func()) {
		reg.Begin(ts)
		reg.Put(machine, uint64(ts))
		if push != nil {
			push()
		}
		reg.Commit()
	}
	scan(t0, nil)
	scan(t0+2000, nil)
	read := func(from, to int64) map[string][]int64 {
		got := map[string][]int64{}
		src.Points(from, to, func(l series.Labels, _ series.Kind, pts []history.Point) bool {
			for _, p := range pts {
				got[l["metric"]] = append(got[l["metric"]], p.TS)
			}
			return true
		})
		return got
	}
	if got := read(t0, t0+2000); len(got["m"]) != 2 || len(got["p"]) != 0 {
		t.Fatalf("first window = %v", got)
	}
	// The next scan brings a pushed point stamped before the previous scan: it is stored at
	// that scan, which the first window already covered.
	scan(t0+4000, func() {
		if at, err := reg.PutAt(pushed, t0+1500, 7); err != nil || at != t0+2000 {
			t.Fatalf("PutAt = %d, %v; want the scan at +2000", at, err)
		}
	})
	got := read(t0+2001, t0+4000)
	if len(got["m"]) != 1 || got["m"][0] != t0+4000 {
		t.Errorf("machine series in the second window = %v; want only the new scan", got["m"])
	}
	if len(got["p"]) != 1 || got["p"][0] != t0+2000 {
		t.Errorf("pushed series in the second window = %v; want the late point at +2000", got["p"])
	}
}
