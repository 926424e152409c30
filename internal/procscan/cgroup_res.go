package procscan

import (
	"errors"
	"path/filepath"
	"strconv"

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
	key := strconv.Itoa(m) + "\x00" + value
	r := cs.labelled[key]
	if r == nil {
		if cs.labelled == nil || len(cs.labelled) >= maxLabelled {
			cs.labelled = map[string]*series.Ref{}
		}
		l := series.Labels{"metric": labelledMetrics[m].name, "cgroup": name, labelledMetrics[m].label: value}
		addContainerLabels(l, cs.info)
		r = sink.Series(l, series.Counter)
		cs.labelled[key] = r
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
		if b, ok := t.read(sink, ci.V2Dir, "io.stat"); ok {
			var err error
			if t.io, err = parseIOStat(b, t.io); err != nil {
				sink.Problem(ci.V2Dir+"/io.stat", err.Error())
			}
			haveIO = true
		}
	}
	if !haveIO && ci.BlkioDir != "" {
		for _, f := range [...]struct {
			file string
			ops  bool
		}{{"blkio.throttle.io_service_bytes_recursive", false}, {"blkio.throttle.io_serviced_recursive", true}} {
			b, ok := t.read(sink, ci.BlkioDir, f.file)
			if !ok {
				b, ok = t.read(sink, ci.BlkioDir, f.file[:len(f.file)-len("_recursive")])
			}
			if ok {
				var err error
				if t.io, err = parseBlkio(b, t.io, f.ops); err != nil {
					sink.Problem(ci.BlkioDir+"/"+f.file, err.Error())
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
	for _, dir := range []string{ci.V2Dir, ci.PidsDir} {
		if dir != "" && t.readSingle(sink, name, cs, dir, "pids.current", cgPids) {
			t.readSingle(sink, name, cs, dir, "pids.max", cgPidsLimit)
			break
		}
	}
	// Pressure.
	if ci.V2Dir != "" {
		for _, f := range [...]struct {
			file       string
			some, full int
		}{{"cpu.pressure", cgPSICPUSome, cgPSICPUFull}, {"memory.pressure", cgPSIMemSome, cgPSIMemFull}, {"io.pressure", cgPSIIOSome, cgPSIIOFull}} {
			b, ok := t.read(sink, ci.V2Dir, f.file)
			if !ok {
				continue
			}
			some, full, haveSome, haveFull, err := parsePressure(b)
			if err != nil {
				sink.Problem(ci.V2Dir+"/"+f.file, err.Error())
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
		t.readNetwork(sink, name, cs)
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

// readNetwork puts the interface counters of the network namespace of cs's process, unless
// it is the host's (a container run with the host's network: its figures are the machine's;
// the host's is Proc/1's, or the agent's own when init's cannot be read).
// The process is held by a descriptor of its /proc directory while it is read, and its cgroup
// is read through it again: a pid that exited and was reused outside the cgroup is not
// counted. The files are the kernel's (procfs), read as it shows them, within a size cap; the
// interface names are the container's choice and are data (cut to valid UTF-8, at most
// maxIfaces of them, lo left out as cAdvisor does).
func (t *cgroupTracker) readNetwork(sink series.Sink, name string, cs *cgroupSeries) {
	if t.hostNetNS == "" {
		// init's, else (init's hidden, e.g. a sandbox's pid namespace) the agent's own.
		ns, err := readlink(filepath.Join(t.opt.Proc, "1", "ns", "net"))
		if err != nil {
			if ns, err = readlink(filepath.Join(t.opt.Proc, "self", "ns", "net")); err != nil {
				return
			}
		}
		t.hostNetNS = ns
	}
	dir, err := unix.Open(filepath.Join(t.opt.Proc, strconv.Itoa(cs.pid)), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return // exited
	}
	defer unix.Close(dir)
	buf := make([]byte, 64)
	n, err := unix.Readlinkat(dir, "ns/net", buf)
	if err != nil || string(buf[:n]) == t.hostNetNS {
		return
	}
	b, err := kfile.ReadFileAt(dir, []byte("cgroup\x00"), &t.buf, 1<<16)
	if err != nil {
		return
	}
	if ci, ok := t.byContent[string(b)]; !ok || ci.Name != name {
		return
	}
	b, err = kfile.ReadFileAt(dir, []byte("net/dev\x00"), &t.buf, maxNetDevFile)
	if err != nil {
		if !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ESRCH) {
			sink.Problem("/proc/"+strconv.Itoa(cs.pid)+"/net/dev", err.Error())
		}
		return
	}
	if t.netdevs, err = kfile.ParseNetDev(b, t.netdevs[:0]); err != nil {
		sink.Problem("/proc/"+strconv.Itoa(cs.pid)+"/net/dev", err.Error())
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
