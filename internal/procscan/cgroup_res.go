package procscan

import (
	"errors"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"github.com/cantal-go/cantal/internal/kfile"
	"github.com/cantal-go/cantal/internal/series"
	"golang.org/x/sys/unix"
)

// A cgroup's resources beyond CPU and memory: block I/O per device (v2 io.stat, v1
// blkio.throttle.io_service_bytes and io_serviced), tasks (pids.current, pids.max), pressure
// stall times (v2 cpu.pressure, memory.pressure, io.pressure) and, for a container, the
// interfaces of its network namespace (/proc/PID/net/dev of one of its processes).

// The per-device and per-interface series of a cgroup.
const (
	ioReadBytes = iota
	ioWriteBytes
	ioReads
	ioWrites
	netRxBytes
	netRxPackets
	netRxErrors
	netRxDrop
	netTxBytes
	netTxPackets
	netTxErrors
	netTxDrop
	labelledNum
)

var labelledMetrics = [labelledNum]struct {
	name, label string
	col         int // the /proc/net/dev column
}{
	ioReadBytes:  {"cgroup.io.read_bytes", "device", 0},
	ioWriteBytes: {"cgroup.io.write_bytes", "device", 0},
	ioReads:      {"cgroup.io.reads", "device", 0},
	ioWrites:     {"cgroup.io.writes", "device", 0},
	netRxBytes:   {"cgroup.net.rx.bytes", "interface", 0},
	netRxPackets: {"cgroup.net.rx.packets", "interface", 1},
	netRxErrors:  {"cgroup.net.rx.errors", "interface", 2},
	netRxDrop:    {"cgroup.net.rx.drop", "interface", 3},
	netTxBytes:   {"cgroup.net.tx.bytes", "interface", 8},
	netTxPackets: {"cgroup.net.tx.packets", "interface", 9},
	netTxErrors:  {"cgroup.net.tx.errors", "interface", 10},
	netTxDrop:    {"cgroup.net.tx.drop", "interface", 11},
}

// Caps: interfaces of one container's network namespace, labelled series kept per cgroup
// (beyond it they are remade), block device names remembered.
const (
	maxIfaces     = 32
	maxLabelled   = 4 * (maxIODevs + maxIfaces)
	maxDevNames   = 1024
	maxNetDevFile = 64 << 10
)

func (t *cgroupTracker) putLabelled(sink series.Sink, name string, cs *cgroupSeries, m int, value string, v uint64) {
	t.key = append(append(append(t.key[:0], byte(m)), 0), value...)
	r := cs.labelled[string(t.key)]
	if r == nil {
		if cs.labelled == nil || len(cs.labelled) >= maxLabelled {
			cs.labelled = map[string]*series.Ref{}
		}
		l := series.Labels{"metric": labelledMetrics[m].name, "cgroup": name, labelledMetrics[m].label: value}
		addContainerLabels(l, cs.info)
		r = sink.Series(l, series.Counter)
		cs.labelled[string(t.key)] = r
	}
	sink.Put(r, v)
}

// readResources reads the I/O, tasks, pressure and network of cgroup name.
func (t *cgroupTracker) readResources(sink series.Sink, name string, cs *cgroupSeries) {
	ci := cs.info
	// Block I/O: the unified io.stat, else v1 blkio's throttle counters (every bio the
	// cgroup issued, with descendants: the _recursive files where the kernel has them).
	t.io = t.io[:0]
	haveIO := false
	if ci.V2Dir != "" {
		if b, ok := t.read(sink, cs, fIOStat, ci.V2Dir); ok {
			var err error
			if t.io, err = parseIOStat(b, t.io); err != nil {
				sink.Problem(ci.V2Dir+"/io.stat", err.Error())
			}
			haveIO = true
		}
	}
	if !haveIO && ci.BlkioDir != "" {
		for _, f := range [...]struct {
			rec, flat int
			ops       bool
		}{{fV1BlkioBytesRec, fV1BlkioBytes, false}, {fV1BlkioOpsRec, fV1BlkioOps, true}} {
			b, ok := t.read(sink, cs, f.rec, ci.BlkioDir)
			if !ok {
				b, ok = t.read(sink, cs, f.flat, ci.BlkioDir)
			}
			if ok {
				var err error
				if t.io, err = parseBlkio(b, t.io, f.ops); err != nil {
					sink.Problem(ci.BlkioDir+"/"+cgFiles[f.rec].name, err.Error())
				}
			}
		}
	}
	for _, d := range t.io {
		dev := t.devName(d.Dev)
		t.putLabelled(sink, name, cs, ioReadBytes, dev, d.RBytes)
		t.putLabelled(sink, name, cs, ioWriteBytes, dev, d.WBytes)
		t.putLabelled(sink, name, cs, ioReads, dev, d.RIOs)
		t.putLabelled(sink, name, cs, ioWrites, dev, d.WIOs)
	}
	// Tasks.
	if ci.V2Dir == "" || !t.readSingle(sink, name, cs, fPidsCurrent, ci.V2Dir, cgPids) {
		if ci.PidsDir != "" && t.readSingle(sink, name, cs, fV1PidsCurrent, ci.PidsDir, cgPids) {
			t.readSingle(sink, name, cs, fV1PidsMax, ci.PidsDir, cgPidsLimit)
		}
	} else {
		t.readSingle(sink, name, cs, fPidsMax, ci.V2Dir, cgPidsLimit)
	}
	// Pressure.
	if ci.V2Dir != "" {
		for _, f := range [...]struct {
			id, some, full int
		}{{fCPUPressure, cgPSICPUSome, cgPSICPUFull}, {fMemPressure, cgPSIMemSome, cgPSIMemFull}, {fIOPressure, cgPSIIOSome, cgPSIIOFull}} {
			b, ok := t.read(sink, cs, f.id, ci.V2Dir)
			if !ok {
				continue
			}
			some, full, haveSome, haveFull, err := parsePressure(b)
			if err != nil {
				sink.Problem(ci.V2Dir+"/"+cgFiles[f.id].name, err.Error())
				continue
			}
			if haveSome {
				t.put(sink, name, cs, f.some, some/1000)
			}
			if haveFull {
				t.put(sink, name, cs, f.full, full/1000)
			}
		}
	}
	if ci.ctrOK && cs.pid > 0 {
		t.netCandidate(sink, name, cs)
	}
}

