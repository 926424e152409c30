package registry

import (
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/selector"
	"github.com/cantal-go/cantal/internal/series"
)

// TestEachLatest: EachLatest gives, for every series written by the view's scan that the
// selector selects (nil: all) and visible accepts, its Handle.Latest sample, in slot order;
// series not written by the scan, states without a value and the invisible are not given, and
// returning false stops it.
func TestEachLatest(t *testing.T) {
	r, _ := newReg(t, time.Hour)
	base := int64(1_700_000_000_000)
	refs := make([]*series.Ref, 40)
	for i := range refs {
		kind := []series.Kind{series.Counter, series.Level, series.Float, series.State}[i%4]
		refs[i] = r.Series(series.Labels{"metric": "m" + strconv.Itoa(i%5), "i": strconv.Itoa(i)}, kind)
	}
	for scan := int64(0); scan < 3; scan++ {
		r.Begin(base + scan*1000)
		for i, ref := range refs {
			switch {
			case i%7 == 0 && scan == 2: // not written by the latest scan
			case ref.Kind == series.State:
				if i%8 != 3 { // i%8 == 3: a state never given a value
					r.PutState(ref, base, "up")
				}
			default:
				r.Put(ref, uint64(100*scan+int64(i)))
			}
		}
		r.Commit()
	}
	v := r.View()
	visible := func(l series.Labels) bool { return l["i"] != "11" }
	for _, text := range []string{"", `{metric="m1"}`, `{metric=~"m[23]"}`, `{i="4"}`} {
		var sel *selector.Selector
		if text != "" {
			var err error
			if sel, err = selector.Parse(text); err != nil {
				t.Fatal(err)
			}
		}
		var want []string
		v.Each(func(h Handle) bool {
			if !h.Live() || sel != nil && !sel.Match(h.Labels()) || !visible(h.Labels()) {
				return true
			}
			if s, ok := h.Latest(r.History(), nil); ok {
				want = append(want, fmt.Sprintf("%s %+v", h.Key(), s))
			}
			return true
		})
		var got []string
		v.EachLatest(sel, visible, func(h Handle, s series.Sample) bool {
			got = append(got, fmt.Sprintf("%s %+v", h.Key(), s))
			return true
		})
		if len(want) == 0 || !slices.Equal(got, want) {
			t.Errorf("EachLatest(%q):\n got %q\nwant %q", text, got, want)
		}
		n := 0
		v.EachLatest(sel, nil, func(Handle, series.Sample) bool { n++; return false })
		if n != 1 {
			t.Errorf("EachLatest(%q) went on after false: %d calls", text, n)
		}
	}
}
