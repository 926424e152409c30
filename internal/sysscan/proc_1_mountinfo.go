package sysscan

// /proc/1/mountinfo and statfs(2) of every mount: Filesystems.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"time"
	"unsafe"

	"github.com/cantal-go/cantal/internal/kfile"
	"github.com/cantal-go/cantal/internal/scanmark"
	"github.com/cantal-go/cantal/internal/series"
	"golang.org/x/sys/unix"
)

// The exclusions node_exporter 1.5 applies by default (upstream's
// --collector.filesystem.mount-points-exclude and --collector.filesystem.fs-types-exclude).
const (
	DefaultFSMountPointsExclude = `^/(dev|proc|run/credentials/.+|sys|var/lib/docker/.+|var/lib/containers/storage/.+)($|/)`
	DefaultFSTypesExclude       = `^(autofs|binfmt_misc|bpf|cgroup2?|configfs|debugfs|devpts|devtmpfs|fusectl|hugetlbfs|iso9660|mqueue|nsfs|overlay|proc|procfs|pstore|rpc_pipefs|securityfs|selinuxfs|squashfs|sysfs|tracefs)$`
)

// DefaultStatfsTimeout is how long a scan waits for statfs(2) on a mount.
const DefaultStatfsTimeout = time.Second

// FSOptions configures Filesystems. The zero value means node_exporter's default exclusions
// and DefaultStatfsTimeout.
type FSOptions struct {
	// MountPointsExclude and TypesExclude leave out the mounts whose mount point, or file
	// system type, they match; DefaultFSMountPointsExclude and DefaultFSTypesExclude when nil.
	MountPointsExclude, TypesExclude *regexp.Regexp
	// Timeout bounds the wait for each scan's statfs calls; DefaultStatfsTimeout when zero.
	Timeout time.Duration
	// Statfs is called for each mount, from the mount's own goroutine; statfs(2) when nil.
	// Tests inject a slow one.
	Statfs func(path string, st *unix.Statfs_t) error
}

// Filesystems is a series.Collector of the space and inodes of every mounted file system
// (fs.* in docs/metrics.md), from statfs(2) on each mount point of /proc/1/mountinfo.
//
// Each mount has a goroutine of its own that makes its statfs calls, so that a hung mount (a
// dead NFS server) never stalls a scan: a scan waits at most FSOptions.Timeout for all of
// them; a mount whose call has not returned by then gets fs.device_error 1 and a problem, and
// is skipped (no new call, device_error 1) until the stuck call returns. There is never more
// than one call in flight per mount. The goroutine of an unmounted mount ends when its last
// call returns.
//
// Collect and Close must not be called concurrently; Close ends the mounts' goroutines (a
// stuck one ends when its call returns).
type Filesystems struct {
	opt     Options
	fo      FSOptions
	gen     uint64
	buf     []byte
	esc     []byte
	key     []byte
	path    []byte
	ents    []mountEntry
	file    kfile.Kept
	self    bool // reading /proc/self/mountinfo: pid 1's could not be read
	prefix  string
	checked bool // prefix decided
	mounts  map[string]*mount
	pending []*mount
	timer   *time.Timer
	// pollable says the open mountinfo is procfs's, whose poll(2) reports POLLPRI when the
	// mount table changed: f.ents are then parsed again only after a change (reading the file
	// costs the kernel ~40 µs of CPU with 30 mounts, four times the rest of the scan).
	pollable bool
	pfd      [1]unix.PollFd
}

// mountinfoEvery is how often (in scans) mountinfo is read even when poll(2) reported no
// change.
const mountinfoEvery = 30

// mountsChanged reports whether mountinfo must be read again: at the first scan, every
// mountinfoEvery scans, when the file is not procfs's, and when poll says the table changed.
func (f *Filesystems) mountsChanged() bool {
	if !f.file.Open || !f.pollable || f.gen%mountinfoEvery == 1 {
		return true
	}
	f.pfd[0] = unix.PollFd{Fd: int32(f.file.FD), Events: unix.POLLPRI}
	for {
		_, err := unix.Poll(f.pfd[:], 0)
		if err == unix.EINTR {
			continue
		}
		return err != nil || f.pfd[0].Revents&(unix.POLLPRI|unix.POLLERR|unix.POLLNVAL) != 0
	}
}