// devName is the block device name of "major:minor" (the name of Sys/dev/block/<it>'s
// target), or "major:minor" itself when sysfs does not say.
func (t *cgroupTracker) devName(majmin []byte) string {
	if n, ok := t.devNames[string(majmin)]; ok {
		return n
	}
	if t.devNames == nil || len(t.devNames) >= maxDevNames {
		t.devNames = map[string]string{}
	}
	n := string(majmin)
	if target, err := readlink(filepath.Join(t.opt.Sys, "dev", "block", n)); err == nil {
		if b := filepath.Base(target); b != "." && b != "/" {
			n = kfile.ValidString([]byte(b))
		}
	}
	t.devNames[string(majmin)] = n
	return n
}

func readlink(p string) (string, error) {
	buf := make([]byte, 256)
	n, err := unix.Readlink(p, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// Network: a container's interfaces are those of its network namespace, read from
// /proc/PID/net/dev of one of its processes, unless the namespace is the host's (a container
// run with the host's network: its figures are the machine's; the host's is Proc/1's, or the
// agent's own when init's cannot be read).
//
// The containers of one pod (a Kubernetes pod, a podman pod) share the namespace of the pod's
// sandbox (infra) container; counting its interfaces on each would count the pod's traffic
// once per container in any sum. As cAdvisor does, the series go to one cgroup of those in
// the namespace, its owner: the one that owned it in the previous scan while it is still in
// it, else the first by cgroup name (the infra container's when the runtime names it so,
// e.g. Kubernetes' pause container is one of the pod's cgroups). The others get none.
//
// The process is first found through a descriptor of its /proc directory, and its cgroup is
// read through it again: a pid that exited and was reused outside the cgroup is not counted.
// Its net/dev is then kept open (within Options.CgroupKeepOpen) and re-read with pread, while
// the same process's ns/net link names the same namespace at each scan (one readlink). The
// files are the kernel's (procfs), read as it shows them, within a size cap; the interface
// names are the container's choice and are data (cut to valid UTF-8, at most maxIfaces of
// them, lo left out as cAdvisor does).

// netState is what the scan keeps of a container cgroup's network namespace.
type netState struct {
	pid  int        // the process it was found through
	ns   string     // that process's ns/net link, e.g. "net:[4026532999]"
	host bool       // ns is the host's
	dev  kfile.Kept // its net/dev, opened through the process checked
	tmp  bool       // dev is open beyond the budget: closed at the end of the scan
}

// netCand is a container cgroup of this scan in a network namespace of its own.
type netCand struct {
	ns, name string
	cs       *cgroupSeries
}

func (t *cgroupTracker) closeNet(n *netState) {
	if n.dev.Open {
		n.dev.Close()
		if !n.tmp {
			t.kept--
		}
	}
	*n = netState{}
}

// hostNS reports whether the host's network namespace is known, reading it when not (again
// every cgProbeEvery scans when it cannot be read).
func (t *cgroupTracker) hostNS() bool {
	if t.hostNetNS != "" {
		return true
	}
	if t.hostTried != 0 && t.gen-t.hostTried < cgProbeEvery {
		return false
	}
	ns, err := readlink(filepath.Join(t.opt.Proc, "1", "ns", "net"))
	if err != nil {
		if ns, err = readlink(filepath.Join(t.opt.Proc, "self", "ns", "net")); err != nil {
			t.hostTried = t.gen
			return false
		}
	}
	t.hostNetNS = ns
	return true
}

// readlinkAt is readlinkat(2) of a NUL-terminated path, without allocating.
func readlinkAt(dirfd int, path, buf []byte) (int, error) {
	r, _, e := unix.Syscall6(unix.SYS_READLINKAT, uintptr(dirfd), uintptr(unsafe.Pointer(&path[0])),
		uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}

// netCandidate finds the network namespace of cs's process and, unless it is the host's,
// adds cs to this scan's candidates for its network series.
func (t *cgroupTracker) netCandidate(sink series.Sink, name string, cs *cgroupSeries) {
	if !t.hostNS() {
		return
	}
	n := &cs.net
	var lnk [64]byte
	if n.pid == cs.pid && (n.dev.Open || n.host) {
		t.path = append(strconv.AppendInt(append(append(t.path[:0], t.opt.Proc...), '/'), int64(cs.pid), 10), "/ns/net\x00"...)
		if k, err := readlinkAt(unix.AT_FDCWD, t.path, lnk[:]); err == nil && string(lnk[:k]) == n.ns {
			if !n.host {
				t.netCands = append(t.netCands, netCand{ns: n.ns, name: name, cs: cs})
			}
			return
		}
	}
	t.closeNet(n)
	dir, err := unix.Open(filepath.Join(t.opt.Proc, strconv.Itoa(cs.pid)), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return // exited
	}
	defer unix.Close(dir)
	k, err := readlinkAt(dir, []byte("ns/net\x00"), lnk[:])
	if err != nil {
		return
	}
	if string(lnk[:k]) == t.hostNetNS {
		n.pid, n.ns, n.host = cs.pid, t.hostNetNS, true
		return
	}
	b, err := kfile.ReadFileAt(dir, []byte("cgroup\x00"), &t.buf, 1<<16)
	if err != nil {
		return
	}
	if ci, ok := t.byContent[string(b)]; !ok || ci.Name != name {
		return
	}
	fd, err := kfile.OpenAt(dir, []byte("net/dev\x00"))
	if err != nil {
		if !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ESRCH) {
			sink.Problem("/proc/"+strconv.Itoa(cs.pid)+"/net/dev", err.Error())
		}
		return
	}
	n.pid, n.ns, n.dev = cs.pid, string(lnk[:k]), kfile.Kept{FD: fd, Open: true}
	if t.kept < t.opt.CgroupKeepOpen {
		t.kept++
	} else {
		n.tmp = true
	}
	t.netCands = append(t.netCands, netCand{ns: n.ns, name: name, cs: cs})
}

// readNetworks puts the interface counters of each network namespace of this scan's
// candidates on its owner.
func (t *cgroupTracker) readNetworks(sink series.Sink) {
	c := t.netCands
	slices.SortFunc(c, func(a, b netCand) int {
		if r := strings.Compare(a.ns, b.ns); r != 0 {
			return r
		}
		return strings.Compare(a.name, b.name)
	})
	owners := t.netOwnerNext
	if owners == nil {
		owners = map[string]string{}
	}
	clear(owners)
	for i := 0; i < len(c); {
		j, owner := i, i
		prev, had := t.netOwner[c[i].ns]
		for ; j < len(c) && c[j].ns == c[i].ns; j++ {
			if had && c[j].name == prev {
				owner = j
			}
		}
		owners[c[owner].ns] = c[owner].name
		t.readNetDev(sink, c[owner].name, c[owner].cs)
		i = j
	}
	t.netOwner, t.netOwnerNext = owners, t.netOwner
	for _, e := range c {
		if e.cs.net.tmp {
			t.closeNet(&e.cs.net)
		}
	}
}

// readNetDev puts the counters of cs's kept net/dev.
func (t *cgroupTracker) readNetDev(sink series.Sink, name string, cs *cgroupSeries) {
	n := &cs.net
	b, err := kfile.PreadAll(n.dev.FD, &t.buf, maxNetDevFile, false)
	if err == nil {
		t.netdevs, err = kfile.ParseNetDev(b, t.netdevs[:0])
	}
	if err != nil {
		if !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ESRCH) {
			sink.Problem("/proc/"+strconv.Itoa(n.pid)+"/net/dev", err.Error())
		}
		t.closeNet(n)
		return
	}
	k := 0
	for _, d := range t.netdevs {
		if string(d.Name) == "lo" {
			continue
		}
		if k++; k > maxIfaces {
			break
		}
		iface := kfile.ValidString(d.Name)
		for m := netRxBytes; m <= netTxDrop; m++ {
			t.putLabelled(sink, name, cs, m, iface, d.V[labelledMetrics[m].col])
		}
	}
}
