package history

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/history/chunkenc/chunktest"
	"github.com/cantal-go/cantal/internal/series"
)

// model is the obvious implementation the Store is checked against: every point kept.
type model struct {
	kinds  map[string]series.Kind
	points map[string][]Point
}

func newModel() *model {
	return &model{kinds: map[string]series.Kind{}, points: map[string][]Point{}}
}

// since returns the model's points of key with ts ≥ from.
func (m *model) since(key string, from int64) []Point {
	var out []Point
	for _, p := range m.points[key] {
		if p.TS >= from {
			out = append(out, p)
		}
	}
	return out
}

func rangeAll(s *Store, id ID, from, to int64) []Point {
	var out []Point
	s.Range(id, from, to, func(ts int64, bits uint64) bool {
		out = append(out, Point{ts, bits})
		return true
	})
	return out
}

// diffPoints fails the test for each series of a (by key) that b holds with another kind or
// other points, and for each series of a that b lacks (only those with points unless
// emptyToo); asA and asB name the two stores in the messages. It returns how many series of a
// have points and how many points were compared.
func diffPoints(t *testing.T, a, b *Store, asA, asB string, emptyToo bool) (withPoints, points int) {
	t.Helper()
	a.Each(func(id ID, key string, kind series.Kind) bool {
		pa := rangeAll(a, id, math.MinInt64, math.MaxInt64)
		id2, kind2, ok := b.Lookup(key)
		if !ok || kind2 != kind {
			if ok || emptyToo || len(pa) > 0 {
				t.Errorf("%s (%v, %d points %s): %s has it: %v, as %v", key, kind, len(pa), asA, asB, ok, kind2)
			}
			return true
		}
		if len(pa) > 0 {
			withPoints++
		}
		pb := rangeAll(b, id2, math.MinInt64, math.MaxInt64)
		if len(pa) != len(pb) {
			t.Errorf("%s: %d points %s, %d %s", key, len(pa), asA, len(pb), asB)
			return true
		}
		for i := range pa {
			if pa[i] != pb[i] {
				t.Errorf("%s point %d: %+v %s, %+v %s", key, i, pa[i], asA, pb[i], asB)
				return true
			}
		}
		points += len(pa)
		return true
	})
	return withPoints, points
}

// check compares every series of s with m. Points older than the store's oldest kept scan may
// be gone; every newer one must be there, exactly.
func check(t *testing.T, s *Store, m *model, r *rand.Rand) {
	t.Helper()
	st := s.Stats()
	oldest := st.OldestMs
	if st.LatestMs == 0 {
		oldest = math.MinInt64
	}
	live := 0
	for key, kind := range m.kinds {
		want := m.since(key, oldest)
		id, k, ok := s.Lookup(key)
		if !ok {
			if len(want) > 0 {
				t.Fatalf("Lookup(%s) failed; want a series with %d points", key, len(want))
			}
			continue
		}
		live++
		if k != kind {
			t.Fatalf("Lookup(%s) kind = %v; want %v", key, k, kind)
		}
		if got := rangeAll(s, id, math.MinInt64, math.MaxInt64); !slices.Equal(got, want) {
			t.Fatalf("Range(%s) = %d points %v\nwant %d points %v", key, len(got), got, len(want), want)
		}
		n := r.IntN(len(want) + 3)
		got := s.Last(id, n, []Point{{-1, 1}})
		wantLast := append([]Point{{-1, 1}}, want[max(0, len(want)-n):]...)
		if n == 0 {
			wantLast = wantLast[:1]
		}
		if !slices.Equal(got, wantLast) {
			t.Fatalf("Last(%s, %d) = %v; want %v", key, n, got, wantLast)
		}
		p, ok := s.Latest(id)
		if ok != (len(want) > 0) || ok && p != want[len(want)-1] {
			t.Fatalf("Latest(%s) = %v, %v; want last of %v", key, p, ok, want)
		}
		if len(want) > 0 {
			a, b := want[r.IntN(len(want))].TS, want[r.IntN(len(want))].TS
			from, to := min(a, b)-int64(r.IntN(3)), max(a, b)+int64(r.IntN(3))
			var sub []Point
			for _, p := range want {
				if p.TS >= from && p.TS <= to {
					sub = append(sub, p)
				}
			}
			if got := rangeAll(s, id, from, to); !slices.Equal(got, sub) {
				t.Fatalf("Range(%s, %d, %d) = %v; want %v", key, from, to, got, sub)
			}
		}
	}
	if st.Series != live {
		t.Fatalf("Stats().Series = %d; want %d", st.Series, live)
	}
	n := 0
	s.Each(func(id ID, key string, kind series.Kind) bool {
		n++
		if id2, k, ok := s.Lookup(key); !ok || id2 != id || k != kind {
			t.Fatalf("Each gave %d %s %v; Lookup gives %d %v %v", id, key, kind, id2, k, ok)
		}
		return true
	})
	if n != live {
		t.Fatalf("Each saw %d series; want %d", n, live)
	}
}

