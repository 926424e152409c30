package sysscan

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"time"

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
	x        sysExtra
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

var psiResources = [3]string{"cpu", "memory", "io"}

// psiRefs are the series of one line (some or full) of a pressure file.
type psiRefs struct {
	total *series.Ref
	avg   [3]*series.Ref
}

type sockRefs struct {
	val, bytes *series.Ref
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
		x:     newSysExtra(),
		th:    newThermal(),
		hw:    newHwmon(),
	}
	s.x.udpFn = s.x.udpLine
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

// vmstatCounterNr are the nr_* fields of /proc/vmstat that count since boot.
var vmstatCounterNr = map[string]bool{
	"nr_dirtied": true, "nr_written": true, "nr_foll_pin_acquired": true, "nr_foll_pin_released": true,
}

// vmstatKind says whether a /proc/vmstat kfile.Field is a level (nr_* now, workingset_nodes) or an
// event counter (everything else).
func vmstatKind(name string) series.Kind {
	if (len(name) > 3 && name[:3] == "nr_" && !vmstatCounterNr[name]) || name == "workingset_nodes" {
		return series.Level
	}
	return series.Counter
}

func (s *System) collectVmstat(b []byte, sink series.Sink) error {
	var err error
	s.vms, err = parseVmstat(b, s.vms[:0])
	for _, e := range s.vms {
		r := s.vm[string(e.Name)]
		if r == nil {
			k := kfile.ValidString(e.Name)
			r = sink.Series(series.Labels{"metric": "vmstat." + k}, vmstatKind(k))
			s.vm[string(e.Name)] = r
		}
		if r.Kind == series.Counter && e.Val < 0 {
			continue // a counter cannot go below zero; leave a gap
		}
		sink.Put(r, uint64(e.Val))
	}
	return err
}

var psiLineNames = [2]string{"some", "full"}
var psiAvgNames = [3]string{"avg10", "avg60", "avg300"}

func (s *System) collectPressure(res int, b []byte, sink series.Sink) error {
	p, err := parsePressure(b)
	if err != nil {
		return err
	}
	for li, l := range [2]*psiLine{&p.Some, &p.Full} {
		if !l.Present {
			continue
		}
		refs := &s.psi[res][li]
		if refs.total == nil {
			base := "pressure." + psiResources[res] + "." + psiLineNames[li]
			refs.total = sink.Series(series.Labels{"metric": base + "_us"}, series.Counter)
			for j := range refs.avg {
				refs.avg[j] = sink.Series(series.Labels{"metric": base + "_" + psiAvgNames[j]}, series.Float)
			}
		}
		sink.Put(refs.total, l.Total)
		for j, v := range l.Avg {
			sink.Put(refs.avg[j], math.Float64bits(v))
		}
	}
	return nil
}

func (s *System) collectSockstat(b []byte, sink series.Sink) error {
	var err error
	s.socks, err = parseSockstat(b, s.socks[:0])
	for _, e := range s.socks {
		s.key = append(append(append(s.key[:0], e.Proto...), '.'), e.Name...)
		r := s.sock[string(s.key)]
		if r == nil {
			k := kfile.ValidString(s.key)
			r = &sockRefs{val: sink.Series(series.Labels{"metric": "sockstat." + k}, series.Level)}
			if string(e.Name) == "mem" {
				r.bytes = sink.Series(series.Labels{"metric": "sockstat." + k + "_bytes"}, series.Level)
			}
			s.sock[string(s.key)] = r
		}
		sink.Put(r.val, uint64(e.Val))
		if r.bytes != nil {
			sink.Put(r.bytes, uint64(e.Val*int64(s.opt.PageSize)))
		}
	}
	return err
}

func (s *System) collectSNMP6(b []byte, sink series.Sink) error {
	var err error
	s.nets, err = parseSNMP6(b, s.nets[:0])
	for _, e := range s.nets {
		s.key = append(append(append(s.key[:0], e.Prefix...), '.'), e.Name...)
		r := s.net6[string(s.key)]
		if r == nil {
			r = sink.Series(series.Labels{"metric": "net." + kfile.ValidString(s.key)}, series.Counter)
			s.net6[string(s.key)] = r
		}
		if e.Val < 0 {
			continue
		}
		sink.Put(r, uint64(e.Val))
	}
	return err
}

