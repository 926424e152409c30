package procscan

import (
	"errors"

	"github.com/cantal-go/cantal/internal/kfile"
	"github.com/cantal-go/cantal/internal/series"
	"golang.org/x/sys/unix"
)

// The files of a cgroup are read at every scan (2 s), for every cgroup that has processes, so
// the steady state of reading them is kept to one system call a file (issue 32: at most 20 µs
// of CPU per container per scan):
//
//   - Each file read at every scan is kept open and re-read with one pread(2) from offset 0,
//     which makes the kernel generate it afresh (cgroupfs files are seq_files), instead of
//     open, read, read and close. Options.CgroupKeepOpen bounds how many are open at once;
//     beyond it a file is opened, read and closed at each scan as before. A cgroup's files are
//     closed when the cgroup has no process left (the scan forgets it) and by Close.
//   - A cgroup removed and made again under the same path (a container restarted with the same
//     id) is told by its kept files: the kernel answers ENODEV for a file of a removed cgroup,
//     and the file is then opened again by its path (where the new cgroup is), with the
//     cgroup's other remembered facts (files missing, limits) forgotten.
//   - A file that is missing (a controller the cgroup does not have, PSI off) is looked for
//     again only every cgProbeEvery scans while the cgroup's directory is there, instead of a
//     failed open at every scan; a controller enabled later shows within that many scans.
//   - The limits (memory.max, memory.limit_in_bytes, pids.max) are read when the cgroup is new
//     and then every cgRareEvery scans, their latest value put at every scan between: a limit
//     changed on a running container (podman update) shows within that many scans.
//
// The paths are the cgroup hierarchy's own (the kernel's names under Sys/fs/cgroup), read
// within the read caps as before; nothing a container controls is followed.

// cgProbeEvery is how many scans apart a missing cgroup file is looked for again (30 s at the
// default interval); cgRareEvery, a limit file read again.
const (
	cgProbeEvery = 15
	cgRareEvery  = 15
)

// cgReadCap caps one cgroup file's read.
const cgReadCap = 1 << 20

// The files of a cgroup, by index in cgroupSeries.files.
const (
	fCPUStat = iota
	fMemCurrent
	fMemMax
	fMemEvents
	fMemStat
	fIOStat
	fPidsCurrent
	fPidsMax
	fCPUPressure
	fMemPressure
	fIOPressure
	fV1MemUsage
	fV1MemLimit
	fV1OOMControl
	fV1MemStat
	fV1CPUAcctUsage
	fV1CPUAcctStat
	fV1CPUStat
	fV1BlkioBytesRec
	fV1BlkioBytes
	fV1BlkioOpsRec
	fV1BlkioOps
	fV1PidsCurrent
	fV1PidsMax
	fNum
)

var cgFiles = [fNum]struct {
	name string
	rare bool // a limit: read every cgRareEvery scans, never kept open
}{
	fCPUStat:         {name: "cpu.stat"},
	fMemCurrent:      {name: "memory.current"},
	fMemMax:          {name: "memory.max", rare: true},
	fMemEvents:       {name: "memory.events"},
	fMemStat:         {name: "memory.stat"},
	fIOStat:          {name: "io.stat"},
	fPidsCurrent:     {name: "pids.current"},
	fPidsMax:         {name: "pids.max", rare: true},
	fCPUPressure:     {name: "cpu.pressure"},
	fMemPressure:     {name: "memory.pressure"},
	fIOPressure:      {name: "io.pressure"},
	fV1MemUsage:      {name: "memory.usage_in_bytes"},
	fV1MemLimit:      {name: "memory.limit_in_bytes", rare: true},
	fV1OOMControl:    {name: "memory.oom_control"},
	fV1MemStat:       {name: "memory.stat"},
	fV1CPUAcctUsage:  {name: "cpuacct.usage"},
	fV1CPUAcctStat:   {name: "cpuacct.stat"},
	fV1CPUStat:       {name: "cpu.stat"},
	fV1BlkioBytesRec: {name: "blkio.throttle.io_service_bytes_recursive"},
	fV1BlkioBytes:    {name: "blkio.throttle.io_service_bytes"},
	fV1BlkioOpsRec:   {name: "blkio.throttle.io_serviced_recursive"},
	fV1BlkioOps:      {name: "blkio.throttle.io_serviced"},
	fV1PidsCurrent:   {name: "pids.current"},
	fV1PidsMax:       {name: "pids.max", rare: true},
}

