// Package systemd reads the state of systemd's units over D-Bus, as node_exporter's systemd
// collector does (node_systemd_unit_state, node_systemd_units, node_systemd_system_running,
// node_systemd_version), for the agent's --systemd.
//
// D-Bus calls can hang (a busy or wedged systemd, a dbus-daemon that stopped answering), and a
// scan must never wait on them: the units are read by a goroutine of their own, at most one at a
// time, every Options.Every, under Options.Timeout for the whole read (the connection is closed
// when it runs out, which ends any call in flight). Collect only starts that read when one is
// due and puts the latest complete result. A read that fails leaves no series (as node_exporter's
// failed collector) and is reported as a problem.
//
// Collector is a series.Collector: Collect is called by one scan goroutine at a time; the read
// goroutine hands its result over under a mutex. Close waits for a read in flight.
package systemd

import (
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cantal-go/cantal/internal/scanmark"
	"github.com/cantal-go/cantal/internal/series"
	"github.com/coreos/go-systemd/v22/dbus"
)

// Manager is what the collector asks systemd; *dbus.Conn of github.com/coreos/go-systemd/v22/dbus
// is one.
type Manager interface {
	ListUnitsContext(ctx context.Context) ([]dbus.UnitStatus, error)
	GetUnitTypePropertyContext(ctx context.Context, unit, unitType, property string) (*dbus.Property, error)
	GetManagerProperty(property string) (string, error)
	Close()
}

// Options configure a Collector. The zero value reads systemd on the system bus every 10 s with
// a 5 s deadline.
type Options struct {
	// Every is how often the units are read (the scans between put the latest read again);
	// 10 s when zero.
	Every time.Duration
	// Timeout bounds one read, connection included; 5 s when zero.
	Timeout time.Duration
	// Connect opens the connection of one read; nil: the system bus (as node_exporter, which
	// honours DBUS_SYSTEM_BUS_ADDRESS), else systemd's private socket (root only).
	Connect func(ctx context.Context) (Manager, error)
}

// Connect is the default Options.Connect: the system bus, else systemd's private socket (root
// only), as node_exporter's dbus.NewWithContext, with both failures in the error.
func Connect(ctx context.Context) (Manager, error) {
	c, err := dbus.NewSystemConnectionContext(ctx)
	if err == nil {
		return c, nil
	}
	c, err2 := dbus.NewSystemdConnectionContext(ctx)
	if err2 == nil {
		return c, nil
	}
	return nil, fmt.Errorf("connect to systemd: system bus: %w; private socket: %w", err, err2)
}

// unitStates are the ActiveState values node_exporter writes a node_systemd_unit_state series
// for, in its order; node_systemd_units has them even at 0.
var unitStates = [5]string{"active", "activating", "deactivating", "inactive", "failed"}

// defaultExclude is node_exporter 1.5's default --collector.systemd.unit-exclude, as Debian's
// prometheus-node-exporter 1.5.0 has it (target units too: TestSystemdUnitsBesideNodeExporter
// in packaging/build compares with it); its include default, ".+", takes every unit.
var defaultExclude = regexp.MustCompile(`^(?:.+\.(automount|device|mount|scope|slice|target))$`)

// versionRE is how node_exporter finds the number in systemd's Version ("252.22-1~deb12u1").
var versionRE = regexp.MustCompile(`[0-9]{3,}(\.[0-9]+)?`)

// minVersionSystemState is the first systemd with the SystemState property (node_exporter
// asks for it only from there).
const minVersionSystemState = 212

// Unit is one unit of a Snapshot.
type Unit struct {
	Name        string
	ActiveState string
	Type        string // a service's or mount's Type property; "" for other units
}

// Snapshot is one complete read of systemd.
type Snapshot struct {
	Units       []Unit         // the units node_exporter reports: loaded and not excluded, in systemd's order
	Summary     map[string]int // units (all of them) per ActiveState, unitStates always present
	Version     string         // Version without quotes; "" when unknown
	VersionNum  float64        // its number as node_exporter parses it; 0 when unknown
	SystemState string         // SystemState without quotes; "" when not asked (systemd < 212)
}