// TestStoreProperty drives a Store with random series (every value shape of chunktest.Values,
// gaps, births and deaths, expiry) and checks it, and its snapshots, against the model.
func TestStoreProperty(t *testing.T) {
	for seed := uint64(1); seed <= 6; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { storeProperty(t, seed) })
	}
}

func storeProperty(t *testing.T, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 99))
	const nser, nscans = 40, 700
	retention := 150 * 2 * time.Second
	// With grace scans, a closing segment's staging is retired and its pages pooled for the
	// next ones (recycled: their presence flags must not leak into a later segment).
	opt := Options{Retention: retention, BlockScans: []int{8, 13, 64, 256}[seed%4], GraceScans: []int{0, 8, 3}[seed%3]}
	s := New(opt)
	m := newModel()
	keys := make([]string, nser)
	kinds := make([]series.Kind, nser)
	vals := make([][]uint64, nser)
	alive := make([][2]int, nser) // scans during which the series reports
	for i := range keys {
		kinds[i] = []series.Kind{series.Counter, series.Level, series.Float}[r.IntN(3)]
		keys[i] = fmt.Sprintf(`{"metric":"m%d"}`, i)
		vals[i] = chunktest.Values(r, kinds[i], nscans)
		a := r.IntN(nscans)
		if i%3 == 0 {
			a = 0
		}
		alive[i] = [2]int{a, a + r.IntN(nscans-a) + 1}
	}
	ts := int64(1_700_000_000_000)
	ids := make([]ID, nser)
	registered := make([]bool, nser)
	for j := 0; j < nscans; j++ {
		ts += 2000 + int64(r.IntN(50)) - 25
		s.Begin(ts)
		for i := range keys {
			if j < alive[i][0] || j >= alive[i][1] || r.IntN(20) == 0 {
				continue
			}
			if !registered[i] {
				id, err := s.Series(keys[i], kinds[i])
				if err != nil {
					t.Fatal(err)
				}
				ids[i], registered[i] = id, true
				m.kinds[keys[i]] = kinds[i]
			}
			s.Add(ids[i], vals[i][j])
			m.points[keys[i]] = append(m.points[keys[i]], Point{ts, vals[i][j]})
		}
		s.Commit()
		if j%7 == 0 {
			for _, key := range s.Expire() {
				if n := len(m.since(key, s.Stats().OldestMs)); n > 0 {
					t.Fatalf("Expire deleted %s with %d points left", key, n)
				}
				i := slices.Index(keys, key)
				registered[i] = false
				delete(m.kinds, key)
				delete(m.points, key)
			}
		}
		if j%50 == 0 || j == nscans-1 {
			check(t, s, m, r)
		}
	}
	t.Logf("stats %+v", s.Stats())
	// Retention is exact: every scan of the last Retention is still there.
	if st := s.Stats(); st.OldestMs > st.LatestMs-retention.Milliseconds() {
		t.Fatalf("oldest kept scan %d is newer than latest-retention %d", st.OldestMs, st.LatestMs-retention.Milliseconds())
	}

	// Snapshot round trip, then keep writing into the loaded store.
	now := func() time.Time { return time.UnixMilli(ts) }
	opt.Now = now
	s2 := reloaded(t, s, opt)
	// Points older than the loaded store's oldest scan are gone; compare from there.
	check(t, s2, m, r)
	for j := 0; j < 40; j++ {
		ts += 2000
		s2.Begin(ts)
		for i := range keys {
			if id, _, ok := s2.Lookup(keys[i]); ok && r.IntN(3) > 0 {
				v := vals[i][r.IntN(nscans)]
				s2.Add(id, v)
				m.points[keys[i]] = append(m.points[keys[i]], Point{ts, v})
			}
		}
		s2.Commit()
	}
	check(t, s2, m, r)
	check(t, reloaded(t, s2, opt), m, r)
}

