package sysscan

import (
	"context"
	"errors"
	"fmt"

	"github.com/cantal-go/cantal/internal/kfile"
	"github.com/cantal-go/cantal/internal/scanmark"
	"github.com/cantal-go/cantal/internal/series"
	"golang.org/x/sys/unix"
)

// rareEvery is how often (in scans) System re-reads what rarely changes: the boot time, uname,
// os-release and the netclass attributes an administrator sets (mtu, speed, ...). The scans
// between write the last values again. 15 scans are 30 s at the default interval.
const rareEvery = 15

// System is a series.Collector for the machine-wide series beyond Machine's: /proc/vmstat,
// pressure stall information, socket counts, IPv6 protocol counters, connection tracking, the
// kernel clock (adjtimex), entropy, the boot time, network interface attributes
// (/sys/class/net), bonds, CPU frequencies, power supplies, interrupts (with
// Options.Interrupts), uname and os-release. The names are listed in docs/metrics.md.
//
// Each source is read on its own: one that cannot be read or parsed is reported with
// Sink.Problem and the others are still collected; sources the kernel may lack (pressure,
// IPv6, conntrack) give no series and no problem while they are missing, and are looked for
// again every rareEvery scans.
//
// A System keeps its buffers, Refs and open files between scans (Close releases the files);
// Collect and Close must not be called concurrently.
type System struct {
	opt  Options
	gen  uint64
	path []byte
	key  []byte
	buf  []byte
	pf   procFiles // the procSources it reads

	one [sfNum]*series.Ref // single-value files

	procfd   int // Options.Proc, kept open (closed by Close)
	procOpen bool
	nc       netClass
	th       thermal
	hw       hwmon

	lastRare uint64 // the scan that last read the rare sources

	// Each source's state, declared in the source's file.
	vmstatState
	pressureState
	sockstatState
	snmp6State
	mdstatState
	softnetState
	schedstatState
	arpState
	timexState
	btimeState
	identityState
	conntrackStatState
	udpState
	clocksourcesState
	selinuxState
	udevState
	bondingState
	cpufreqState
	powerSupplyState
	interruptsState
}

// stateSeries is a State series whose labels may change: a change registers a new Ref and the
// old one is no longer written, so its series stops.
type stateSeries struct {
	ref    *series.Ref
	labels series.Labels
	text   string
	since  int64
}

// set records labels and text, replacing the Ref when the labels changed.
func (s *stateSeries) set(sink series.Sink, labels series.Labels, text string, since int64) {
	if s.ref == nil || !sameLabels(s.labels, labels) {
		s.ref = sink.Series(labels, series.State)
		s.labels = labels
		s.since = since
	}
	s.text = text
}

func (s *stateSeries) put(sink series.Sink) {
	if s.ref != nil {
		sink.PutState(s.ref, s.since, s.text)
	}
}

func sameLabels(a, b series.Labels) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// NewSystem returns a collector of the kernel and host series reading opt.Proc and opt.Sys.
func NewSystem(opt Options) *System {
	opt = opt.withDefaults()
	s := &System{
		opt:                opt,
		udevState:          udevState{disks: map[string]*diskInfoState{}},
		clocksourcesState:  clocksourcesState{cs: map[string]*clocksourceState{}},
		udpState:           udpState{lr: kfile.LineReader{Buf: make([]byte, 64<<10)}},
		conntrackStatState: conntrackStatState{ct: map[string]*series.Ref{}},
		arpState:           arpState{arp: map[string]*arpRef{}},
		schedstatState:     schedstatState{sched: map[int]*softnetRefs{}},
		softnetState:       softnetState{sn: map[int]*softnetRefs{}},
		mdstatState:        mdstatState{md: map[string]*mdRefs{}},
		snmp6State:         snmp6State{net6: map[string]*series.Ref{}},
		sockstatState:      sockstatState{sock: map[string]*sockRefs{}},
		vmstatState:        vmstatState{vm: map[string]*series.Ref{}},
		buf:                make([]byte, 0, 16<<10),
		nc:                 newNetClass(),
		th:                 newThermal(),
		hw:                 newHwmon(),
	}
	s.udpFn = s.udpLine
	return s
}

// Close closes the files System keeps open between scans. Collect may be called again
// afterwards; it reopens them.
func (s *System) Close() error {
	s.pf.close()
	s.nc.close()
	s.th.close()
	s.closeBonding()
	s.closeCpufreq()
	s.closePowerSupply()
	if s.procOpen {
		unix.Close(s.procfd)
		s.procOpen = false
	}
	return nil
}

// isAbsent reports whether err says a kernel source does not exist here: a missing file, or
// pressure files with psi disabled (EOPNOTSUPP).
func isAbsent(err error) bool {
	return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOTDIR)
}

// Collect implements series.Collector.
func (s *System) Collect(ctx context.Context, sink series.Sink) error {
	if !s.procOpen {
		fd, err := kfile.OpenDir(s.opt.Proc)
		if err != nil {
			return fmt.Errorf("scan system: %w", err)
		}
		s.procfd, s.procOpen = fd, true
	}
	procfd := s.procfd
	s.gen++
	rare := (s.gen-1)%rareEvery == 0
	arpDue := (s.gen-1)%arpEvery == 0
	if err := collectProc(ctx, s, systemOf, func(i int) bool { return i == sfARP && !arpDue || i == sfInterrupts && !s.opt.Interrupts }, &s.pf, procfd, s.opt.Proc, s.gen, rare, sink); err != nil {
		return fmt.Errorf("scan system: %w", err)
	}
	if !arpDue && (s.pf.missing[sfARP] == 0 || rare) {
		s.putARP(sink) // the last counts again
	}
	if rare || !s.btimeOK { // from /proc/stat, read apart (Machine reads it at every scan)
		s.readBtime(procfd, sink)
	}
	if s.btimeOK {
		s.putLevel(sink, &s.btimeRef, "system.boot_time_s", s.btime)
	}
	s.collectUDP(procfd, sink)
	s.collectTimex(sink)
	if rare {
		s.lastRare = s.gen
		s.readIdentity(sink)
		s.readDiskInfo(procfd, sink)
	}
	s.putDiskInfo(sink)
	s.collectClocksources(sink, rare)
	s.collectTimeAndSELinux(sink, rare)
	s.uname.put(sink)
	s.osRel.put(sink)
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("scan system: %w", err)
	}
	scanmark.Sweep(s.md, s.gen, nil)
	scanmark.Sweep(s.sn, s.gen, nil)
	scanmark.Sweep(s.sched, s.gen, nil)
	if !s.opt.Interrupts {
		clear(s.irqs)
	}
	if arpDue {
		scanmark.Sweep(s.arp, s.gen, nil)
	}
	s.nc.collect(s.opt.Sys, sink, s.gen, rare)
	s.th.collect(s.opt.Sys, sink, s.gen, rare)
	s.hw.collect(s.opt.Sys, sink, s.gen, rare)
	s.collectBonding(s.opt.Sys, sink, rare)
	s.collectCpufreq(s.opt.Sys, sink, rare)
	s.collectPowerSupply(s.opt.Sys, sink, rare)
	return ctx.Err()
}

func (s *System) putLevel(sink series.Sink, r **series.Ref, name string, v int64) {
	if *r == nil {
		*r = sink.Series(series.Labels{"metric": name}, series.Level)
	}
	sink.Put(*r, uint64(v))
}
