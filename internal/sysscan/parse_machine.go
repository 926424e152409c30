package sysscan

import (
	"bytes"
	"fmt"

	"github.com/cantal-go/cantal/internal/kfile"
)

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

// kv is a named value; Key aliases the parsed buffer.
type kv struct {
	Key []byte
	Val uint64
}

// parseMeminfo parses /proc/meminfo ("MemTotal:       24683620 kB") appending to dst. Values
// with a kB unit are converted to bytes; the others (HugePages_Total) are counts.
func parseMeminfo(b []byte, dst []kv) ([]kv, error) {
	for pos := 0; pos < len(b); {
		var line []byte
		line, pos = kfile.NextLine(b, pos)
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		colon := kfile.IndexByte(line, ':')
		if colon < 0 || len(bytes.TrimSpace(line[:colon])) == 0 {
			return dst, kfile.ParseError("/proc/meminfo", line, kfile.ErrSyntax)
		}
		f, p := kfile.Field(line, colon+1)
		v, err := kfile.ParseUint(f)
		if err != nil {
			return dst, kfile.ParseError("/proc/meminfo", line, err)
		}
		unit, _ := kfile.Field(line, p)
		switch string(unit) {
		case "":
		case "kB":
			if v > (1<<64-1)/1024 {
				return dst, kfile.ParseError("/proc/meminfo", line, kfile.ErrRange)
			}
			v *= 1024
		default:
			return dst, kfile.ParseError("/proc/meminfo", line, fmt.Errorf("unknown unit %q", unit))
		}
		dst = append(dst, kv{Key: bytes.TrimSpace(line[:colon]), Val: v})
	}
	return dst, nil
}

// loadAvg is /proc/loadavg.
type loadAvg struct {
	Load1, Load5, Load15 float64
	Runnable, Total      uint64 // scheduling entities (tasks)
	LastPID              uint64
}

// parseLoadAvg parses "0.80 0.46 0.18 1/87 8106".
func parseLoadAvg(b []byte) (loadAvg, error) {
	var l loadAvg
	var f []byte
	p := 0
	for _, dst := range []*float64{&l.Load1, &l.Load5, &l.Load15} {
		f, p = kfile.Field(b, p)
		v, err := kfile.ParseDecimal(f)
		if err != nil {
			return l, kfile.ParseError("/proc/loadavg", b, err)
		}
		*dst = v
	}
	f, p = kfile.Field(b, p)
	slash := kfile.IndexByte(f, '/')
	if slash < 0 {
		return l, kfile.ParseError("/proc/loadavg", b, kfile.ErrSyntax)
	}
	var err1, err2, err3 error
	l.Runnable, err1 = kfile.ParseUint(f[:slash])
	l.Total, err2 = kfile.ParseUint(f[slash+1:])
	f, _ = kfile.Field(b, p)
	l.LastPID, err3 = kfile.ParseUint(f)
	for _, err := range []error{err1, err2, err3} {
		if err != nil {
			return l, kfile.ParseError("/proc/loadavg", b, err)
		}
	}
	return l, nil
}

// parseUptime parses /proc/uptime, "370.95 616.03": seconds since boot and idle seconds summed
// over all CPUs.
func parseUptime(b []byte) (up, idle float64, err error) {
	f, p := kfile.Field(b, 0)
	if up, err = kfile.ParseDecimal(f); err != nil {
		return 0, 0, kfile.ParseError("/proc/uptime", b, err)
	}
	f, _ = kfile.Field(b, p)
	if idle, err = kfile.ParseDecimal(f); err != nil {
		return 0, 0, kfile.ParseError("/proc/uptime", b, err)
	}
	return up, idle, nil
}

// fileNr is /proc/sys/fs/file-nr.
type fileNr struct {
	Allocated, Free, Max uint64
}

// parseFileNr parses "486	0	2466167".
func parseFileNr(b []byte) (fileNr, error) {
	var r fileNr
	p := 0
	for _, dst := range []*uint64{&r.Allocated, &r.Free, &r.Max} {
		var f []byte
		f, p = kfile.Field(b, p)
		v, err := kfile.ParseUint(f)
		if err != nil {
			return r, kfile.ParseError("/proc/sys/fs/file-nr", b, err)
		}
		*dst = v
	}
	return r, nil
}

