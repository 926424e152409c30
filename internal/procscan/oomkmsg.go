package procscan

import (
	"bytes"
	"errors"
	"strings"

	"github.com/cantal-go/cantal/internal/kfile"
	"github.com/cantal-go/cantal/internal/series"
	"golang.org/x/sys/unix"
)

// OOM kills of containers gone by the next scan
//
// A container's cgroup.memory.oom_kill comes from its cgroup (memory.events, v1
// memory.oom_control), read once a scan. A container OOM-killed after one scan and removed
// before the next takes its cgroup, and the kill, with it. The kernel also logs every OOM kill
// to /dev/kmsg with the killed task's memory cgroup ("oom-kill:...,task_memcg=/docker/<id>,
// task=...,pid=...,uid=..."), as cAdvisor's oomparser reads it. The tracker reads the new
// records without blocking (Options.Kmsg), just before it reads each container's memory files
// and once more at the end of a scan:
//
//   - a kill of a container whose files this scan has not read yet is ignored: the read counts it
//     (the kernel logs the kill before it counts it, and the read comes after the log was read);
//   - a kill of a container already read this scan is kept pending: the next read counts it,
//     and the pending kill is dropped then;
//   - when a container's cgroup is gone, its oom_kill series is kept for tombScans scans as a
//     tombstone: the count its last read gave, plus its pending kills, plus the kills logged
//     after, written each scan. A kill of a container no scan saw (started and killed within
//     one interval) starts a tombstone named as the runtime's state still names it.
//
// Only the kernel's own records count (syslog facility 0): a process that may write to
// /dev/kmsg writes user-facility records. The cgroup path in a record is the kernel's.

// Caps and lengths: records read per drain, kills pending per cgroup, tombstones kept, and how
// many scans a tombstone is written for.
const (
	maxKmsgPerDrain = 4096
	maxTombs        = 1024
	tombScans       = 30
)

// tomb is what is kept of a gone container's OOM kills.
type tomb struct {
	ref   *series.Ref
	info  *cgroupInfo
	base  uint64 // oom_kill its last read gave
	kills uint64 // kills logged after that read
	until uint64 // the last scan it is written in
}

// openKmsg opens Options.Kmsg once, positioned after the records already logged. A kmsg that
// cannot be opened (not root, no such device) disables the watch without a problem.
func (t *cgroupTracker) openKmsg() {
	if t.kmsgTried || t.opt.Kmsg == "" {
		return
	}
	t.kmsgTried = true
	fd, err := unix.Open(t.opt.Kmsg, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	unix.Seek(fd, 0, unix.SEEK_END)
	t.kmsgFD = fd
	t.kmsgBuf = make([]byte, 8192)
}

// drainKmsg reads the records logged since the last drain and applies their OOM kills (see
// above). gen is the scan.
func (t *cgroupTracker) drainKmsg(gen uint64) {
	if t.kmsgFD < 0 {
		return
	}
	for range maxKmsgPerDrain {
		n, err := unix.Read(t.kmsgFD, t.kmsgBuf)
		if errors.Is(err, unix.EPIPE) {
			continue // records overwritten before they were read: go on from the oldest kept
		}
		if err != nil || n <= 0 {
			if err != nil && !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EINTR) {
				unix.Close(t.kmsgFD)
				t.kmsgFD = -1
			}
			return
		}
		// /dev/kmsg gives one record a read; a file or pipe (tests) may give several lines.
		for b := t.kmsgBuf[:n]; len(b) > 0; {
			line := b
			if i := bytes.IndexByte(b, '\n'); i >= 0 {
				line, b = b[:i], b[i+1:]
			} else {
				b = nil
			}
			if memcg, ok := parseKmsgOOM(line); ok {
				t.oomKilled(memcg, gen)
			}
		}
	}
}