// Summarize counts units per ActiveState, every state of unitStates included, as
// node_exporter's summarizeUnits.
func Summarize(units []dbus.UnitStatus) map[string]int {
	m := make(map[string]int, len(unitStates))
	for _, s := range unitStates {
		m[s] = 0
	}
	for _, u := range units {
		m[u.ActiveState]++
	}
	return m
}

// Filter returns the units node_exporter 1.5 reports by default: loaded ones whose names are not
// automount, device, mount, scope, slice or target units.
func Filter(units []dbus.UnitStatus) []dbus.UnitStatus {
	var out []dbus.UnitStatus
	for _, u := range units {
		if u.LoadState == "loaded" && !defaultExclude.MatchString(u.Name) {
			out = append(out, u)
		}
	}
	return out
}

// ParseVersion parses the Version manager property as D-Bus gives it (`"252.22-1~deb12u1"`,
// quotes included) as node_exporter does: the version without quotes, and the first run of at
// least three digits with its decimal part as a number. ok is false when there is none.
func ParseVersion(prop string) (version string, num float64, ok bool) {
	version = strings.TrimPrefix(strings.TrimSuffix(prop, `"`), `"`)
	v, err := strconv.ParseFloat(versionRE.FindString(version), 64)
	if err != nil {
		return "", 0, false
	}
	return version, v, true
}

// Read makes one Snapshot from m, within ctx.
func Read(ctx context.Context, m Manager) (*Snapshot, error) {
	s := &Snapshot{}
	if prop, err := m.GetManagerProperty("Version"); err == nil {
		if v, n, ok := ParseVersion(prop); ok {
			s.Version, s.VersionNum = v, n
		}
	}
	all, err := m.ListUnitsContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("list units: %w", err)
	}
	s.Summary = Summarize(all)
	for _, u := range Filter(all) {
		unit := Unit{Name: u.Name, ActiveState: u.ActiveState}
		var iface string
		switch {
		case strings.HasSuffix(u.Name, ".service"):
			iface = "Service"
		case strings.HasSuffix(u.Name, ".mount"):
			iface = "Mount"
		}
		if iface != "" {
			if p, err := m.GetUnitTypePropertyContext(ctx, u.Name, iface, "Type"); err == nil {
				unit.Type, _ = p.Value.Value().(string)
			} else if ctx.Err() != nil {
				return nil, fmt.Errorf("unit %s: %w", u.Name, ctx.Err())
			}
		}
		s.Units = append(s.Units, unit)
	}
	if s.VersionNum >= minVersionSystemState {
		st, err := m.GetManagerProperty("SystemState")
		if err != nil {
			return nil, fmt.Errorf("system state: %w", err)
		}
		s.SystemState = strings.Trim(st, `"`)
	}
	return s, ctx.Err()
}

// Collector is the series.Collector of --systemd (see the package doc).
type Collector struct {
	opt Options

	mu       sync.Mutex
	latest   *Snapshot // guarded by mu; nil: no good read (yet, or the last one failed)
	lastErr  error     // guarded by mu: the last read's failure
	running  bool      // guarded by mu: a read is in flight
	started  time.Time // guarded by mu: when the last read started
	wg       sync.WaitGroup
	closed   bool   // guarded by mu
	gen      uint64 // puts so far, for scanmark; Collect's only
	unitRefs map[string]*unitRefs
	sumRefs  map[string]*stateRef
	runRef   *series.Ref
	verRef   *stateRef
}

type unitRefs struct {
	typ  string
	refs [len(unitStates)]*series.Ref
	scanmark.Mark
}

type stateRef struct {
	key string
	ref *series.Ref
	scanmark.Mark
}

// New returns a collector; the first Collect starts the first read.
func New(opt Options) *Collector {
	if opt.Every <= 0 {
		opt.Every = 10 * time.Second
	}
	if opt.Timeout <= 0 {
		opt.Timeout = 5 * time.Second
	}
	if opt.Connect == nil {
		opt.Connect = Connect
	}
	return &Collector{opt: opt, unitRefs: map[string]*unitRefs{}, sumRefs: map[string]*stateRef{}}
}