// netDevFields are the columns of /proc/net/dev after the interface name, as series names.
var netDevFields = [...]string{
	"rx.bytes", "rx.packets", "rx.errors", "rx.drop", "rx.fifo", "rx.frame", "rx.compressed", "rx.multicast",
	"tx.bytes", "tx.packets", "tx.errors", "tx.drop", "tx.fifo", "tx.collisions", "tx.carrier", "tx.compressed",
}

// netDev is one interface of /proc/net/dev; Name aliases the parsed buffer.
type netDev struct {
	Name []byte
	V    [len(netDevFields)]uint64
}

// parseNetDev parses /proc/net/dev appending to dst. The two header lines have no colon
// before their first '|' and are skipped.
func parseNetDev(b []byte, dst []netDev) ([]netDev, error) {
	for pos := 0; pos < len(b); {
		var line []byte
		line, pos = kfile.NextLine(b, pos)
		colon := kfile.IndexByte(line, ':')
		if colon < 0 || bytes.IndexByte(line[:colon], '|') >= 0 {
			if len(bytes.TrimSpace(line)) == 0 || kfile.IndexByte(line, '|') >= 0 {
				continue
			}
			return dst, kfile.ParseError("/proc/net/dev", line, kfile.ErrSyntax)
		}
		d := netDev{Name: bytes.TrimSpace(line[:colon])}
		if len(d.Name) == 0 {
			return dst, kfile.ParseError("/proc/net/dev", line, kfile.ErrSyntax)
		}
		p := colon + 1
		for i := range d.V {
			var f []byte
			f, p = kfile.Field(line, p)
			v, err := kfile.ParseUint(f)
			if err != nil {
				return dst, kfile.ParseError("/proc/net/dev", line, err)
			}
			d.V[i] = v
		}
		dst = append(dst, d)
	}
	return dst, nil
}

// netstatEntry is one value of /proc/net/snmp or /proc/net/netstat; Prefix ("Tcp", "TcpExt")
// and Name alias the parsed buffer.
type netstatEntry struct {
	Prefix, Name []byte
	Val          int64
}

// parseNetstat parses the paired header/value lines of /proc/net/snmp and /proc/net/netstat
// ("Tcp: RtoAlgorithm RtoMin ..." then "Tcp: 1 200 ...") appending to dst. Values are signed
// (Tcp MaxConn is -1).
func parseNetstat(b []byte, dst []netstatEntry) ([]netstatEntry, error) {
	for pos := 0; pos < len(b); {
		var head, vals []byte
		head, pos = kfile.NextLine(b, pos)
		if len(bytes.TrimSpace(head)) == 0 {
			continue
		}
		vals, pos = kfile.NextLine(b, pos)
		hp, hv := kfile.Field(head, 0)
		vp, vv := kfile.Field(vals, 0)
		if len(hp) < 2 || hp[len(hp)-1] != ':' || !bytes.Equal(hp, vp) {
			return dst, kfile.ParseError("netstat", head, fmt.Errorf("header and values do not pair"))
		}
		prefix := hp[:len(hp)-1]
		for {
			var k, v []byte
			k, hv = kfile.Field(head, hv)
			v, vv = kfile.Field(vals, vv)
			if k == nil && v == nil {
				break
			}
			if k == nil || v == nil {
				return dst, kfile.ParseError("netstat", head, fmt.Errorf("%d names and values differ in number", len(dst)))
			}
			n, err := kfile.ParseInt(v)
			if err != nil {
				return dst, kfile.ParseError("netstat", vals, err)
			}
			dst = append(dst, netstatEntry{Prefix: prefix, Name: k, Val: n})
		}
	}
	return dst, nil
}

// Columns of /proc/diskstats after major, minor and the device name.
const (
	diskReadOps = iota
	diskReadMerges
	diskReadSectors
	diskReadMs
	diskWriteOps
	diskWriteMerges
	diskWriteSectors
	diskWriteMs
	diskInProgress
	diskIOMs
	diskWeightedMs
	diskDiscardOps // 4.18+
	diskDiscardMerges
	diskDiscardSectors
	diskDiscardMs
	diskFlushOps // 5.5+
	diskFlushMs
	diskFields
)

// diskStat is one line of /proc/diskstats; Name aliases the parsed buffer and N says how many
// of V the kernel printed (11, 15 or 17).
type diskStat struct {
	Name []byte
	N    int
	V    [diskFields]uint64
}

