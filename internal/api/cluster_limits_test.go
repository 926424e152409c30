package api

import (
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/hub"
	"github.com/cantal-go/cantal/internal/querylimit"
	"github.com/cantal-go/cantal/internal/registry"
	"github.com/cantal-go/cantal/internal/series"
)

// limitedClusterServer is a server with n series of 60 points each, the query limiter l in
// front of its cluster routes as the agent puts it (no slot for the route, answers bounded),
// and a cluster keeping 5 minutes.
func limitedClusterServer(t *testing.T, n int, l *querylimit.Limiter) http.Handler {
	t.Helper()
	reg := registry.New(history.New(history.Options{Retention: time.Hour, Interval: time.Second}), time.Hour, slog.New(slog.DiscardHandler))
	hs := make([]*series.Ref, n)
	for i := range hs {
		hs[i] = reg.Series(series.Labels{"metric": "load", "i": fmt.Sprint(i)}, series.Float)
	}
	now := time.Now().UnixMilli()
	for k := int64(59); k >= 0; k-- {
		reg.Begin(now - k*1000)
		for _, h := range hs {
			reg.Put(h, math.Float64bits(float64(k)))
		}
		reg.Commit()
	}
	var queries atomic.Int32
	srv := &Server{Registry: reg, Log: slog.New(slog.DiscardHandler), MaxWindow: time.Hour, NodeName: "local",
		ClusterTimeout: 200 * time.Millisecond, Cluster: keptCluster{answers: []hub.NodeAnswer{}, queries: &queries}, Slots: l}
	mux := http.NewServeMux()
	srv.Register(mux)
	return l.Handler(mux, false)
}

// TestClusterRoutesTakeQuerySlot: the local part of cluster/metrics and cluster/history is
// built under a query slot: while every slot is held, neither answers; once one is free, both
// do. Without it, parallel cluster queries each built the local node's full answer at once
// (issue 31, N7: six cluster/history?window=1h took the agent to 1.97 GB).
func TestClusterRoutesTakeQuerySlot(t *testing.T) {
	l := querylimit.New(1, 16<<20, 64<<20)
	h := limitedClusterServer(t, 10, l)
	release, err := l.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var done []chan int
	for _, path := range []string{"/api/v1/cluster/metrics?match=load", "/api/v1/cluster/history?match=load&window=1m"} {
		c := make(chan int, 1)
		go func() {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
			c <- rec.Code
		}()
		done = append(done, c)
	}
	for i, c := range done {
		select {
		case code := <-c:
			t.Fatalf("cluster route %d answered %d while the only query slot was held", i, code)
		case <-time.After(200 * time.Millisecond):
		}
	}
	release()
	for i, c := range done {
		select {
		case code := <-c:
			if code != 200 {
				t.Errorf("cluster route %d = %d after the slot was freed; want 200", i, code)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("cluster route %d did not answer within 10 s of the slot being freed", i)
		}
	}
	if l.InUse() != 0 {
		t.Errorf("%d slots still held after the cluster answers", l.InUse())
	}
}

// TestClusterHistoryAnswerBounded: a cluster history whose local part is larger than one answer
// may be is refused with 422 and the reason, having built at most about that bound, instead of
// building the whole local history and a decoded copy of it. (Issue 31, N7.)
func TestClusterHistoryAnswerBounded(t *testing.T) {
	l := querylimit.New(1, 256<<10, 1<<20)
	h := limitedClusterServer(t, 2000, l) // about 2000 × 60 points × 20 bytes: 2.4 MB
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/api/v1/cluster/history?match=load&window=1m", nil)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	h.ServeHTTP(rec, req)
	runtime.ReadMemStats(&after)
	// Building to the bound, and the answer's own buffers, take a few times the bound; the
	// whole local history and its decoded copy took over 100 times it.
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 16*256<<10 {
		t.Errorf("a refused cluster history allocated %d bytes; want at most 16 times the 256 KiB bound", alloc)
	}
	if rec.Code != http.StatusUnprocessableEntity || !strings.Contains(rec.Body.String(), "--max-answer-bytes") {
		t.Fatalf("cluster history past the answer bound = %d %.200s; want 422 naming --max-answer-bytes", rec.Code, rec.Body)
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", `/api/v1/cluster/history?match={metric="load",i="7"}&window=1m`, nil))
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"node":"local"`) {
		t.Fatalf("a narrow cluster history = %d %.200s; want 200 with the local node's series", rec.Code, rec.Body)
	}
}
