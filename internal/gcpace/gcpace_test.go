package gcpace

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

func TestLimit(t *testing.T) {
	const mib = 1 << 20
	cases := []struct {
		name string
		m    Mem
		g    float64
		want int64
	}{
		// 200 MiB live, 210 MiB of objects (10 allocated since), 10 MiB free, 30 MiB of
		// other memory: the next collection at 250 MiB of objects, plus the runtime's 3 %.
		{"steady", Mem{Live: 200 * mib, Mapped: 250 * mib, Objects: 210 * mib, Free: 10 * mib}, 0.25, 30*mib + 250*mib*100/97},
		// Right after a collection, 50 MiB of dead objects not swept yet: the objects are at
		// the target already, so the floor (the Pacer sets the limit again once swept).
		{"unswept", Mem{Live: 200 * mib, Mapped: 290 * mib, Objects: 250 * mib, Free: 10 * mib}, 0.25, 285*mib + MinHeadroom},
		// A small heap grows by MinHeadroom at least.
		{"small", Mem{Live: 2 * mib, Mapped: 6 * mib, Objects: 2 * mib}, 0.25, 4*mib + (2*mib+MinHeadroom)*100/97},
		// No collection yet: the objects may grow by MinHeadroom.
		{"no live", Mem{Mapped: 3 * mib, Objects: 1 * mib}, 0.25, 3*mib + MinHeadroom},
		// Much free memory (after a load): never so low that the runtime collects at once.
		{"free", Mem{Live: 100 * mib, Mapped: 300 * mib, Objects: 100 * mib, Free: 180 * mib}, 0.25, 210*mib + MinHeadroom},
		// Inconsistent samples (objects and free above mapped) never give a limit below mapped.
		{"odd", Mem{Live: 10 * mib, Mapped: 20 * mib, Objects: 30 * mib, Free: 5 * mib}, 0.25, 20*mib + MinHeadroom},
	}
	for _, c := range cases {
		if got := Limit(c.m, c.g); got != c.want {
			t.Errorf("%s: Limit(%+v, %v) = %d MiB + %d, want %d MiB + %d", c.name, c.m, c.g,
				got/mib, got%mib, c.want/mib, c.want%mib)
		}
	}
}

func read(names ...string) []uint64 {
	s := make([]metrics.Sample, len(names))
	for i, n := range names {
		s[i].Name = n
	}
	metrics.Read(s)
	out := make([]uint64, len(s))
	for i := range s {
		out[i] = s[i].Value.Uint64()
	}
	return out
}

