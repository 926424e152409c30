// Package stats computes the window statistics of the agent's /api/v1/stats answer and turns
// counter points into per-second rates.
//
// # Methods
//
// Percentiles (median = p50, p90, p95, p99) use linear interpolation between closest ranks, the
// default method of numpy.percentile and Excel's PERCENTILE.INC: for n sorted values x[0..n-1]
// and a fraction p, h = (n-1)·p and the result is x[⌊h⌋] + (h-⌊h⌋)·(x[⌊h⌋+1]-x[⌊h⌋]). Min and
// max are p0 and p100; one value is every percentile of itself.
//
// Slope is the ordinary least-squares fit of value against time, reported as change per second.
// It is computed on centred data (timestamps relative to their mean) so that millisecond unix
// timestamps lose no precision.
//
// # NaN and infinities
//
// A NaN value is a missing value: it is skipped and not counted. Infinities are values: they
// take part in min, max and percentiles, and make mean and slope infinite or NaN as IEEE 754
// arithmetic says. An empty window (or only NaNs) has Count 0 and every other field NaN; fewer
// than two distinct timestamps give a NaN slope. JSON cannot carry NaN, so AppendFields writes
// non-finite numbers as the strings "NaN", "+Inf", "-Inf", like the series objects do.
//
// # Rates
//
// Rates turns counter points into rate points: one point per pair of consecutive usable points,
// (v[i]-v[i-1]) / (t[i]-t[i-1]) per second, stamped with t[i]. It invents nothing (a gap in the
// answer is a missing timestamp):
//   - a decrease is a reset (a restarted application): no point for that step, the lower value
//     is the new base. No negative rate is ever produced, and no rate is guessed for the step
//     in which the reset happened (Prometheus would assume a restart from zero; an application
//     may restart from any value, so we do not).
//   - a step longer than GapFactor (2.5) times the median step of the window is a gap (the
//     series was absent, or the agent was down): no point. 2.5 tolerates a scan that ran late or
//     one missed scan (2×) while rejecting longer absences. RatesMaxGap takes an explicit bound.
//   - points with a non-finite value or a timestamp not after the previous usable point are
//     skipped.
//
// Counter values arrive as float64: counters above 2^53 lose precision in their low digits.
//
// Nothing here allocates when given room: Summarizer reuses its buffer, Rates writes into the
// spare capacity of dst.
package stats

import (
	"math"
	"slices"
	"strconv"

	"github.com/cantal-go/cantal/internal/series"
)

// Point is one value of a series: a unix-millisecond timestamp and a value.
type Point struct {
	TS    int64
	Value float64
}

// Summary holds the statistics of a window of points. See the package documentation for the
// methods and the NaN rules.
type Summary struct {
	Count  int     // points with a value (NaN excluded)
	Min    float64 // smallest value
	Max    float64 // largest value
	Mean   float64 // arithmetic mean
	Median float64 // p50
	P90    float64
	P95    float64
	P99    float64
	Slope  float64 // least-squares change per second
}

// Summarizer computes Summaries reusing one scratch buffer, so that it allocates only when a
// window is larger than any before. The zero value is ready to use. A Summarizer is not safe for
// concurrent use; use one per goroutine.
type Summarizer struct {
	buf []float64
}

// Summarize returns the statistics of pts, which may be in any order. pts is not modified.
func (z *Summarizer) Summarize(pts []Point) Summary {
	if cap(z.buf) < len(pts) {
		z.buf = make([]float64, 0, len(pts))
	}
	sorted := z.buf[:0]
	for _, p := range pts {
		if !math.IsNaN(p.Value) {
			sorted = append(sorted, p.Value)
		}
	}
	nan := math.NaN()
	s := Summary{Count: len(sorted), Min: nan, Max: nan, Mean: nan, Median: nan, P90: nan, P95: nan, P99: nan, Slope: nan}
	if len(sorted) == 0 {
		return s
	}
	slices.Sort(sorted)
	s.Min, s.Max = sorted[0], sorted[len(sorted)-1]
	s.Median = Percentile(sorted, 0.5)
	s.P90 = Percentile(sorted, 0.9)
	s.P95 = Percentile(sorted, 0.95)
	s.P99 = Percentile(sorted, 0.99)
	s.Mean, s.Slope = meanSlope(pts)
	return s
}