// parseDiskstats parses /proc/diskstats appending to dst.
func parseDiskstats(b []byte, dst []diskStat) ([]diskStat, error) {
	for pos := 0; pos < len(b); {
		var line []byte
		line, pos = kfile.NextLine(b, pos)
		_, p := kfile.Field(line, 0) // major
		if p == 0 || len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		_, p = kfile.Field(line, p) // minor
		var d diskStat
		d.Name, p = kfile.Field(line, p)
		if d.Name == nil {
			return dst, kfile.ParseError("/proc/diskstats", line, kfile.ErrSyntax)
		}
		for d.N < diskFields {
			var f []byte
			f, p = kfile.Field(line, p)
			if f == nil {
				break
			}
			v, err := kfile.ParseUint(f)
			if err != nil {
				return dst, kfile.ParseError("/proc/diskstats", line, err)
			}
			d.V[d.N] = v
			d.N++
		}
		if d.N < diskWeightedMs+1 {
			return dst, kfile.ParseError("/proc/diskstats", line, fmt.Errorf("%d columns, want at least 11", d.N))
		}
		dst = append(dst, d)
	}
	return dst, nil
}

// tcpStates are the names of the kernel's TCP states, indexed by their number in
// /proc/net/tcp's st column.
var tcpStates = [...]string{
	1: "established", 2: "syn_sent", 3: "syn_recv", 4: "fin_wait1", 5: "fin_wait2",
	6: "time_wait", 7: "close", 8: "close_wait", 9: "last_ack", 10: "listen", 11: "closing",
	12: "new_syn_recv",
}

const tcpListen = 10

// tcpSock is what the machine collector keeps of one /proc/net/tcp{,6} line.
type tcpSock struct {
	LocalPort, RemotePort uint16
	State                 uint8
	TxQueue, RxQueue      uint64
	UID                   uint32
}

// parseTCPLine parses one socket line of /proc/net/tcp or /proc/net/tcp6:
//
//	0: 0100007F:0CEA 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000  0 115 ...
//
// ok is false for the header line.
func parseTCPLine(line []byte) (s tcpSock, ok bool, err error) {
	sl, p := kfile.Field(line, 0)
	if len(sl) < 2 || sl[len(sl)-1] != ':' {
		if bytes.Equal(sl, []byte("sl")) {
			return s, false, nil
		}
		return s, false, kfile.ParseError("/proc/net/tcp", line, kfile.ErrSyntax)
	}
	var local, remote, st, queues, uid []byte
	local, p = kfile.Field(line, p)
	remote, p = kfile.Field(line, p)
	st, p = kfile.Field(line, p)
	queues, p = kfile.Field(line, p)
	_, p = kfile.Field(line, p) // tr:tm->when
	_, p = kfile.Field(line, p) // retrnsmt
	uid, _ = kfile.Field(line, p)
	lp, err1 := addrPort(local)
	rp, err2 := addrPort(remote)
	state, err3 := kfile.ParseHex(st)
	colon := kfile.IndexByte(queues, ':')
	if colon < 0 {
		return s, false, kfile.ParseError("/proc/net/tcp", line, kfile.ErrSyntax)
	}
	tx, err4 := kfile.ParseHex(queues[:colon])
	rx, err5 := kfile.ParseHex(queues[colon+1:])
	u, err6 := kfile.ParseUint(uid)
	for _, err := range [...]error{err1, err2, err3, err4, err5, err6} {
		if err != nil {
			return s, false, kfile.ParseError("/proc/net/tcp", line, err)
		}
	}
	if state == 0 || state >= uint64(len(tcpStates)) || u > 1<<32-1 {
		return s, false, kfile.ParseError("/proc/net/tcp", line, kfile.ErrRange)
	}
	return tcpSock{LocalPort: lp, RemotePort: rp, State: uint8(state), TxQueue: tx, RxQueue: rx, UID: uint32(u)}, true, nil
}

// addrPort returns the port of "0100007F:0CEA" (IPv4) or a 32-hex-digit IPv6 address.
func addrPort(b []byte) (uint16, error) {
	colon := kfile.IndexByte(b, ':')
	if (colon != 8 && colon != 32) || len(b) != colon+5 {
		return 0, kfile.ErrSyntax
	}
	v, err := kfile.ParseHex(b[colon+1:])
	return uint16(v), err
}