// TestPacer runs a Pacer on this test process: the limit follows the live heap after each
// collection, garbage is collected under the limit, and Stop gives back the runtime's settings.
func TestPacer(t *testing.T) {
	oldGC := debug.SetGCPercent(100)
	defer debug.SetGCPercent(oldGC)
	oldLimit := debug.SetMemoryLimit(1 << 40)
	defer debug.SetMemoryLimit(oldLimit)

	// 64 MiB of live pointers, as a long-lived heap of small objects.
	type node struct {
		next *node
		pad  [48]byte
	}
	var keep []*node
	for range (64 << 20) / 64 {
		keep = append(keep, &node{})
	}

	p := Start(0.25)
	defer p.Stop()
	if got := debug.SetGCPercent(-1); got != -1 {
		t.Fatalf("GOGC while pacing = %d, want off (-1)", got)
	}
	_, sets0 := p.Stats()
	runtime.GC()
	var limit int64
	var sets int
	for deadline := time.Now().Add(10 * time.Second); ; {
		if limit, sets = p.Stats(); sets >= sets0+2 { // after the collection and once swept
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("limit set %d times after a collection, want 2 more than %d", sets, sets0)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := debug.SetMemoryLimit(-1); got != limit {
		t.Errorf("runtime's memory limit %d, the pacer's %d", got, limit)
	}
	// The room the limit leaves for new heap objects: over the memory that stays (other than
	// objects and free heap, which the runtime releases rather than pass the limit) and over the
	// objects there are now. Free heap memory is not room: Limit subtracts it.
	v := read("/gc/heap/live:bytes", "/memory/classes/total:bytes", "/memory/classes/heap/released:bytes",
		"/memory/classes/heap/objects:bytes", "/memory/classes/heap/free:bytes")
	live, mapped, objects, free := v[0], v[1]-v[2], v[3], v[4]
	if live < 64<<20 {
		t.Fatalf("live heap %d MiB, want the 64 MiB kept at least", live>>20)
	}
	other := mapped - objects - free
	headroom := limit - int64(other+objects)
	// The collection came right after Start, sooner than MinGap: the growth doubled (adapt).
	if g := p.Growth(); g != 0.5 {
		t.Errorf("growth after a collection right after Start: %v, want 0.5", g)
	}
	if headroom < int64(live)/4 || headroom > int64(live) {
		t.Errorf("limit %d MiB leaves %d MiB for new objects (%d MiB of objects, %d MiB free, %d MiB other): want about half the live %d MiB",
			limit>>20, headroom>>20, objects>>20, free>>20, other>>20, live>>20)
	}

	// Garbage: 8 times the live heap, in small objects. The pacer collects it, several
	// times, and memory stays near the limit.
	c0 := read("/gc/cycles/total:gc-cycles")[0]
	var peak uint64
	var sink *node
	for i := range (512 << 20) / 64 {
		n := &node{next: sink}
		if i%1024 == 0 {
			sink = nil
			v := read("/memory/classes/total:bytes", "/memory/classes/heap/released:bytes")
			peak = max(peak, v[0]-v[1])
		} else {
			sink = n
		}
	}
	cycles := read("/gc/cycles/total:gc-cycles")[0] - c0
	if cycles < 3 {
		t.Errorf("%d collections for 8 live heaps of garbage, want several", cycles)
	}
	if limit, _ := p.Stats(); peak > uint64(limit)+uint64(limit)/10 {
		t.Errorf("memory peaked at %d MiB, over the limit of %d MiB", peak>>20, limit>>20)
	}
	runtime.KeepAlive(keep)

	p.Stop()
	if got := debug.SetGCPercent(-1); got != 100 {
		t.Errorf("GOGC after Stop = %d, want 100 back", got)
	}
	debug.SetGCPercent(100)
	if got := debug.SetMemoryLimit(-1); got != 1<<40 {
		t.Errorf("memory limit after Stop = %d, want %d back", got, int64(1<<40))
	}
}

func TestAdapt(t *testing.T) {
	for _, tc := range []struct {
		base, growth float64
		gap          time.Duration
		want         float64
	}{
		{0.15, 0.15, time.Second, 0.3},     // collections too close: double
		{0.15, 0.6, MinGap / 2, MaxGrowth}, // up to MaxGrowth
		{0.15, MaxGrowth, time.Second, MaxGrowth},
		{0.15, 0.6, MinGap * 2, 0.6}, // in between: keep
		{0.15, 0.6, MinGap * 5, 0.3}, // far apart: halve
		{0.15, 0.2, time.Hour, 0.15}, // not below the base
		{2, 2, time.Second, 2},       // a base above MaxGrowth stays
	} {
		if got := adapt(tc.base, tc.growth, tc.gap); got != tc.want {
			t.Errorf("adapt(%v, %v, %v) = %v; want %v", tc.base, tc.growth, tc.gap, got, tc.want)
		}
	}
}

// mapped is the memory the runtime holds and has not released.
func mapped() uint64 {
	v := read("/memory/classes/total:bytes", "/memory/classes/heap/released:bytes")
	return v[0] - v[1]
}

// After a spike (a large heap, live at a collection, then garbage), the Pacer collects and
// returns the memory on its own: what the runtime holds comes back within twice what it held
// before the spike, with no allocation to trigger a collection. Without it the limit set during
// the spike kept the garbage for good. (issue 31, N9)
func TestPacerReturnsMemoryAfterSpike(t *testing.T) {
	oldGC := debug.SetGCPercent(100)
	defer debug.SetGCPercent(oldGC)
	oldLimit := debug.SetMemoryLimit(1 << 40)
	defer debug.SetMemoryLimit(oldLimit)
	debug.FreeOSMemory()
	p := start(0.15, 200*time.Millisecond)
	defer p.Stop()
	// collect runs a collection and waits for the Pacer to have seen it.
	collect := func() {
		t.Helper()
		_, sets := p.Stats()
		runtime.GC()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			if _, n := p.Stats(); n > sets {
				return
			}
			if time.Now().After(deadline) {
				t.Fatal("the Pacer did not see the collection")
			}
		}
	}
	collect() // settles the heap as it is
	before := mapped()

	spike := make([][]byte, 0, 256)
	for range 256 {
		spike = append(spike, make([]byte, 1<<20))
	}
	collect() // the spike live at a collection: the limit follows it up
	runtime.KeepAlive(spike)
	spike = nil
	peak := mapped()
	deadline := time.Now().Add(20 * time.Second)
	for mapped() > 2*before+8<<20 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	after := mapped()
	t.Logf("held %d MiB before, %d MiB at the spike, %d MiB after; %d spike collections", before>>20, peak>>20, after>>20, p.Released())
	if after > 2*before+8<<20 {
		t.Errorf("held %d MiB 20 s after the spike; want at most twice the %d MiB before", after>>20, before>>20)
	}
	if p.Released() == 0 {
		t.Error("no spike collection ran")
	}
}

// The settled heap follows the live heap down, not up through a spike's collections (each
// within twice the one before); a heap still large after MaxRechecks spike collections settles
// there. (N9)
func TestSpikeSettles(t *testing.T) {
	const mib = 1 << 20
	p := &Pacer{recheck: time.Hour}
	defer func() {
		if p.pending != nil {
			p.pending.Stop()
		}
	}()
	at := func(live uint64) {
		p.live = live
		p.spike()
	}
	at(10 * mib)
	for _, l := range []uint64{20, 40, 80, 160} { // a spike growing by collections
		at(l * mib)
	}
	if p.settled != 10*mib || p.pending == nil {
		t.Fatalf("settled %d MiB, pending %v; want 10 MiB and a spike collection to come", p.settled/mib, p.pending != nil)
	}
	for range MaxRechecks { // spike collections that find the heap still large
		p.pending.Stop()
		p.pending = nil
		p.rechecks++
		at(160 * mib)
	}
	if p.settled != 160*mib || p.rechecks != 0 {
		t.Errorf("after %d spike collections: settled %d MiB, rechecks %d; want 160 MiB, 0", MaxRechecks, p.settled/mib, p.rechecks)
	}
	at(5 * mib)
	if p.settled != 5*mib {
		t.Errorf("settled %d MiB after the heap shrank to 5; want 5", p.settled/mib)
	}
}
