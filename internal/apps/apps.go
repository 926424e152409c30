// Package apps is the agent's collector for instrumented applications: every process whose
// environment names CANTAL_PATH has its .meta/.values pair read each scan, through the process's
// own root directory (so paths inside containers resolve) and only as far as the process's owner
// could read the files itself (package confined).
//
// The directory of the files is resolved as the process's owner (its fsuid, fsgid and groups,
// read from /proc/PID/status when the directory or a file is opened) and then held open: the
// files are opened in it one name at a time, as that owner, and the reader's cheap checks (an
// lstat of .meta each full read) look the name up in that directory, never along a path walked
// as root. So the agent looks nowhere the owner could not, and what it reports cannot tell the
// owner anything about places it cannot look into: a CANTAL_PATH through a directory the owner
// cannot search is refused with one reason, confined.ReasonUnreachable, whether or not anything
// exists there, where a missing file the owner could see for itself is just not read yet (no
// problem). Problems never quote the files (package shm's errors do not) and name them by
// CANTAL_PATH. The directory is resolved again when its watch says it was removed or moved,
// and at the periodic full check while the files are missing.
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
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/cantal-go/cantal/internal/confined"
	"github.com/cantal-go/cantal/internal/procscan"
	"github.com/cantal-go/cantal/internal/series"
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
// to a buffer the collector reuses (*procscan.Processes implements it).
type ProcessTable interface {
	AppendTable(dst []procscan.Process) []procscan.Process
}

// Collector implements series.Collector. Collect runs on the scan goroutine; Count and Exports
// may be called from any goroutine.
type Collector struct {
	procs  ProcessTable
	opt    Options
	groups map[groupKey]*group
	mntns  map[pidStart]mntEntry
	keys   []keyed // scratch of Collect
	table  []procscan.Process
	watch  *watcher
	scans  uint64

	pids    []int  // scratch of Collect: the pids read, sorted
	mapsBuf []byte // scratch of owner

	count   atomic.Int64
	exports atomic.Pointer[[]int] // sorted; replaced only when it changes
}

// mntEntry is the mount namespace of a process, the scan that last saw the process, and the
// scan that last found its maps not to name its values file (0: never), see owner.
type mntEntry struct {
	ns       string
	seen     uint64
	unmapped uint64
}

