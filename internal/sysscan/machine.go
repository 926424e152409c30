package sysscan

import (
	"context"
	"fmt"
	"math"

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
	opt Options
	gen uint64
	pf  procFiles // the procSources it reads

	sys [sysNum]*series.Ref
	tcp tcpScan

	// Each source's state, declared in the source's file.
	procStatState
	meminfoState
	netDevState
	netstatState
	diskstatsState
}

// Close closes the files Machine keeps open between scans. Collect may be called again
// afterwards; it reopens them.
func (m *Machine) Close() error {
	m.pf.close()
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
		opt:            opt,
		diskstatsState: diskstatsState{disks: map[string]*diskRefs{}},
		netstatState:   netstatState{net: map[string]*series.Ref{}},
		netDevState:    netDevState{ifs: map[string]*ifaceRefs{}},
		meminfoState:   meminfoState{mem: map[string]*series.Ref{}},
		procStatState:  procStatState{cpus: map[int]*cpuRefs{}},
		tcp:            newTCPScan(opt.TCPStat),
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
	if err := collectProc(ctx, m, machineOf, nil, &m.pf, procfd, m.opt.Proc, m.gen, false, sink); err != nil {
		return fmt.Errorf("scan machine: %w", err)
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
