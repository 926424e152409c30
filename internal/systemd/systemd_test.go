package systemd

import (
	"context"
	"errors"
	"maps"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/series"
	"github.com/coreos/go-systemd/v22/dbus"
	godbus "github.com/godbus/dbus/v5"
)

// fakeManager answers like systemd 252 with a fixed set of units.
type fakeManager struct {
	mu     sync.Mutex
	units  []dbus.UnitStatus // guarded by mu
	types  map[string]string // unit → Type
	state  string
	hang   chan struct{} // when set, ListUnitsContext waits for it or ctx
	closed chan struct{}
	once   sync.Once
}

func (f *fakeManager) ListUnitsContext(ctx context.Context) ([]dbus.UnitStatus, error) {
	if f.hang != nil {
		select {
		case <-f.hang:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.units, nil
}

func (f *fakeManager) GetUnitTypePropertyContext(_ context.Context, unit, iface, prop string) (*dbus.Property, error) {
	t, ok := f.types[unit]
	if !ok || prop != "Type" || (iface == "Service") != strings.HasSuffix(unit, ".service") {
		return nil, errors.New("no such property")
	}
	return &dbus.Property{Name: prop, Value: godbus.MakeVariant(t)}, nil
}

func (f *fakeManager) GetManagerProperty(p string) (string, error) {
	switch p {
	case "Version":
		return `"252.22-1~deb12u1"`, nil
	case "SystemState":
		return `"` + f.state + `"`, nil
	}
	return "", errors.New("no such property")
}

// Close marks the fake closed; the collector makes a connection per read, the tests reuse the
// fake, so the first Close counts.
func (f *fakeManager) Close() {
	f.once.Do(func() {
		if f.closed != nil {
			close(f.closed)
		}
	})
}

func newFake() *fakeManager {
	u := func(name, load, active string) dbus.UnitStatus {
		return dbus.UnitStatus{Name: name, LoadState: load, ActiveState: active}
	}
	return &fakeManager{
		units: []dbus.UnitStatus{
			u("ssh.service", "loaded", "active"),
			u("backup.service", "loaded", "failed"),
			u("nginx.service", "loaded", "reloading"),
			u("ghost.service", "not-found", "inactive"),
			u("apt-daily.timer", "loaded", "active"),
			u("home.mount", "loaded", "active"),
			u("dev-sda.device", "loaded", "active"),
			u("system.slice", "loaded", "active"),
			u("multi-user.target", "loaded", "active"),
		},
		types: map[string]string{"ssh.service": "notify", "backup.service": "oneshot", "nginx.service": "forking", "home.mount": "ext4"},
		state: "degraded",
	}
}

func TestParseVersion(t *testing.T) {
	for _, c := range []struct {
		in      string
		version string
		num     float64
		ok      bool
	}{
		{`"252.22-1~deb12u1"`, "252.22-1~deb12u1", 252.22, true},
		{`"257"`, "257", 257, true},
		{`"v245.4-4ubuntu3"`, "v245.4-4ubuntu3", 245.4, true},
		{`"42"`, "", 0, false},
		{``, "", 0, false},
	} {
		v, n, ok := ParseVersion(c.in)
		if v != c.version || n != c.num || ok != c.ok {
			t.Errorf("ParseVersion(%q) = %q, %v, %v; want %q, %v, %v", c.in, v, n, ok, c.version, c.num, c.ok)
		}
	}
}

func FuzzParseVersion(f *testing.F) {
	for _, s := range []string{`"252.22-1~deb12u1"`, `"257"`, `"v245.4"`, `""`, `"1.2.3"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, n, ok := ParseVersion(s)
		if ok && (n < 0 || math.IsNaN(n) || math.IsInf(n, 0) || !strings.Contains(s, v)) {
			t.Errorf("ParseVersion(%q) = %q, %v", s, v, n)
		}
	})
}

// values returns the recorder's put series as "metric{k=v,...}" → value.
func values(r *series.Recorder) map[string]float64 {
	out := map[string]float64{}
	for key, ref := range r.Refs() {
		v, ok := r.Values[key]
		if !ok {
			continue
		}
		k := ref.Labels["metric"] + "{"
		for _, l := range []string{"name", "state", "type", "version"} {
			if x, ok := ref.Labels[l]; ok && x != "" {
				k += l + "=" + x + ","
			}
		}
		if ref.Kind == series.Float {
			out[k+"}"] = math.Float64frombits(v)
		} else {
			out[k+"}"] = float64(v)
		}
	}
	return out
}

// collectUntil collects until a read has been put (or fails the test after 5 s).
func collectUntil(t *testing.T, c *Collector, r *series.Recorder, cond func(map[string]float64) bool) map[string]float64 {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		clear(r.Values)
		if err := c.Collect(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		v := values(r)
		if cond(v) {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within 5 s: %v; problems %v", v, r.Problems)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestCollectorAsNodeExporter: the series of a read are node_exporter's: five unit_state
// series per loaded unit that is not a mount, device, slice, scope, automount or target, the 1 on its
// ActiveState (none for a state outside the five: nginx reloading), type for services and
// mounts only; units per ActiveState over all units (the five always, others as they come);
// system_running 0 for a degraded system; version with its number.
func TestCollectorAsNodeExporter(t *testing.T) {
	f := newFake()
	c := New(Options{Every: time.Hour, Connect: func(context.Context) (Manager, error) { return f, nil }})
	defer c.Close()
	r := series.NewRecorder()
	got := collectUntil(t, c, r, func(v map[string]float64) bool { return len(v) > 0 })
	want := map[string]float64{
		"systemd.units{state=active,}": 6, "systemd.units{state=failed,}": 1, "systemd.units{state=inactive,}": 1,
		"systemd.units{state=activating,}": 0, "systemd.units{state=deactivating,}": 0, "systemd.units{state=reloading,}": 1,
		"systemd.system_running{}":                   0,
		"systemd.version{version=252.22-1~deb12u1,}": 252.22,
	}
	for _, u := range []struct{ name, typ, active string }{
		{"ssh.service", "notify", "active"}, {"backup.service", "oneshot", "failed"},
		{"nginx.service", "forking", "reloading"}, {"apt-daily.timer", "", "active"},
	} {
		for _, st := range unitStates {
			k := "systemd.unit_state{name=" + u.name + ",state=" + st + ","
			if u.typ != "" {
				k += "type=" + u.typ + ","
			}
			want[k+"}"] = 0
			if st == u.active {
				want[k+"}"] = 1
			}
		}
	}
	if !maps.Equal(got, want) {
		for k, v := range want {
			if g, ok := got[k]; !ok || g != v {
				t.Errorf("%s: got %v (%v), want %v", k, g, ok, v)
			}
		}
		for k, v := range got {
			if _, ok := want[k]; !ok {
				t.Errorf("%s = %v: not wanted", k, v)
			}
		}
	}
}

// TestCollectNeverWaitsForSystemd: with systemd not answering, Collect returns at once every
// time, puts nothing, and reports the read's failure once its deadline has passed; the
// connection of the hung read is closed.
func TestCollectNeverWaitsForSystemd(t *testing.T) {
	f := newFake()
	f.hang, f.closed = make(chan struct{}), make(chan struct{})
	c := New(Options{Every: time.Millisecond, Timeout: 200 * time.Millisecond,
		Connect: func(context.Context) (Manager, error) { return f, nil }})
	defer c.Close()
	r := series.NewRecorder()
	deadline := time.Now().Add(10 * time.Second)
	for {
		start := time.Now()
		if err := c.Collect(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d > 100*time.Millisecond {
			// Not a timing assertion on a fast path: a Collect that waited for the read
			// would take the 200 ms deadline.
			t.Fatalf("Collect took %v with systemd hung", d)
		}
		if len(r.Values) != 0 {
			t.Fatalf("series put without an answer: %v", values(r))
		}
		if len(r.Problems) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no problem reported for the hung read")
		}
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case <-f.closed:
	case <-time.After(5 * time.Second):
		t.Fatal("the hung read's connection was not closed")
	}
}

// TestCollectorForgetsAfterFailure: a read that fails after a good one removes the series (as
// node_exporter's failed collector has none), and a unit that disappears loses its series.
func TestCollectorForgetsAfterFailure(t *testing.T) {
	f := newFake()
	var fail atomic.Bool
	c := New(Options{Every: time.Millisecond, Connect: func(context.Context) (Manager, error) {
		if fail.Load() {
			return nil, errors.New("dial unix /run/dbus/system_bus_socket: connection refused")
		}
		return f, nil
	}})
	defer c.Close()
	r := series.NewRecorder()
	collectUntil(t, c, r, func(v map[string]float64) bool {
		return v["systemd.unit_state{name=ssh.service,state=active,type=notify,}"] == 1
	})
	f.mu.Lock()
	f.units = f.units[1:] // ssh.service gone
	f.mu.Unlock()
	collectUntil(t, c, r, func(v map[string]float64) bool {
		_, ok := v["systemd.unit_state{name=ssh.service,state=active,type=notify,}"]
		return !ok && v["systemd.units{state=active,}"] == 5
	})
	fail.Store(true)
	collectUntil(t, c, r, func(v map[string]float64) bool { return len(v) == 0 && len(r.Problems) > 0 })
}

// BenchmarkCollect is what --systemd costs a scan: the puts of the latest read (here the
// fake's 5 reported units and 8 in the summary: 25 unit_state series); the read itself runs in
// its own goroutine every 10 s.
func BenchmarkCollect(b *testing.B) {
	f := newFake()
	c := New(Options{Every: time.Hour, Connect: func(context.Context) (Manager, error) { return f, nil }})
	defer c.Close()
	sink := &series.Discard{}
	for {
		if err := c.Collect(context.Background(), sink); err != nil {
			b.Fatal(err)
		}
		c.mu.Lock()
		ready := c.latest != nil
		c.mu.Unlock()
		if ready {
			break
		}
		time.Sleep(time.Millisecond)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := c.Collect(context.Background(), sink); err != nil {
			b.Fatal(err)
		}
	}
}
