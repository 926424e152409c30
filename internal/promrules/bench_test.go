package promrules

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"

	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/promstore"
	"github.com/cantal-go/cantal/internal/registry"
)

// BenchmarkRecordAndCollect: one evaluation's commit of 10 000 recorded samples and the scan
// that stores them (what a scan pays for rule files: the copy under the mutex).
func BenchmarkRecordAndCollect(b *testing.B) {
	hist := history.New(history.Options{})
	reg := registry.New(hist, time.Hour, nil)
	st := promstore.New(hist, promstore.StoreCatalog(hist), promstore.Options{})
	r := New(Options{Queryable: st})
	ls := make([]labels.Labels, 10_000)
	for i := range ls {
		ls[i] = labels.FromStrings(labels.MetricName, "instance:bench:rate1m", "device", "d"+strconv.Itoa(i))
	}
	ctx := context.Background()
	b.ReportAllocs()
	ts := time.Now().UnixMilli()
	for i := 0; b.Loop(); i++ {
		app := appendable{r}.AppenderV2(ctx)
		for j, l := range ls {
			app.Append(0, l, 0, ts+int64(i), float64(j), nil, nil, storage.AppendV2Options{})
		}
		app.Commit()
		reg.Begin(ts + int64(i)*1000)
		r.Collect(ctx, reg)
		reg.Commit()
	}
}