func (s *System) readBtime(procfd int, sink series.Sink) {
	s.path = append(append(s.path[:0], "stat"...), 0)
	b, err := kfile.ReadFileAt(procfd, s.path, &s.buf, 8<<20)
	if err == nil {
		var v int64
		if v, err = kfile.ParseBtime(b); err == nil {
			s.btime, s.btimeOK = v, true
			return
		}
	}
	s.btimeOK = false
	sink.Problem(filepath.Join(s.opt.Proc, "stat"), err.Error())
}

func (s *System) collectTimex(sink series.Sink) {
	state, err := readTimex(&s.tx)
	if err != nil {
		sink.Problem("adjtimex", err.Error())
		return
	}
	v := timexValues(state, &s.tx)
	for i := range v {
		r := s.timex[i]
		if r == nil {
			r = sink.Series(series.Labels{"metric": timexMetrics[i].name}, timexMetrics[i].kind)
			s.timex[i] = r
		}
		sink.Put(r, v[i])
	}
}

// readIdentity reads uname(2) and os-release into their state series.
func (s *System) readIdentity(sink series.Sink) {
	since := time.Now().UnixMilli()
	if s.btimeOK {
		since = s.btime * 1000
	}
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		sink.Problem("uname", err.Error())
	} else {
		l := series.Labels{
			"metric":     "system.uname",
			"sysname":    utsString(u.Sysname[:]),
			"release":    utsString(u.Release[:]),
			"version":    utsString(u.Version[:]),
			"machine":    utsString(u.Machine[:]),
			"nodename":   utsString(u.Nodename[:]),
			"domainname": utsString(u.Domainname[:]),
		}
		s.uname.set(sink, l, l["release"], since)
	}
	var lastErr error
	for _, p := range s.osReleasePaths() {
		b, err := readSmallFile(p, &s.buf, 64<<10)
		if err != nil {
			lastErr = err
			continue
		}
		lastErr = nil
		r, err := parseOSRelease(b)
		if err != nil {
			sink.Problem(p, err.Error())
		}
		l := series.Labels{"metric": "system.os"}
		for i, k := range osReleaseKeys {
			l[toLower(k)] = r.Vals[i]
		}
		s.osRel.set(sink, l, l["pretty_name"], since)
		break
	}
	if lastErr != nil {
		sink.Problem("os-release", lastErr.Error())
	}
}

// osReleasePaths are where os-release(5) is looked for: /etc, then /usr/lib; next to a proc
// root other than /proc (a host's root mounted in a container) when one is set.
func (s *System) osReleasePaths() []string {
	root := s.root()
	return []string{filepath.Join(root, "etc/os-release"), filepath.Join(root, "usr/lib/os-release")}
}

// root is where the host's /etc is looked for: /, or the parent of a proc root other than
// /proc (a host's root mounted in a container).
func (s *System) root() string {
	if s.opt.Proc != "/proc" {
		return filepath.Dir(s.opt.Proc)
	}
	return "/"
}

// readSmallFile reads path whole into *buf, up to limit bytes.
func readSmallFile(path string, buf *[]byte, limit int) ([]byte, error) {
	p := append([]byte(path), 0)
	b, err := kfile.ReadFileAt(unix.AT_FDCWD, p, buf, limit)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return b, nil
}

func utsString(b []byte) string {
	if i := kfile.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return kfile.ValidString(b)
}

func toLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// md series of one array, in the order of mdStates for state and of mdDiskStates for disks.
type mdRefs struct {
	state          [len(mdStates)]*series.Ref
	disks          [len(mdDiskStates)]*series.Ref
	required       *series.Ref
	blocks, synced *series.Ref
	scanmark.Mark  // the latest scan that saw it
}

var mdDiskStates = [...]string{"active", "failed", "spare", "down"}