// Close waits for a read in flight (at most Options.Timeout) and stops further reads.
func (c *Collector) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.wg.Wait()
	return nil
}

// read is the read goroutine: one Snapshot under the deadline, handed to Collect.
func (c *Collector) read() {
	defer c.wg.Done()
	ctx, cancel := context.WithTimeout(context.Background(), c.opt.Timeout)
	defer cancel()
	var snap *Snapshot
	m, err := c.opt.Connect(ctx)
	if err == nil {
		var once sync.Once
		closeConn := func() { once.Do(m.Close) }
		done := make(chan struct{})
		go func() {
			// GetManagerProperty takes no context: closing the connection at the deadline
			// ends a call that hangs.
			select {
			case <-ctx.Done():
				closeConn()
			case <-done:
			}
		}()
		snap, err = Read(ctx, m)
		close(done)
		closeConn()
		if err == nil && ctx.Err() != nil {
			err = ctx.Err()
		}
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("no answer within %v: %w", c.opt.Timeout, err)
		}
	}
	c.mu.Lock()
	c.running = false
	if err != nil {
		c.latest, c.lastErr = nil, err
	} else {
		c.latest, c.lastErr = snap, nil
	}
	c.mu.Unlock()
}

// Collect implements series.Collector: it starts a read when one is due and none is in flight,
// and puts the latest complete read's series; it never waits for systemd.
func (c *Collector) Collect(ctx context.Context, sink series.Sink) error {
	c.mu.Lock()
	if !c.running && !c.closed && time.Since(c.started) >= c.opt.Every {
		c.running, c.started = true, time.Now()
		c.wg.Add(1)
		go c.read()
	}
	snap, lastErr := c.latest, c.lastErr
	c.mu.Unlock()
	if lastErr != nil {
		sink.Problem("systemd (D-Bus)", lastErr.Error())
	}
	if snap == nil {
		return nil
	}
	c.put(snap, sink)
	return nil
}

// put puts s's series; those of units and states s no longer has are forgotten.
func (c *Collector) put(s *Snapshot, sink series.Sink) {
	c.gen++
	gen := c.gen
	for _, u := range s.Units {
		r := c.unitRefs[u.Name]
		if r == nil || r.typ != u.Type {
			r = &unitRefs{typ: u.Type}
			for i, st := range unitStates {
				r.refs[i] = sink.Series(series.Labels{"metric": "systemd.unit_state", "name": u.Name, "state": st, "type": u.Type}, series.Level)
			}
			c.unitRefs[u.Name] = r
		}
		r.See(gen)
		for i, st := range unitStates {
			v := uint64(0)
			if st == u.ActiveState {
				v = 1
			}
			sink.Put(r.refs[i], v)
		}
	}
	scanmark.Sweep(c.unitRefs, gen, nil)
	for st, n := range s.Summary {
		r := c.sumRefs[st]
		if r == nil {
			r = &stateRef{ref: sink.Series(series.Labels{"metric": "systemd.units", "state": st}, series.Level)}
			c.sumRefs[st] = r
		}
		r.See(gen)
		sink.Put(r.ref, uint64(n))
	}
	scanmark.Sweep(c.sumRefs, gen, nil)
	if s.SystemState != "" {
		if c.runRef == nil {
			c.runRef = sink.Series(series.Labels{"metric": "systemd.system_running"}, series.Level)
		}
		v := uint64(0)
		if s.SystemState == "running" {
			v = 1
		}
		sink.Put(c.runRef, v)
	}
	if s.Version != "" {
		if c.verRef == nil || c.verRef.key != s.Version {
			c.verRef = &stateRef{key: s.Version, ref: sink.Series(series.Labels{"metric": "systemd.version", "version": s.Version}, series.Float)}
		}
		sink.Put(c.verRef.ref, math.Float64bits(s.VersionNum))
	}
}
