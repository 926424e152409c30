package sysscan

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

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
// (/sys/class/net), uname and os-release. The names are listed in docs/metrics.md.
//
// Each source is read on its own: one that cannot be read or parsed is reported with
// Sink.Problem and the others are still collected; sources the kernel may lack (pressure,
// IPv6, conntrack) give no series and no problem while they are missing, and are looked for
// again every rareEvery scans.
//
// A System keeps its buffers, Refs and open files between scans (Close releases the files);
// Collect and Close must not be called concurrently.
type System struct {
	opt   Options
	gen   uint64
	path  []byte
	key   []byte
	buf   []byte
	files [len(systemFiles)]kfile.Kept
	// missing marks the optional files found absent, with the scan they were last tried in.
	missing [len(systemFiles)]uint64

	vm    map[string]*series.Ref
	vms   []nameVal
	psi   [3][2]psiRefs
	sock  map[string]*sockRefs
	socks []sockstatEntry
	net6  map[string]*series.Ref
	md    map[string]*mdRefs
	mds   []mdArray
	sn    map[int]*softnetRefs
	sched map[int]*softnetRefs // same shape: three counters per CPU
	scs   []schedCPU
	sns   []softnetCPU
	arp   map[string]*arpRef
	arps  []arpCount
	nets  []netstatEntry
	one   [len(systemFiles)]*series.Ref // single-value files
	timex [txNum]*series.Ref
	tx    unix.Timex

	btime    int64
	btimeOK  bool
	btimeRef *series.Ref
	uname    stateSeries
	osRel    stateSeries

	procfd   int // Options.Proc, kept open (closed by Close)
	procOpen bool
	nc       netClass
	th       thermal
	hw       hwmon
	// What System reads besides its kept files: conntrack statistics, UDP queues, clock
	// sources, the time zone, SELinux and the disks' udev data.
	ct  map[string]*series.Ref
	cts []nameVal
	lr  kfile.LineReader
	// the sums of the UDP file being read, and udpLine bound once (no allocation per read)
	udpTx, udpRx uint64
	udpErr       error
	udpFn        func([]byte)
	udp          [2]udpQueues
	cs           map[string]*clocksourceState
	tz           string
	tzV          int64
	tzR          *series.Ref
	se           [3]*series.Ref // enabled, current_mode, config_mode
	seV          [3]int64
	seOK         [3]bool

	dids     []diskID
	ubuf     []byte
	disks    map[string]*diskInfoState
	lastRare uint64 // the scan that last read the rare sources
}

// systemFiles are the procfs files System reads, relative to Options.Proc, kept open between
// scans. optional marks those the kernel may lack; one names the series of single-value files.
var systemFiles = [...]struct {
	name     string
	single   bool
	optional bool
	one      string
}{
	sfVmstat:      {name: "vmstat"},
	sfPSICPU:      {name: "pressure/cpu", single: true, optional: true},
	sfPSIMemory:   {name: "pressure/memory", single: true, optional: true},
	sfPSIIO:       {name: "pressure/io", single: true, optional: true},
	sfSockstat:    {name: "net/sockstat", single: true},
	sfSockstat6:   {name: "net/sockstat6", single: true, optional: true},
	sfSNMP6:       {name: "net/snmp6", single: true, optional: true},
	sfCTCount:     {name: "sys/net/netfilter/nf_conntrack_count", single: true, optional: true, one: "conntrack.entries"},
	sfCTMax:       {name: "sys/net/netfilter/nf_conntrack_max", single: true, optional: true, one: "conntrack.entries_limit"},
	sfEntropy:     {name: "sys/kernel/random/entropy_avail", single: true, one: "system.entropy_avail"},
	sfEntropyPool: {name: "sys/kernel/random/poolsize", single: true, one: "system.entropy_pool_size"},
	sfMdstat:      {name: "mdstat", optional: true},
	sfSoftnet:     {name: "net/softnet_stat"},
	sfARP:         {name: "net/arp", optional: true},
	sfCTStat:      {name: "net/stat/nf_conntrack", optional: true},
	sfSchedstat:   {name: "schedstat", optional: true},
	sfStat:        {name: "stat"},
}

