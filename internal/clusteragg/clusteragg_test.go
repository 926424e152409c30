package clusteragg

import (
	"math"
	"net/url"
	"testing"

	"github.com/cantal-go/cantal/internal/apiwire"
	"github.com/cantal-go/cantal/internal/series"
)

// scans returns a node's points: one every step from phase, n of them, the i-th late by
// jitter(i) ms, all of value v.
func scans(phase, step int64, n int, v float64, jitter func(i int) int64) []Point {
	pts := make([]Point, n)
	for i := range pts {
		pts[i] = Point{TS: 1_700_000_000_000 + phase + int64(i)*step + jitter(i), Value: v}
	}
	return pts
}

// TestStraddlingPhases: two nodes whose scans fall on either side of a 2 s edge (1990 ms and
// 10 ms into the step), each jittering by ±15 ms across it, sum to the same total in every
// slot: no slot counts a node twice, none misses one.
func TestStraddlingPhases(t *testing.T) {
	const step = 2000
	wobble := func(i int) int64 { return []int64{-15, 15, 0, 12, -12, 5}[i%6] }
	a := scans(1990, step, 60, 30, wobble)
	b := scans(10, step, 60, 80, func(i int) int64 { return -wobble(i) })
	slots := Aggregate("sum", [][]Point{a, b}, nil, 0)
	if len(slots) < 59 || len(slots) > 61 {
		t.Fatalf("%d slots for 60 scans of two nodes; want 60 (±1 at the edges)", len(slots))
	}
	complete := 0
	for i, s := range slots {
		if s.Partial() {
			// Only the window's edges may lack a node: the first slot (before the other's
			// first scan) and the newest (before its next).
			if i != 0 && i != len(slots)-1 {
				t.Errorf("slot %d at %d: %d of %d nodes; want complete", i, s.TS, s.N, s.Expected)
			}
			continue
		}
		complete++
		if s.Value != 110 || s.N != 2 {
			t.Errorf("slot %d at %d: sum %v of %d nodes; want 110 of 2", i, s.TS, s.Value, s.N)
		}
		if s.TS%step != 0 {
			t.Errorf("slot %d at %d: not on the %d ms grid", i, s.TS, step)
		}
	}
	if complete < 58 {
		t.Errorf("%d complete slots of %d", complete, len(slots))
	}
	// Bucketing raw times (floor(ts/step)) double-counts here; the test data does provoke it.
	buckets := map[int64]int{}
	for _, pts := range [][]Point{a, b} {
		for _, p := range pts {
			buckets[p.TS/step]++
		}
	}
	twice := 0
	for _, n := range buckets {
		if n > 2 {
			twice++
		}
	}
	if twice == 0 {
		t.Error("raw-time buckets never hold three points: the data does not straddle the edge")
	}
}

// TestNewestSlotPartial: a node whose scan of the newest period is not in yet makes that slot
// partial, not a smaller complete sum.
func TestNewestSlotPartial(t *testing.T) {
	const step = 1000
	none := func(int) int64 { return 0 }
	a := scans(100, step, 10, 1, none)
	b := scans(600, step, 10, 2, none)
	c := scans(900, step, 9, 4, none) // its 10th scan has not happened yet
	slots := Aggregate("sum", [][]Point{a, b, c}, nil, 0)
	last := slots[len(slots)-1]
	if !last.Partial() || last.N != 2 || last.Expected != 3 || last.Value != 3 {
		t.Errorf("newest slot %+v; want partial: 2 of 3 nodes, sum 3", last)
	}
	for _, s := range slots[:len(slots)-1] {
		if s.Partial() || s.Value != 7 {
			t.Errorf("slot %+v; want complete, 7", s)
		}
	}
}

// TestOutagePartialEndedNot: a node missing for a while in the middle of the window makes those
// slots partial (and leaves no point: a gap, not a fill); a series that ended is not expected
// after its end.
func TestOutagePartialEndedNot(t *testing.T) {
	const step = 1000
	none := func(int) int64 { return 0 }
	a := scans(200, step, 30, 1, none)
	b := append(scans(500, step, 10, 10, none), scans(500+20*step, step, 10, 10, none)...) // down for 10 scans
	ended := scans(700, step, 5, 100, none)                                                // exited after 5 scans
	slots := Aggregate("max", [][]Point{a, b, ended}, nil, 0)
	if len(slots) != 30 {
		t.Fatalf("%d slots; want 30", len(slots))
	}
	for i, s := range slots {
		switch {
		case i < 5:
			if s.Partial() || s.Value != 100 {
				t.Errorf("slot %d %+v; want complete max 100", i, s)
			}
		case i >= 10 && i < 20:
			if !s.Partial() || s.N != 1 || s.Expected != 2 || s.Value != 1 {
				t.Errorf("slot %d %+v; want partial (b down): 1 of 2", i, s)
			}
		default:
			if s.Partial() || s.Value != 10 || s.Expected != 2 {
				t.Errorf("slot %d %+v; want complete max 10 of 2 (the ended series not expected)", i, s)
			}
		}
	}
}

