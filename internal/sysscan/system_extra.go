package sysscan

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cantal-go/cantal/internal/kfile"
	"github.com/cantal-go/cantal/internal/scanmark"
	"github.com/cantal-go/cantal/internal/series"
	"golang.org/x/sys/unix"
)

// udpEvery is how often (in scans) System reads /proc/net/udp{,6}: each read walks the
// kernel's UDP hash table; the scans between write the last values again.
const udpEvery = 5

// sysExtra holds what System reads besides its kept files: conntrack statistics, UDP queues,
// clock sources, the time zone and SELinux. Only System's scan goroutine uses it.
type sysExtra struct {
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

	dids  []diskID
	ubuf  []byte
	disks map[string]*diskInfoState
}

type udpQueues struct {
	tx, rx   *series.Ref
	txV, rxV uint64
	ok       bool
}

type clocksourceState struct {
	st            stateSeries
	scanmark.Mark // the latest scan that saw it
}

func newSysExtra() sysExtra {
	return sysExtra{ct: map[string]*series.Ref{}, cs: map[string]*clocksourceState{}, lr: kfile.LineReader{Buf: make([]byte, 64<<10)},
		disks: map[string]*diskInfoState{}}
}

func (s *System) collectConntrackStat(b []byte, sink series.Sink) error {
	x := &s.x
	var err error
	x.cts, err = parseConntrackStat(b, x.cts[:0])
	for _, e := range x.cts {
		r := x.ct[string(e.Name)]
		if r == nil {
			r = sink.Series(series.Labels{"metric": "conntrack.stat." + kfile.ValidString(e.Name)}, series.Counter)
			x.ct[string(e.Name)] = r
		}
		sink.Put(r, uint64(e.Val))
	}
	return err
}

// udpLine adds a line's queues to the sums; the first malformed line's error is kept.
func (x *sysExtra) udpLine(line []byte) {
	t, r, ok, err := parseUDPLine(line)
	if err != nil && x.udpErr == nil {
		x.udpErr = err
	}
	if ok {
		x.udpTx += t
		x.udpRx += r
	}
}

var udpFiles = [2]struct{ name, ip string }{{"net/udp", "v4"}, {"net/udp6", "v6"}}

// collectUDP sums the queues of /proc/net/udp and udp6 every udpEvery scans and writes the
// last sums at every scan.
func (s *System) collectUDP(procfd int, sink series.Sink) {
	x := &s.x
	if (s.gen-1)%udpEvery == 0 {
		for i, f := range udpFiles {
			q := &x.udp[i]
			q.ok = false
			s.path = append(append(s.path[:0], f.name...), 0)
			fd, err := kfile.OpenAt(procfd, s.path)
			if err != nil {
				if i == 0 || !isAbsent(err) {
					sink.Problem(filepath.Join(s.opt.Proc, f.name), err.Error())
				}
				continue
			}
			x.udpTx, x.udpRx, x.udpErr = 0, 0, nil
			err = x.lr.Each(fd, x.udpFn)
			unix.Close(fd)
			if err == nil {
				err = x.udpErr
			}
			if err != nil {
				sink.Problem(filepath.Join(s.opt.Proc, f.name), err.Error())
				continue
			}
			q.txV, q.rxV, q.ok = x.udpTx, x.udpRx, true
		}
	}
	for i := range x.udp {
		q := &x.udp[i]
		if !q.ok {
			continue
		}
		if q.tx == nil {
			q.tx = sink.Series(series.Labels{"metric": "udp.tx_queue", "ip": udpFiles[i].ip}, series.Level)
			q.rx = sink.Series(series.Labels{"metric": "udp.rx_queue", "ip": udpFiles[i].ip}, series.Level)
		}
		sink.Put(q.tx, q.txV)
		sink.Put(q.rx, q.rxV)
	}
}

// collectTimeAndSELinux writes the clock sources, the time zone's offset and SELinux's state;
// what rarely changes is read again when rare is set.
func (s *System) collectTimeAndSELinux(sink series.Sink, rare bool) {
	x := &s.x
	if rare {
		s.readClocksources(sink)
		s.readSELinux()
	}
	scanmark.Sweep(x.cs, s.lastRare, nil)
	for _, c := range x.cs {
		c.st.put(sink)
	}
	name, off := time.Now().Zone()
	if x.tzR == nil || name != x.tz {
		x.tz = name
		x.tzR = sink.Series(series.Labels{"metric": "system.time_zone_offset_s", "time_zone": name}, series.Level)
	}
	sink.Put(x.tzR, uint64(int64(off)))
	for i, r := range x.se {
		if !x.seOK[i] {
			continue
		}
		if r == nil {
			r = sink.Series(series.Labels{"metric": selinuxMetrics[i]}, series.Level)
			x.se[i] = r
		}
		sink.Put(r, uint64(x.seV[i]))
	}
}

