package promapi

import (
	"fmt"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/promstore"
	"github.com/cantal-go/cantal/internal/registry"
	"github.com/cantal-go/cantal/internal/series"
)

// BenchmarkQueryRangeMatrix is query_range of a selector over 100 counters holding an hour of
// 2 s scans (1800 steps): an answer of 180 000 points, most of whose cost is writing it.
func BenchmarkQueryRangeMatrix(b *testing.B) {
	const scans, n = 1800, 100
	hist := history.New(history.Options{})
	reg := registry.New(hist, time.Hour, nil)
	refs := make([]*series.Ref, n)
	for i := range refs {
		refs[i] = reg.Series(series.Labels{"metric": "requests", "appname": "bench", "worker": fmt.Sprint(i)}, series.Counter)
	}
	for j := range scans {
		reg.Begin(t0 + int64(j)*2000)
		for i, r := range refs {
			reg.Put(r, uint64(j*(i+1)))
		}
		reg.Commit()
	}
	st := promstore.New(hist, promstore.RegistryCatalog(reg), promstore.Options{Instance: "n1:22682", Node: "n1"})
	h := New(st, Options{MaxSamples: 1e9, Timeout: time.Hour})
	q := url.Values{"query": {`requests_total`}, "start": {fmt.Sprint(t0 / 1000)},
		"end": {fmt.Sprint((t0 + (scans-1)*2000) / 1000)}, "step": {"2"}}
	target := "/prometheus/api/v1/query_range?" + q.Encode()
	b.ReportAllocs()
	size := 0
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", target, nil))
		if w.Code != 200 {
			b.Fatalf("%d %.300s", w.Code, w.Body.String())
		}
		size = w.Body.Len()
	}
	b.ReportMetric(float64(size), "answer-bytes")
}
