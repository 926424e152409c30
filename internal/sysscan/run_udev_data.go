package sysscan

// /run/udev/data/b<major>:<minor> for the disks of /proc/diskstats: disk.info (System, rare
// scans).

import (
	"bytes"
	"path/filepath"
	"strconv"
	"time"

	"github.com/cantal-go/cantal/internal/kfile"
	"github.com/cantal-go/cantal/internal/scanmark"
	"github.com/cantal-go/cantal/internal/series"
)

// diskID is the major, minor and name of a /proc/diskstats line.
type diskID struct {
	Major, Minor uint64
	Name         []byte
}

// parseDiskIDs reads the first three columns of every /proc/diskstats line.
func parseDiskIDs(b []byte, dst []diskID) ([]diskID, error) {
	for pos := 0; pos < len(b); {
		var line []byte
		line, pos = kfile.NextLine(b, pos)
		maj, p := kfile.Field(line, 0)
		if maj == nil {
			continue
		}
		min, p := kfile.Field(line, p)
		name, _ := kfile.Field(line, p)
		if name == nil {
			return dst, kfile.ParseError("/proc/diskstats", line, kfile.ErrSyntax)
		}
		a, err1 := kfile.ParseUint(maj)
		b, err2 := kfile.ParseUint(min)
		if err1 != nil || err2 != nil || a > 1<<32 || b > 1<<32 {
			return dst, kfile.ParseError("/proc/diskstats", line, kfile.ErrSyntax)
		}
		dst = append(dst, diskID{Major: a, Minor: b, Name: name})
	}
	return dst, nil
}

// udevDiskKeys are the udev properties node_exporter puts on node_disk_info, in the order of
// udevDiskLabels.
var (
	udevDiskKeys   = [...]string{"ID_PATH", "ID_WWN", "ID_MODEL", "ID_SERIAL_SHORT", "ID_REVISION"}
	udevDiskLabels = [...]string{"path", "wwn", "model", "serial", "revision"}
)

// parseUdevDisk picks udevDiskKeys out of a udev database file (/run/udev/data/b8:0), whose
// property lines read "E:KEY=value"; other lines are ignored.
func parseUdevDisk(b []byte) [len(udevDiskKeys)]string {
	var r [len(udevDiskKeys)]string
	for pos := 0; pos < len(b); {
		var line []byte
		line, pos = kfile.NextLine(b, pos)
		kv, ok := bytes.CutPrefix(line, []byte("E:"))
		if !ok {
			continue
		}
		k, v, ok := bytes.Cut(kv, []byte("="))
		if !ok {
			continue
		}
		for i, key := range udevDiskKeys {
			if string(k) == key {
				r[i] = kfile.ValidString(v)
			}
		}
	}
	return r
}

type diskInfoState struct {
	st            stateSeries
	scanmark.Mark // the latest scan that saw it
}

// readDiskInfo reads the disks of /proc/diskstats and their udev properties into disk.info
// state series (every rareEvery scans; the scans between write them again).
func (s *System) readDiskInfo(procfd int, sink series.Sink) {
	s.path = append(append(s.path[:0], "diskstats"...), 0)
	b, err := kfile.ReadFileAt(procfd, s.path, &s.buf, 8<<20)
	if err == nil {
		s.dids, err = parseDiskIDs(b, s.dids[:0])
	}
	if err != nil {
		sink.Problem(filepath.Join(s.opt.Proc, "diskstats"), err.Error())
	}
	since := time.Now().UnixMilli()
	for _, d := range s.dids {
		if skipDisk(d.Name) {
			continue
		}
		name := kfile.ValidString(d.Name)
		maj, min := strconv.FormatUint(d.Major, 10), strconv.FormatUint(d.Minor, 10)
		var props [len(udevDiskKeys)]string
		if ub, err := readSmallFile(filepath.Join(s.opt.Udev, "data", "b"+maj+":"+min), &s.ubuf, 1<<20); err == nil {
			props = parseUdevDisk(ub)
		}
		l := series.Labels{"metric": "disk.info", "device": name, "major": maj, "minor": min}
		for i, k := range udevDiskLabels {
			l[k] = props[i]
		}
		di := s.disks[name]
		if di == nil {
			di = &diskInfoState{}
			s.disks[name] = di
		}
		di.See(s.gen)
		di.st.set(sink, l, name, since)
	}
}

// putDiskInfo writes the disk.info states; those of disks gone at the last read stop.
func (s *System) putDiskInfo(sink series.Sink) {
	scanmark.Sweep(s.disks, s.lastRare, nil)
	for _, d := range s.disks {
		d.st.put(sink)
	}
}

// udevState is what System keeps of the disks' udev data.
type udevState struct {
	dids  []diskID
	ubuf  []byte
	disks map[string]*diskInfoState
}