// Summarize is Summarizer.Summarize with a fresh buffer, for one-off use.
func Summarize(pts []Point) Summary {
	var z Summarizer
	return z.Summarize(pts)
}

// Percentile returns the p-quantile (0 ≤ p ≤ 1) of sorted, which must be sorted ascending and
// free of NaN, by linear interpolation between closest ranks. It returns NaN for an empty slice
// or p outside [0, 1]. Interpolating towards an infinite neighbour gives that infinity (-Inf
// first), never NaN.
func Percentile(sorted []float64, p float64) float64 {
	n := len(sorted)
	if n == 0 || !(p >= 0 && p <= 1) {
		return math.NaN()
	}
	h := float64(n-1) * p
	lo := int(h)
	if lo >= n-1 {
		return sorted[n-1]
	}
	frac := h - float64(lo)
	a, b := sorted[lo], sorted[lo+1]
	switch {
	case frac == 0 || a == b || math.IsInf(a, -1):
		return a
	case math.IsInf(b, 1):
		return b
	}
	return a + frac*(b-a)
}

// meanSlope returns the mean value and the least-squares slope per second of the non-NaN points.
func meanSlope(pts []Point) (mean, slope float64) {
	var (
		n          int
		t0         int64
		sumV, comp float64 // Neumaier-compensated sum of values
		sumT       float64 // sum of (ts - t0)
	)
	for _, p := range pts {
		if math.IsNaN(p.Value) {
			continue
		}
		if n == 0 {
			t0 = p.TS
		}
		n++
		sumT += float64(p.TS - t0)
		t := sumV + p.Value
		if math.Abs(sumV) >= math.Abs(p.Value) {
			comp += (sumV - t) + p.Value
		} else {
			comp += (p.Value - t) + sumV
		}
		sumV = t
	}
	if n == 0 {
		return math.NaN(), math.NaN()
	}
	if !math.IsInf(sumV, 0) {
		sumV += comp
	}
	mean = sumV / float64(n)
	meanT := sumT / float64(n)
	var sxx, sxy float64
	for _, p := range pts {
		if math.IsNaN(p.Value) {
			continue
		}
		dt := float64(p.TS-t0) - meanT
		sxx += dt * dt
		sxy += dt * (p.Value - mean)
	}
	if sxx == 0 {
		return mean, math.NaN()
	}
	return mean, sxy / sxx * 1000
}

// AppendFields appends the summary as JSON object members, without braces:
// "count":N,"min":...,"max":...,"mean":...,"median":...,"p90":...,"p95":...,"p99":...,"slope":...
// so that the caller can put it next to the series' labels. Non-finite numbers are written as
// the strings "NaN", "+Inf" and "-Inf".
func (s Summary) AppendFields(b []byte) []byte {
	b = append(b, `"count":`...)
	b = strconv.AppendInt(b, int64(s.Count), 10)
	for _, f := range [...]struct {
		name string
		v    float64
	}{{"min", s.Min}, {"max", s.Max}, {"mean", s.Mean}, {"median", s.Median}, {"p90", s.P90}, {"p95", s.P95}, {"p99", s.P99}, {"slope", s.Slope}} {
		b = append(b, `,"`...)
		b = append(b, f.name...)
		b = append(b, `":`...)
		b = series.AppendFloat(b, f.v)
	}
	return b
}

// MarshalJSON writes the summary as a JSON object with the members of AppendFields.
func (s Summary) MarshalJSON() ([]byte, error) {
	b := append(make([]byte, 0, 160), '{')
	return append(s.AppendFields(b), '}'), nil
}

