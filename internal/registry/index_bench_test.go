package registry

import (
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/series"
)

// BenchmarkNameChurn measures a scan (one op) of a registry holding 100 000 pushed series of
// as many distinct metric names, where every scan brings 100 series of new names and the
// series limit drops as many old ones: the read index's names must cost the scanner what came
// and went, not a copy of every name (a pusher putting an id in its metric names does this).
//
//	go test -run '^$' -bench NameChurn -benchtime 200x ./internal/registry/
func BenchmarkNameChurn(b *testing.B) {
	const held, perScan = 100_000, 100
	h := history.New(history.Options{Retention: time.Hour, Interval: 2 * time.Second})
	r := New(h, time.Hour, slog.New(slog.DiscardHandler))
	r.SetMaxPushed(held, 0)
	start := time.Now().Add(-time.Hour).UnixMilli()
	n, scan := 0, 0
	step := func() {
		r.Begin(start + int64(scan)*2000)
		scan++
		for range perScan {
			ref := r.Series(series.Labels{"metric": "req." + strconv.Itoa(n), PushLabel: PushValue}, series.Counter)
			r.Put(ref, 1)
			n++
		}
		r.Commit()
	}
	for n < held+10*perScan {
		step()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		step()
	}
	b.ReportMetric(float64(r.View().Len()), "series")
}
