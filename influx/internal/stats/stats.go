// Package stats is the statistics core shared by package influx and its ECS facade,
// influx/ecs: reservoir sampling (Algorithm R), the two percentile rules, and the encoding of
// a histogrammable field's ten statistics fields.
//
// The two rules, for a sorted reservoir s of n samples and a percentile p in [0, 100]:
//
//   - Interpolated (influx's default): rank r = p/100·(n−1); the result is
//     s[⌊r⌋] + (r−⌊r⌋)·(s[⌊r⌋+1]−s[⌊r⌋]). For 1..10: p10 1.9, median 5.5, p90 9.1.
//   - ECS: the sample s[⌊n·0.01·p⌋], computed in float64 exactly as ECS's
//     reservoirSampling.indexForPercentile does. For 1..10: p10 2, median 6, p90 10.
package stats

import (
	"math"
	"math/rand/v2"
	"sort"

	"github.com/influxdata/line-protocol/v2/lineprotocol"
)

// Suffixes are the fields a histogrammable field f is reported as, in this order:
// f_mean, f_median, f_min, f_p10, f_p30, f_p70, f_p90, f_max, f_count, f_poolsize.
var Suffixes = [...]string{"_mean", "_median", "_min", "_p10", "_p30", "_p70", "_p90", "_max", "_count", "_poolsize"}

// Observe adds v, the n-th value of a stream (n counts v), to the reservoir res of capacity
// size and returns it: v is appended while res has room, and afterwards replaces a uniformly
// chosen slot with probability size/n (Algorithm R, as ECS's AddPoint).
func Observe(res []float64, n uint64, v float64, size int, rng *rand.Rand) []float64 {
	if len(res) < size {
		return append(res, v)
	}
	if j := rng.Uint64N(n); j < uint64(len(res)) {
		res[j] = v
	}
	return res
}

// Summary is what a histogrammable field is reported as.
type Summary struct {
	Mean, Median, Min, P10, P30, P70, P90, Max float64
	Count, PoolSize                            uint64
}

// Interpolated is influx's default summary: mean, min and max are those of every value of
// the stream (given by the caller, who keeps them exactly), the percentiles interpolate the
// sorted reservoir (see Quantile), count is the stream's length and poolsize the
// reservoir's.
func Interpolated(sorted []float64, count uint64, sum, minimum, maximum float64) Summary {
	s := Summary{Min: minimum, Max: maximum, Count: count, PoolSize: uint64(len(sorted))}
	if count > 0 {
		s.Mean = sum / float64(count)
	}
	s.Median = Quantile(sorted, 0.5)
	s.P10 = Quantile(sorted, 0.1)
	s.P30 = Quantile(sorted, 0.3)
	s.P70 = Quantile(sorted, 0.7)
	s.P90 = Quantile(sorted, 0.9)
	return s
}

// Quantile interpolates the q-quantile of sorted linearly at rank q·(n−1) (Hyndman and Fan's
// type 7, the default of R and NumPy). It is 0 for an empty slice.
func Quantile(sorted []float64, q float64) float64 {
	switch len(sorted) {
	case 0:
		return 0
	case 1:
		return sorted[0]
	}
	pos := q * float64(len(sorted)-1)
	i := int(pos)
	if i >= len(sorted)-1 {
		return sorted[len(sorted)-1]
	}
	lo, hi, frac := sorted[i], sorted[i+1], pos-float64(i)
	if frac == 0 {
		return lo
	}
	v := lo + frac*(hi-lo)
	if math.IsInf(hi-lo, 0) { // samples near ±MaxFloat64: the difference overflows
		v = lo*(1-frac) + hi*frac
	}
	return min(max(v, lo), hi) // never outside the two samples, whatever the rounding
}

// ECSIndex is the index of percentile p (0-100) in a sorted reservoir of n samples under
// ECS's rule: ⌊n·0.01·p⌋, evaluated in float64 in that order, as ECS does (so that the
// rounding of 0.01 gives the same index as ECS, for instance 3 for n=10, p=30).
func ECSIndex(n, p int) int {
	return int(float64(n) * 0.01 * float64(p))
}

// ECS is ECS's reservoirSampling.GetStats: it sorts samples in place (with sort.Slice and
// the same comparison, so that equal values such as -0 and +0 end in the same order), then
// mean, min and max are those of the reservoir, each percentile p is
// samples[ECSIndex(n, p)], count is the stream's length and poolsize the reservoir's. An
// empty reservoir gives all zeros, count included.
func ECS(samples []float64, count uint64) Summary {
	sort.Slice(samples, func(i, j int) bool { return samples[i] < samples[j] })
	n := len(samples)
	if n == 0 {
		return Summary{}
	}
	var sum float64
	for _, v := range samples { // in sorted order, as ECS: the rounding of the sum depends on it
		sum += v
	}
	return Summary{
		Mean:     sum / float64(n),
		Median:   samples[ECSIndex(n, 50)],
		Min:      samples[0],
		P10:      samples[ECSIndex(n, 10)],
		P30:      samples[ECSIndex(n, 30)],
		P70:      samples[ECSIndex(n, 70)],
		P90:      samples[ECSIndex(n, 90)],
		Max:      samples[n-1],
		Count:    count,
		PoolSize: uint64(n),
	}
}

// Floats returns the eight float statistics in the order of Suffixes.
func (s *Summary) Floats() [8]float64 {
	return [8]float64{s.Mean, s.Median, s.Min, s.P10, s.P30, s.P70, s.P90, s.Max}
}

// AddFields adds field's ten statistics to the line e is encoding, named field+Suffixes[i]:
// the eight floats (clamped to ±MaxFloat64, which a sum can overflow), then count and
// poolsize as unsigned integers (10u, as ECS writes them) if uintCounts, else as floats.
// key is scratch space for the field names; AddFields returns it for reuse.
func (s *Summary) AddFields(e *lineprotocol.Encoder, key []byte, field string, uintCounts bool) []byte {
	for i, v := range s.Floats() {
		key = append(append(key[:0], field...), Suffixes[i]...)
		e.AddFieldRaw(key, Finite(v))
	}
	for i, c := range [2]uint64{s.Count, s.PoolSize} {
		key = append(append(key[:0], field...), Suffixes[8+i]...)
		if uintCounts {
			e.AddFieldRaw(key, lineprotocol.UintValue(c))
		} else {
			e.AddFieldRaw(key, Finite(float64(c)))
		}
	}
	return key
}

// Finite returns v as a line-protocol float, clamping the infinities a float sum can overflow
// to. NaN, which line protocol cannot carry either, becomes 0; callers refuse NaNs earlier.
func Finite(v float64) lineprotocol.Value {
	if math.IsNaN(v) {
		v = 0
	}
	v = max(min(v, math.MaxFloat64), -math.MaxFloat64)
	lv, _ := lineprotocol.FloatValue(v)
	return lv
}