// GapFactor is how many median steps a step may last before Rates treats it as a gap.
const GapFactor = 2.5

// Rates appends to dst the per-second rates of the counter points pts (ascending timestamps)
// and returns the extended slice, like append. A step longer than GapFactor times the median
// step of pts is a gap. See the package documentation for resets and skipped points. Rates does
// not allocate when cap(dst)-len(dst) ≥ len(pts); it uses that spare room as scratch space.
func Rates(dst, pts []Point) []Point {
	if len(pts) < 2 {
		return dst
	}
	// Collect the steps into dst's spare capacity and take their median.
	base := len(dst)
	dst = slices.Grow(dst, len(pts))
	steps := dst[base:base]
	forSteps(pts, func(prev, cur Point) {
		steps = append(steps, Point{TS: cur.TS - prev.TS})
	})
	if len(steps) == 0 {
		return dst[:base]
	}
	m := len(steps) / 2
	median := float64(selectTS(steps, m))
	if len(steps)%2 == 0 {
		// selectTS left the m smallest steps before index m: the lower middle is their maximum.
		lower := steps[0].TS
		for _, p := range steps[1:m] {
			lower = max(lower, p.TS)
		}
		median = (float64(lower) + median) / 2
	}
	return RatesMaxGap(dst[:base], pts, int64(math.Floor(GapFactor*median)))
}

// RatesMaxGap is Rates with an explicit bound: a step longer than maxGapMs milliseconds is a
// gap. maxGapMs ≤ 0 means no bound. It does not allocate when cap(dst)-len(dst) ≥ len(pts)-1.
func RatesMaxGap(dst, pts []Point, maxGapMs int64) []Point {
	forSteps(pts, func(prev, cur Point) {
		dt := cur.TS - prev.TS
		if maxGapMs > 0 && dt > maxGapMs {
			return
		}
		if cur.Value < prev.Value {
			return // reset
		}
		dst = append(dst, Point{TS: cur.TS, Value: (cur.Value - prev.Value) * 1000 / float64(dt)})
	})
	return dst
}

// forSteps calls fn for each pair of consecutive usable points: finite values, strictly
// increasing timestamps.
func forSteps(pts []Point, fn func(prev, cur Point)) {
	var prev Point
	have := false
	for _, p := range pts {
		if math.IsNaN(p.Value) || math.IsInf(p.Value, 0) {
			continue
		}
		if !have {
			prev, have = p, true
			continue
		}
		if p.TS <= prev.TS {
			continue
		}
		fn(prev, p)
		prev = p
	}
}

// selectTS reorders p so that p[k] holds the element that would be there if p were sorted by TS,
// with no larger TS before it and no smaller after, and returns p[k].TS (quickselect, expected
// linear time; no allocation).
func selectTS(p []Point, k int) int64 {
	lo, hi := 0, len(p)-1
	for lo < hi {
		// Median of three as the pivot, to stay linear on sorted and constant input.
		mid := lo + (hi-lo)/2
		if p[mid].TS < p[lo].TS {
			p[mid], p[lo] = p[lo], p[mid]
		}
		if p[hi].TS < p[lo].TS {
			p[hi], p[lo] = p[lo], p[hi]
		}
		if p[hi].TS < p[mid].TS {
			p[hi], p[mid] = p[mid], p[hi]
		}
		pivot := p[mid].TS
		// Hoare partition.
		i, j := lo, hi
		for i <= j {
			for p[i].TS < pivot {
				i++
			}
			for p[j].TS > pivot {
				j--
			}
			if i <= j {
				p[i], p[j] = p[j], p[i]
				i++
				j--
			}
		}
		switch {
		case k <= j:
			hi = j
		case k >= i:
			lo = i
		default:
			return p[k].TS
		}
	}
	return p[k].TS
}
