package registry

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/series"
)

// TestPutBatchMatchesPut drives two registries with the same scans, one through Put and one
// through PutBatch on arrays of Refs kept between scans (as a collector keeps them), and checks
// after every scan that readers see the same thing: the View's counters and, for every series,
// whether it is live and its latest value. The arrays change content in place, hold a State, a
// Ref refused for its kind and the same Ref twice; series expire, come back on the Ref their
// collector kept (attached again, to another slot), and are dropped by the series limit.
func TestPutBatchMatchesPut(t *testing.T) {
	const retention = 20 * time.Second
	mk := func() *Registry {
		h := history.New(history.Options{Retention: retention, Interval: time.Second, BlockScans: 8})
		r := New(h, retention, slog.New(slog.DiscardHandler))
		r.SetMaxSeries(300)
		return r
	}
	one, many := mk(), mk()
	const groups, per = 12, 30
	type group struct {
		one, many []*series.Ref
		batch     series.Batch // Refs: many
		bits      []uint64
	}
	rng := rand.New(rand.NewPCG(3, 4))
	gs := make([]*group, groups)
	labels := func(g, m int) series.Labels {
		return series.Labels{"group": strconv.Itoa(g), "metric": strconv.Itoa(m)}
	}
	// States only in the groups never silent: a state's expiry walks a map, in random order,
	// which would give the two registries different slots for the series that come back, and
	// so a different choice among the series of equal age that the limit drops.
	kindOf := func(g, m int) series.Kind {
		switch {
		case m == per-1 && g < 8:
			return series.State
		case m%3 == 1:
			return series.Level
		}
		return series.Counter
	}
	for g := range gs {
		gr := &group{bits: make([]uint64, per)}
		for m := range per {
			gr.one = append(gr.one, one.Series(labels(g, m), kindOf(g, m)))
			gr.many = append(gr.many, many.Series(labels(g, m), kindOf(g, m)))
		}
		gr.batch.Refs = gr.many
		gs[g] = gr
	}
	// A Ref refused for its kind (ID -1 for good), and a group holding one Ref twice.
	gs[0].one[5] = one.Series(labels(0, 4), series.Float)
	gs[0].many[5] = many.Series(labels(0, 4), series.Float)
	gs[1].one[7], gs[1].many[7] = gs[1].one[6], gs[1].many[6]
	base := int64(1_700_000_000_000)
	for scan := range 150 {
		ts := base + int64(scan)*1000
		one.Begin(ts)
		many.Begin(ts)
		for g, gr := range gs {
			// Groups 8-11 are silent for a while (their series expire, then come back on the
			// Refs kept); group 3 (with a State) and group 9 (numeric only: written as a
			// history.Group) are rebuilt in place every 40 scans, metrics in another order.
			if g >= 8 && scan%70 >= 30 {
				continue
			}
			if (g == 3 || g == 9) && scan%40 == 39 {
				rng.Shuffle(per, func(i, j int) {
					gr.one[i], gr.one[j] = gr.one[j], gr.one[i]
					gr.many[i], gr.many[j] = gr.many[j], gr.many[i]
				})
			}
			for m := range per {
				gr.bits[m] = uint64(scan*100 + g*per + m + rng.IntN(3))
			}
			for m, ref := range gr.one {
				if ref.Kind == series.State {
					one.PutState(ref, base, "s"+strconv.Itoa(scan/10))
					continue
				}
				one.Put(ref, gr.bits[m])
			}
			many.PutBatch(&gr.batch, gr.bits) // the State is skipped
			for _, ref := range gr.many {
				if ref.Kind == series.State {
					many.PutState(ref, base, "s"+strconv.Itoa(scan/10))
				}
			}
		}
		one.Commit()
		many.Commit()
		compareViews(t, scan, one, many)
	}
	if v := many.View(); v.Evicted == 0 || v.Live == 0 {
		t.Fatalf("the scans evicted %d series and left %d live; the test lost its churn", v.Evicted, v.Live)
	}
}

func compareViews(t *testing.T, scan int, one, many *Registry) {
	t.Helper()
	va, vb := one.View(), many.View()
	if va.Len() != vb.Len() || va.Live != vb.Live || va.Added != vb.Added || va.Removed != vb.Removed ||
		va.Evicted != vb.Evicted || len(va.Problems) != len(vb.Problems) {
		t.Fatalf("scan %d: Put's view has %d series (live %d, added %d, removed %d, evicted %d, %d problems); "+
			"PutBatch's %d (live %d, added %d, removed %d, evicted %d, %d problems)", scan,
			va.Len(), va.Live, va.Added, va.Removed, va.Evicted, len(va.Problems),
			vb.Len(), vb.Live, vb.Added, vb.Removed, vb.Evicted, len(vb.Problems))
	}
	type seen struct {
		live, ok, hasRate bool
		kind              series.Kind
		ts, since         int64
		bits              uint64
		rate              float64
		text              string
	}
	collect := func(r *Registry) map[string]seen {
		m := map[string]seen{}
		r.View().Each(func(h Handle) bool {
			s, ok := h.Latest(r.History(), nil)
			m[h.Key()] = seen{h.Live(), ok, s.HasRate, s.Kind, s.TS, s.Since, s.Bits, s.Rate, s.Text}
			return true
		})
		return m
	}
	a, b := collect(one), collect(many)
	live := 0
	for k, sa := range a {
		if sb, ok := b[k]; !ok || sa != sb {
			t.Fatalf("scan %d: %s is %+v with Put, %+v (known %v) with PutBatch", scan, k, sa, sb, ok)
		}
		if sa.live {
			live++
		}
	}
	if live != va.Live {
		t.Fatalf("scan %d: %d handles are live; View.Live = %d", scan, live, va.Live)
	}
}