// Filesystem series, in the order of mount.refs.
const (
	fsSize = iota
	fsFree
	fsAvail
	fsFiles
	fsFilesFree
	fsReadonly
	fsDeviceError
	fsNum
)

var fsMetrics = [fsNum]string{
	fsSize: "fs.size", fsFree: "fs.free", fsAvail: "fs.avail", fsFiles: "fs.files",
	fsFilesFree: "fs.files_free", fsReadonly: "fs.readonly", fsDeviceError: "fs.device_error",
}

// mount is one (device, mount point, type) of mountinfo. Its fields belong to the scan
// goroutine, except path (immutable) and the channels.
type mount struct {
	device, mountpoint, fstype string
	path                       string // what statfs is called on
	excluded                   bool
	refs                       [fsNum]*series.Ref
	scanmark.Mark              // the latest scan that saw it
	ro                         bool
	busy                       bool // a request was sent and its result not yet received
	req                        chan struct{}
	res                        chan statfsResult
}

type statfsResult struct {
	st  unix.Statfs_t
	err error
}

// NewFilesystems returns a filesystem collector reading opt.Proc's mountinfo.
func NewFilesystems(opt Options, fo FSOptions) *Filesystems {
	opt = opt.withDefaults()
	if fo.MountPointsExclude == nil {
		fo.MountPointsExclude = regexp.MustCompile(DefaultFSMountPointsExclude)
	}
	if fo.TypesExclude == nil {
		fo.TypesExclude = regexp.MustCompile(DefaultFSTypesExclude)
	}
	if fo.Timeout <= 0 {
		fo.Timeout = DefaultStatfsTimeout
	}
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &Filesystems{opt: opt, fo: fo, buf: make([]byte, 0, 16<<10), mounts: map[string]*mount{}, timer: t}
}

// Close ends the goroutines of every mount and closes the mountinfo file.
func (f *Filesystems) Close() error {
	for k, m := range f.mounts {
		m.stop()
		delete(f.mounts, k)
	}
	f.file.Close()
	return nil
}

func (m *mount) start(statfs func(string, *unix.Statfs_t) error) {
	m.req = make(chan struct{}, 1)
	m.res = make(chan statfsResult, 1)
	go func(req <-chan struct{}, res chan<- statfsResult, path string) {
		st := new(unix.Statfs_t)
		cpath := append([]byte(path), 0)
		for range req {
			var err error
			if statfs == nil {
				err = rawStatfs(cpath, st)
			} else {
				err = statfs(path, st)
			}
			res <- statfsResult{*st, err} // never blocks: one request in flight at most, and res holds one
		}
	}(m.req, m.res, m.path)
}

func (m *mount) stop() {
	if m.req != nil {
		close(m.req)
		m.req = nil
	}
}

// rawStatfs is statfs(2) on a NUL-terminated path, without converting a string each call.
func rawStatfs(path []byte, st *unix.Statfs_t) error {
	for {
		_, _, e := unix.Syscall(unix.SYS_STATFS, uintptr(unsafe.Pointer(&path[0])), uintptr(unsafe.Pointer(st)), 0)
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return e
		}
		return nil
	}
}

// readMountinfo reads pid 1's mountinfo, or the agent's own when pid 1's cannot be read
// (hidepid, another pid namespace).
func (f *Filesystems) readMountinfo(procfd int) ([]byte, error) {
	if !f.self {
		f.path = append(append(f.path[:0], "1/mountinfo"...), 0)
		b, err := f.file.Read(procfd, f.path, &f.buf, 16<<20, false)
		if err == nil {
			return b, nil
		}
		if !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.EACCES) && !errors.Is(err, unix.EPERM) {
			return nil, fmt.Errorf("read %s: %w", filepath.Join(f.opt.Proc, "1/mountinfo"), err)
		}
		f.self, f.checked = true, false
		f.file.Close()
	}
	f.path = append(append(f.path[:0], "self/mountinfo"...), 0)
	b, err := f.file.Read(procfd, f.path, &f.buf, 16<<20, false)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", filepath.Join(f.opt.Proc, "self/mountinfo"), err)
	}
	return b, nil
}

