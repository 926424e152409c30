package sysscan

import (
	"context"
	"fmt"
	"math"
	"path/filepath"

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
