package registry

import (
	"errors"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/series"
)

// A pushed point is stored once at its own scan; a held series is listed with that point (and
// its age) in later scans, and history has exactly one point.
func TestPutAtOnceAndHold(t *testing.T) {
	r, _ := newReg(t, time.Hour) // Interval 1 s: MaxSlot 1500 ms
	labels := series.Labels{"metric": "temp", series.SourceLabel: series.SourcePush}
	ref := r.Series(labels.Clone(), series.Float)
	base := int64(1_700_000_000_000)
	for i := int64(0); i < 5; i++ {
		r.Begin(base + i*1000)
		switch i {
		case 1:
			if r.ScanTime() != base+1000 {
				t.Errorf("ScanTime() = %d; want %d", r.ScanTime(), base+1000)
			}
			if slot, err := r.PutAt(ref, base+800, math.Float64bits(22.5)); err != nil || slot != base+1000 {
				t.Errorf("PutAt = %d, %v; want %d, nil", slot, err, base+1000)
			}
		case 3:
			// A late point for scan 2, then nothing for scan 3: held.
			if slot, err := r.PutAt(ref, base+1500, math.Float64bits(23)); err != nil || slot != base+2000 {
				t.Errorf("late PutAt = %d, %v; want %d, nil", slot, err, base+2000)
			}
			if _, err := r.PutAt(ref, base+3500, 0); !errors.Is(err, history.ErrFuture) {
				t.Errorf("future PutAt: %v; want ErrFuture", err)
			}
			r.Hold(ref)
		default:
			r.Hold(ref)
		}
		r.Commit()
		smp, ok, live := latest(t, r, ref.Key)
		if i == 0 {
			if ok {
				t.Errorf("scan 0: a value before the first point: %v", smp)
			}
			continue
		}
		if !ok || !live {
			t.Errorf("scan %d: listed %v, live %v; want both", i, ok, live)
		}
		wantTS, wantV := base+1000, 22.5
		if i >= 3 {
			wantTS, wantV = base+2000, 23
		}
		if smp.TS != wantTS || math.Float64frombits(smp.Bits) != wantV {
			t.Errorf("scan %d: latest (%d, %v); want (%d, %v)", i, smp.TS, math.Float64frombits(smp.Bits), wantTS, wantV)
		}
	}
	var pts []history.Point
	hid, _, _ := r.History().Lookup(ref.Key)
	r.History().Range(hid, 0, math.MaxInt64, func(ts int64, bits uint64) bool {
		pts = append(pts, history.Point{TS: ts, Bits: bits})
		return true
	})
	want := []history.Point{{TS: base + 1000, Bits: math.Float64bits(22.5)}, {TS: base + 2000, Bits: math.Float64bits(23)}}
	if !slices.Equal(pts, want) {
		t.Errorf("history %v; want %v", pts, want)
	}
	if from := r.BackfillFrom(); from >= base {
		t.Errorf("BackfillFrom() = %d; want before the first scan %d", from, base)
	}
}

func TestPutAtState(t *testing.T) {
	r, _ := newReg(t, time.Hour)
	ref := r.Series(series.Labels{"metric": "s"}, series.State)
	r.Begin(1000)
	if _, err := r.PutAt(ref, 1000, 0); err == nil {
		t.Errorf("PutAt on a state: no error")
	}
	r.Commit()
}

// The history of pushed series is charged to their byte budget (SetMaxPushed): points are
// refused with ErrPushedFull while keys and history fill it, the history they hold stays within
// it, and pushing resumes as segments expire. Before, the history grew outside any budget
// (~1.5 GB at the series cap). (issue 31, N11)
func TestPushedHistoryChargedToBudget(t *testing.T) {
	r, _ := newReg(t, 10*time.Minute) // 1 s scans, 64-scan segments
	const budget = 256 << 10
	r.SetMaxPushed(0, budget)
	var refs []*series.Ref
	for i := range 100 {
		refs = append(refs, r.Series(series.Labels{"metric": "rand", "i": string(rune('a'+i%26)) + string(rune('a'+i/26)), series.SourceLabel: series.SourcePush}, series.Float))
	}
	base := int64(1_700_000_000_000)
	var maxHist int64
	refused, acceptedLate := 0, 0
	x := uint64(1)
	for i := int64(0); i < 1800; i++ {
		ts := base + i*1000
		r.Begin(ts)
		for _, ref := range refs {
			x = x*6364136223846793005 + 1442695040888963407 // random floats: the least compressible
			_, err := r.PutAt(ref, ts, math.Float64bits(float64(x>>11)/(1<<53)))
			switch {
			case errors.Is(err, ErrPushedFull):
				refused++
			case err != nil:
				t.Fatal(err)
			case i > 1500:
				acceptedLate++
			}
		}
		r.Commit()
		st := r.History().Stats()
		maxHist = max(maxHist, st.CompressedBytes) // the staging is a fixed capacity, not grown by points
	}
	t.Logf("history at most %d KiB (budget %d KiB), %d points refused, %d accepted in the last 5 minutes", maxHist>>10, budget>>10, refused, acceptedLate)
	if refused == 0 {
		t.Error("no point refused: the history is not charged")
	}
	if maxHist > budget {
		t.Errorf("the history held %d KiB; want about the %d KiB budget at most", maxHist>>10, budget>>10)
	}
	if acceptedLate == 0 {
		t.Error("no point accepted after segments expired: the charge is never given back")
	}
	if v := r.View(); v.PushedBytes <= int64(len(refs))*pushedOverhead {
		t.Errorf("PushedBytes %d: the history is not in it", v.PushedBytes)
	}
}
