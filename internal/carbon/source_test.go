package carbon

import (
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/registry"
	"github.com/cantal-go/cantal/internal/series"
)

func TestPrefix(t *testing.T) {
	for _, tc := range []struct{ prefix, node, want string }{
		{"{node}", "web1.example.com", "web1_example_com."},
		{"servers.{node}.cantal", "db 2", "servers.db_2.cantal."},
		{"fixed.", "x", "fixed."},
		{"", "x", ""},
	} {
		if got := Prefix(tc.prefix, tc.node); got != tc.want {
			t.Errorf("Prefix(%q, node %q) = %q; want %q", tc.prefix, tc.node, got, tc.want)
		}
	}
}

// TestHistorySourceLatePush: pushed points stored late, at scans the carbon output has already
// read (one just behind, one ten scans back), are read again by the next window, also when
// that window is read twice (the sender shrinks a window over its budget); scanned series are
// read once.
func TestHistorySourceLatePush(t *testing.T) {
	hist := history.New(history.Options{Retention: time.Hour, Interval: 2 * time.Second})
	reg := registry.New(hist, time.Hour, slog.New(slog.DiscardHandler))
	src := NewHistorySource(hist, nil)
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
	// Rounds of one scan each, as the sender makes them.
	sent := t0 - 1
	round := func(ts int64, push func()) map[string][]int64 {
		scan(ts, push)
		got := read(sent+1, ts)
		sent = ts
		return got
	}
	for i := range 12 {
		ts := t0 + int64(i)*2000
		got := round(ts, nil)
		if len(got["m"]) != 1 || got["m"][0] != ts || len(got["p"]) != 0 {
			t.Fatalf("round at %d = %v", i, got)
		}
	}
	// A pushed point stamped before the previous scan lands at that scan (already sent).
	got := round(t0+24000, func() {
		if at, err := reg.PutAt(pushed, t0+21500, 7); err != nil || at != t0+22000 {
			t.Fatalf("PutAt = %d, %v; want the scan at +22000", at, err)
		}
	})
	// The point is outside the window [+22001, +24000], but the window follows on from the
	// last one, whose range now holds a new point: the series is sent again.
	if len(got["m"]) != 1 || got["m"][0] != t0+24000 {
		t.Errorf("machine series = %v; want only the new scan", got["m"])
	}
	if len(got["p"]) != 1 || got["p"][0] != t0+22000 {
		t.Errorf("pushed series = %v; want the late point at +22000", got["p"])
	}
	// No change since: not sent again.
	for _, ts := range []int64{t0 + 26000, t0 + 28000} {
		if got = round(ts, nil); len(got["p"]) != 0 || len(got["m"]) != 1 {
			t.Errorf("round at %d = %v; want the machine's scan only", ts, got)
		}
	}
	// A point ten scans back (stamped 0.5 s before that scan, which came in time), read by a
	// window that the sender reads twice.
	scan(t0+30000, func() {
		if at, err := reg.PutAt(pushed, t0+9500, 9); err != nil || at != t0+10000 {
			t.Fatalf("PutAt = %d, %v; want the scan at +10000", at, err)
		}
	})
	scan(t0+32000, nil)
	first := read(sent+1, t0+32000)
	second := read(sent+1, t0+30000) // the window shrunk: only this one is sent
	sent = t0 + 30000
	for _, g := range []map[string][]int64{first, second} {
		if len(g["p"]) != 2 || g["p"][0] != t0+10000 || g["p"][1] != t0+22000 {
			t.Errorf("pushed series after a point ten scans back = %v; want +10000 and +22000", g["p"])
		}
	}
	if got = read(sent+1, t0+32000); len(got["p"]) != 0 || len(got["m"]) != 1 {
		t.Errorf("next window = %v; want the machine's scan only", got)
	}
}

// BenchmarkHistorySourceWindow: one window of one scan read from a history of 5000 scanned and
// 1000 pushed series (the steady state of the carbon output), per op. Run it with at most
// -benchtime 900x: the scans must stay within the hour held.
func BenchmarkHistorySourceWindow(b *testing.B) {
	hist := history.New(history.Options{Retention: time.Hour, Interval: 2 * time.Second})
	reg := registry.New(hist, time.Hour, slog.New(slog.DiscardHandler))
	var refs []*series.Ref
	for i := range 6000 {
		l := series.Labels{"metric": "m", "i": strconv.Itoa(i)}
		if i >= 5000 {
			l[registry.PushLabel] = registry.PushValue
		}
		refs = append(refs, reg.Series(l, series.Level))
	}
	src := NewHistorySource(hist, nil)
	t0 := time.Now().Add(-30 * time.Minute).UnixMilli()
	scan := func(i int) int64 {
		ts := t0 + int64(i)*2000
		reg.Begin(ts)
		for j, r := range refs {
			reg.Put(r, uint64(i+j))
		}
		reg.Commit()
		return ts
	}
	points := 0
	read := func(from, to int64) {
		src.Points(from, to, func(_ series.Labels, _ series.Kind, pts []history.Point) bool {
			points += len(pts)
			return true
		})
	}
	prev := scan(0)
	read(prev, prev)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 1; i <= b.N; i++ {
		b.StopTimer()
		ts := scan(i)
		b.StartTimer()
		read(prev+1, ts)
		prev = ts
	}
	b.ReportMetric(float64(points)/float64(b.N), "points/op")
}
