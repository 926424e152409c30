package sysscan

// /proc/stat: CPU times, context switches, interrupts, forks and running and blocked
// tasks (Machine); the boot time (System, every rareEvery scans).

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/cantal-go/cantal/internal/kfile"
	"github.com/cantal-go/cantal/internal/scanmark"
	"github.com/cantal-go/cantal/internal/series"
)

type cpuRefs struct {
	refs          [len(cpuStates)]*series.Ref
	scanmark.Mark // the latest scan that saw it
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

// CPU states in the order of a /proc/stat cpu line, as they appear in series names.
var cpuStates = [...]string{"user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal", "guest", "guest_nice"}

// cpuTimes are the tick counters of one cpu line of /proc/stat, in cpuStates order. Kernels
// older than 2.6.33 print fewer columns; the missing ones stay zero.
type cpuTimes [len(cpuStates)]uint64

// cpuLine is one "cpuN" line.
type cpuLine struct {
	CPU   int
	Times cpuTimes
}

// procStat is what the machine collector keeps of /proc/stat.
type procStat struct {
	Total        cpuTimes
	HasTotal     bool
	CPUs         []cpuLine // reused between parses
	Intr         uint64    // total interrupts serviced
	Ctxt         uint64    // context switches
	Btime        uint64    // boot time, unix seconds
	Processes    uint64    // forks since boot
	ProcsRunning uint64
	ProcsBlocked uint64
	SoftIRQ      uint64
}

// parseProcStat parses /proc/stat into s, reusing s.CPUs.
func parseProcStat(b []byte, s *procStat) error {
	cpus := s.CPUs[:0]
	*s = procStat{}
	for pos := 0; pos < len(b); {
		var line []byte
		line, pos = kfile.NextLine(b, pos)
		name, p := kfile.Field(line, 0)
		if len(name) == 0 {
			continue
		}
		if bytes.HasPrefix(name, []byte("cpu")) {
			var t cpuTimes
			for i := range t {
				var f []byte
				f, p = kfile.Field(line, p)
				if f == nil {
					if i < 4 { // user nice system idle exist on every kernel
						return kfile.ParseError("/proc/stat cpu", line, kfile.ErrSyntax)
					}
					break
				}
				v, err := kfile.ParseUint(f)
				if err != nil {
					return kfile.ParseError("/proc/stat cpu", line, err)
				}
				t[i] = v
			}
			if len(name) == 3 {
				s.Total, s.HasTotal = t, true
				continue
			}
			n, ok := atoiCPU(name[3:])
			if !ok {
				return kfile.ParseError("/proc/stat cpu", line, kfile.ErrSyntax)
			}
			cpus = append(cpus, cpuLine{CPU: n, Times: t})
			continue
		}
		var dst *uint64
		switch string(name) {
		case "intr":
			dst = &s.Intr
		case "ctxt":
			dst = &s.Ctxt
		case "btime":
			dst = &s.Btime
		case "processes":
			dst = &s.Processes
		case "procs_running":
			dst = &s.ProcsRunning
		case "procs_blocked":
			dst = &s.ProcsBlocked
		case "softirq":
			dst = &s.SoftIRQ
		default:
			continue
		}
		f, _ := kfile.Field(line, p)
		v, err := kfile.ParseUint(f)
		if err != nil {
			return kfile.ParseError("/proc/stat", line, err)
		}
		*dst = v
	}
	s.CPUs = cpus
	if !s.HasTotal {
		return fmt.Errorf("parse /proc/stat: no cpu line")
	}
	return nil
}

// atoiCPU parses a cpu number ("0", "17").
func atoiCPU(b []byte) (int, bool) {
	if len(b) == 1 && b[0] == '0' {
		return 0, true
	}
	return kfile.AtoiPositive(b)
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

// procStatState is what Machine keeps of /proc/stat.
type procStatState struct {
	stat procStat
	cpu  [len(cpuStates)]*series.Ref
	cpus map[int]*cpuRefs
}

// btimeState is what System keeps of /proc/stat: the boot time.
type btimeState struct {
	btime    int64
	btimeOK  bool
	btimeRef *series.Ref
}
