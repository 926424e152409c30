package api

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/apiwire"
	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/registry"
	"github.com/cantal-go/cantal/internal/series"
)

// TestHistoryWindowWithDeadSeries: on a node keeping the series of processes that exited, the
// history answer holds every series with a point in the window, a dead one included (its
// labels long dropped from memory), and none whose points are all older; metrics holds only the
// live one. Each is asked by metric name (the index's lists) and by pid alone (no metric
// matcher: a cold series is tested on its key).
func TestHistoryWindowWithDeadSeries(t *testing.T) {
	h := history.New(history.Options{Retention: time.Hour, Interval: 2 * time.Second})
	reg := registry.New(h, time.Hour, slog.New(slog.DiscardHandler))
	ref := func(pid string) *series.Ref {
		return reg.Series(series.Labels{"metric": "proc.rss", "pid": pid, "job": "x"}, series.Level)
	}
	live, recent, old := ref("1"), ref("2"), ref("3")
	const scans = 900 // 30 min at 2 s, ending now
	now := time.Now().UnixMilli()
	for s := range scans {
		reg.Begin(now - int64(scans-1-s)*2000)
		reg.Put(live, 1)
		if s < scans-60 { // exited 2 min ago
			reg.Put(recent, 2)
		}
		if s < scans-600 { // exited 20 min ago
			reg.Put(old, 3)
		}
		reg.Commit()
	}
	srv := &Server{Registry: reg, Log: slog.New(slog.DiscardHandler), MaxWindow: time.Hour,
		Status: func(context.Context) apiwire.Status { return apiwire.Status{} }, Processes: func(context.Context, ProcessQuery) apiwire.ProcessesAnswer { return apiwire.ProcessesAnswer{} }}
	mux := http.NewServeMux()
	srv.Register(mux)
	ts := httptest.NewServer(mux)
	defer ts.Close()
	pids := func(path string) []string {
		var ans struct{ Series []apiSeries }
		if code := get(t, ts, path, &ans); code != 200 {
			t.Fatalf("GET %s: %d", path, code)
		}
		var out []string
		for _, s := range ans.Series {
			if s.Kind != "state" && s.Labels["metric"] == "proc.rss" && (len(s.Points) > 0 || s.Value != nil || s.Count > 0) {
				out = append(out, s.Labels["pid"])
			}
		}
		slices.Sort(out)
		return out
	}
	for _, match := range []string{"proc.rss", `{metric=~"proc\\..*"}`, `{pid=~"1|2|3"}`, `{job="x"}`} {
		m := url.QueryEscape(match)
		if got := pids("/api/v1/history?window=15m&match=" + m); !slices.Equal(got, []string{"1", "2"}) {
			t.Errorf("%s over 15 min: pids %q, want 1 and 2 (2 exited within the window)", match, got)
		}
		if got := pids("/api/v1/history?window=30m&match=" + m); !slices.Equal(got, []string{"1", "2", "3"}) {
			t.Errorf("%s over 30 min: pids %q, want all three", match, got)
		}
		if got := pids("/api/v1/history?window=1m&match=" + m); !slices.Equal(got, []string{"1"}) {
			t.Errorf("%s over 1 min: pids %q, want 1", match, got)
		}
		if got := pids("/api/v1/stats?window=15m&match=" + m); !slices.Equal(got, []string{"1", "2"}) {
			t.Errorf("stats of %s over 15 min: pids %q, want 1 and 2", match, got)
		}
		if got := pids("/api/v1/metrics?match=" + m); !slices.Equal(got, []string{"1"}) {
			t.Errorf("metrics of %s: pids %q, want the live one", match, got)
		}
	}
}
