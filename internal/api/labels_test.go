package api

import (
	"context"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/access"
	"github.com/cantal-go/cantal/internal/selector"
	"github.com/cantal-go/cantal/internal/series"
)

func TestLabels(t *testing.T) {
	reg, ts, _ := fixture(t)
	reg.Begin(time.Now().UnixMilli())
	shop := reg.Series(series.Labels{"metric": "shop.Orders", "pid": "2", "appname": "Shop-front"}, series.Counter)
	ret := reg.Series(series.Labels{"metric": "shop.returns", "pid": "2"}, series.Counter)
	reg.Put(shop, 1)
	reg.Put(ret, 1)
	reg.Commit()
	var ans LabelsAnswer
	if code := get(t, ts, "/api/v1/labels?q=SHOP", &ans); code != 200 {
		t.Fatalf("code %d", code)
	}
	if !slices.Equal(ans.Metrics, []string{"shop.Orders", "shop.returns"}) || !slices.Equal(ans.Labels, []LabelValue{{"appname", "Shop-front"}}) || ans.Truncated {
		t.Errorf("q=SHOP: %+v; want the metrics shop.Orders, shop.returns and appname Shop-front", ans)
	}
	ans = LabelsAnswer{}
	if get(t, ts, "/api/v1/labels?q=shop&limit=1", &ans); len(ans.Metrics) != 1 || !ans.Truncated {
		t.Errorf("q=shop&limit=1: %+v; want one metric and truncated", ans)
	}
	var e struct{ Error string }
	for _, bad := range []string{"", "?q=", "?q=x&limit=0", "?q=x&limit=201", "?q=" + strings.Repeat("a", 129)} {
		if code := get(t, ts, "/api/v1/labels"+bad, &e); code != 400 || e.Error == "" {
			t.Errorf("/api/v1/labels%s: %d %q; want 400 with an error", bad, code, e.Error)
		}
	}
}

// TestLabelsPrivate: a caller who sees no process gets no label of a per-process series.
func TestLabelsPrivate(t *testing.T) {
	reg, _, _ := fixture(t)
	srv := &Server{Registry: reg, ProcessUID: testUIDs}
	r := httptest.NewRequest("GET", "/api/v1/labels?q=1", nil)
	r = r.WithContext(access.NewContext(context.Background(), access.Caller{Processes: access.ProcessesNone}))
	rec := httptest.NewRecorder()
	srv.labels(rec, r)
	if rec.Code != 200 || strings.Contains(rec.Body.String(), `"pid"`) {
		t.Errorf("a caller seeing no process: %d %s; want no pid value", rec.Code, rec.Body)
	}
}

func FuzzLabelsQuery(f *testing.F) {
	for _, s := range []string{"q=shop", "q=%FF", "q=a&limit=7", "limit=-1&q=x", "q=%20%20", ""} {
		f.Add(s)
	}
	reg, ts, _ := fixture(f)
	ts.Close()
	f.Fuzz(func(t *testing.T, raw string) {
		r := httptest.NewRequest("GET", "/api/v1/labels", nil)
		r.URL.RawQuery = raw
		q, limit, err := ParseLabelsQuery(r)
		if err != nil {
			return
		}
		if q == "" || len(q) > labelsMaxQuery*2 || limit < 1 || limit > labelsMaxLimit {
			t.Fatalf("ParseLabelsQuery(%q) = %q, %d without error", raw, q, limit)
		}
		ans := FindLabels(reg.View(), nil, q, limit)
		if len(ans.Metrics) > limit || len(ans.Labels) > limit {
			t.Fatal(fmt.Sprintf("%d metrics, %d labels over limit %d", len(ans.Metrics), len(ans.Labels), limit))
		}
	})
}

// BenchmarkSuggest: one suggestion lookup over 100k live series, /api/v1/labels (FindLabels)
// side by side with what the UI did before it, the whole /api/v1/metrics answer (LatestJSON).
func BenchmarkSuggest(b *testing.B) {
	reg, ts, _ := fixture(b)
	ts.Close()
	reg.Begin(time.Now().UnixMilli())
	for i := 0; i < 100_000; i++ {
		h := reg.Series(series.Labels{"metric": fmt.Sprintf("app%d.requests", i%500), "pid": fmt.Sprint(1000 + i/500), "appname": fmt.Sprintf("app%d", i%500)}, series.Counter)
		reg.Put(h, uint64(i))
	}
	reg.Commit()
	b.Run("labels", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			FindLabels(reg.View(), nil, "app42", 40)
		}
	})
	b.Run("all-series", func(b *testing.B) {
		b.ReportAllocs()
		q := Query{Sel: selector.MustParse("")}
		var n int
		for b.Loop() {
			n = len(LatestJSON(make([]byte, 0, 4096), reg, q))
		}
		b.ReportMetric(float64(n), "answer-bytes")
	})
}
