package sysscan

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strconv"

	"github.com/cantal-go/cantal/internal/kfile"
	"github.com/cantal-go/cantal/internal/scanmark"
	"github.com/cantal-go/cantal/internal/series"
	"golang.org/x/sys/unix"
)

// Machine is a series.Collector for machine-wide series: CPU, memory, load, uptime, open files,
// network interfaces, SNMP/netstat counters, disks and TCP sockets. Each source is read
// independently: a file that cannot be read or parsed is reported with Sink.Problem and the
// others are still collected.
//
// A Machine keeps its buffers, Refs and open files between scans (Close releases the files);
// Collect and Close must not be called concurrently.
type Machine struct {
	opt   Options
	gen   uint64
	path  []byte
	buf   []byte
	files [len(machineFiles)]kfile.Kept

	stat  procStat
	cpu   [len(cpuStates)]*series.Ref
	cpus  map[int]*cpuRefs
	sys   [sysNum]*series.Ref
	mem   map[string]*series.Ref
	kvs   []kv
	ifs   map[string]*ifaceRefs
	devs  []netDev
	net   map[string]*series.Ref
	nets  []netstatEntry
	key   []byte
	disks map[string]*diskRefs
	dstat []diskStat
	tcp   tcpScan
}

// machineFiles are the files Machine reads besides the TCP tables, kept open between scans;
// single marks those the kernel generates in one piece (see kfile.PreadAll).
var machineFiles = [...]struct {
	name   string
	single bool
}{
	{"stat", true}, {"meminfo", true}, {"loadavg", true}, {"uptime", true}, {"sys/fs/file-nr", true},
	{"net/dev", false}, {"net/snmp", true}, {"net/netstat", true}, {"diskstats", false},
}

// Close closes the files Machine keeps open between scans. Collect may be called again
// afterwards; it reopens them.
func (m *Machine) Close() error {
	for i := range m.files {
		m.files[i].Close()
	}
	m.tcp.close()
	return nil
}

type cpuRefs struct {
	refs          [len(cpuStates)]*series.Ref
	scanmark.Mark // the latest scan that saw it
}

type ifaceRefs struct {
	refs          [len(netDevFields)]*series.Ref
	scanmark.Mark // the latest scan that saw it
}

type diskRefs struct {
	refs          [len(diskSeries)]*series.Ref
	scanmark.Mark // the latest scan that saw it
}

// Machine-wide scalar series.
const (
	sysCtxt = iota
	sysIntr
	sysSoftIRQ
	sysForks
	sysRunning
	sysBlocked
	sysLoad1
	sysLoad5
	sysLoad15
	sysTasksRunnable
	sysTasksTotal
	sysUptime
	sysIdle
	sysFilesAllocated
	sysFilesFree
	sysFilesMax
	sysNum
)

var sysMetrics = [sysNum]struct {
	name string
	kind series.Kind
}{
	sysCtxt:           {"system.context_switches", series.Counter},
	sysIntr:           {"system.interrupts", series.Counter},
	sysSoftIRQ:        {"system.softirqs", series.Counter},
	sysForks:          {"system.forks", series.Counter},
	sysRunning:        {"system.procs_running", series.Level},
	sysBlocked:        {"system.procs_blocked", series.Level},
	sysLoad1:          {"system.load_avg_1min", series.Float},
	sysLoad5:          {"system.load_avg_5min", series.Float},
	sysLoad15:         {"system.load_avg_15min", series.Float},
	sysTasksRunnable:  {"system.tasks_runnable", series.Level},
	sysTasksTotal:     {"system.tasks_total", series.Level},
	sysUptime:         {"system.uptime_s", series.Float},
	sysIdle:           {"system.idle_s", series.Float},
	sysFilesAllocated: {"system.files.allocated", series.Level},
	sysFilesFree:      {"system.files.free", series.Level},
	sysFilesMax:       {"system.files.max", series.Level},
}

// diskSeries maps the columns of /proc/diskstats to series; bytes columns are sectors (always
// 512 bytes in this file, whatever the device's sector size) converted to bytes.
var diskSeries = [...]struct {
	col  int
	name string
	kind series.Kind
	mult uint64
}{
	{diskReadOps, "disk.read.ops", series.Counter, 1},
	{diskReadMerges, "disk.read.merges", series.Counter, 1},
	{diskReadSectors, "disk.read.bytes", series.Counter, 512},
	{diskReadMs, "disk.read.time_ms", series.Counter, 1},
	{diskWriteOps, "disk.write.ops", series.Counter, 1},
	{diskWriteMerges, "disk.write.merges", series.Counter, 1},
	{diskWriteSectors, "disk.write.bytes", series.Counter, 512},
	{diskWriteMs, "disk.write.time_ms", series.Counter, 1},
	{diskInProgress, "disk.in_progress", series.Level, 1},
	{diskIOMs, "disk.io_time_ms", series.Counter, 1},
	{diskWeightedMs, "disk.weighted_io_time_ms", series.Counter, 1},
	{diskDiscardOps, "disk.discard.ops", series.Counter, 1},
	{diskDiscardMerges, "disk.discard.merges", series.Counter, 1},
	{diskDiscardSectors, "disk.discard.bytes", series.Counter, 512},
	{diskDiscardMs, "disk.discard.time_ms", series.Counter, 1},
	{diskFlushOps, "disk.flush.ops", series.Counter, 1},
	{diskFlushMs, "disk.flush.time_ms", series.Counter, 1},
}