const (
	sfVmstat = iota
	sfPSICPU
	sfPSIMemory
	sfPSIIO
	sfSockstat
	sfSockstat6
	sfSNMP6
	sfCTCount
	sfCTMax
	sfEntropy
	sfEntropyPool
	sfMdstat
	sfSoftnet
	sfARP
	sfCTStat
	sfSchedstat
	sfStat // read apart, every rareEvery scans, for btime
)

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
		opt:   opt,
		buf:   make([]byte, 0, 16<<10),
		vm:    map[string]*series.Ref{},
		sock:  map[string]*sockRefs{},
		net6:  map[string]*series.Ref{},
		md:    map[string]*mdRefs{},
		sn:    map[int]*softnetRefs{},
		sched: map[int]*softnetRefs{},
		arp:   map[string]*arpRef{},
		nc:    newNetClass(),
		ct:    map[string]*series.Ref{},
		cs:    map[string]*clocksourceState{},
		lr:    kfile.LineReader{Buf: make([]byte, 64<<10)},
		disks: map[string]*diskInfoState{},
		th:    newThermal(),
		hw:    newHwmon(),
	}
	s.udpFn = s.udpLine
	return s
}

// Close closes the files System keeps open between scans. Collect may be called again
// afterwards; it reopens them.
func (s *System) Close() error {
	for i := range s.files {
		s.files[i].Close()
	}
	s.nc.close()
	s.th.close()
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
	for i := range len(systemFiles) {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("scan system: %w", err)
		}
		f := &systemFiles[i]
		if i == sfStat {
			if rare || !s.btimeOK {
				s.readBtime(procfd, sink)
			}
			if s.btimeOK {
				s.putLevel(sink, &s.btimeRef, "system.boot_time_s", s.btime)
			}
			continue
		}
		if s.missing[i] != 0 && !rare {
			continue
		}
		if i == sfARP && (s.gen-1)%arpEvery != 0 {
			s.putARP(sink) // the last counts again
			continue
		}
		s.path = append(append(s.path[:0], f.name...), 0)
		b, err := s.files[i].Read(procfd, s.path, &s.buf, 8<<20, f.single)
		if err != nil {
			if f.optional && isAbsent(err) {
				s.missing[i] = s.gen
				continue
			}
			sink.Problem(filepath.Join(s.opt.Proc, f.name), err.Error())
			continue
		}
		s.missing[i] = 0
		if err := s.collectFile(i, b, sink); err != nil {
			sink.Problem(filepath.Join(s.opt.Proc, f.name), err.Error())
		}
	}
	s.collectUDP(procfd, sink)
	s.collectTimex(sink)
	if rare {
		s.lastRare = s.gen
		s.readIdentity(sink)
		s.readDiskInfo(procfd, sink)
	}
	s.putDiskInfo(sink)
	s.collectTimeAndSELinux(sink, rare)
	s.uname.put(sink)
	s.osRel.put(sink)
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("scan system: %w", err)
	}
	scanmark.Sweep(s.md, s.gen, nil)
	scanmark.Sweep(s.sn, s.gen, nil)
	scanmark.Sweep(s.sched, s.gen, nil)
	if (s.gen-1)%arpEvery == 0 {
		scanmark.Sweep(s.arp, s.gen, nil)
	}
	s.nc.collect(s.opt.Sys, sink, s.gen, rare)
	s.th.collect(s.opt.Sys, sink, s.gen, rare)
	s.hw.collect(s.opt.Sys, sink, s.gen, rare)
	return ctx.Err()
}

func (s *System) collectFile(i int, b []byte, sink series.Sink) error {
	switch i {
	case sfVmstat:
		return s.collectVmstat(b, sink)
	case sfPSICPU, sfPSIMemory, sfPSIIO:
		return s.collectPressure(i-sfPSICPU, b, sink)
	case sfSockstat, sfSockstat6:
		return s.collectSockstat(b, sink)
	case sfSNMP6:
		return s.collectSNMP6(b, sink)
	case sfMdstat:
		return s.collectMdstat(b, sink)
	case sfSoftnet:
		return s.collectSoftnet(b, sink)
	case sfARP:
		return s.collectARP(b, sink)
	case sfCTStat:
		return s.collectConntrackStat(b, sink)
	case sfSchedstat:
		return s.collectSchedstat(b, sink)
	}
	v, err := kfile.ParseIntValue(b)
	if err != nil {
		return err
	}
	s.putLevel(sink, &s.one[i], systemFiles[i].one, v)
	return nil
}

func (s *System) putLevel(sink series.Sink, r **series.Ref, name string, v int64) {
	if *r == nil {
		*r = sink.Series(series.Labels{"metric": name}, series.Level)
	}
	sink.Put(*r, uint64(v))
}
