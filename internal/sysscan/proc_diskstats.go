package sysscan

// /proc/diskstats: block device counters (Machine).

import (
	"bytes"
	"fmt"

	"github.com/cantal-go/cantal/internal/kfile"
	"github.com/cantal-go/cantal/internal/scanmark"
	"github.com/cantal-go/cantal/internal/series"
)

type diskRefs struct {
	refs          [len(diskSeries)]*series.Ref
	scanmark.Mark // the latest scan that saw it
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

// diskstatsState is what Machine keeps of /proc/diskstats.
type diskstatsState struct {
	disks map[string]*diskRefs
	dstat []diskStat
}
