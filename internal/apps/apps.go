// Package apps is the agent's collector for instrumented applications: every process whose
// environment names CANTAL_PATH has its .meta/.values pair read each scan, through the process's
// own root directory (so paths inside containers resolve) and only as far as the process's uid
// could read the files itself (package safefile).
//
// Several processes naming the same files in the same mount namespace (forked workers sharing a
// mapping, or a wrapper such as `go run` and the program it starts) are read once per scan; their
// series carry the pid and name of the process that maps the values file (see owner).
//
// An application whose files did not change costs no system call: its .values is copied out of
// a read-only mapping, and a watcher (watch.go) learns from inotify when a .meta or .values is
// replaced, with a full check every 10th scan for what inotify cannot see.
package apps

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/cantal-go/cantal/internal/safefile"
	"github.com/cantal-go/cantal/internal/series"
	"github.com/cantal-go/cantal/internal/sysscan"
	"github.com/cantal-go/cantal/shm"
)

// Options configure a Collector.
type Options struct {
	Proc          string // proc root; default /proc
	MaxMetaSize   int64  // default 1 MiB
	MaxValuesSize int64  // default 16 MiB
	Log           *slog.Logger
}

// ProcessTable is what the collector needs of the process scan: the latest table, appended
// to a buffer the collector reuses (*sysscan.Processes implements it).
type ProcessTable interface {
	AppendTable(dst []sysscan.Process) []sysscan.Process
}

// Collector implements series.Collector. Collect runs on the scan goroutine; Count and Exports
// may be called from any goroutine.
type Collector struct {
	procs    ProcessTable
	opt      Options
	selfNS   string    // the agent's own mount namespace
	selfRoot [2]uint64 // dev and inode of the agent's root directory
	groups   map[groupKey]*group
	mntns    map[pidStart]mntEntry
	keys     []keyed // scratch of Collect
	table    []sysscan.Process
	watch    *watcher
	scans    uint64

	pids []int // scratch of Collect: the pids read, sorted

	count   atomic.Int64
	exports atomic.Pointer[[]int] // sorted; replaced only when it changes
}

// mntEntry is the mount namespace of a process, and the scan that last saw the process.
type mntEntry struct {
	ns   string
	seen uint64
}

type groupKey struct {
	ns   string // mount namespace of the processes
	uid  int
	path string // CANTAL_PATH
}

// keyed is a process of the table (by index) with the group its files belong to.
type keyed struct {
	key   groupKey
	index int
}

type pidStart struct {
	pid   int
	start int64
}

type group struct {
	key     groupKey
	rootPID int // the pid whose /proc/PID/root the files are opened through
	reader  *shm.Reader
	labels  series.Labels // agent labels: pid, process, cgroup, appname
	layout  *shm.Layout
	refs    []*series.Ref
	texts   []string      // last text of each state entry, to avoid a conversion per scan
	num     []*series.Ref // the Refs of the numeric entries, the array given to PutBatch
	numOff  []int         // their offsets in the values file
	bits    []uint64      // their values in a scan
	members uint64        // signature of the pids sharing the files
	seen    bool
	sig     uint64 // this scan's signature of the pids sharing the files, being built
	n       int    // this scan's number of them

	watch     *watchDir // the watched directory of the files, nil when not watched
	watchName string    // the files' base name in it
	dirty     bool      // the files may have changed: read them with a full Read
}

// New returns a Collector reading the applications found in procs' table. procs must be
// collected before this collector in each scan.
func New(procs ProcessTable, opt Options) *Collector {
	if opt.Proc == "" {
		opt.Proc = "/proc"
	}
	if opt.MaxMetaSize <= 0 {
		opt.MaxMetaSize = 1 << 20
	}
	if opt.MaxValuesSize <= 0 {
		opt.MaxValuesSize = 16 << 20
	}
	if opt.Log == nil {
		opt.Log = slog.New(slog.DiscardHandler)
	}
	c := &Collector{procs: procs, opt: opt, groups: map[groupKey]*group{}, mntns: map[pidStart]mntEntry{},
		watch: newWatcher()}
	c.selfNS, _ = os.Readlink(opt.Proc + "/self/ns/mnt")
	c.selfRoot, _ = rootID(opt.Proc + "/self/root")
	c.exports.Store(&[]int{})
	return c
}

// Count returns the number of applications read in the latest scan.
func (c *Collector) Count() int { return int(c.count.Load()) }

// Exports reports whether pid's metrics were read in the latest scan.
func (c *Collector) Exports(pid int) bool {
	_, ok := slices.BinarySearch(*c.exports.Load(), pid)
	return ok
}

