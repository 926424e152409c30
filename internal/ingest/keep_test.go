package ingest

import (
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/registry"
	"github.com/cantal-go/cantal/internal/series"
)

// points returns every point of the series with labels l in the rig's history.
func (a *agentRig) points(l series.Labels) []history.Point {
	a.t.Helper()
	id, _, ok := a.hist.Lookup(l.Key())
	if !ok {
		return nil
	}
	var out []history.Point
	a.hist.Range(id, 0, math.MaxInt64, func(ts int64, bits uint64) bool {
		out = append(out, history.Point{TS: ts, Bits: bits})
		return true
	})
	return out
}

// listed returns the latest sample of the series with labels l as /api/v1/metrics lists it
// (live series only), and whether it is listed.
func (a *agentRig) listed(l series.Labels) (series.Sample, bool) {
	key := l.Key()
	var out series.Sample
	var ok bool
	a.reg.View().Each(func(h registry.Handle) bool {
		if h.Key() != key {
			return true
		}
		if h.Live() {
			out, ok = h.Latest(a.hist, nil)
		}
		return false
	})
	return out, ok
}

func newKeepRig(t *testing.T) *agentRig {
	a := newAgentRig(t, Config{Interval: 2e9})
	a.push.cfg.BackfillFrom = a.reg.BackfillFrom
	return a
}

// TestWriteKeepsPointsAsSent: one push is one point, at the scan after its time, whatever the
// scans that follow; the series stays listed with that point (its age in ts) while held.
func TestWriteKeepsPointsAsSent(t *testing.T) {
	a := newKeepRig(t)
	h := a.push.WriteHandler()
	for range 3 {
		a.scan()
	}
	// No timestamp, pushed between two scans: the next scan.
	a.clk.t = a.clk.t.Add(time.Second)
	if w := post(t, h, "", []byte("room temp=22.5\n"), nil); w.Code != http.StatusNoContent {
		t.Fatalf("POST = %d %s", w.Code, w.Body)
	}
	for range 10 {
		a.scan()
	}
	temp := pl(series.Labels{"metric": "room.temp"})
	first := a.ts - 9*2000
	if pts := a.points(temp); !slices.Equal(pts, []history.Point{{TS: first, Bits: math.Float64bits(22.5)}}) {
		t.Errorf("history of one push after 10 scans: %v; want exactly one point at %d", pts, first)
	}
	if s, ok := a.listed(temp); !ok || s.TS != first || math.Float64frombits(s.Bits) != 22.5 {
		t.Errorf("listed %v %+v; want the point of %d, with its own time", ok, s, first)
	}
	if st := a.push.Stats(); st.Points != 1 || st.Late != 0 {
		t.Errorf("Stats = %+v; want 1 point stored", st)
	}
}

// TestWriteTimestamps: old (within the open segment: a late point at its scan; older: refused),
// current, near future (kept for its scan) and far future (refused) timestamps.
func TestWriteTimestamps(t *testing.T) {
	a := newKeepRig(t) // 16-scan segments
	h := a.push.WriteHandler()
	for range 20 {
		a.scan() // one closed segment (16 scans), 4 scans in the open one
	}
	now := a.clk.t.UnixMilli() // the last scan's time
	body := fmt.Sprintf("m late=1 %d\nm cur=2 %d\nm soon=3 %d\nm old=4 %d\nm far=5 %d\nm cur=6 %d\n",
		now-3000,  // scan now-2000 (late, already committed)
		now+500,   // the next scan
		now+1999,  // within one interval ahead: the next scan
		now-20000, // in the closed segment: too old
		now+60000, // a minute ahead: refused
		now+1000,  // the same slot as cur=2, later: wins
	)
	w := post(t, h, "?precision=ms", []byte(body), nil)
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "partial write") ||
		!strings.Contains(w.Body.String(), "too old") || !strings.Contains(w.Body.String(), "ahead of the agent's clock") ||
		!strings.Contains(w.Body.String(), `"lines":[4,5]`) {
		t.Errorf("POST = %d %s; want 400 partial write refusing lines 4 (too old) and 5 (ahead)", w.Code, w.Body)
	}
	a.scan()
	a.scan()
	next := now + 2000
	for _, c := range []struct {
		field string
		want  []history.Point
	}{
		{"late", []history.Point{{TS: now - 2000, Bits: math.Float64bits(1)}}},
		{"cur", []history.Point{{TS: next, Bits: math.Float64bits(6)}}},
		{"soon", []history.Point{{TS: next, Bits: math.Float64bits(3)}}},
		{"old", nil},
		{"far", nil},
	} {
		if pts := a.points(pl(series.Labels{"metric": "m." + c.field})); !slices.Equal(pts, c.want) {
			t.Errorf("m.%s: %v; want %v", c.field, pts, c.want)
		}
	}
}

// TestStatsdKeepsPointsAsSent: statsd values are stored at the scan after they arrive, once.
func TestStatsdKeepsPointsAsSent(t *testing.T) {
	a := newKeepRig(t)
	var l StatsdLine
	a.scan()
	a.push.handleStatsd([]byte("hits:2|c\ntemp:21|g\n"), &l)
	a.scan()
	t1 := a.ts
	a.scan()
	a.scan()
	a.push.handleStatsd([]byte("hits:3|c\n"), &l)
	a.scan()
	t2 := a.ts
	a.scan()
	if pts := a.points(pl(series.Labels{"metric": "hits"})); !slices.Equal(pts, []history.Point{{TS: t1, Bits: 2}, {TS: t2, Bits: 5}}) {
		t.Errorf("hits: %v; want 2 at %d and 5 at %d", pts, t1, t2)
	}
	if pts := a.points(pl(series.Labels{"metric": "temp"})); !slices.Equal(pts, []history.Point{{TS: t1, Bits: math.Float64bits(21)}}) {
		t.Errorf("temp: %v; want one point 21 at %d", pts, t1)
	}
	if s, ok := a.listed(pl(series.Labels{"metric": "temp"})); !ok || s.TS != t1 {
		t.Errorf("temp listed %v %+v; want its point of %d", ok, s, t1)
	}
}
