package history

import (
	"io"
	"strconv"
	"testing"

	"github.com/cantal-go/cantal/internal/series"
)

// BenchmarkWriteSnapshot writes the snapshot of 100k series (keys like the agent's) holding an
// hour of 2 s scans (28 closed segments and a half-full open one), as the agent does every
// --snapshot-interval.
//
//	go test -run '^$' -bench WriteSnapshot -benchtime 5x ./internal/history/
func BenchmarkWriteSnapshot(b *testing.B) {
	const nser = 100_000
	s := New(Options{})
	ids := make([]ID, nser)
	for i := range ids {
		key := `{"appname":"app` + strconv.Itoa(i/100%50) + `","metric":"app.metric.` + strconv.Itoa(i%100) + `","pid":"` + strconv.Itoa(1000+i/100) + `","process":"worker"}`
		ids[i], _ = s.Series(key, series.Counter)
	}
	ts := int64(1_700_000_000_000)
	for j := 0; j < 28*DefaultBlockScans+DefaultBlockScans/2; j++ {
		s.Begin(ts + int64(j)*2000)
		for i, id := range ids {
			s.Add(id, uint64(j*(i%7)))
		}
		s.Commit()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if err := s.WriteSnapshot(io.Discard); err != nil {
			b.Fatal(err)
		}
	}
}
