package history

import (
	"math"
	"strconv"
	"testing"

	"github.com/cantal-go/cantal/internal/series"
	"github.com/cantal-go/cantal/internal/testsupport/cputime"
)

// BenchmarkAdd measures the writer's cost per sample in steady state, segment compression
// included: 10000 series of mixed shapes, one op = one Add, with Begin/Commit every 10000 ops.
//
//	go test -run '^$' -bench 'Add|Last|Latest' -benchmem ./internal/history/
func BenchmarkAdd(b *testing.B) {
	const nser = 10000
	s := New(Options{})
	ids := make([]ID, nser)
	kinds := []series.Kind{series.Counter, series.Level, series.Float}
	for i := range ids {
		ids[i], _ = s.Series("s"+strconv.Itoa(i), kinds[i%3])
	}
	value := func(i, j int) uint64 {
		switch i % 3 {
		case 0:
			return uint64(j * (i%50 + 1) * 1000)
		case 1:
			return uint64(i*1000 + (j*7+i)%13)
		}
		return math.Float64bits(float64((j*31+i)%1000) / 100)
	}
	ts := int64(1_700_000_000_000)
	// Warm up: fill a few segments so that buffers have their steady-state size.
	j := 0
	for ; j < 3*DefaultBlockScans; j++ {
		ts += 2000
		s.Begin(ts)
		for i, id := range ids {
			s.Add(id, value(i, j))
		}
		s.Commit()
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cputime.Process()
	i := 0
	ts += 2000
	s.Begin(ts)
	for k := 0; k < b.N; k++ {
		s.Add(ids[i], value(i, j))
		i++
		if i == nser {
			s.Commit()
			s.Expire()
			i = 0
			j++
			ts += 2000
			s.Begin(ts)
		}
	}
	s.Commit()
	reportCPU(b, cpu0, b.N, "cpu-ns/op")
}

func benchStore(b *testing.B) (*Store, []ID) {
	s := New(Options{})
	const nser = 100
	ids := make([]ID, nser)
	for i := range ids {
		ids[i], _ = s.Series("s"+strconv.Itoa(i), series.Counter)
	}
	ts := int64(1_700_000_000_000)
	for j := 0; j < 1800; j++ {
		ts += 2000
		s.Begin(ts)
		for i, id := range ids {
			s.Add(id, uint64(j*(i+1)*100+j%7))
		}
		s.Commit()
	}
	return s, ids
}

func BenchmarkLast(b *testing.B) {
	s, ids := benchStore(b)
	b.ReportAllocs()
	buf := make([]Point, 0, 100)
	for k := 0; b.Loop(); k++ {
		buf = s.Last(ids[k%len(ids)], 100, buf[:0])
	}
}

func BenchmarkLatest(b *testing.B) {
	s, ids := benchStore(b)
	b.ReportAllocs()
	for k := 0; b.Loop(); k++ {
		s.Latest(ids[k%len(ids)])
	}
}

func BenchmarkRangeHour(b *testing.B) {
	s, ids := benchStore(b)
	b.ReportAllocs()
	n := 0
	for k := 0; b.Loop(); k++ {
		s.Range(ids[k%len(ids)], math.MinInt64, math.MaxInt64, func(int64, uint64) bool { n++; return true })
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/point")
}