// ownerRecheck is how many scans a process whose maps did not name its values file is taken
// not to map it: under heavy churn the members of a shared CANTAL_PATH change at every scan,
// and reading the maps of every member each time cost more than the rest of the scan.
const ownerRecheck = 30

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
	rootPID int           // the pid whose /proc/PID/root the files are opened through; 0 before setRoot
	dir     *confined.Dir // the files' directory, resolved as the process's owner; nil until it is
	fdBase  string        // the files' base path through dir (dir.FDPath()/name), as the reader names them
	reader  *shm.Reader   // reads the files in dir; nil when dir is
	missing bool          // the latest read found no files: dir may be stale
	labels  series.Labels // agent labels: pid, process, cgroup, appname
	layout  *shm.Layout
	refs    []*series.Ref
	texts   []string     // last text of each state entry, to avoid a conversion per scan
	batch   series.Batch // Refs: the Refs of the numeric entries, given to PutBatch
	numOff  []int        // their offsets in the values file
	bits    []uint64     // their values in a scan
	members uint64       // signature of the pids sharing the files
	seen    bool
	sig     uint64 // this scan's signature of the pids sharing the files, being built
	n       int    // this scan's number of them

	watch     *watchDir // the watched directory of the files, nil when not watched
	watchName string    // the files' base name in it
	dirty     bool      // the files may have changed: read them with a full Read
	reopen    bool      // the directory was removed or moved: resolve it again
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
	var changed map[groupKey][]*procscan.Process
	for k, g := range c.groups {
		if !g.seen {
			continue
		}
		if sig := g.sig ^ uint64(g.n)<<56; g.rootPID == 0 || sig != g.members {
			g.members = sig
			if changed == nil {
				changed = map[groupKey][]*procscan.Process{}
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
			if p := c.owner(k.path, ms); g.rootPID != p.PID {
				g.setRoot(c, p)
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
		if g.reader != nil && (g.reopen || g.missing && periodic) {
			g.close(c) // the directory may have been replaced
		}
		if g.reader == nil && !g.open(c, sink) {
			continue
		}
		if g.watch == nil && periodic {
			g.watchAdd(c)
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
func (c *Collector) owner(path string, ms []*procscan.Process) *procscan.Process {
	if len(ms) == 1 {
		return ms[0]
	}
	values := []byte(path + ".values")
	buf := c.mapsBuf[:0]
	if buf == nil {
		buf = make([]byte, 0, 64<<10)
	}
	defer func() {
		if cap(buf) > 1<<20 {
			buf = nil // one huge process's maps: not kept
		}
		c.mapsBuf = buf[:0]
	}()
	for _, p := range ms {
		ps := pidStart{p.PID, p.StartTime}
		m, known := c.mntns[ps]
		if known && m.unmapped != 0 && c.scans-m.unmapped < ownerRecheck {
			continue
		}
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
		if known {
			m.unmapped = c.scans
			c.mntns[ps] = m
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
// The files are opened at the group's next read (open).
func (g *group) setRoot(c *Collector, p *procscan.Process) {
	g.close(c)
	g.rootPID = p.PID
	g.labels = series.Labels{"pid": strconv.Itoa(p.PID), "process": p.Name}
	if p.Cgroup != "" {
		g.labels["cgroup"] = p.Cgroup
	}
	if p.CantalAppName != "" {
		g.labels["appname"] = p.CantalAppName
	}
	g.layout, g.refs = nil, nil
}

// policy returns the file policy of the group's process as it is now: its identity read from
// its status (opens are rare: a new process, a replaced .meta), not the process table's, which
// may be a few scans old, so a process that changed uid since is never read for under its old
// one. A file already open stays readable, as it does for the process itself.
func (g *group) policy(c *Collector) (confined.Policy, error) {
	cred, err := confined.ProcessCred(c.opt.Proc, g.rootPID)
	if err != nil {
		return confined.Policy{}, err
	}
	return confined.Policy{
		Root:    c.opt.Proc + "/" + strconv.Itoa(g.rootPID) + "/root",
		UID:     cred.UID,
		MaxSize: max(c.opt.MaxMetaSize, c.opt.MaxValuesSize),
		Cred:    &cred,
	}, nil
}

// open resolves the directory of the group's files as the process's owner and makes the
// reader of the files in it. It reports whether it did; a refusal is reported to sink, a
// directory that does not exist (yet) or a process that is gone is not.
func (g *group) open(c *Collector, sink series.Sink) bool {
	g.missing, g.reopen = false, false
	pol, err := g.policy(c)
	if err != nil {
		return false // gone meanwhile
	}
	dir, name := filepath.Dir(g.key.path), filepath.Base(g.key.path)
	d, err := pol.OpenDir(dir)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			sink.Problem(g.source(), g.message(err))
		}
		return false
	}
	g.dir = d
	g.fdBase = d.FDPath() + "/" + name
	g.reader = shm.NewReader(g.fdBase, shm.ReaderOptions{
		Open: func(path string) (*os.File, error) {
			pol, err := g.policy(c)
			if err != nil {
				return nil, err
			}
			f, _, err := pol.OpenAt(d, filepath.Base(path))
			return f, err
		},
		MaxMetaSize:   c.opt.MaxMetaSize,
		MaxValuesSize: c.opt.MaxValuesSize,
	})
	g.layout = nil // a new reader hands out its layout anew
	g.watchAdd(c)
	return true
}

// source names the group in problems.
func (g *group) source() string { return g.key.path + " (pid " + strconv.Itoa(g.rootPID) + ")" }

// message is the text of a problem of the group: err's, with the files named by CANTAL_PATH
// rather than by the reader's path through the held directory.
func (g *group) message(err error) string { return g.rename(err.Error()) }

func (g *group) rename(s string) string {
	if g.fdBase == "" {
		return s
	}
	return strings.ReplaceAll(s, g.fdBase, g.key.path)
}

// watchAdd watches the directory of g's files (see watcher).
func (g *group) watchAdd(c *Collector) {
	c.watch.remove(g)
	g.dirty = true
	c.watch.add(g, g.reader.Base())
}

// close releases the group's reader, directory and watch; the next read opens them again.
func (g *group) close(c *Collector) {
	c.watch.remove(g)
	if g.reader != nil {
		g.reader.Close()
		g.reader = nil
	}
	g.dir.Close()
	g.dir, g.fdBase = nil, ""
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
	g.missing = false
	if err != nil {
		if errors.Is(err, shm.ErrNotReady) {
			return false // between the client's two renames; next scan
		}
		if errors.Is(err, os.ErrNotExist) {
			g.missing = true
			return false // not written yet, or removed on exit: not a problem
		}
		sink.Problem(g.source(), g.message(err))
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
				if k == series.SourceLabel && v == series.SourcePush {
					// Only the agent's ingest makes pushed series; an application's series
					// marked so would fall in the pushed budget and be reachable by a push.
					continue
				}
				labels[k] = v
			}
			for k, v := range g.labels { // the agent's labels win: a process cannot pose as another
				labels[k] = v
			}
			g.refs = append(g.refs, sink.Series(labels, kindOf(e.Kind)))
		}
		// A BatchSink is fastest with an array of numeric series only, the same every scan.
		g.batch.Refs, g.numOff = g.batch.Refs[:0], g.numOff[:0]
		for i := range g.layout.Entries {
			if e := &g.layout.Entries[i]; e.Kind != shm.KindState {
				g.batch.Refs = append(g.batch.Refs, g.refs[i])
				g.numOff = append(g.numOff, e.Offset)
			}
		}
		g.bits = make([]uint64, len(g.batch.Refs))
		// The registry has the labels now (in the merged maps above); the layout is kept
		// only to decode values, and the reader never hands it out as a new one again.
		g.layout.ForgetLabels()
		for _, s := range g.layout.Skipped {
			sink.Problem(g.source(), g.rename(s))
		}
	}
	if len(g.batch.Refs) != len(g.layout.Entries) { // some states
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
		batch.PutBatch(&g.batch, g.bits)
	} else {
		for i, ref := range g.batch.Refs {
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