// Collect implements series.Collector.
func (c *Collector) Collect(ctx context.Context, sink series.Sink) error {
	table := c.procs.AppendTable(c.table[:0])
	c.table = table
	c.scans++
	for _, g := range c.groups {
		g.seen, g.sig, g.n = false, 0, 0
	}
	// Per group: how many processes share the files, and a signature of which; the member
	// list itself is built only when the signature changes (rarely), so the steady state
	// allocates nothing per application.
	c.keys, c.pids = c.keys[:0], c.pids[:0]
	for i := range table {
		p := &table[i]
		if p.CantalPath == "" {
			continue
		}
		ps := pidStart{p.PID, p.StartTime}
		m, ok := c.mntns[ps]
		if !ok {
			link, err := os.Readlink(c.opt.Proc + "/" + strconv.Itoa(p.PID) + "/ns/mnt")
			if err != nil {
				continue // gone meanwhile
			}
			m.ns = link
		}
		m.seen = c.scans
		c.mntns[ps] = m
		k := groupKey{ns: m.ns, uid: p.UID, path: p.CantalPath}
		c.keys = append(c.keys, keyed{k, i})
		g := c.groups[k]
		if g == nil {
			g = &group{key: k}
			c.groups[k] = g
		}
		g.seen = true
		g.n++
		g.sig = g.sig*1099511628211 ^ uint64(p.PID) ^ uint64(p.StartTime)<<20
		c.pids = append(c.pids, p.PID)
	}
	slices.Sort(c.pids)
	if !slices.Equal(c.pids, *c.exports.Load()) {
		exports := slices.Clone(c.pids)
		c.exports.Store(&exports)
	}
	var changed map[groupKey][]*sysscan.Process
	for k, g := range c.groups {
		if !g.seen {
			continue
		}
		if sig := g.sig ^ uint64(g.n)<<56; g.reader == nil || sig != g.members {
			g.members = sig
			if changed == nil {
				changed = map[groupKey][]*sysscan.Process{}
			}
			changed[k] = nil
		}
	}
	if changed != nil {
		// Who a group's series are labelled with is chosen again only when the set of
		// processes sharing its files changes.
		for _, kd := range c.keys {
			if ms, ok := changed[kd.key]; ok {
				changed[kd.key] = append(ms, &table[kd.index])
			}
		}
		for k, ms := range changed {
			g := c.groups[k]
			if p := c.owner(k.path, ms); g.reader == nil || g.rootPID != p.PID {
				g.setRoot(c, p)
				g.watchAdd(c)
			}
		}
	}
	for ps, m := range c.mntns {
		if m.seen != c.scans {
			delete(c.mntns, ps)
		}
	}
	all := c.watch.poll()
	n := 0
	for k, g := range c.groups {
		if !g.seen {
			g.close(c)
			delete(c.groups, k)
			continue
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		periodic := (c.scans+uint64(g.rootPID))%fullCheckEvery == 0
		if g.watch == nil && periodic {
			g.watchAdd(c) // its directory may exist now
		}
		full := all || g.dirty || g.watch == nil || periodic
		g.dirty = false
		if g.read(sink, full) {
			n++
		}
	}
	c.count.Store(int64(n))
	return nil
}

// owner picks, among processes naming the same files, the one the series are labelled with:
// the first that maps the values file (the writer: a wrapper such as `go run`, `sudo` or a
// supervisor passes CANTAL_PATH on without writing), else the first that is not a parent of
// another (the innermost of a chain of wrappers), else the first.
func (c *Collector) owner(path string, ms []*sysscan.Process) *sysscan.Process {
	if len(ms) == 1 {
		return ms[0]
	}
	values := []byte(path + ".values")
	buf := make([]byte, 0, 64<<10)
	for _, p := range ms {
		f, err := os.Open(c.opt.Proc + "/" + strconv.Itoa(p.PID) + "/maps")
		if err != nil {
			continue
		}
		buf = buf[:0]
		for len(buf) < 4<<20 { // maps of a huge process: enough to find a mapping made early
			if len(buf) == cap(buf) {
				buf = append(buf, 0)[:len(buf)]
			}
			n, err := f.Read(buf[len(buf):cap(buf)])
			buf = buf[:len(buf)+n]
			if err != nil {
				break
			}
		}
		f.Close()
		if bytes.Contains(buf, values) {
			return p
		}
	}
	parents := make(map[int]bool, len(ms))
	for _, p := range ms {
		parents[p.PPID] = true
	}
	for _, p := range ms {
		if !parents[p.PID] {
			return p
		}
	}
	return ms[0]
}

// setRoot makes p the process the group's files are opened through and its labels come from.
func (g *group) setRoot(c *Collector, p *sysscan.Process) {
	g.close(c)
	g.rootPID = p.PID
	root := c.opt.Proc + "/" + strconv.Itoa(p.PID) + "/root"
	pid, proc, maxSize := p.PID, c.opt.Proc, max(c.opt.MaxMetaSize, c.opt.MaxValuesSize)
	// The reader names files by a path it only lstats, to notice a replaced file cheaply; every
	// open goes through the policy, resolved inside the process's root. For a process that
	// shares the agent's mount namespace and root directory the plain path names the same
	// file, and its lookup costs a fraction of one through /proc/PID/root.
	prefix := root
	if id, err := rootID(root); err == nil && g.key.ns == c.selfNS && c.selfNS != "" && id == c.selfRoot {
		prefix = ""
	}
	g.reader = shm.NewReader(prefix+g.key.path, shm.ReaderOptions{
		// Each open checks the file against the process's uid as it is now, read from its
		// status (opens are rare: a new process, a replaced .meta), not against the process
		// table's, which may be a few scans old: a process that changed uid since is never
		// read for under its old one. A file already open stays readable, as it does for the
		// process itself.
		Open: func(name string) (*os.File, error) {
			uid, err := sysscan.ProcessUID(proc, pid)
			if err != nil {
				return nil, err
			}
			pol := safefile.Policy{Root: root, UID: uid, MaxSize: maxSize}
			return pol.Open(strings.TrimPrefix(name, prefix))
		},
		MaxMetaSize:   c.opt.MaxMetaSize,
		MaxValuesSize: c.opt.MaxValuesSize,
	})
	g.labels = series.Labels{"pid": strconv.Itoa(p.PID), "process": p.Name}
	if p.Cgroup != "" {
		g.labels["cgroup"] = p.Cgroup
	}
	if p.CantalAppName != "" {
		g.labels["appname"] = p.CantalAppName
	}
	g.layout, g.refs = nil, nil
}

// watchAdd watches the directory of g's files (see watcher).
func (g *group) watchAdd(c *Collector) {
	c.watch.remove(g)
	g.dirty = true
	c.watch.add(g, g.reader.Base())
}

func (g *group) close(c *Collector) {
	c.watch.remove(g)
	if g.reader != nil {
		g.reader.Close()
		g.reader = nil
	}
}

// Close releases the files and the inotify instance the collector holds. Collect may be called
// again afterwards. Close must not be called concurrently with Collect.
func (c *Collector) Close() error {
	for k, g := range c.groups {
		g.close(c)
		delete(c.groups, k)
	}
	c.watch.close()
	return nil
}

// read reads the group's files into sink; it reports whether values were read. full makes it
// check whether .meta was replaced (shm.Reader.Read); otherwise the watcher vouches that it
// was not (ReadUnchanged).
func (g *group) read(sink series.Sink, full bool) bool {
	var snap shm.Snapshot
	var err error
	if full {
		snap, err = g.reader.Read()
	} else {
		snap, err = g.reader.ReadUnchanged()
	}
	source := func() string { return g.key.path + " (pid " + strconv.Itoa(g.rootPID) + ")" }
	if err != nil {
		if errors.Is(err, shm.ErrNotReady) {
			return false // between the client's two renames; next scan
		}
		if errors.Is(err, os.ErrNotExist) {
			return false // not written yet, or removed on exit: not a problem
		}
		sink.Problem(source(), err.Error())
		return false
	}
	if snap.Changed || g.layout != snap.Layout {
		g.layout = snap.Layout
		g.refs = g.refs[:0]
		g.texts = make([]string, len(g.layout.Entries))
		for i := range g.layout.Entries {
			e := &g.layout.Entries[i]
			labels := make(series.Labels, len(e.Labels)+len(g.labels))
			for k, v := range e.Labels {
				labels[k] = v
			}
			for k, v := range g.labels { // the agent's labels win: a process cannot pose as another
				labels[k] = v
			}
			g.refs = append(g.refs, sink.Series(labels, kindOf(e.Kind)))
		}
		// A BatchSink is fastest with an array of numeric series only, the same every scan.
		g.num, g.numOff = g.num[:0], g.numOff[:0]
		for i := range g.layout.Entries {
			if e := &g.layout.Entries[i]; e.Kind != shm.KindState {
				g.num = append(g.num, g.refs[i])
				g.numOff = append(g.numOff, e.Offset)
			}
		}
		g.bits = make([]uint64, len(g.num))
		// The registry has the labels now (in the merged maps above); the layout is kept
		// only to decode values, and the reader never hands it out as a new one again.
		g.layout.ForgetLabels()
		for _, s := range g.layout.Skipped {
			sink.Problem(source(), s)
		}
	}
	if len(g.num) != len(g.layout.Entries) { // some states
		for i := range g.layout.Entries {
			if e := &g.layout.Entries[i]; e.Kind == shm.KindState {
				since, text := e.State(snap.Values)
				if g.texts[i] != string(text) { // no allocation: compiler-optimised comparison
					g.texts[i] = string(text)
				}
				sink.PutState(g.refs[i], since, g.texts[i])
			}
		}
	}
	// Every numeric entry is 8 bytes in native order (see shm.Entry.Bits): reading them by
	// offset spares walking the layout's 64-byte Entries.
	for i, off := range g.numOff {
		g.bits[i] = binary.NativeEndian.Uint64(snap.Values[off:][:8])
	}
	if batch, ok := sink.(series.BatchSink); ok {
		batch.PutBatch(g.num, g.bits)
	} else {
		for i, ref := range g.num {
			sink.Put(ref, g.bits[i])
		}
	}
	return true
}

func kindOf(k shm.Kind) series.Kind {
	switch k {
	case shm.KindCounter:
		return series.Counter
	case shm.KindLevel:
		return series.Level
	case shm.KindFloat:
		return series.Float
	}
	return series.State
}

// rootID returns the device and inode of the directory path leads to.
func rootID(path string) ([2]uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return [2]uint64{}, err
	}
	return [2]uint64{uint64(st.Dev), st.Ino}, nil
}