func TestAggregateFns(t *testing.T) {
	pts := func(v float64) []Point { return []Point{{1000, v}, {2000, v}} }
	members := [][]Point{pts(1), pts(4), pts(math.NaN()), pts(7)}
	for fn, want := range map[string]float64{"sum": 12, "avg": 4, "min": 1, "max": 7} {
		s := Aggregate(fn, members, nil, 1000)
		if len(s) != 2 || s[0].Value != want || s[0].N != 3 || s[0].Expected != 4 {
			t.Errorf("%s: %+v; want %v of 3 values, 4 expected", fn, s, want)
		}
	}
}

func TestPlaceKeepsEveryPoint(t *testing.T) {
	// A late scan and an on-time one meet in a slot: the later goes to the next.
	pts := []Point{{0, 1}, {1000, 1}, {2600, 1}, {3000, 1}, {4000, 1}}
	ks := Place(pts, 1000)
	for i := 1; i < len(ks); i++ {
		if ks[i] <= ks[i-1] {
			t.Fatalf("slots %v: not increasing", ks)
		}
	}
}

func TestGrouping(t *testing.T) {
	l := series.Labels{"metric": "m", "node": "n1", "pid": "1", "disk": "sda"}
	for _, tc := range []struct {
		q    url.Values
		want string
	}{
		{url.Values{}, `{"disk":"sda","metric":"m"}`},
		{url.Values{"by": {"pid"}}, `{"metric":"m","pid":"1"}`},
		{url.Values{"without": {"disk"}}, `{"metric":"m","pid":"1"}`},
	} {
		g, err := ParseGrouping(tc.q)
		if err != nil {
			t.Fatal(err)
		}
		if got := g.Key(l).Key(); got != tc.want {
			t.Errorf("%v: %s; want %s", tc.q, got, tc.want)
		}
	}
	if _, err := ParseGrouping(url.Values{"by": {"a"}, "without": {"b"}}); err == nil {
		t.Error("by and without together: no error")
	}
}

// TestDownNodeOngoing: the series of a node that does not answer now stay expected after its
// last point: the slots since are partial, not complete sums without it.
func TestDownNodeOngoing(t *testing.T) {
	none := func(int) int64 { return 0 }
	up := scans(100, 1000, 20, 1, none)
	down := scans(400, 1000, 10, 2, none)
	for _, ongoing := range []bool{false, true} {
		slots := Aggregate("sum", [][]Point{up, down}, []bool{false, ongoing}, 1000)
		partial := 0
		for _, s := range slots {
			if s.Partial() {
				partial++
			}
		}
		if want := map[bool]int{false: 0, true: 10}[ongoing]; partial != want {
			t.Errorf("ongoing %v: %d partial slots; want %d", ongoing, partial, want)
		}
	}
}

// BenchmarkAggregate: a group of 20 nodes' series over 15 minutes of 2 s scans (450 points
// each), every node at its own phase.
func BenchmarkAggregate(b *testing.B) {
	members := make([][]Point, 20)
	for i := range members {
		members[i] = scans(int64(i)*97, 2000, 450, float64(i), func(j int) int64 { return int64((j*7)%11 - 5) })
	}
	b.ReportAllocs()
	for b.Loop() {
		Aggregate("sum", members, nil, Step(members))
	}
}

// TestFromWire: an answer's points keep their times and values; a point without a value (null
// on the wire) is NaN.
func TestFromWire(t *testing.T) {
	got := FromWire([]apiwire.Point{{TS: 1, Value: apiwire.Float(2.5)}, {TS: 3}})
	if len(got) != 2 || got[0] != (Point{1, 2.5}) || got[1].TS != 3 || !math.IsNaN(got[1].Value) {
		t.Errorf("FromWire = %+v; want [{1 2.5} {3 NaN}]", got)
	}
}