// netstatLevels are the /proc/net/snmp values that are levels or settings, not counters.
var netstatLevels = map[string]bool{
	"Ip.Forwarding": true, "Ip.DefaultTTL": true,
	"Tcp.RtoAlgorithm": true, "Tcp.RtoMin": true, "Tcp.RtoMax": true, "Tcp.MaxConn": true,
	"Tcp.CurrEstab": true,
}

// NewMachine returns a machine collector reading opt.Proc.
func NewMachine(opt Options) *Machine {
	opt = opt.withDefaults()
	return &Machine{
		opt:   opt,
		buf:   make([]byte, 0, 16<<10),
		cpus:  map[int]*cpuRefs{},
		mem:   map[string]*series.Ref{},
		ifs:   map[string]*ifaceRefs{},
		net:   map[string]*series.Ref{},
		disks: map[string]*diskRefs{},
		tcp:   newTCPScan(),
	}
}

// Collect implements series.Collector.
func (m *Machine) Collect(ctx context.Context, sink series.Sink) error {
	procfd, err := kfile.OpenDir(m.opt.Proc)
	if err != nil {
		return fmt.Errorf("scan machine: %w", err)
	}
	defer unix.Close(procfd)
	m.gen++
	steps := [len(machineFiles)]func(b []byte, sink series.Sink) error{
		m.collectStat, m.collectMeminfo, m.collectLoadAvg, m.collectUptime, m.collectFileNr,
		m.collectNetDev, m.collectNetstat, m.collectNetstat, m.collectDiskstats,
	}
	for i, fn := range steps {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("scan machine: %w", err)
		}
		f := &machineFiles[i]
		m.path = append(append(m.path[:0], f.name...), 0)
		b, err := m.files[i].Read(procfd, m.path, &m.buf, 8<<20, f.single)
		if err == nil {
			err = fn(b, sink)
		}
		if err != nil {
			sink.Problem(filepath.Join(m.opt.Proc, f.name), err.Error())
		}
	}
	if (m.gen-1)%uint64(m.opt.TCPEvery) == 0 { // the first scan (gen 1) included
		m.tcp.collect(ctx, procfd, m.opt.Proc, sink, m.gen)
	} else {
		m.tcp.emit(sink, m.gen) // the last counts again
	}
	scanmark.Sweep(m.cpus, m.gen, nil)
	scanmark.Sweep(m.ifs, m.gen, nil)
	scanmark.Sweep(m.disks, m.gen, nil)
	return ctx.Err()
}

func (m *Machine) putSys(sink series.Sink, i int, v uint64) {
	r := m.sys[i]
	if r == nil {
		r = sink.Series(series.Labels{"metric": sysMetrics[i].name}, sysMetrics[i].kind)
		m.sys[i] = r
	}
	sink.Put(r, v)
}

func (m *Machine) putSysFloat(sink series.Sink, i int, v float64) {
	m.putSys(sink, i, math.Float64bits(v))
}

func (m *Machine) collectStat(b []byte, sink series.Sink) error {
	if err := parseProcStat(b, &m.stat); err != nil {
		return err
	}
	for i, v := range m.stat.Total {
		r := m.cpu[i]
		if r == nil {
			r = sink.Series(series.Labels{"metric": "cpu." + cpuStates[i] + "_ms"}, series.Counter)
			m.cpu[i] = r
		}
		sink.Put(r, m.opt.ticksToMs(v))
	}
	for _, c := range m.stat.CPUs {
		cr := m.cpus[c.CPU]
		if cr == nil {
			cr = &cpuRefs{}
			n := strconv.Itoa(c.CPU)
			for i := range cr.refs {
				cr.refs[i] = sink.Series(series.Labels{"metric": "cpu." + cpuStates[i] + "_ms", "cpu": n}, series.Counter)
			}
			m.cpus[c.CPU] = cr
		}
		cr.See(m.gen)
		for i, v := range c.Times {
			sink.Put(cr.refs[i], m.opt.ticksToMs(v))
		}
	}
	m.putSys(sink, sysCtxt, m.stat.Ctxt)
	m.putSys(sink, sysIntr, m.stat.Intr)
	m.putSys(sink, sysSoftIRQ, m.stat.SoftIRQ)
	m.putSys(sink, sysForks, m.stat.Processes)
	m.putSys(sink, sysRunning, m.stat.ProcsRunning)
	m.putSys(sink, sysBlocked, m.stat.ProcsBlocked)
	return nil
}