// TestPutBatchConcurrentReaders runs the scanner with PutBatch flat out while readers walk the
// latest View; every value is a function of the series and the scan time, so a reader checks
// each latest value it sees, and that a live series' latest point is the view's scan. Run with
// -race: the readers take no lock the scanner takes.
func TestPutBatchConcurrentReaders(t *testing.T) {
	h := history.New(history.Options{Retention: time.Minute, Interval: time.Second, BlockScans: 16})
	r := New(h, time.Minute, slog.New(slog.DiscardHandler))
	const groups, per = 20, 50
	refs := make([][]*series.Ref, groups)
	num := map[*series.Ref]uint64{}
	for g := range refs {
		for m := range per {
			ref := r.Series(series.Labels{"g": strconv.Itoa(g), "m": strconv.Itoa(m)}, series.Counter)
			refs[g] = append(refs[g], ref)
			num[ref] = uint64(g*per + m)
		}
	}
	batches := make([]series.Batch, groups)
	for g := range batches {
		batches[g].Refs = refs[g]
	}
	keyNum := map[string]uint64{}
	for ref, n := range num {
		keyNum[ref.Key] = n
	}
	value := func(n uint64, ts int64) uint64 { return n*1_000_003 + uint64(ts) }
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var bad, checked atomic.Int64
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var scratch []history.Point
			for ctx.Err() == nil {
				v := r.View()
				v.Each(func(hd Handle) bool {
					smp, ok := hd.Latest(h, scratch)
					if !ok {
						return true
					}
					if smp.Bits != value(keyNum[hd.Key()], smp.TS) || len(hd.Labels()) != 2 {
						bad.Add(1)
					}
					if hd.Live() && smp.TS < v.TS {
						bad.Add(1) // written by the view's scan, yet its latest point is older
					}
					checked.Add(1)
					return true
				})
			}
		}()
	}
	bits := make([]uint64, per)
	ts := int64(1_700_000_000_000)
	for scan := 0; scan < 200 || checked.Load() == 0; scan++ {
		ts += 1000
		r.Begin(ts)
		for g := range refs {
			if g == 0 && scan%50 >= 40 {
				continue // a silent group: not live for a while
			}
			for m, ref := range refs[g] {
				bits[m] = value(num[ref], ts)
			}
			r.PutBatch(&batches[g], bits)
		}
		r.Commit()
	}
	cancel()
	wg.Wait()
	if bad.Load() != 0 {
		t.Fatalf("readers saw %d wrong series of %d", bad.Load(), checked.Load())
	}
}

// TestBatchHandleOwnedByItsRegistry: what PutBatch keeps in a series.Batch is the slots of one
// registry; the same Batch (Refs changed to the other registry's) written to two registries in
// turn puts every point in the right series of each.
func TestBatchHandleOwnedByItsRegistry(t *testing.T) {
	a, _ := newReg(t, time.Hour)
	b, _ := newReg(t, time.Hour)
	var ra, rb []*series.Ref
	for m := range 5 {
		// b registers a series first, so that the same labels get other slots there.
		b.Series(series.Labels{"metric": "other" + strconv.Itoa(m)}, series.Counter)
		ra = append(ra, a.Series(series.Labels{"metric": strconv.Itoa(m)}, series.Counter))
		rb = append(rb, b.Series(series.Labels{"metric": strconv.Itoa(m)}, series.Counter))
	}
	var batch series.Batch
	bits := make([]uint64, 5)
	base := int64(1_700_000_000_000)
	for scan := range 4 {
		for _, x := range []struct {
			r    *Registry
			refs []*series.Ref
			off  uint64
		}{{a, ra, 0}, {b, rb, 1000}} {
			for m := range bits {
				bits[m] = x.off + uint64(10*scan+m)
			}
			x.r.Begin(base + int64(scan)*1000)
			batch.Refs = x.refs
			x.r.PutBatch(&batch, bits)
			x.r.Commit()
		}
	}
	for _, x := range []struct {
		r   *Registry
		off uint64
	}{{a, 0}, {b, 1000}} {
		for m := range 5 {
			s, ok, live := latest(t, x.r, series.Labels{"metric": strconv.Itoa(m)}.Key())
			if want := x.off + uint64(30+m); !ok || !live || s.Bits != want {
				t.Errorf("series %d: latest %d (ok %v, live %v); want %d", m, s.Bits, ok, live, want)
			}
		}
	}
}
