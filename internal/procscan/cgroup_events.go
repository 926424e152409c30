package procscan

import (
	"encoding/binary"
	"errors"

	"golang.org/x/sys/unix"
)

// A v2 cgroup's memory.events (oom, oom_kill, ...) changes only when the kernel counts such an
// event, and the kernel then notifies the file (cgroup_file_notify: inotify IN_MODIFY, at most
// 10 ms late, never dropped). So the scan watches each kept memory.events with one inotify
// instance, drains it once a scan (one read), and re-reads the file only when it was notified,
// answering the figures of its latest read otherwise: one system call less a container a scan.
//
// A file is also read again when:
//   - the kernel log (Options.Kmsg, see oomkmsg.go) reports an OOM kill in the cgroup, so that a
//     kill is never taken as counted by a read that was skipped;
//   - the watch could not be made (inotify unavailable, max_user_watches reached), the queue
//     overflowed (every cgroup is read again), or the kernel dropped the watch (the cgroup was
//     removed);
//   - the cgroup is new, or the file was opened again.

// evWatch is what the scan keeps of the watch on a cgroup's memory.events.
type evWatch struct {
	wd      int32 // the watch, when on
	on      bool
	dirty   bool // notified (or not known unchanged) since the latest read
	have    bool // the latest read is kept below
	oom     uint64
	kill    uint64
	hasOOM  bool
	hasKill bool
}

// inotifyInit opens the tracker's inotify instance once; none when the kernel refuses.
func (t *cgroupTracker) inotifyInit() bool {
	if !t.inoTried {
		t.inoTried = true
		fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
		if err != nil {
			return false
		}
		t.ino, t.inoWD = fd, map[int32]*cgroupSeries{}
	}
	return t.ino >= 0
}

// watchEvents watches cs's memory.events at path (the file just opened and kept).
func (t *cgroupTracker) watchEvents(cs *cgroupSeries, path string) {
	t.unwatchEvents(cs)
	cs.ev = evWatch{dirty: true}
	if !t.inotifyInit() {
		return
	}
	wd, err := unix.InotifyAddWatch(t.ino, path, unix.IN_MODIFY)
	if err != nil {
		return
	}
	if old := t.inoWD[int32(wd)]; old != nil && old != cs {
		old.ev.on, old.ev.dirty = false, true // the same file under another name: one owner
	}
	cs.ev.wd, cs.ev.on = int32(wd), true
	t.inoWD[int32(wd)] = cs
}

// unwatchEvents ends the watch on cs's memory.events, if any.
func (t *cgroupTracker) unwatchEvents(cs *cgroupSeries) {
	if cs.ev.on {
		if t.inoWD[cs.ev.wd] == cs {
			delete(t.inoWD, cs.ev.wd)
			unix.InotifyRmWatch(t.ino, uint32(cs.ev.wd))
		}
		cs.ev.on = false
	}
	cs.ev.dirty, cs.ev.have = true, false
}

// drainEvents marks the cgroups whose memory.events was notified since the previous scan.
func (t *cgroupTracker) drainEvents() {
	if t.ino < 0 {
		return
	}
	if t.inoBuf == nil {
		t.inoBuf = make([]byte, 64<<10)
	}
	for {
		n, err := unix.Read(t.ino, t.inoBuf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || n <= 0 {
			return // EAGAIN: none left
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			wd := int32(binary.NativeEndian.Uint32(t.inoBuf[off:]))
			mask := binary.NativeEndian.Uint32(t.inoBuf[off+4:])
			off += unix.SizeofInotifyEvent + int(binary.NativeEndian.Uint32(t.inoBuf[off+12:]))
			if mask&unix.IN_Q_OVERFLOW != 0 {
				for _, cs := range t.inoWD {
					cs.ev.dirty = true
				}
				continue
			}
			cs := t.inoWD[wd]
			if cs == nil {
				continue
			}
			cs.ev.dirty = true
			if mask&unix.IN_IGNORED != 0 { // the kernel dropped the watch (file removed)
				delete(t.inoWD, wd)
				cs.ev.on = false
			}
		}
	}
}

// closeEvents closes the inotify instance (Processes.Close).
func (t *cgroupTracker) closeEvents() {
	if t.ino >= 0 {
		unix.Close(t.ino)
	}
	for _, cs := range t.inoWD {
		cs.ev.on, cs.ev.dirty, cs.ev.have = false, true, false
	}
	t.ino, t.inoTried, t.inoWD = -1, false, nil
}
