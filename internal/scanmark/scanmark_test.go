package scanmark

import (
	"maps"
	"slices"
	"testing"
)

type thing struct {
	Mark
	name string
}

func TestSweepDropsWhatTheScanDidNotSee(t *testing.T) {
	m := map[string]*thing{"a": {name: "a"}, "b": {name: "b"}, "c": {name: "c"}}
	m["a"].See(1)
	m["b"].See(1)
	m["c"].See(1)
	Sweep(m, 1, func(string, *thing) { t.Error("scan 1 saw everything; drop called") })
	if len(m) != 3 {
		t.Fatalf("after a scan that saw all three: %d left", len(m))
	}
	m["b"].See(2)
	var dropped []string
	Sweep(m, 2, func(k string, v *thing) {
		if v.name != k {
			t.Errorf("drop(%q, %q): value of another key", k, v.name)
		}
		dropped = append(dropped, k)
	})
	slices.Sort(dropped)
	if got := slices.Sorted(maps.Keys(m)); !slices.Equal(got, []string{"b"}) || !slices.Equal(dropped, []string{"a", "c"}) {
		t.Errorf("after scan 2 saw only b: kept %v, dropped %v; want [b], [a c]", got, dropped)
	}
	Sweep(m, 3, nil) // no drop function
	if len(m) != 0 {
		t.Errorf("after scan 3 saw nothing: %d left", len(m))
	}
}

func TestMarkZeroValueUnseen(t *testing.T) {
	var m Mark
	if m.Seen(1) {
		t.Error("zero Mark seen by scan 1")
	}
	m.See(5)
	if !m.Seen(5) || m.Seen(4) || m.Seen(6) {
		t.Error("Mark seen by scan 5 answers for another scan")
	}
}
