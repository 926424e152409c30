package history

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/cantal-go/cantal/internal/history/chunkenc"
	"github.com/cantal-go/cantal/internal/series"
)

// BenchmarkStagingRow measures what closing a segment costs before the compression: reading
// every row of a full staging of 100k series, in ID order, as Commit does. The series are
// written as the agent writes them: in groups of 100 consecutive IDs, the groups in a new random
// order each scan. One op is one whole staging.
//
//	go test -run '^$' -bench StagingRow ./internal/history/
func BenchmarkStagingRow(b *testing.B) {
	const groups, per = 1000, 100
	s := New(Options{})
	ids := make([]ID, groups*per)
	for i := range ids {
		ids[i], _ = s.Series("s"+strconv.Itoa(i), series.Counter)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	order := rng.Perm(groups)
	bits := make([]uint64, per)
	ts := int64(1_700_000_000_000)
	for j := range s.scans - 1 { // all but the last scan: Commit would close the segment
		ts += 2000
		s.Begin(ts)
		rng.Shuffle(groups, func(a, c int) { order[a], order[c] = order[c], order[a] })
		for _, g := range order {
			for m := range bits {
				bits[m] = uint64(j * m)
			}
			for m, id := range ids[g*per : (g+1)*per] {
				s.Add(id, bits[m])
			}
		}
		s.Commit()
	}
	st := s.w.st
	n := int(st.n.Load())
	var vals [chunkenc.MaxScans]uint64
	var pres [chunkenc.MaxScans]uint8
	b.ResetTimer()
	for range b.N {
		for _, id := range ids {
			if !st.row(id, n, &vals, &pres) {
				b.Fatal("no row")
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(ids)), "ns/series")
}
