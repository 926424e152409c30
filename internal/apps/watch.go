package apps

import (
	"bytes"
	"encoding/binary"
	"errors"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// fullCheckEvery is how often (in scans) a watched group's files are checked with a full
// shm.Reader.Read anyway: inotify does not report everything that changes what a path names
// (an ancestor directory renamed or replaced, a file system without inotify support), so such a
// change is noticed within this many scans. Groups are spread over the scans.
const fullCheckEvery = 10

// watchMask is what makes a group's files worth checking: a file created, renamed in or out,
// deleted, rewritten in place (closed after writing) or given another owner or mode, and the
// directory itself deleted or moved.
const watchMask = unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_MOVED_FROM | unix.IN_DELETE |
	unix.IN_CLOSE_WRITE | unix.IN_ATTRIB | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR

// watcher tells which groups' files may have changed since the previous scan, from inotify
// events on the directories that hold them, so that an unchanged application is read with
// shm.Reader.ReadUnchanged (no system call) instead of Read (an lstat of its .meta): 1000
// applications cost 1000 lstat calls per scan otherwise. It is owned by the collector and used
// on the scan goroutine only.
//
// A group whose directory cannot be watched (inotify unavailable, out of watches, the directory
// missing) is read with Read at every scan, as if there were no watcher. Events only ever cause
// extra checks, never fewer: a lost event (queue overflow) marks every group.
type watcher struct {
	fd   int // inotify instance; -1 before the first use, -2 when unavailable
	dirs map[int32]*watchDir
	buf  []byte
}

type watchDir struct {
	wd    int32
	names map[string][]*group // base name of the files (CANTAL_PATH's last element) → groups
	count int
}

func newWatcher() *watcher {
	return &watcher{fd: -1, dirs: map[int32]*watchDir{}}
}

// add watches the directory of g's files (base is the path the reader uses) and reports
// whether it could.
func (w *watcher) add(g *group, base string) bool {
	if w.fd == -1 {
		fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
		if err != nil {
			w.fd = -2
		} else {
			w.fd = fd
			w.buf = make([]byte, 64<<10)
		}
	}
	if w.fd < 0 {
		return false
	}
	dir, name := filepath.Split(base)
	if dir == "" {
		dir = "."
	}
	wd, err := unix.InotifyAddWatch(w.fd, dir, watchMask)
	if err != nil {
		return false
	}
	d := w.dirs[int32(wd)]
	if d == nil {
		d = &watchDir{wd: int32(wd), names: map[string][]*group{}}
		w.dirs[d.wd] = d
	}
	d.names[name] = append(d.names[name], g)
	d.count++
	g.watch, g.watchName = d, name
	return true
}

// remove stops watching for g; the directory's watch goes when its last group does.
func (w *watcher) remove(g *group) {
	d := g.watch
	if d == nil {
		return
	}
	g.watch = nil
	gs := d.names[g.watchName]
	for i, x := range gs {
		if x == g {
			gs = append(gs[:i], gs[i+1:]...)
			break
		}
	}
	if len(gs) == 0 {
		delete(d.names, g.watchName)
	} else {
		d.names[g.watchName] = gs
	}
	if d.count--; d.count == 0 {
		delete(w.dirs, d.wd)
		unix.InotifyRmWatch(w.fd, uint32(d.wd))
	}
}

// drop forgets directory d after its watch went away (the directory was deleted, moved or
// unmounted): its groups resolve their directory again (the one they hold is no longer at
// their path) and are read with Read until they are watched again.
func (w *watcher) drop(d *watchDir) {
	delete(w.dirs, d.wd)
	for _, gs := range d.names {
		for _, g := range gs {
			g.dirty, g.watch, g.reopen = true, nil, true
		}
	}
}

// poll reads the pending events and marks the groups they concern. all is true when events
// were lost, so every group must be checked.
func (w *watcher) poll() (all bool) {
	if w.fd < 0 {
		return false
	}
	for {
		n, err := unix.Read(w.fd, w.buf)
		if err != nil || n <= 0 {
			if err != nil && !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EINTR) {
				all = true
			}
			return all
		}
		for b := w.buf[:n]; len(b) >= unix.SizeofInotifyEvent; {
			wd := int32(binary.NativeEndian.Uint32(b[0:]))
			mask := binary.NativeEndian.Uint32(b[4:])
			nameLen := int(binary.NativeEndian.Uint32(b[12:]))
			if unix.SizeofInotifyEvent+nameLen > len(b) {
				all = true
				break
			}
			name := bytes.TrimRight(b[unix.SizeofInotifyEvent:unix.SizeofInotifyEvent+nameLen], "\x00")
			b = b[unix.SizeofInotifyEvent+nameLen:]
			if mask&unix.IN_Q_OVERFLOW != 0 {
				all = true
				continue
			}
			d := w.dirs[wd]
			if d == nil {
				continue // a watch removed meanwhile
			}
			if mask&(unix.IN_IGNORED|unix.IN_DELETE_SELF|unix.IN_MOVE_SELF|unix.IN_UNMOUNT) != 0 {
				if mask&unix.IN_IGNORED == 0 {
					unix.InotifyRmWatch(w.fd, uint32(wd))
				}
				w.drop(d)
				continue
			}
			base, ok := bytes.CutSuffix(name, []byte(".meta"))
			if !ok {
				if base, ok = bytes.CutSuffix(name, []byte(".values")); !ok {
					continue
				}
			}
			for _, g := range d.names[string(base)] { // no allocation: a map index by converted bytes
				g.dirty = true
			}
		}
	}
}

func (w *watcher) close() {
	if w.fd >= 0 {
		unix.Close(w.fd)
	}
	w.fd = -1
	clear(w.dirs)
}
