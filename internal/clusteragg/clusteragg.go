// Package clusteragg defines, once, how the series of several nodes aggregate over time: which
// series form a group (Grouping), how each node's points are placed in time slots (Place) and
// how a slot's values combine, with whether the slot is complete (Aggregate). The agent's
// /api/v1/cluster/history?agg= answers with it; the CLI and the UI print and draw that answer,
// and the CLI places its per-node columns with Align, so that the three never disagree.
//
// Nodes scan independently, each at its own phase. A slot is one scan period: slot k holds,
// of every series, the point it took in [k·step, (k+1)·step) on its own grid. Each series'
// grid is its own: its phase (where in the step its scans fall, the circular median over the
// window) is found first, and each point goes to round((ts − phase) / step). A series whose
// scans fall near a slot edge (a phase of 1990 ms on a 2 s step) thus stays in its slot
// however its scans jitter: it is never counted twice in one slot and missing from the next,
// which bucketing the raw times does.
//
// A slot is complete when every series expected in it has a value there. A series is expected
// from its first slot to its last, and also before its first when it starts in the window's
// first two slots (the window cut its earlier points), and after its last when it has a point
// in one of the last two slots (its next scan is not in yet: the newest slot of a live series).
// A series that ended (a process that exited) is not expected after it did. A slot with fewer
// values than expected (the newest before every node scanned, the slots of a node's outage) is
// partial: Aggregate marks it, and the callers draw or print it as such.
//
// Everything here is pure and safe for concurrent use.
package clusteragg

import (
	"fmt"
	"math"
	"net/url"
	"slices"
	"strings"

	"github.com/cantal-go/cantal/internal/apiwire"
	"github.com/cantal-go/cantal/internal/series"
)

// HostLabels are the labels an aggregate drops by default: they differ on every host (and a
// process's pid and name change with an exec), so grouping by them would make one group per
// node.
var HostLabels = []string{"node", "pid", "process", "cgroup"}

// maxGroupLabels bounds the label names of by= or without=.
const maxGroupLabels = 32

// Grouping makes the group labels of a series: keep holds the labels kept (by=), else drop
// the labels dropped. The zero value drops only node.
type Grouping struct {
	keep, drop map[string]bool
}

// ParseGrouping reads a grouping from by= or without= (comma-separated label names, not
// both): by keeps only the listed labels and the metric name; without drops the listed labels
// and node; neither drops HostLabels.
func ParseGrouping(v url.Values) (Grouping, error) {
	_, hasBy := v["by"]
	_, hasWithout := v["without"]
	if hasBy && hasWithout {
		return Grouping{}, fmt.Errorf("by and without exclude each other")
	}
	names := func(param string) (map[string]bool, error) {
		out := map[string]bool{}
		for _, n := range strings.Split(v.Get(param), ",") {
			n = strings.TrimSpace(n)
			if n == "" {
				continue
			}
			if len(n) > 256 {
				return nil, fmt.Errorf("bad %s: label name longer than 256 bytes", param)
			}
			out[n] = true
			if len(out) > maxGroupLabels {
				return nil, fmt.Errorf("bad %s: more than %d label names", param, maxGroupLabels)
			}
		}
		return out, nil
	}
	if hasBy {
		keep, err := names("by")
		if err != nil {
			return Grouping{}, err
		}
		keep["metric"] = true
		return Grouping{keep: keep}, nil
	}
	drop := map[string]bool{}
	if hasWithout {
		var err error
		if drop, err = names("without"); err != nil {
			return Grouping{}, err
		}
	} else {
		for _, n := range HostLabels {
			drop[n] = true
		}
	}
	drop["node"] = true
	return Grouping{drop: drop}, nil
}

// Key returns the group labels of a series with labels l (a new map).
func (g Grouping) Key(l series.Labels) series.Labels {
	out := series.Labels{}
	for k, v := range l {
		if g.keep != nil && g.keep[k] || g.keep == nil && !g.drop[k] && k != "node" {
			out[k] = v
		}
	}
	return out
}

// Point is one point of a series: its time (unix ms) and value (NaN: none).
type Point struct {
	TS    int64
	Value float64
}

// FromWire returns the points of an answer's series (apiwire.HistorySeries.Points) as
// Aggregate takes them: a point without a value is NaN.
func FromWire(pts []apiwire.Point) []Point {
	out := make([]Point, len(pts))
	for i, p := range pts {
		v := math.NaN()
		if p.Value.Valid {
			v = p.Value.F
		}
		out[i] = Point{TS: p.TS, Value: v}
	}
	return out
}

// Slot is one time slot of an aggregate: its time (the start of the scan period, a multiple of
// the step), the aggregated value (NaN when no series had one), how many series had a value
// in it and how many were expected (see the package comment); N < Expected: partial.
type Slot struct {
	TS          int64
	Value       float64
	N, Expected int
}

// Partial reports whether some series expected in the slot has no value there.
func (s Slot) Partial() bool { return s.N < s.Expected }

// Fns are the aggregate functions.
var Fns = []string{"sum", "avg", "min", "max"}

// ValidFn reports whether fn is one of Fns.
func ValidFn(fn string) bool { return slices.Contains(Fns, fn) }

