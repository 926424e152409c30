package cantalv1

import (
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/registry"
	"github.com/cantal-go/cantal/internal/series"
)

// benchRegistry holds n counters {metric: requests, pid, shard} over 60 scans 2 s apart.
func benchRegistry(b *testing.B, n int) *Server {
	h := history.New(history.Options{Retention: time.Hour, Interval: 2 * time.Second})
	reg := registry.New(h, time.Hour, slog.New(slog.DiscardHandler))
	refs := make([]*series.Ref, n)
	for i := range refs {
		refs[i] = reg.Series(series.Labels{"metric": "requests", "pid": strconv.Itoa(1000 + i), "shard": strconv.Itoa(i % 8)}, series.Counter)
	}
	load := reg.Series(series.Labels{"metric": "system.load_avg_1min"}, series.Float)
	end := time.Now().UnixMilli()
	for s := int64(0); s < 60; s++ {
		reg.Begin(end - (59-s)*2000)
		for i, r := range refs {
			reg.Put(r, uint64(s*int64(i+1)))
		}
		reg.Put(load, math.Float64bits(float64(s)))
		reg.Commit()
	}
	return &Server{Registry: reg}
}

// BenchmarkQuery: POST /query of 1000 series' last 30 points each, derived and summed by shard,
// as a resource manager polls it; and /all_metrics of the same registry.
func BenchmarkQuery(b *testing.B) {
	s := benchRegistry(b, 1000)
	body := `{"rules": {"r": {"series": {"source": "Fine", "condition": ["Eq", "metric", "requests"]},
		"extract": ["HistoryByNum", 30], "functions": [["NonNegativeDerivative"], ["SumBy", "shard", "Ignore", true]]}}}`
	mux := http.NewServeMux()
	s.Register(mux)
	b.Run("query", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			w := httptest.NewRecorder()
			mux.ServeHTTP(w, httptest.NewRequest("POST", "/query", strings.NewReader(body)))
			if w.Code != 200 {
				b.Fatalf("%d %s", w.Code, w.Body)
			}
		}
	})
	b.Run("all_metrics", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			w := httptest.NewRecorder()
			mux.ServeHTTP(w, httptest.NewRequest("GET", "/all_metrics", nil))
			if w.Code != 200 {
				b.Fatalf("%d", w.Code)
			}
		}
	})
}