// parseKmsgOOM returns the memory cgroup path of the task an OOM-kill record of /dev/kmsg
// ("6,1234,567890,-;oom-kill:constraint=CONSTRAINT_MEMCG,...,oom_memcg=/a,task_memcg=/a/b,
// task=x,pid=1,uid=0") says was killed, and whether the line is such a record of the kernel's
// own (facility 0). Continuation lines (" KEY=value") and other records are not. The task's
// cgroup is within oom_memcg's: of the ways a path with ",task_memcg=" in its names could
// split the line, the one where it is is taken.
func parseKmsgOOM(line []byte) (string, bool) {
	head, msg, ok := bytes.Cut(line, []byte(";"))
	if !ok {
		return "", false
	}
	pri, _, _ := bytes.Cut(head, []byte(","))
	p, err := kfile.ParseUint(pri)
	if err != nil || p >= 8 { // facility 0 (kernel) only: user records are 8 and above
		return "", false
	}
	s, ok := strings.CutPrefix(string(msg), "oom-kill:")
	if !ok {
		return "", false
	}
	const om, tm, tk = "oom_memcg=", ",task_memcg=", ",task="
	i := strings.Index(s, om)
	if i < 0 {
		return "", false
	}
	rest := s[i+len(om):]
	for off := 0; ; {
		j := strings.Index(rest[off:], tm)
		if j < 0 {
			return "", false
		}
		oom, after := rest[:off+j], rest[off+j+len(tm):]
		k := strings.Index(after, tk)
		if k < 0 {
			return "", false
		}
		task := after[:k]
		if strings.HasPrefix(task, "/") && (task == oom || oom == "/" || strings.HasPrefix(task, oom+"/")) {
			return task, true
		}
		off += j + len(tm)
	}
}

// oomKilled applies a logged OOM kill of a task in memory cgroup path memcg.
func (t *cgroupTracker) oomKilled(memcg string, gen uint64) {
	name, _ := cgroupName([]byte(memcg))
	if name == "" || name == "user" {
		return
	}
	// The outermost cgroup the tracker knows: a container's, not one it made inside.
	for i := 0; i <= len(name); i++ {
		if i < len(name) && name[i] != '.' {
			continue
		}
		pre := name[:i]
		if cs := t.byName[pre]; cs != nil && cs.Seen(gen) && cs.info.ctrOK {
			cs.ev.dirty = true // its memory.events is read again (cgroup_events.go)
			if cs.oomReadGen == gen {
				cs.oomPending++
			}
			return
		}
		if tb := t.tombs[pre]; tb != nil {
			tb.kills++
			tb.until = gen + tombScans
			return
		}
	}
	// A container no scan saw: named as its runtime's state still names it.
	if t.opt.Containers == nil || len(t.tombs) >= maxTombs {
		return
	}
	ci := &cgroupInfo{Name: name}
	t.identify(ci, gen)
	if !ci.ctrOK {
		return
	}
	t.tombs[name] = &tomb{info: ci, kills: 1, until: gen + tombScans}
}

// bury keeps a gone container cgroup's OOM kills as a tombstone.
func (t *cgroupTracker) bury(name string, cs *cgroupSeries, gen uint64) {
	if cs.info == nil || !cs.info.ctrOK || !cs.oomHave || len(t.tombs) >= maxTombs {
		return
	}
	t.tombs[name] = &tomb{ref: cs.refs[cgOOMKill], info: cs.info, base: cs.oomKill,
		kills: cs.oomPending, until: gen + tombScans}
}

// putTombs writes the tombstones' oom_kill series and forgets the expired ones.
func (t *cgroupTracker) putTombs(sink series.Sink, gen uint64) {
	for name, tb := range t.tombs {
		if gen > tb.until {
			delete(t.tombs, name)
			continue
		}
		if tb.kills == 0 {
			continue // nothing logged after its last read: its series ended with it
		}
		if tb.ref == nil {
			l := series.Labels{"metric": cgroupMetrics[cgOOMKill].name, "cgroup": name}
			addContainerLabels(l, tb.info)
			tb.ref = sink.Series(l, cgroupMetrics[cgOOMKill].kind)
		}
		sink.Put(tb.ref, tb.base+tb.kills)
	}
}