// statfsPrefix says where mount points of the mountinfo read are reached: through
// /proc/1/root when pid 1 is in another mount namespace than the agent, else directly.
func (f *Filesystems) statfsPrefix() string {
	if f.self {
		return ""
	}
	mine, err1 := os.Readlink(filepath.Join(f.opt.Proc, "self/ns/mnt"))
	init, err2 := os.Readlink(filepath.Join(f.opt.Proc, "1/ns/mnt"))
	if err1 != nil || err2 != nil || mine == init {
		return ""
	}
	return filepath.Join(f.opt.Proc, "1/root")
}

// Collect implements series.Collector.
func (f *Filesystems) Collect(ctx context.Context, sink series.Sink) error {
	f.gen++
	if f.mountsChanged() {
		procfd, err := kfile.OpenDir(f.opt.Proc)
		if err != nil {
			return fmt.Errorf("scan filesystems: %w", err)
		}
		wasOpen := f.file.Open
		b, err := f.readMountinfo(procfd)
		unix.Close(procfd)
		if err != nil {
			f.ents = f.ents[:0]
			sink.Problem(filepath.Join(f.opt.Proc, "1/mountinfo"), err.Error())
			f.expire()
			return nil
		}
		if !wasOpen && f.file.Open {
			var st unix.Statfs_t
			f.pollable = unix.Fstatfs(f.file.FD, &st) == nil && st.Type == unix.PROC_SUPER_MAGIC
		}
		if !f.checked {
			f.prefix, f.checked = f.statfsPrefix(), true
		}
		f.ents, err = parseMountinfo(b, f.ents[:0], &f.esc)
		if err != nil {
			sink.Problem(filepath.Join(f.opt.Proc, "1/mountinfo"), err.Error())
		}
	}
	f.pending = f.pending[:0]
	for _, e := range f.ents {
		f.key = append(append(append(append(append(f.key[:0], e.Device...), 0), e.MountPoint...), 0), e.FSType...)
		m := f.mounts[string(f.key)]
		if m == nil {
			m = &mount{device: kfile.ValidString(e.Device), mountpoint: kfile.ValidString(e.MountPoint), fstype: kfile.ValidString(e.FSType)}
			m.excluded = f.fo.MountPointsExclude.MatchString(m.mountpoint) || f.fo.TypesExclude.MatchString(m.fstype)
			if !m.excluded {
				m.path = f.prefix + string(e.MountPoint)
				m.start(f.fo.Statfs)
			}
			f.mounts[string(f.key)] = m
		}
		if m.Seen(f.gen) || m.excluded {
			m.See(f.gen)
			continue // excluded, or a second line for the same mount
		}
		m.See(f.gen)
		m.ro = hasOption(e.Options, "ro")
		if m.busy {
			select {
			case <-m.res: // the stuck call returned; its result is stale
				m.busy = false
			default:
				f.put(sink, m, fsReadonly, boolBits(m.ro))
				f.put(sink, m, fsDeviceError, 1)
				sink.Problem(m.mountpoint, "statfs still has not returned; the mount is skipped until it does")
				continue
			}
		}
		m.req <- struct{}{}
		m.busy = true
		f.pending = append(f.pending, m)
	}
	f.wait(ctx, sink)
	f.expire()
	return ctx.Err()
}

// wait collects the results of the scan's statfs calls until the deadline.
func (f *Filesystems) wait(ctx context.Context, sink series.Sink) {
	if len(f.pending) == 0 {
		return
	}
	f.timer.Reset(f.fo.Timeout)
	late := false
	for _, m := range f.pending {
		var r statfsResult
		got := false
		if !late {
			select {
			case r = <-m.res:
				got = true
			case <-f.timer.C:
				late = true
			case <-ctx.Done():
				late = true
			}
		}
		if !got && late {
			select {
			case r = <-m.res:
				got = true
			default:
			}
		}
		f.put(sink, m, fsReadonly, boolBits(m.ro))
		if !got {
			f.put(sink, m, fsDeviceError, 1)
			sink.Problem(m.mountpoint, fmt.Sprintf("statfs has not returned within %v; the mount is skipped until it does", f.fo.Timeout))
			continue
		}
		m.busy = false
		if r.err != nil {
			f.put(sink, m, fsDeviceError, 1)
			sink.Problem(m.mountpoint, "statfs: "+r.err.Error())
			continue
		}
		f.put(sink, m, fsDeviceError, 0)
		bs := uint64(max(r.st.Bsize, 0))
		f.put(sink, m, fsSize, mulLevel(r.st.Blocks, bs))
		f.put(sink, m, fsFree, mulLevel(r.st.Bfree, bs))
		f.put(sink, m, fsAvail, mulLevel(r.st.Bavail, bs))
		f.put(sink, m, fsFiles, mulLevel(r.st.Files, 1))
		f.put(sink, m, fsFilesFree, mulLevel(r.st.Ffree, 1))
	}
	f.timer.Stop()
}

