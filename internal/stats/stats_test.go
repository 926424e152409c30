package stats

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func pts(start, step int64, values ...float64) []Point {
	out := make([]Point, len(values))
	for i, v := range values {
		out[i] = Point{TS: start + int64(i)*step, Value: v}
	}
	return out
}

func near(a, b float64) bool {
	if math.IsNaN(a) || math.IsNaN(b) {
		return math.IsNaN(a) && math.IsNaN(b)
	}
	if math.IsInf(a, 0) || math.IsInf(b, 0) {
		return a == b
	}
	return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b))
}

func checkSummary(t *testing.T, name string, got, want Summary) {
	t.Helper()
	if got.Count != want.Count {
		t.Errorf("%s: Count = %d; want %d", name, got.Count, want.Count)
	}
	for _, f := range []struct {
		field     string
		got, want float64
	}{
		{"Min", got.Min, want.Min}, {"Max", got.Max, want.Max}, {"Mean", got.Mean, want.Mean},
		{"Median", got.Median, want.Median}, {"P90", got.P90, want.P90}, {"P95", got.P95, want.P95},
		{"P99", got.P99, want.P99}, {"Slope", got.Slope, want.Slope},
	} {
		if !near(f.got, f.want) {
			t.Errorf("%s: %s = %v; want %v", name, f.field, f.got, f.want)
		}
	}
}

var nan = math.NaN()

func TestSummarizeHandComputed(t *testing.T) {
	// Values 3 1 4 1 5 9 2 6 every 2 s. Sorted: 1 1 2 3 4 5 6 9.
	//   median: h = 7·0.5 = 3.5   → 3 + 0.5·(4-3)  = 3.5
	//   p90:    h = 7·0.9 = 6.3   → 6 + 0.3·(9-6)  = 6.9
	//   p95:    h = 6.65          → 6 + 0.65·3     = 7.95
	//   p99:    h = 6.93          → 6 + 0.93·3     = 8.79
	//   mean 31/8 = 3.875
	//   slope: t = 0,2,..,14 s, centred -7,-5,-3,-1,1,3,5,7; Σdt² = 168;
	//          Σdt·v = -21-5-12-1+5+27+10+42 = 45 → 45/168 per second.
	p := pts(1_700_000_000_000, 2000, 3, 1, 4, 1, 5, 9, 2, 6)
	orig := slices.Clone(p)
	checkSummary(t, "pi", Summarize(p), Summary{Count: 8, Min: 1, Max: 9, Mean: 3.875, Median: 3.5, P90: 6.9, P95: 7.95, P99: 8.79, Slope: 45.0 / 168})
	if !slices.Equal(p, orig) {
		t.Error("Summarize modified its input")
	}
	// Order does not matter.
	rev := slices.Clone(p)
	slices.Reverse(rev)
	checkSummary(t, "pi reversed", Summarize(rev), Summarize(p))
}

func TestSummarizeCases(t *testing.T) {
	for _, tc := range []struct {
		name string
		pts  []Point
		want Summary
	}{
		{"empty", nil, Summary{0, nan, nan, nan, nan, nan, nan, nan, nan}},
		{"only NaN", pts(0, 2000, nan, nan), Summary{0, nan, nan, nan, nan, nan, nan, nan, nan}},
		{"one point", pts(5000, 2000, 7), Summary{1, 7, 7, 7, 7, 7, 7, 7, nan}},
		{"same timestamp", []Point{{1000, 1}, {1000, 3}}, Summary{2, 1, 3, 2, 2, 2.8, 2.9, 2.98, nan}},
		// y = 2t + 5 with t in seconds, at realistic unix-ms timestamps: slope exactly 2/s.
		{"line", pts(1_700_000_000_000, 2000, 5, 9, 13, 17, 21), Summary{5, 5, 21, 13, 13, 19.4, 20.2, 20.84, 2}},
		// NaN is a missing point: the same as the line without it.
		{"line with NaN", []Point{{0, 5}, {2000, nan}, {4000, 13}, {6000, 17}}, Summary{3, 5, 17, 35.0 / 3, 13, 16.2, 16.6, 16.92, 2}},
		{"constant", pts(0, 2000, 4, 4, 4, 4), Summary{4, 4, 4, 4, 4, 4, 4, 4, 0}},
		{"two points", pts(0, 2000, 0, 1), Summary{2, 0, 1, 0.5, 0.5, 0.9, 0.95, 0.99, 0.5}},
		{"infinity", pts(0, 2000, 1, math.Inf(1)), Summary{2, 1, math.Inf(1), math.Inf(1), math.Inf(1), math.Inf(1), math.Inf(1), math.Inf(1), nan}},
		{"both infinities", pts(0, 2000, math.Inf(-1), 0, math.Inf(1)), Summary{3, math.Inf(-1), math.Inf(1), nan, 0, math.Inf(1), math.Inf(1), math.Inf(1), nan}},
		{"negative", pts(0, 1000, -1, -2, -3), Summary{3, -3, -1, -2, -2, -1.2, -1.1, -1.02, -1}},
	} {
		checkSummary(t, tc.name, Summarize(tc.pts), tc.want)
	}
}