func TestSeriesKinds(t *testing.T) {
	s := New(Options{})
	id, err := s.Series(`{"metric":"a"}`, series.Counter)
	if err != nil {
		t.Fatal(err)
	}
	if id2, err := s.Series(`{"metric":"a"}`, series.Counter); err != nil || id2 != id {
		t.Errorf("Series again = %d, %v; want %d, nil", id2, err, id)
	}
	if _, err := s.Series(`{"metric":"a"}`, series.Level); err == nil {
		t.Error("Series with another kind succeeded; want error")
	}
	if _, err := s.Series(`{"metric":"b"}`, series.State); err == nil {
		t.Error("Series of a state succeeded; want error")
	}
	if _, _, ok := s.Lookup(`{"metric":"b"}`); ok {
		t.Error("Lookup of a rejected series succeeded")
	}
}

func TestGapsAndStrayAdds(t *testing.T) {
	s := New(Options{BlockScans: 4})
	a, _ := s.Series("a", series.Level)
	b, _ := s.Series("b", series.Float)
	s.Add(a, 1) // outside a scan
	for j := int64(1); j <= 10; j++ {
		s.Begin(j * 1000)
		if j%3 != 0 {
			s.Add(a, uint64(j))
		}
		s.Add(ID(99), 5)
		s.Commit()
	}
	s.Begin(10_000) // not after the previous scan: clamped to 10001
	s.Add(b, math.Float64bits(-0.0))
	s.Commit()
	got := rangeAll(s, a, 0, math.MaxInt64)
	var want []Point
	for j := int64(1); j <= 10; j++ {
		if j%3 != 0 {
			want = append(want, Point{j * 1000, uint64(j)})
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("Range(a) = %v; want %v", got, want)
	}
	if p, ok := s.Latest(b); !ok || p != (Point{10_001, math.Float64bits(-0.0)}) {
		t.Errorf("Latest(b) = %v, %v; want {10001, -0}", p, ok)
	}
	st := s.Stats()
	if st.DroppedAdds != 11 || st.ClampedScans != 1 || st.Points != 8 {
		t.Errorf("Stats = %+v; want 11 dropped adds, 1 clamped scan, 8 points", st)
	}
	// A Begin without Commit discards that scan's values.
	s.Begin(20_000)
	s.Add(a, 77)
	s.Begin(21_000)
	s.Commit()
	if p, _ := s.Latest(a); p.Bits == 77 {
		t.Errorf("Latest(a) = %v; the abandoned scan's value leaked", p)
	}
}

func TestRate(t *testing.T) {
	for _, c := range []struct {
		prev, cur Point
		want      float64
		ok        bool
	}{
		{Point{0, 10}, Point{2000, 30}, 10, true},
		{Point{0, 30}, Point{2000, 30}, 0, true},
		{Point{0, 30}, Point{2000, 5}, 0, false}, // reset
		{Point{2000, 1}, Point{2000, 5}, 0, false},
		{Point{0, 0}, Point{1000, math.MaxUint64}, float64(math.MaxUint64), true},
	} {
		got, ok := Rate(c.prev, c.cur)
		if got != c.want || ok != c.ok {
			t.Errorf("Rate(%v, %v) = %v, %v; want %v, %v", c.prev, c.cur, got, ok, c.want, c.ok)
		}
	}
}

func TestExpireReusesIDs(t *testing.T) {
	s := New(Options{BlockScans: 2, Retention: 10 * time.Second})
	old, _ := s.Series("old", series.Counter)
	for j := int64(0); j < 4; j++ {
		s.Begin(j * 1000)
		s.Add(old, uint64(100+j))
		s.Commit()
	}
	var gone []string
	ts := int64(4000)
	for ; ts < 30_000; ts += 1000 {
		s.Begin(ts)
		s.Commit()
		gone = append(gone, s.Expire()...)
	}
	if !slices.Equal(gone, []string{"old"}) {
		t.Fatalf("Expire deleted %v; want [old]", gone)
	}
	if _, _, ok := s.Lookup("old"); ok {
		t.Fatal("Lookup(old) succeeded after it expired")
	}
	nu, _ := s.Series("new", series.Counter)
	if nu != old {
		t.Fatalf("new series got ID %d; want the freed %d", nu, old)
	}
	if got := rangeAll(s, nu, math.MinInt64, math.MaxInt64); len(got) != 0 {
		t.Fatalf("new series has points %v of the old one", got)
	}
}

// TestPinnedStagingIsNotReused checks the writer's side of the reader protocol: a staging
// buffer pinned by a reader when its segment closes is neither waited for nor overwritten.
func TestPinnedStagingIsNotReused(t *testing.T) {
	s := New(Options{BlockScans: 4})
	id, _ := s.Series("a", series.Level)
	scan := func(ts int64) {
		s.Begin(ts)
		s.Add(id, uint64(ts))
		s.Commit()
	}
	for ts := int64(1); ts <= 3; ts++ {
		scan(ts)
	}
	v := s.acquire()
	pinned := v.open
	for ts := int64(4); ts <= 12; ts++ { // closes three segments while pinned
		scan(ts)
		if s.w.st == pinned {
			t.Fatalf("scan %d: the writer reuses a staging a reader holds", ts)
		}
	}
	got := openPoints(pinned, id, math.MinInt64, math.MaxInt64, nil)
	// Scan 4 was committed into it before its segment closed; later scans went elsewhere.
	if want := []Point{{1, 1}, {2, 2}, {3, 3}, {4, 4}}; !slices.Equal(got, want) {
		t.Fatalf("pinned staging reads %v; want %v", got, want)
	}
	s.release(v)
	for ts := int64(13); ts <= 20; ts++ {
		scan(ts)
	}
	if len(s.w.retired) != 0 {
		t.Errorf("%d stagings still retired after the reader left", len(s.w.retired))
	}
	if got := rangeAll(s, id, math.MinInt64, math.MaxInt64); len(got) != 20 {
		t.Errorf("Range = %d points; want 20", len(got))
	}
}

// TestDropReusesIDs checks Drop: the series is gone at once, its ID is reused, and the new holder
// of the ID sees none of the old points, neither in closed segments nor in the open one, nor
// after a snapshot round trip.
func TestDropReusesIDs(t *testing.T) {
	s := New(Options{BlockScans: 4})
	old, _ := s.Series("old", series.Level)
	for j := int64(0); j < 6; j++ { // one closed segment, two scans in the open one
		s.Begin(j * 1000)
		s.Add(old, uint64(100+j))
		s.Commit()
	}
	s.Begin(6000)
	if s.Drop(old) {
		t.Fatal("Drop succeeded during a scan")
	}
	s.Commit()
	if !s.Drop(old) || s.Drop(old) {
		t.Fatal("Drop of a series must succeed once")
	}
	if _, _, ok := s.Lookup("old"); ok || s.Stats().Series != 0 {
		t.Fatal("a dropped series is still there")
	}
	s.Begin(7000)
	nu, _ := s.Series("new", series.Level)
	if nu != old {
		t.Fatalf("new series got ID %d; want the freed %d", nu, old)
	}
	s.Add(nu, 7)
	s.Commit()
	want := []Point{{7000, 7}}
	if got := rangeAll(s, nu, math.MinInt64, math.MaxInt64); !slices.Equal(got, want) {
		t.Fatalf("new series has points %v; want %v", got, want)
	}
	if got := s.Last(nu, 10, nil); !slices.Equal(got, want) {
		t.Fatalf("Last of the new series: %v; want %v", got, want)
	}
	s2 := reloaded(t, s, Options{BlockScans: 4, Now: func() time.Time { return time.UnixMilli(8000) }})
	id, _, ok := s2.Lookup("new")
	if !ok {
		t.Fatal("new series lost in the snapshot")
	}
	if got := rangeAll(s2, id, math.MinInt64, math.MaxInt64); !slices.Equal(got, want) {
		t.Fatalf("after a snapshot the new series has points %v; want %v", got, want)
	}
}

// TestSegIter checks the block lookup (a one-pass iterator that jumps by group checkpoints)
// against a plain walk of the whole index, for every ID and for random increasing subsets, on
// segments with runs, gaps and group boundaries.
func TestSegIter(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	s := New(Options{BlockScans: 4})
	const n = 700
	ids := make([]ID, n)
	for i := range ids {
		ids[i], _ = s.Series(fmt.Sprint("s", i), series.Level)
	}
	for j := int64(0); j < 4; j++ {
		s.Begin(j * 1000)
		for i, id := range ids {
			// Long runs of silent series, some lone ones, and dense stretches.
			if (i/150)%2 == 0 && rng.IntN(4) != 0 || i%97 == 0 {
				s.Add(id, uint64(i))
			}
		}
		s.Commit()
	}
	g := s.view.Load().segs[0]
	// The reference: every ID's block, from the start of the index to its end.
	var all [][]byte
	for p, off := 0, 0; p < len(g.lens); {
		u, w := binary.Uvarint(g.lens[p:])
		p += w
		if u&1 == 1 {
			all = append(all, make([][]byte, u>>1+1)...)
			continue
		}
		all = append(all, g.data[off:off+int(u>>1)])
		off += int(u >> 1)
	}
	want := func(id ID) []byte {
		if int(id) < len(all) {
			return all[id]
		}
		return nil
	}
	for id := ID(0); id < n+70; id++ {
		if got := g.block(id); !bytes.Equal(got, want(id)) {
			t.Fatalf("block of %d = %x; want %x", id, got, want(id))
		}
	}
	for trial := 0; trial < 200; trial++ {
		it := segIter{g: g}
		for id := ID(0); id < n+70; id++ {
			if trial > 0 && rng.IntN(1+trial%7) != 0 {
				continue
			}
			if got := it.block(id); !bytes.Equal(got, want(id)) {
				t.Fatalf("trial %d: iterator block of %d = %x; want %x", trial, id, got, want(id))
			}
		}
	}
}

// TestClosed checks that Closed counts segment closes, and that right after one the open
// segment is empty: what a Saver then compresses is nothing.
func TestClosed(t *testing.T) {
	s := New(Options{BlockScans: 3})
	id, err := s.Series("a", series.Counter)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 7 {
		s.Begin(int64(1000 * (i + 1)))
		s.Add(id, uint64(i))
		s.Commit()
		if got, want := s.Closed(), int64((i+1)/3); got != want {
			t.Fatalf("after scan %d: Closed() = %d, want %d", i+1, got, want)
		}
		if (i+1)%3 == 0 && s.view.Load().open.n.Load() != 0 {
			t.Fatalf("after scan %d, which closed a segment: open segment holds scans", i+1)
		}
	}
	if got := s.Stats().Segments; got != 2 {
		t.Fatalf("Segments = %d, want 2", got)
	}
}
