package bench

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/series"
	"github.com/cantal-go/cantal/internal/testsupport/cputime"
	"github.com/cantal-go/cantal/internal/testsupport/procmix"
)

// Side-by-side benchmarks of internal/history against Prometheus tsdb/chunkenc XOR chunks (120
// samples per chunk, as the Prometheus head cuts them) on the same data:
//
//	cd bench && go test -run '^$' -bench 'History' -benchmem -count 1
//
// Every shape is 1000 series × 1792 scans (one hour at 2 s, a whole number of 64-scan
// segments); the mix is the /proc recording in internal/history/testdata. Metrics:
// bytes/sample (history: compressed segments including offsets and the shared time column;
// XOR: chunk bytes, which include per-series timestamps), bytes/series-hour (bytes/sample ×
// 1800), ns/sample for appending and for decoding every point back.

const (
	histSeries = 1000
	histScans  = 1792
	scanMs     = 2000
)

type dataset struct {
	kinds []series.Kind
	ts    []int64
	vals  [][]uint64 // [series][scan]
	ok    [][]bool
	n     int // present points
}

func shapeData(kind series.Kind, gen func(r *rand.Rand, i, j int, prev uint64) uint64) *dataset {
	r := rand.New(rand.NewPCG(42, 7))
	d := &dataset{}
	t := int64(1_700_000_000_000)
	for j := 0; j < histScans; j++ {
		t += scanMs + int64(r.IntN(5)) - 2 // the scanner's jitter
		d.ts = append(d.ts, t)
	}
	for i := 0; i < histSeries; i++ {
		vals := make([]uint64, histScans)
		ok := make([]bool, histScans)
		var prev uint64
		for j := range vals {
			prev = gen(r, i, j, prev)
			vals[j], ok[j] = prev, true
		}
		d.kinds = append(d.kinds, kind)
		d.vals = append(d.vals, vals)
		d.ok = append(d.ok, ok)
		d.n += histScans
	}
	return d
}

func shapes() map[string]*dataset {
	return map[string]*dataset{
		"constant": shapeData(series.Level, func(r *rand.Rand, i, j int, prev uint64) uint64 {
			return uint64(i) * 1_000_003
		}),
		"counter_jitter": shapeData(series.Counter, func(r *rand.Rand, i, j int, prev uint64) uint64 {
			if j == 0 {
				return uint64(i) << 20
			}
			return prev + 1000 + uint64(r.IntN(100))
		}),
		"counter_1in5": shapeData(series.Counter, func(r *rand.Rand, i, j int, prev uint64) uint64 {
			if j == 0 || r.IntN(5) == 0 {
				return prev + uint64(1+r.IntN(5000))
			}
			return prev
		}),
		"int_walk": shapeData(series.Level, func(r *rand.Rand, i, j int, prev uint64) uint64 {
			if j == 0 {
				return 1 << 30
			}
			return prev + uint64(int64(r.IntN(2001)-1000))
		}),
		"float_2dec": shapeData(series.Float, func(r *rand.Rand, i, j int, prev uint64) uint64 {
			v := 50.0
			if j > 0 {
				v = math.Float64frombits(prev)
			}
			v = math.Round((v+float64(r.IntN(201)-100)/100)*100) / 100
			return math.Float64bits(v)
		}),
		"float_random": shapeData(series.Float, func(r *rand.Rand, i, j int, prev uint64) uint64 {
			return math.Float64bits(r.Float64() * 1000)
		}),
	}
}

// mixData loads the /proc recording. With stable, only the series present in at least 90% of
// the scans are kept: the machine it was recorded on ran many short-lived build and test
// processes, and the stable part is what a quiet production node looks like.
func mixData(b *testing.B, stable bool) *dataset {
	m, err := procmix.Load("../internal/history/testdata/procmix.json.gz")
	if err != nil {
		b.Fatal(err)
	}
	d := &dataset{}
	for _, s := range m.Scans {
		d.ts = append(d.ts, s.TS)
	}
	for i, si := range m.Series {
		_, vals, ok := m.Column(i)
		if stable {
			n := 0
			for _, o := range ok {
				if o {
					n++
				}
			}
			if n*10 < len(ok)*9 {
				continue
			}
		}
		d.kinds = append(d.kinds, si.Kind)
		d.vals = append(d.vals, vals)
		d.ok = append(d.ok, ok)
		for _, o := range ok {
			if o {
				d.n++
			}
		}
	}
	return d
}

func toFloat(k series.Kind, bits uint64) float64 { return series.ToFloat(k, bits) }