// cgFile is what the scan keeps of one file of a cgroup.
type cgFile struct {
	kept   kfile.Kept
	dir    string // the directory it was read in (a cgroup's info may change to another)
	absent uint64 // missing: not looked for before this scan
	// A limit's latest read: its value, whether it had one (not "max"), whether the file was
	// there, and the scan to read it again.
	v         uint64
	ok, there bool
	next      uint64
}

// cgFileTable is the files of one cgroup, made on its first read.
type cgFileTable [fNum]cgFile

// read reads file id of the cgroup cs in dir; a missing file (a controller without that file,
// a cgroup removed mid-scan) is reported as ok=false without a problem. The bytes are valid
// until the next read.
func (t *cgroupTracker) read(sink series.Sink, cs *cgroupSeries, id int, dir string) ([]byte, bool) {
	if cs.files == nil {
		cs.files = &cgFileTable{}
	}
	f := &cs.files[id]
	if f.dir != dir {
		t.closeFile(f)
		*f = cgFile{dir: dir}
		if id == fMemEvents {
			t.unwatchEvents(cs)
		}
	}
	if f.absent > t.gen {
		return nil, false
	}
	if f.kept.Open {
		b, err := kfile.PreadAll(f.kept.FD, &t.buf, cgReadCap, true)
		if err == nil {
			return b, true
		}
		t.closeFile(f)
		if id == fMemEvents {
			t.unwatchEvents(cs)
		}
		if !errors.Is(err, unix.ENODEV) {
			sink.Problem(dir+"/"+cgFiles[id].name, err.Error())
			return nil, false
		}
		// The cgroup was removed; one of the same path may be there now, with other files.
		t.forgetFiles(cs)
		f.dir = dir
	}
	t.path = append(append(append(append(t.path[:0], dir...), '/'), cgFiles[id].name...), 0)
	fd, err := kfile.OpenAt(unix.AT_FDCWD, t.path)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			// Missing while its cgroup is there: not looked for again for a while. A cgroup
			// gone is not remembered so (it may come back under this path at once).
			if t.dirThere(cs, dir) {
				f.absent = t.gen + cgProbeEvery
			}
		} else if !errors.Is(err, unix.ENODEV) {
			sink.Problem(dir+"/"+cgFiles[id].name, err.Error())
		}
		return nil, false
	}
	b, err := kfile.PreadAll(fd, &t.buf, cgReadCap, true)
	if err == nil && !cgFiles[id].rare && t.kept < t.opt.CgroupKeepOpen {
		f.kept, t.kept = kfile.Kept{FD: fd, Open: true}, t.kept+1
		if id == fMemEvents {
			t.watchEvents(cs, string(t.path[:len(t.path)-1]))
		}
	} else {
		unix.Close(fd)
	}
	if err != nil {
		if !errors.Is(err, unix.ENODEV) && !errors.Is(err, unix.ENOENT) {
			sink.Problem(dir+"/"+cgFiles[id].name, err.Error())
		}
		return nil, false
	}
	return b, true
}

// dirThere reports whether the directory dir of cs is there (asked when a file is missing),
// once a scan.
func (t *cgroupTracker) dirThere(cs *cgroupSeries, dir string) bool {
	if cs.dir.gen != t.gen || cs.dir.path != dir {
		var st unix.Stat_t
		cs.dir.gen, cs.dir.path, cs.dir.there = t.gen, dir, unix.Stat(dir, &st) == nil
	}
	return cs.dir.there
}

func (t *cgroupTracker) closeFile(f *cgFile) {
	if f.kept.Open {
		f.kept.Close()
		t.kept--
	}
}

// forgetFiles closes cs's files and forgets what was known of them.
func (t *cgroupTracker) forgetFiles(cs *cgroupSeries) {
	t.unwatchEvents(cs)
	if cs.files == nil {
		return
	}
	for i := range cs.files {
		t.closeFile(&cs.files[i])
		cs.files[i] = cgFile{}
	}
}

// closeAll closes every file the tracker keeps open (Processes.Close); the next scan opens
// them again.
func (t *cgroupTracker) closeAll() {
	for _, cs := range t.byName {
		t.forgetFiles(cs)
		t.closeNet(&cs.net)
	}
	t.closeEvents()
}
