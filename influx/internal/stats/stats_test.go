package stats

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/influxdata/line-protocol/v2/lineprotocol"
)

func oneToN(n int) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = float64(i + 1)
	}
	return s
}

func TestInterpolatedOneToTen(t *testing.T) {
	s := Interpolated(oneToN(10), 10, 55, 1, 10)
	want := Summary{Mean: 5.5, Median: 5.5, Min: 1, P10: 1.9, P30: 3.7, P70: 7.3, P90: 9.1, Max: 10, Count: 10, PoolSize: 10}
	if !near(s, want) {
		t.Errorf("Interpolated(1..10) = %+v; want %+v", s, want)
	}
}

func TestECSOneToTen(t *testing.T) {
	samples := oneToN(10)
	rand.Shuffle(len(samples), func(i, j int) { samples[i], samples[j] = samples[j], samples[i] })
	s := ECS(samples, 10)
	want := Summary{Mean: 5.5, Median: 6, Min: 1, P10: 2, P30: 4, P70: 8, P90: 10, Max: 10, Count: 10, PoolSize: 10}
	if s != want {
		t.Errorf("ECS(1..10) = %+v; want %+v", s, want)
	}
}

// TestECSIndexFloatRounding: ECS computes n·0.01·p in float64, which for some n falls just
// below the exact integer: 58 samples put the median at index 28, not 29.
func TestECSIndexFloatRounding(t *testing.T) {
	for _, c := range []struct{ n, p, want int }{
		{58, 50, 28}, {410, 30, 122}, {410, 90, 368}, {10, 30, 3}, {10, 70, 7}, {1000, 90, 900}, {1, 90, 0},
	} {
		if got := ECSIndex(c.n, c.p); got != c.want {
			t.Errorf("ECSIndex(%d, %d) = %d; want %d", c.n, c.p, got, c.want)
		}
	}
	if s := ECS(oneToN(58), 58); s.Median != 29 {
		t.Errorf("ECS median of 1..58 = %v; want 29 (index 28)", s.Median)
	}
}

func TestECSEmpty(t *testing.T) {
	if s := ECS(nil, 5); s != (Summary{}) {
		t.Errorf("ECS(empty) = %+v; want zeros, count included, as ECS", s)
	}
}

// TestECSSignedZeroOrder: the sort is ECS's, so -0 and +0 come out in ECS's order.
func TestECSSignedZeroOrder(t *testing.T) {
	negZero := math.Copysign(0, -1)
	s := ECS([]float64{0, negZero, 0}, 3)
	if math.Signbit(s.Min) || !math.Signbit(s.Median) || math.Signbit(s.Max) {
		t.Errorf("ECS(0, -0, 0): min %v median %v max %v (signbits %v %v %v)", s.Min, s.Median, s.Max,
			math.Signbit(s.Min), math.Signbit(s.Median), math.Signbit(s.Max))
	}
}

func TestObserveAlgorithmR(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var res []float64
	for i := 1; i <= 1000; i++ {
		res = Observe(res, uint64(i), float64(i), 10, rng)
	}
	if len(res) != 10 {
		t.Fatalf("reservoir holds %d; want 10", len(res))
	}
	for _, v := range res {
		if v < 1 || v > 1000 {
			t.Errorf("reservoir holds %v, never sent", v)
		}
	}
}

func TestAddFields(t *testing.T) {
	s := ECS(oneToN(10), 10)
	for _, c := range []struct {
		uintCounts bool
		want       string
	}{
		{true, "m a_mean=5.5,a_median=6,a_min=1,a_p10=2,a_p30=4,a_p70=8,a_p90=10,a_max=10,a_count=10u,a_poolsize=10u 1\n"},
		{false, "m a_mean=5.5,a_median=6,a_min=1,a_p10=2,a_p30=4,a_p70=8,a_p90=10,a_max=10,a_count=10,a_poolsize=10 1\n"},
	} {
		var e lineprotocol.Encoder
		e.StartLine("m")
		s.AddFields(&e, nil, "a", c.uintCounts)
		e.EndLine(time.Unix(0, 1))
		if err := e.Err(); err != nil || string(e.Bytes()) != c.want {
			t.Errorf("AddFields(uintCounts=%v) = %q, %v; want %q", c.uintCounts, e.Bytes(), err, c.want)
		}
	}
}

// FuzzPercentileRules: under both rules the statistics are ordered
// (min ≤ p10 ≤ p30 ≤ median ≤ p70 ≤ p90 ≤ max); ECS's are samples of the reservoir at
// ECSIndex; the interpolated ones lie between the two samples around their rank.
func FuzzPercentileRules(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		var samples []float64
		for len(data) >= 8 {
			v := math.Float64frombits(binary.LittleEndian.Uint64(data))
			data = data[8:]
			if math.IsNaN(v) || math.IsInf(v, 0) {
				continue
			}
			samples = append(samples, v)
		}
		sorted := slices.Clone(samples)
		slices.Sort(sorted)
		ecs := ECS(slices.Clone(samples), uint64(len(samples)))
		if len(samples) == 0 {
			if ecs != (Summary{}) {
				t.Fatalf("ECS(empty) = %+v", ecs)
			}
			return
		}
		n := len(sorted)
		for p, got := range map[int]float64{10: ecs.P10, 30: ecs.P30, 50: ecs.Median, 70: ecs.P70, 90: ecs.P90} {
			if i := ECSIndex(n, p); i < 0 || i >= n || got != sorted[i] {
				t.Fatalf("ECS p%d of %v = %v; want sorted[%d]", p, sorted, got, i)
			}
		}
		in := Interpolated(sorted, uint64(n), 0, sorted[0], sorted[n-1])
		for _, s := range []Summary{ecs, in} {
			seq := []float64{s.Min, s.P10, s.P30, s.Median, s.P70, s.P90, s.Max}
			for i := 1; i < len(seq); i++ {
				if seq[i] < seq[i-1] {
					t.Fatalf("statistics out of order: %v (samples %v)", seq, sorted)
				}
			}
		}
		for _, q := range []float64{0.1, 0.3, 0.5, 0.7, 0.9} {
			r := q * float64(n-1)
			lo, hi := sorted[int(math.Floor(r))], sorted[int(math.Ceil(r))]
			if v := Quantile(sorted, q); v < lo || v > hi {
				t.Fatalf("Quantile(%v, %v) = %v; not in [%v, %v]", sorted, q, v, lo, hi)
			}
		}
	})
}

func near(a, b Summary) bool {
	af, bf := a.Floats(), b.Floats()
	for i := range af {
		if math.Abs(af[i]-bf[i]) > 1e-9 {
			return false
		}
	}
	return a.Count == b.Count && a.PoolSize == b.PoolSize
}
