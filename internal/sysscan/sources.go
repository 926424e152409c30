package sysscan

import (
	"context"
	"path/filepath"

	"github.com/cantal-go/cantal/internal/kfile"
	"github.com/cantal-go/cantal/internal/series"
)

// procSource is one procfs file read whole at every scan through a file kept open between
// scans. The function of the collector that reads it parses the content and puts its series
// (in the source's own file, named after the kernel file).
type procSource struct {
	name     string // relative to Options.Proc
	single   bool   // generated in one piece (see kfile.PreadAll)
	optional bool   // the kernel may lack it: no problem while absent, looked for again every rareEvery scans
	machine  func(m *Machine, b []byte, sink series.Sink) error
	system   func(s *System, b []byte, sink series.Sink) error
}

// Sources of procSources, by index.
const (
	sfStat = iota
	sfMeminfo
	sfLoadavg
	sfUptime
	sfFileNr
	sfNetDev
	sfSNMP
	sfNetstat
	sfDiskstats
	sfVmstat
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
	sfInterrupts
	sfNum
)

// procSources is the one table of the procfs files Machine and System read whole at every scan
// (ARP every arpEvery scans, interrupts with Options.Interrupts only). The sources read otherwise are called by the collectors after it:
// the TCP and UDP socket tables (streamed, or a netlink dump: proc_net_tcp.go, proc_net_udp.go),
// adjtimex(2), and the sysfs, udev and /etc sources, most of them only every rareEvery scans.
var procSources = [sfNum]procSource{
	sfStat:        {name: "stat", single: true, machine: (*Machine).collectStat},
	sfMeminfo:     {name: "meminfo", single: true, machine: (*Machine).collectMeminfo},
	sfLoadavg:     {name: "loadavg", single: true, machine: (*Machine).collectLoadAvg},
	sfUptime:      {name: "uptime", single: true, machine: (*Machine).collectUptime},
	sfFileNr:      {name: "sys/fs/file-nr", single: true, machine: (*Machine).collectFileNr},
	sfNetDev:      {name: "net/dev", machine: (*Machine).collectNetDev},
	sfSNMP:        {name: "net/snmp", single: true, machine: (*Machine).collectNetstat},
	sfNetstat:     {name: "net/netstat", single: true, machine: (*Machine).collectNetstat},
	sfDiskstats:   {name: "diskstats", machine: (*Machine).collectDiskstats},
	sfVmstat:      {name: "vmstat", system: (*System).collectVmstat},
	sfPSICPU:      {name: "pressure/cpu", single: true, optional: true, system: pressure(0)},
	sfPSIMemory:   {name: "pressure/memory", single: true, optional: true, system: pressure(1)},
	sfPSIIO:       {name: "pressure/io", single: true, optional: true, system: pressure(2)},
	sfSockstat:    {name: "net/sockstat", single: true, system: (*System).collectSockstat},
	sfSockstat6:   {name: "net/sockstat6", single: true, optional: true, system: (*System).collectSockstat},
	sfSNMP6:       {name: "net/snmp6", single: true, optional: true, system: (*System).collectSNMP6},
	sfCTCount:     {name: "sys/net/netfilter/nf_conntrack_count", single: true, optional: true, system: oneValue(sfCTCount, "conntrack.entries")},
	sfCTMax:       {name: "sys/net/netfilter/nf_conntrack_max", single: true, optional: true, system: oneValue(sfCTMax, "conntrack.entries_limit")},
	sfEntropy:     {name: "sys/kernel/random/entropy_avail", single: true, system: oneValue(sfEntropy, "system.entropy_avail")},
	sfEntropyPool: {name: "sys/kernel/random/poolsize", single: true, system: oneValue(sfEntropyPool, "system.entropy_pool_size")},
	sfMdstat:      {name: "mdstat", optional: true, system: (*System).collectMdstat},
	sfSoftnet:     {name: "net/softnet_stat", system: (*System).collectSoftnet},
	sfARP:         {name: "net/arp", optional: true, system: (*System).collectARP},
	sfCTStat:      {name: "net/stat/nf_conntrack", optional: true, system: (*System).collectConntrackStat},
	sfSchedstat:   {name: "schedstat", optional: true, system: (*System).collectSchedstat},
	sfInterrupts:  {name: "interrupts", system: (*System).collectInterrupts}, // with Options.Interrupts only
}

// pressure is System's function for the pressure file of resource res (psiResources).
func pressure(res int) func(*System, []byte, series.Sink) error {
	return func(s *System, b []byte, sink series.Sink) error { return s.collectPressure(res, b, sink) }
}

// oneValue is System's function for source i, a file holding one integer, the series metric.
func oneValue(i int, metric string) func(*System, []byte, series.Sink) error {
	return func(s *System, b []byte, sink series.Sink) error {
		v, err := kfile.ParseIntValue(b)
		if err != nil {
			return err
		}
		s.putLevel(sink, &s.one[i], metric, v)
		return nil
	}
}

// procFiles is a collector's side of procSources: the files it keeps open, the optional ones
// found absent (with the scan that last tried them) and its read buffers. It belongs to the
// collector's scan goroutine.
type procFiles struct {
	files   [sfNum]kfile.Kept
	missing [sfNum]uint64
	path    []byte
	buf     []byte
}

// machineOf and systemOf give a source's function for Machine and for System.
func machineOf(src *procSource) func(*Machine, []byte, series.Sink) error { return src.machine }
func systemOf(src *procSource) func(*System, []byte, series.Sink) error   { return src.system }

func (p *procFiles) close() {
	for i := range p.files {
		p.files[i].Close()
	}
}

// collectProc is the one collect loop over procSources, for Machine and System alike: for every
// source that fn gives a function of c for, it reads the file through its kept file and calls
// that function; a file that cannot be read or parsed is reported with Sink.Problem and the
// others are still read. An optional source found absent is skipped, silently, until the next
// rare scan. skip says which of c's sources this scan does not read (nil: none). It returns
// ctx's error when ctx is done between two sources.
func collectProc[C any](ctx context.Context, c C, fn func(*procSource) func(C, []byte, series.Sink) error, skip func(i int) bool,
	p *procFiles, procfd int, proc string, gen uint64, rare bool, sink series.Sink) error {
	for i := range procSources {
		src := &procSources[i]
		put := fn(src)
		if put == nil || skip != nil && skip(i) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if p.missing[i] != 0 && !rare {
			continue
		}
		p.path = append(append(p.path[:0], src.name...), 0)
		b, err := p.files[i].Read(procfd, p.path, &p.buf, 8<<20, src.single)
		if err != nil {
			if src.optional && isAbsent(err) {
				p.missing[i] = gen
				continue
			}
			sink.Problem(filepath.Join(proc, src.name), err.Error())
			continue
		}
		p.missing[i] = 0
		if err := put(c, b, sink); err != nil {
			sink.Problem(filepath.Join(proc, src.name), err.Error())
		}
	}
	return nil
}