func (s *System) collectMdstat(b []byte, sink series.Sink) error {
	var err error
	s.mds, err = parseMdstat(b, s.mds[:0])
	for i := range s.mds {
		a := &s.mds[i]
		r := s.md[string(a.Name)]
		if r == nil {
			dev := kfile.ValidString(a.Name)
			r = &mdRefs{}
			for j, st := range mdStates {
				r.state[j] = sink.Series(series.Labels{"metric": "md.state", "device": dev, "state": st}, series.Level)
			}
			for j, st := range mdDiskStates {
				r.disks[j] = sink.Series(series.Labels{"metric": "md.disks", "device": dev, "state": st}, series.Level)
			}
			r.required = sink.Series(series.Labels{"metric": "md.disks_required", "device": dev}, series.Level)
			r.blocks = sink.Series(series.Labels{"metric": "md.blocks", "device": dev}, series.Level)
			r.synced = sink.Series(series.Labels{"metric": "md.blocks_synced", "device": dev}, series.Level)
			s.md[string(a.Name)] = r
		}
		if r.Seen(s.gen) {
			continue // a name twice: keep the first
		}
		r.See(s.gen)
		for j := range r.state {
			sink.Put(r.state[j], boolBits(j == a.State))
		}
		for j, v := range [len(mdDiskStates)]int64{a.Active, a.Failed, a.Spare, a.Down} {
			sink.Put(r.disks[j], uint64(v))
		}
		sink.Put(r.required, uint64(a.Required))
		sink.Put(r.blocks, uint64(a.Blocks))
		sink.Put(r.synced, uint64(a.Synced))
	}
	return err
}

type softnetRefs struct {
	refs          [3]*series.Ref // processed, dropped, times_squeezed
	scanmark.Mark                // the latest scan that saw it
}

var softnetMetrics = [3]string{"softnet.processed", "softnet.dropped", "softnet.times_squeezed"}

func (s *System) collectSoftnet(b []byte, sink series.Sink) error {
	var err error
	s.sns, err = parseSoftnet(b, s.sns[:0])
	for _, c := range s.sns {
		r := s.sn[c.CPU]
		if r == nil {
			r = &softnetRefs{}
			cpu := strconv.Itoa(c.CPU)
			for i, m := range softnetMetrics {
				r.refs[i] = sink.Series(series.Labels{"metric": m, "cpu": cpu}, series.Counter)
			}
			s.sn[c.CPU] = r
		}
		r.See(s.gen)
		sink.Put(r.refs[0], c.Processed)
		sink.Put(r.refs[1], c.Dropped)
		sink.Put(r.refs[2], c.TimeSqueeze)
	}
	return err
}

// arpEvery is how often (in scans) /proc/net/arp is read: the kernel takes ~40 µs of CPU to
// print it, a third of the rest of System's scan; the scans between write the last counts again.
const arpEvery = 5

type arpRef struct {
	ref           *series.Ref
	n             int64
	scanmark.Mark // the latest scan that saw it
}

func (s *System) putARP(sink series.Sink) {
	for _, r := range s.arp {
		sink.Put(r.ref, uint64(r.n))
	}
}

func (s *System) collectARP(b []byte, sink series.Sink) error {
	var err error
	s.arps, err = parseARP(b, s.arps[:0])
	for _, a := range s.arps {
		r := s.arp[string(a.Device)]
		if r == nil {
			r = &arpRef{ref: sink.Series(series.Labels{"metric": "net.arp.entries", "interface": kfile.ValidString(a.Device)}, series.Level)}
			s.arp[string(a.Device)] = r
		}
		r.See(s.gen)
		r.n = a.N
		sink.Put(r.ref, uint64(a.N))
	}
	return err
}

var schedMetrics = [3]string{"schedstat.running_ns", "schedstat.waiting_ns", "schedstat.timeslices"}

func (s *System) collectSchedstat(b []byte, sink series.Sink) error {
	var err error
	s.scs, err = parseSchedstat(b, s.scs[:0])
	for _, c := range s.scs {
		r := s.sched[c.CPU]
		if r == nil {
			r = &softnetRefs{}
			cpu := strconv.Itoa(c.CPU)
			for i, m := range schedMetrics {
				r.refs[i] = sink.Series(series.Labels{"metric": m, "cpu": cpu}, series.Counter)
			}
			s.sched[c.CPU] = r
		}
		r.See(s.gen)
		sink.Put(r.refs[0], c.Running)
		sink.Put(r.refs[1], c.Waiting)
		sink.Put(r.refs[2], c.Timeslices)
	}
	return err
}
