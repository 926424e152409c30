package e2e

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestScanKeepsItsBeatUnderHeavyPromQL: while 20 clients send heavy PromQL queries without a
// pause (regular expressions over every metric name, 10 000 pushed series, hour-long ranges
// at a 2 s step) to the real agent, its scans keep their 2 s beat: the history of a machine
// series has a point for every scan tick of the window, none dropped (a gap of two intervals
// or more is a tick the ticker dropped because a scan was still running).
func TestScanKeepsItsBeatUnderHeavyPromQL(t *testing.T) {
	quiet(t)
	const interval = 2 * time.Second
	a := startAgent(t, "--interval", interval.String())
	var body strings.Builder
	for i := range 10_000 {
		fmt.Fprintf(&body, "heavy,worker=w%d value=%d\n", i, i)
	}
	for range 2 {
		if code, msg := a.raw("POST", "/write", body.String()); code != http.StatusNoContent {
			t.Fatalf("push: %d %s", code, msg)
		}
		a.waitScans(2)
	}
	type status struct {
		LastScan struct {
			TS    int64 `json:"ts"`
			Scans int64 `json:"scans"`
			Late  int64 `json:"late"`
		} `json:"last_scan"`
	}
	var st0, st1 status
	if err := a.get("/api/v1/status", &st0); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	hour := url.Values{"start": {strconv.FormatInt(now.Add(-time.Hour).Unix(), 10)}, "end": {strconv.FormatInt(now.Unix(), 10)}, "step": {"2"}}
	queries := []struct{ path, query string }{
		{"query_range", `count_over_time({__name__=~".+"}[1m])`},
		{"query_range", `sum by (__name__) (rate({__name__=~".+"}[1m]))`},
		{"query_range", `topk(5, {__name__=~"heavy.*"})`},
		{"query", `count({__name__=~"(.+)+(.+)+x|.+"})`},
	}
	var ok, refused, other atomic.Int64
	var mu sync.Mutex
	codes := map[int]int{}
	deadline := time.Now().Add(20 * time.Second)
	var wg sync.WaitGroup
	for c := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Longer than the agent's own bound on a request (its 2-minute answer deadline):
			// the agent answers every query, with its result or Prometheus's error, first.
			hc := &http.Client{Timeout: 3 * time.Minute}
			for i := c; time.Now().Before(deadline); i++ {
				q := queries[i%len(queries)]
				form := url.Values{"query": {q.query}}
				if q.path == "query_range" {
					for k, v := range hour {
						form[k] = v
					}
				}
				resp, err := hc.Get(a.URL + "/prometheus/api/v1/" + q.path + "?" + form.Encode())
				if err != nil {
					other.Add(1)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				mu.Lock()
				codes[resp.StatusCode]++
				mu.Unlock()
				switch resp.StatusCode {
				case 200:
					ok.Add(1)
				case http.StatusServiceUnavailable, http.StatusTooManyRequests, 422:
					refused.Add(1) // busy, timed out or over the samples limit: Prometheus's answers
				default:
					other.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	a.waitScans(int(st0.LastScan.Scans) + 1)
	if err := a.get("/api/v1/status", &st1); err != nil {
		t.Fatal(err)
	}
	t.Logf("queries: %d answered, %d refused (busy, timeout, limits), %d other; by status %v; late scans %d; load average %s",
		ok.Load(), refused.Load(), other.Load(), codes, st1.LastScan.Late-st0.LastScan.Late, loadavg())
	if ok.Load() == 0 || other.Load() > 0 {
		t.Errorf("heavy queries: %d answered, %d failed otherwise (%v): want answers, and Prometheus's errors only", ok.Load(), other.Load(), codes)
	}
	ss, err := a.series("/api/v1/history?window=10m", `{metric="memory.MemTotal"}`)
	if err != nil || len(ss) != 1 {
		t.Fatalf("history of memory.MemTotal: %v, %v", ss, err)
	}
	var inside int64
	pts := ss[0].Points
	for i := 1; i < len(pts); i++ {
		if pts[i][0] <= float64(st0.LastScan.TS) || pts[i][0] > float64(st1.LastScan.TS) {
			continue
		}
		inside++
		if gap := time.Duration(pts[i][0]-pts[i-1][0]) * time.Millisecond; gap >= 2*interval {
			t.Errorf("history gap of %s at %.0f under the queries: a scan tick was dropped", gap, pts[i][0])
		}
	}
	if want := st1.LastScan.Scans - st0.LastScan.Scans; inside < want-1 || want < 9 {
		t.Errorf("%d points in the history over %d scans of the 20 s of queries; want one per scan, about 10 scans", inside, want)
	}
}