// fill appends d into a new store, scan by scan as the agent does.
func fill(d *dataset) *history.Store {
	s := history.New(history.Options{})
	ids := make([]history.ID, len(d.kinds))
	for i, k := range d.kinds {
		id, err := s.Series("s"+strconv.Itoa(i), k)
		if err != nil {
			panic(err)
		}
		ids[i] = id
	}
	for j, t := range d.ts {
		s.Begin(t)
		for i := range ids {
			if d.ok[i][j] {
				s.Add(ids[i], d.vals[i][j])
			}
		}
		s.Commit()
	}
	return s
}

// xorChunks appends d into Prometheus XOR chunks of 120 samples per series.
func xorChunks(d *dataset) [][]chunkenc.Chunk {
	out := make([][]chunkenc.Chunk, len(d.kinds))
	for i, k := range d.kinds {
		var c chunkenc.Chunk
		var app chunkenc.Appender
		for j, t := range d.ts {
			if !d.ok[i][j] {
				continue
			}
			if c == nil || c.NumSamples() == 120 {
				c = chunkenc.NewXORChunk()
				app, _ = c.Appender()
				out[i] = append(out[i], c)
			}
			app.Append(0, t, toFloat(k, d.vals[i][j]))
		}
	}
	return out
}

func xorBytes(cs [][]chunkenc.Chunk) int {
	n := 0
	for _, s := range cs {
		for _, c := range s {
			n += len(c.Bytes())
		}
	}
	return n
}

func benchData(b *testing.B, name string, d *dataset) {
	var histBytes, xBytes float64
	b.Run(name+"/append/history", func(b *testing.B) {
		b.ReportAllocs()
		var s *history.Store
		cpu0 := cputime.Process()
		for b.Loop() {
			s = fill(d)
		}
		b.ReportMetric(float64(cputime.Process()-cpu0)/float64(b.N)/float64(d.n), "cpu-ns/sample")
		st := s.Stats()
		histBytes = float64(st.CompressedBytes) / float64(st.Points-pointsInStaging(s, d))
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(d.n), "ns/sample")
		b.ReportMetric(histBytes, "bytes/sample")
		b.ReportMetric(histBytes*1800, "bytes/series-hour")
	})
	b.Run(name+"/append/xor", func(b *testing.B) {
		b.ReportAllocs()
		var cs [][]chunkenc.Chunk
		cpu0 := cputime.Process()
		for b.Loop() {
			cs = xorChunks(d)
		}
		b.ReportMetric(float64(cputime.Process()-cpu0)/float64(b.N)/float64(d.n), "cpu-ns/sample")
		xBytes = float64(xorBytes(cs)) / float64(d.n)
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(d.n), "ns/sample")
		b.ReportMetric(xBytes, "bytes/sample")
		b.ReportMetric(histBytes/xBytes, "history/xor_bytes")
	})
	b.Run(name+"/decode/history", func(b *testing.B) {
		s := fill(d)
		b.ReportAllocs()
		n := 0
		var sum uint64
		cpu0 := cputime.Process()
		for b.Loop() {
			s.Each(func(id history.ID, key string, kind series.Kind) bool {
				s.Range(id, math.MinInt64, math.MaxInt64, func(ts int64, bits uint64) bool {
					sum += bits
					n++
					return true
				})
				return true
			})
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/sample")
		b.ReportMetric(float64(cputime.Process()-cpu0)/float64(n), "cpu-ns/sample")
	})
	b.Run(name+"/decode/xor", func(b *testing.B) {
		cs := xorChunks(d)
		b.ReportAllocs()
		n := 0
		var sum float64
		var it chunkenc.Iterator
		cpu0 := cputime.Process()
		for b.Loop() {
			for _, s := range cs {
				for _, c := range s {
					it = c.Iterator(it)
					for it.Next() == chunkenc.ValFloat {
						_, v := it.At()
						sum += v
						n++
					}
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/sample")
		b.ReportMetric(float64(cputime.Process()-cpu0)/float64(n), "cpu-ns/sample")
	})
}

// pointsInStaging counts the points of d in scans that are not yet compressed (the open
// segment), so that bytes/sample divides compressed bytes by compressed points only.
func pointsInStaging(s *history.Store, d *dataset) int64 {
	full := len(d.ts) / history.DefaultBlockScans * history.DefaultBlockScans
	n := int64(0)
	for i := range d.ok {
		for j := full; j < len(d.ts); j++ {
			if d.ok[i][j] {
				n++
			}
		}
	}
	return n
}

func BenchmarkHistoryShapes(b *testing.B) {
	sh := shapes()
	for _, name := range []string{"constant", "counter_jitter", "counter_1in5", "int_walk", "float_2dec", "float_random"} {
		benchData(b, name, sh[name])
	}
}

func BenchmarkHistoryMix(b *testing.B) {
	benchData(b, "procmix_all", mixData(b, false))
	benchData(b, "procmix_stable", mixData(b, true))
}