func TestPercentile(t *testing.T) {
	x := []float64{10, 20, 30, 40, 50}
	for _, tc := range []struct{ p, want float64 }{
		{0, 10}, {0.25, 20}, {0.5, 30}, {0.1, 14}, {0.99, 49.6}, {1, 50}, {-0.1, nan}, {1.1, nan}, {nan, nan},
	} {
		if got := Percentile(x, tc.p); !near(got, tc.want) {
			t.Errorf("Percentile(%v, %v) = %v; want %v", x, tc.p, got, tc.want)
		}
	}
	if got := Percentile(nil, 0.5); !math.IsNaN(got) {
		t.Errorf("Percentile(nil, 0.5) = %v; want NaN", got)
	}
}

// TestSlopeMatchesNaive compares the centred slope with the textbook formula on small timestamps.
func TestSlopeMatchesNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 100 {
		n := 2 + r.IntN(50)
		p := make([]Point, n)
		ts := int64(0)
		for i := range p {
			ts += 1 + r.Int64N(5000)
			p[i] = Point{ts, r.NormFloat64() * 100}
		}
		var st, sv, stt, stv float64
		for _, q := range p {
			x := float64(q.TS) / 1000
			st += x
			sv += q.Value
			stt += x * x
			stv += x * q.Value
		}
		fn := float64(n)
		want := (fn*stv - st*sv) / (fn*stt - st*st)
		if got := Summarize(p).Slope; math.Abs(got-want) > 1e-6*math.Max(1, math.Abs(want)) {
			t.Fatalf("slope of %v = %v; naive formula gives %v", p, got, want)
		}
	}
}

func TestSummarizerDoesNotAllocate(t *testing.T) {
	p := make([]Point, 1800)
	for i := range p {
		p[i] = Point{int64(i) * 2000, float64(i % 37)}
	}
	var z Summarizer
	z.Summarize(p)
	if n := testing.AllocsPerRun(20, func() { z.Summarize(p) }); n != 0 {
		t.Errorf("Summarizer.Summarize allocates %v times per call; want 0", n)
	}
}

func TestSummaryJSON(t *testing.T) {
	b, err := Summary{Count: 2, Min: 1, Max: 3, Mean: 2, Median: 2, P90: 2.8, P95: 2.9, P99: 2.98, Slope: nan}.MarshalJSON()
	want := `{"count":2,"min":1,"max":3,"mean":2,"median":2,"p90":2.8,"p95":2.9,"p99":2.98,"slope":"NaN"}`
	if err != nil || string(b) != want {
		t.Errorf("MarshalJSON = %s, %v; want %s", b, err, want)
	}
}

func TestRates(t *testing.T) {
	// Steps of 2 s with a reset at 6 s and a 12 s gap; median step 2 s, so the bound is 5 s.
	in := []Point{{0, 0}, {2000, 10}, {4000, 30}, {6000, 5}, {8000, 25}, {20000, 45}, {22000, 47}}
	want := []Point{{2000, 5}, {4000, 10}, {8000, 10}, {22000, 1}}
	if got := Rates(nil, in); !slices.Equal(got, want) {
		t.Errorf("Rates(%v) = %v; want %v", in, got, want)
	}
	// With no bound the gap step is a (slow) rate.
	want = []Point{{2000, 5}, {4000, 10}, {8000, 10}, {20000, 20.0 / 12}, {22000, 1}}
	if got := RatesMaxGap(nil, in, 0); !slices.Equal(got, want) {
		t.Errorf("RatesMaxGap(%v, 0) = %v; want %v", in, got, want)
	}
}

