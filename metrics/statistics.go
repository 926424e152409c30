package metrics

import (
	"math"
	"slices"
)

// Statistics summarises the values in a metric's window (libprocess' Statistics).
//
// Percentiles follow libprocess' Statistics::percentile: the n values are sorted, and the
// p-quantile is the value at position p·(n−1), counting from 0, linearly interpolated between
// the two values around it. Over the eleven values 0, 1, …, 10 that gives p25 = 2.5, p50 = 5,
// p75 = 7.5, p90 = 9, p95 = 9.5, p99 = 9.9, p999 = 9.99, p9999 = 9.999; over 1, 2, 3, 4 it
// gives p25 = 1.75, p50 = 2.5, p75 = 3.25 and p90 = 3.7. Min and Max are the 0- and
// 1-quantiles.
//
// P25 and P75 are computed as libprocess' Statistics computes them; like libprocess, whose
// snapshot leaves them out ("TODO: Consider exposing p25 and p75 percentiles"), a Registry's
// snapshot does not report them. Mean is an addition of this package: libprocess' Statistics
// has none, and a Registry reports it only when built WithMean.
type Statistics struct {
	Count int
	Min   float64
	Max   float64
	Mean  float64
	P25   float64 // the first quartile
	P50   float64 // the median
	P75   float64 // the third quartile
	P90   float64
	P95   float64
	P99   float64
	P999  float64
	P9999 float64
}

// NewStatistics computes Statistics over values, which it does not modify. Like libprocess it
// needs at least two values and returns false otherwise. NaN values are ignored.
func NewStatistics(values []float64) (Statistics, bool) {
	return statisticsOfSorted(sortValues(slices.Clone(values)))
}

// sortValues sorts vs in place after dropping NaNs, and returns it.
func sortValues(vs []float64) []float64 {
	vs = slices.DeleteFunc(vs, math.IsNaN)
	slices.Sort(vs)
	return vs
}

func statisticsOfSorted(vs []float64) (Statistics, bool) {
	if len(vs) < 2 {
		return Statistics{}, false
	}
	var sum float64
	for _, v := range vs {
		sum += v
	}
	return Statistics{
		Count: len(vs),
		Min:   vs[0],
		Max:   vs[len(vs)-1],
		Mean:  sum / float64(len(vs)),
		P25:   percentile(vs, 0.25),
		P50:   percentile(vs, 0.5),
		P75:   percentile(vs, 0.75),
		P90:   percentile(vs, 0.9),
		P95:   percentile(vs, 0.95),
		P99:   percentile(vs, 0.99),
		P999:  percentile(vs, 0.999),
		P9999: percentile(vs, 0.9999),
	}, true
}

// percentile interpolates the p-quantile (0 ≤ p ≤ 1) of sorted, as libprocess does: at
// position p·(n−1) between the two surrounding values (see Statistics).
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 1 {
		return sorted[0]
	}
	pos := p * float64(len(sorted)-1)
	i := int(pos)
	if i >= len(sorted)-1 {
		return sorted[len(sorted)-1]
	}
	d := pos - float64(i)
	return sorted[i] + d*(sorted[i+1]-sorted[i])
}

// statSuffixes are the keys libprocess reports for a metric's statistics, after its name.
var statSuffixes = []string{"/count", "/min", "/max", "/p50", "/p90", "/p95", "/p99", "/p999", "/p9999"}

// statSuffixesMean are statSuffixes with /mean.
var statSuffixesMean = []string{"/count", "/min", "/max", "/mean", "/p50", "/p90", "/p95", "/p99", "/p999", "/p9999"}

// entries passes put the snapshot keys and values of s for a metric named name: name/count,
// /min, /max, /p50, /p90, /p95, /p99, /p999, /p9999 as libprocess reports them, and /mean if
// mean is true.
func (s Statistics) entries(name string, mean bool, put func(key string, v float64)) {
	put(name+"/count", float64(s.Count))
	put(name+"/min", s.Min)
	put(name+"/max", s.Max)
	if mean {
		put(name+"/mean", s.Mean)
	}
	put(name+"/p50", s.P50)
	put(name+"/p90", s.P90)
	put(name+"/p95", s.P95)
	put(name+"/p99", s.P99)
	put(name+"/p999", s.P999)
	put(name+"/p9999", s.P9999)
}