// expire forgets the mounts not seen in this scan, ending their goroutines.
func (f *Filesystems) expire() {
	scanmark.Sweep(f.mounts, f.gen, func(_ string, m *mount) { m.stop() })
}

func (f *Filesystems) put(sink series.Sink, m *mount, i int, bits uint64) {
	r := m.refs[i]
	if r == nil {
		r = sink.Series(series.Labels{"metric": fsMetrics[i], "device": m.device, "mountpoint": m.mountpoint, "fstype": m.fstype}, series.Level)
		m.refs[i] = r
	}
	sink.Put(r, bits)
}

// mulLevel returns a×b as the bits of a Level, capped at the largest int64.
func mulLevel(a, b uint64) uint64 {
	if b != 0 && a > math.MaxInt64/b {
		return math.MaxInt64
	}
	return a * b
}

func boolBits(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// mountEntry is one line of /proc/PID/mountinfo, its fields pointing into the file's bytes;
// MountPoint is unescaped into the buffer given to parseMountinfo.
type mountEntry struct {
	Device, MountPoint, FSType, Options []byte
}

// parseMountinfo parses /proc/PID/mountinfo (proc(5)):
//
//	36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
//
// MountPoint and Device are unescaped (the kernel writes space, tab, newline and backslash as
// \040, \011, \012, \134) into *esc, which is reused between calls; the returned entries point
// into b and *esc.
func parseMountinfo(b []byte, dst []mountEntry, esc *[]byte) ([]mountEntry, error) {
	// The unescaped strings are never longer than the file, so esc never grows while entries
	// point into it.
	if cap(*esc) < len(b) {
		*esc = make([]byte, 0, len(b))
	}
	e := (*esc)[:0]
	for pos := 0; pos < len(b); {
		var line []byte
		line, pos = kfile.NextLine(b, pos)
		f, p := kfile.Field(line, 0)
		if f == nil {
			continue
		}
		var fields [6][]byte
		fields[0] = f
		for i := 1; i < 6; i++ {
			fields[i], p = kfile.Field(line, p)
			if fields[i] == nil {
				return dst, kfile.ParseError("mountinfo", line, kfile.ErrSyntax)
			}
		}
		// optional fields up to the "-" separator
		for {
			f, p = kfile.Field(line, p)
			if f == nil {
				return dst, kfile.ParseError("mountinfo", line, fmt.Errorf("no separator"))
			}
			if len(f) == 1 && f[0] == '-' {
				break
			}
		}
		fstype, p := kfile.Field(line, p)
		source, _ := kfile.Field(line, p)
		if fstype == nil || source == nil {
			return dst, kfile.ParseError("mountinfo", line, kfile.ErrSyntax)
		}
		start := len(e)
		e = unescapeMount(e, fields[4])
		mp := e[start:len(e):len(e)]
		start = len(e)
		e = unescapeMount(e, source)
		dev := e[start:len(e):len(e)]
		dst = append(dst, mountEntry{Device: dev, MountPoint: mp, FSType: fstype, Options: fields[5]})
	}
	*esc = e
	return dst, nil
}

// unescapeMount appends s to dst with the kernel's octal escapes (\ooo) decoded.
func unescapeMount(dst, s []byte) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			v := (int(s[i+1]-'0')<<6 | int(s[i+2]-'0')<<3 | int(s[i+3]-'0'))
			if v < 256 {
				dst = append(dst, byte(v))
				i += 3
				continue
			}
		}
		dst = append(dst, c)
	}
	return dst
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

// hasOption reports whether the comma-separated mount options include opt.
func hasOption(opts []byte, opt string) bool {
	for len(opts) > 0 {
		i := kfile.IndexByte(opts, ',')
		if i < 0 {
			return string(opts) == opt
		}
		if string(opts[:i]) == opt {
			return true
		}
		opts = opts[i+1:]
	}
	return false
}