func TestRatesCases(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []Point
		want []Point
	}{
		{"empty", nil, nil},
		{"one", []Point{{0, 1}}, nil},
		{"constant", pts(0, 2000, 7, 7, 7), []Point{{2000, 0}, {4000, 0}}},
		{"uneven steps", []Point{{0, 0}, {1000, 1}, {3000, 5}, {4000, 5}}, []Point{{1000, 1}, {3000, 2}, {4000, 0}}},
		{"NaN skipped", []Point{{0, 0}, {2000, nan}, {4000, 8}, {6000, 12}}, []Point{{4000, 2}, {6000, 2}}},
		{"Inf skipped", []Point{{0, 0}, {2000, math.Inf(1)}, {4000, 8}}, []Point{{4000, 2}}},
		{"duplicate and backwards timestamps", []Point{{0, 0}, {2000, 4}, {2000, 6}, {1000, 9}, {4000, 8}}, []Point{{2000, 2}, {4000, 2}}},
		{"only resets", pts(0, 2000, 9, 5, 1), nil},
		{"step of 2.5 median steps tolerated", []Point{{0, 0}, {2000, 2}, {4000, 4}, {9000, 9}, {11000, 11}}, []Point{{2000, 1}, {4000, 1}, {9000, 1}, {11000, 1}}},
		{"absence not bridged", []Point{{0, 0}, {2000, 2}, {4000, 4}, {9100, 9}, {11100, 11}}, []Point{{2000, 1}, {4000, 1}, {11100, 1}}},
		// Counters beyond 2^53 still give exact small rates when the differences are representable.
		{"large counter", []Point{{0, 1 << 52}, {2000, 1<<52 + 4000}}, []Point{{2000, 2000}}},
	} {
		got := Rates(nil, tc.in)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: Rates(%v) = %v; want %v", tc.name, tc.in, got, tc.want)
		}
		for _, p := range got {
			if p.Value < 0 {
				t.Errorf("%s: negative rate %v", tc.name, p)
			}
		}
	}
}

func TestRatesAppends(t *testing.T) {
	dst := []Point{{-1, -1}}
	got := Rates(dst, pts(0, 1000, 0, 1, 3))
	want := []Point{{-1, -1}, {1000, 1}, {2000, 2}}
	if !slices.Equal(got, want) {
		t.Errorf("Rates(dst, ...) = %v; want %v", got, want)
	}
	// Scratch use must not clobber what dst already holds, even with no output.
	got = Rates(dst[:1:1], pts(0, 1000, 5, 1))
	if !slices.Equal(got, []Point{{-1, -1}}) {
		t.Errorf("Rates with only a reset = %v; want dst unchanged", got)
	}
}

func TestRatesDoesNotAllocate(t *testing.T) {
	p := make([]Point, 1800)
	for i := range p {
		p[i] = Point{int64(i)*2000 + int64(i%3), float64(i * 17 % 1000)}
	}
	dst := make([]Point, 0, len(p))
	if n := testing.AllocsPerRun(20, func() { dst = Rates(dst[:0], p) }); n != 0 {
		t.Errorf("Rates allocates %v times per call; want 0", n)
	}
	if len(dst) == 0 {
		t.Fatal("no rates")
	}
}

func TestSelectTS(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for range 500 {
		n := 1 + r.IntN(40)
		p := make([]Point, n)
		for i := range p {
			p[i].TS = r.Int64N(int64(1 + r.IntN(10))) // many duplicates
		}
		sorted := make([]int64, n)
		for i := range p {
			sorted[i] = p[i].TS
		}
		slices.Sort(sorted)
		k := r.IntN(n)
		if got := selectTS(p, k); got != sorted[k] {
			t.Fatalf("selectTS(%v, %d) = %d; want %d", p, k, got, sorted[k])
		}
		for i := range k {
			if p[i].TS > p[k].TS {
				t.Fatalf("selectTS left %d before index %d holding %d", p[i].TS, k, p[k].TS)
			}
		}
	}
}