// Combine folds v into acc by fn: the first value as it is, then the smaller (min), the
// larger (max) or the sum (sum, and avg, which divides the sum by the count at the end). The
// cluster metrics aggregate of the nodes' latest values folds with it too.
func Combine(fn string, acc, v float64, first bool) float64 {
	switch {
	case first:
		return v
	case fn == "min":
		return math.Min(acc, v)
	case fn == "max":
		return math.Max(acc, v)
	}
	return acc + v
}

// Step returns the scan interval of the series, the width of a slot (0 when no series has two
// points): the mean of the steps between consecutive points within half the median step of
// it. The median alone would be one jittered step; the mean over the steps left after the
// gaps (outages, skipped scans) is the interval the scans keep.
func Step(members [][]Point) int64 {
	var steps []int64
	for _, pts := range members {
		for i := 1; i < len(pts); i++ {
			if d := pts[i].TS - pts[i-1].TS; d > 0 {
				steps = append(steps, d)
			}
		}
	}
	if len(steps) == 0 {
		return 0
	}
	slices.Sort(steps)
	med := steps[len(steps)/2]
	var sum, n int64
	for _, d := range steps {
		if d >= med/2 && d <= med+med/2 {
			sum += d
			n++
		}
	}
	return max((sum+n/2)/n, 1)
}

// Place returns the slot of each of pts (in time order) on the series' own grid of step
// (step > 0): round((ts − phase) / step), phase being the circular median of the points' times
// modulo step. Two points that would share a slot (a scan late, the next one on time) are
// kept apart: the later goes to the next slot, so no point is dropped.
func Place(pts []Point, step int64) []int64 {
	if len(pts) == 0 {
		return nil
	}
	// Offsets of every point's phase from the first's, in (−step/2, step/2]: their median
	// does not wrap around the step's edge.
	ref := mod(pts[0].TS, step)
	offs := make([]int64, len(pts))
	for i, p := range pts {
		d := mod(p.TS-ref, step)
		if d > step/2 {
			d -= step
		}
		offs[i] = d
	}
	slices.Sort(offs)
	phase := ref + offs[len(offs)/2]
	out := make([]int64, len(pts))
	last := int64(math.MinInt64)
	for i, p := range pts {
		k := floorDiv(p.TS-phase+step/2, step)
		if k <= last {
			k = last + 1
		}
		out[i], last = k, k
	}
	return out
}

func mod(a, b int64) int64 {
	m := a % b
	if m < 0 {
		m += b
	}
	return m
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// Align places every series' points (Place) in the slots of step and returns the slots' times
// (k·step, ascending) and, for each, one value per series (NaN where it has none): the table
// of per-node columns beside Aggregate's values.
func Align(members [][]Point, step int64) (times []int64, rows [][]float64) {
	if step <= 0 {
		step = 1
	}
	at := map[int64][]float64{}
	for i, pts := range members {
		for j, k := range Place(pts, step) {
			row := at[k]
			if row == nil {
				row = make([]float64, len(members))
				for c := range row {
					row[c] = math.NaN()
				}
				at[k] = row
			}
			row[i] = pts[j].Value
		}
	}
	ks := make([]int64, 0, len(at))
	for k := range at {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	times = make([]int64, len(ks))
	rows = make([][]float64, len(ks))
	for i, k := range ks {
		times[i], rows[i] = k*step, at[k]
	}
	return times, rows
}

// Aggregate combines the series' points slot by slot with fn (sum, avg, min or max; NaN values
// are left out) and says of each slot how many series had a value and how many were expected.
// ongoing[i] (nil: none) says that series i is expected to the end of the window whatever its
// last point: its node does not answer now (stale, unreachable), so the slots since are
// partial rather than complete without it. step is the slots' width (Step of the series when
// ≤ 0; 1 when that is unknown too). Slots no series has a point in are left out: a time with no
// slot is a gap.
func Aggregate(fn string, members [][]Point, ongoing []bool, step int64) []Slot {
	if step <= 0 {
		step = Step(members)
	}
	if step <= 0 {
		step = 1
	}
	type span struct {
		first, last int64
		ongoing     bool
	}
	spans := make([]span, 0, len(members))
	acc := map[int64]*Slot{}
	minK, maxK := int64(math.MaxInt64), int64(math.MinInt64)
	for i, pts := range members {
		ks := Place(pts, step)
		if len(ks) == 0 {
			continue
		}
		spans = append(spans, span{ks[0], ks[len(ks)-1], i < len(ongoing) && ongoing[i]})
		minK, maxK = min(minK, ks[0]), max(maxK, ks[len(ks)-1])
		for j, k := range ks {
			s := acc[k]
			if s == nil {
				s = &Slot{TS: k * step, Value: math.NaN()}
				acc[k] = s
			}
			v := pts[j].Value
			if math.IsNaN(v) {
				continue
			}
			s.Value = Combine(fn, s.Value, v, s.N == 0)
			s.N++
		}
	}
	out := make([]Slot, 0, len(acc))
	for _, s := range acc {
		k := s.TS / step
		for _, sp := range spans {
			if sp.first <= k && k <= sp.last || k < sp.first && sp.first <= minK+1 || k > sp.last && (sp.ongoing || sp.last >= maxK-1) {
				s.Expected++
			}
		}
		if fn == "avg" && s.N > 0 {
			s.Value /= float64(s.N)
		}
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b Slot) int { return int(a.TS/step - b.TS/step) })
	return out
}