var selinuxMetrics = [3]string{"selinux.enabled", "selinux.current_mode", "selinux.config_mode"}

func (s *System) readClocksources(sink series.Sink) {
	x := &s.x
	dir := filepath.Join(s.opt.Sys, "devices/system/clocksource")
	ents, err := os.ReadDir(dir)
	if err != nil {
		if !os.IsNotExist(err) {
			sink.Problem(dir, err.Error())
		}
		return
	}
	since := time.Now().UnixMilli()
	for _, e := range ents {
		dev, ok := strings.CutPrefix(e.Name(), "clocksource")
		if !ok || dev == "" {
			continue
		}
		for _, kind := range [2]string{"available", "current"} {
			b, err := readSmallFile(filepath.Join(dir, e.Name(), kind+"_clocksource"), &s.buf, 4096)
			if err != nil {
				sink.Problem(filepath.Join(dir, e.Name()), err.Error())
				continue
			}
			for _, src := range strings.Fields(kfile.ValidString(b)) {
				key := kind + "\x00" + dev + "\x00" + src
				c := x.cs[key]
				if c == nil {
					c = &clocksourceState{}
					c.st.set(sink, series.Labels{"metric": "system.clocksource." + kind, "device": dev, "clocksource": src}, src, since)
					x.cs[key] = c
				}
				c.See(s.gen)
			}
		}
	}
}

func (s *System) readSELinux() {
	x := &s.x
	x.seOK = [3]bool{true, false, false}
	x.seV = [3]int64{}
	b, err := readSmallFile(filepath.Join(s.opt.Sys, "fs/selinux/enforce"), &s.buf, 64)
	if err != nil {
		return // selinuxfs not mounted: SELinux is disabled
	}
	x.seV[0] = 1
	if v, err := kfile.ParseIntValue(b); err == nil {
		x.seV[1], x.seOK[1] = v, true
	}
	if b, err := readSmallFile(filepath.Join(s.root(), "etc/selinux/config"), &s.buf, 64<<10); err == nil {
		x.seV[2], x.seOK[2] = selinuxMode(b)
	}
}

type diskInfoState struct {
	st            stateSeries
	scanmark.Mark // the latest scan that saw it
}

// readDiskInfo reads the disks of /proc/diskstats and their udev properties into disk.info
// state series (every rareEvery scans; the scans between write them again).
func (s *System) readDiskInfo(procfd int, sink series.Sink) {
	x := &s.x
	s.path = append(append(s.path[:0], "diskstats"...), 0)
	b, err := kfile.ReadFileAt(procfd, s.path, &s.buf, 8<<20)
	if err == nil {
		x.dids, err = parseDiskIDs(b, x.dids[:0])
	}
	if err != nil {
		sink.Problem(filepath.Join(s.opt.Proc, "diskstats"), err.Error())
	}
	since := time.Now().UnixMilli()
	for _, d := range x.dids {
		if skipDisk(d.Name) {
			continue
		}
		name := kfile.ValidString(d.Name)
		maj, min := strconv.FormatUint(d.Major, 10), strconv.FormatUint(d.Minor, 10)
		var props [len(udevDiskKeys)]string
		if ub, err := readSmallFile(filepath.Join(s.opt.Udev, "data", "b"+maj+":"+min), &x.ubuf, 1<<20); err == nil {
			props = parseUdevDisk(ub)
		}
		l := series.Labels{"metric": "disk.info", "device": name, "major": maj, "minor": min}
		for i, k := range udevDiskLabels {
			l[k] = props[i]
		}
		di := x.disks[name]
		if di == nil {
			di = &diskInfoState{}
			x.disks[name] = di
		}
		di.See(s.gen)
		di.st.set(sink, l, name, since)
	}
}

// putDiskInfo writes the disk.info states; those of disks gone at the last read stop.
func (s *System) putDiskInfo(sink series.Sink) {
	scanmark.Sweep(s.x.disks, s.lastRare, nil)
	for _, d := range s.x.disks {
		d.st.put(sink)
	}
}