func (m *Machine) collectMeminfo(b []byte, sink series.Sink) error {
	var err error
	m.kvs, err = parseMeminfo(b, m.kvs[:0])
	for _, e := range m.kvs {
		r := m.mem[string(e.Key)]
		if r == nil {
			k := string(e.Key)
			r = sink.Series(series.Labels{"metric": "memory." + k}, series.Level)
			m.mem[k] = r
		}
		sink.Put(r, min(e.Val, math.MaxInt64))
	}
	return err
}

func (m *Machine) collectLoadAvg(b []byte, sink series.Sink) error {
	l, err := parseLoadAvg(b)
	if err != nil {
		return err
	}
	m.putSysFloat(sink, sysLoad1, l.Load1)
	m.putSysFloat(sink, sysLoad5, l.Load5)
	m.putSysFloat(sink, sysLoad15, l.Load15)
	m.putSys(sink, sysTasksRunnable, l.Runnable)
	m.putSys(sink, sysTasksTotal, l.Total)
	return nil
}

func (m *Machine) collectUptime(b []byte, sink series.Sink) error {
	up, idle, err := parseUptime(b)
	if err != nil {
		return err
	}
	m.putSysFloat(sink, sysUptime, up)
	m.putSysFloat(sink, sysIdle, idle)
	return nil
}

func (m *Machine) collectFileNr(b []byte, sink series.Sink) error {
	f, err := parseFileNr(b)
	if err != nil {
		return err
	}
	m.putSys(sink, sysFilesAllocated, f.Allocated)
	m.putSys(sink, sysFilesFree, f.Free)
	m.putSys(sink, sysFilesMax, min(f.Max, math.MaxInt64))
	return nil
}

func (m *Machine) collectNetDev(b []byte, sink series.Sink) error {
	var err error
	m.devs, err = parseNetDev(b, m.devs[:0])
	for _, d := range m.devs {
		ir := m.ifs[string(d.Name)]
		if ir == nil {
			ir = &ifaceRefs{}
			name := kfile.ValidString(d.Name)
			for i := range ir.refs {
				ir.refs[i] = sink.Series(series.Labels{"metric": "net.interface." + netDevFields[i], "interface": name}, series.Counter)
			}
			m.ifs[string(d.Name)] = ir
		}
		ir.See(m.gen)
		for i, v := range d.V {
			sink.Put(ir.refs[i], v)
		}
	}
	return err
}

func (m *Machine) collectNetstat(b []byte, sink series.Sink) error {
	var err error
	m.nets, err = parseNetstat(b, m.nets[:0])
	for _, e := range m.nets {
		m.key = append(append(append(m.key[:0], e.Prefix...), '.'), e.Name...)
		r := m.net[string(m.key)]
		if r == nil {
			k := kfile.ValidString(m.key)
			kind := series.Counter
			if netstatLevels[k] {
				kind = series.Level
			}
			r = sink.Series(series.Labels{"metric": "net." + k}, kind)
			m.net[string(m.key)] = r
		}
		if r.Kind == series.Counter && e.Val < 0 {
			continue // not a counter after all; never seen on real kernels
		}
		sink.Put(r, uint64(e.Val))
	}
	return err
}

// skipDisk reports whether a block device is left out: RAM disks and loop devices, which have
// lines even when unused.
func skipDisk(name []byte) bool {
	return hasPrefix(name, "ram") || hasPrefix(name, "loop")
}

func hasPrefix(b []byte, p string) bool { return len(b) >= len(p) && string(b[:len(p)]) == p }

func (m *Machine) collectDiskstats(b []byte, sink series.Sink) error {
	var err error
	m.dstat, err = parseDiskstats(b, m.dstat[:0])
	for i := range m.dstat {
		d := &m.dstat[i]
		if skipDisk(d.Name) {
			continue
		}
		dr := m.disks[string(d.Name)]
		if dr == nil {
			dr = &diskRefs{}
			m.disks[string(d.Name)] = dr
		}
		dr.See(m.gen)
		for j, s := range diskSeries {
			if s.col >= d.N {
				continue
			}
			r := dr.refs[j]
			if r == nil {
				r = sink.Series(series.Labels{"metric": s.name, "device": kfile.ValidString(d.Name)}, s.kind)
				dr.refs[j] = r
			}
			sink.Put(r, d.V[s.col]*s.mult)
		}
	}
	return err
}

// errTCPMissing marks that neither tcp nor tcp6 could be read.
var errTCPMissing = errors.New("no tcp table readable")
