package agent

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/access"
	"github.com/cantal-go/cantal/internal/querylimit"
)

// TestPrometheusAPIRoles: Prometheus's query API takes its queries as POSTed forms too
// (Grafana's default): those need the read role only, as GETs; any other POST under it the
// write role.
func TestPrometheusAPIRoles(t *testing.T) {
	for _, c := range []struct {
		method, path string
		want         access.Role
	}{
		{"POST", "/prometheus/api/v1/query", access.Read},
		{"POST", "/prometheus/api/v1/query_range", access.Read},
		{"POST", "/prometheus/api/v1/series", access.Read},
		{"POST", "/prometheus/api/v1/labels", access.Read},
		{"GET", "/prometheus/api/v1/label/job/values", access.Read},
		{"POST", "/prometheus/api/v1/admin/tsdb/delete_series", access.Write},
		{"POST", "/prometheus/api/v1/query/x", access.Write},
	} {
		if got := needRole(httptest.NewRequest(c.method, c.path, nil)); got != c.want {
			t.Errorf("needRole(%s %s) = %v; want %v", c.method, c.path, got, c.want)
		}
	}
}

// TestPrometheusAPITakesSlot: a PromQL query waits for one of the agent's query slots like
// any other read, so queries never take the CPU the scans need.
func TestPrometheusAPITakesSlot(t *testing.T) {
	release := make(chan struct{})
	var holding atomic.Bool
	h := limitQueries(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v1/metrics" {
			holding.Store(true)
			<-release
		}
	}), querylimit.New(1, 1<<20, 4<<20))
	held := make(chan struct{})
	go func() {
		defer close(held)
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/api/v1/metrics", nil))
	}()
	for !holding.Load() {
		time.Sleep(time.Millisecond)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/prometheus/api/v1/query", nil))
	}()
	select {
	case <-done:
		t.Fatal("a PromQL query ran while the only query slot was held")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	<-held
	<-done
}
