package shm

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime/debug"
	"time"

	"golang.org/x/sys/unix"
)

// ErrNotReady means the application is replacing its files right now (for example the new
// .values file is in place but the new .meta file is not yet), so this read was refused rather
// than decode values with the wrong layout. It is temporary: read again at the next scan.
var ErrNotReady = errors.New("metric files are being replaced")

// ErrShortValues means the .values file is shorter than its .meta file says.
var ErrShortValues = errors.New("values file shorter than its layout")

// ErrTooLarge means a file exceeds ReaderOptions.MaxMetaSize or MaxValuesSize.
var ErrTooLarge = errors.New("file too large")

// Default limits of ReaderOptions.
const (
	DefaultMaxMetaSize   = 1 << 20  // 1 MiB: about ten thousand metrics
	DefaultMaxValuesSize = 16 << 20 // 16 MiB
)

// youngValues is how long after its creation a .values file newer than its .meta is taken
// for one whose .meta is not written yet.
const youngValues = 2 * time.Second

// maxAttempts bounds how often one Read starts over when files are replaced under it.
const maxAttempts = 4

// ReaderOptions configures a Reader. The zero value is ready to use.
type ReaderOptions struct {
	// Open opens a file for reading. The Reader opens files only through it, so the agent can
	// resolve paths inside containers and check ownership. It must return an open regular
	// file; the Reader closes it. nil means OpenFile.
	Open func(path string) (*os.File, error)
	// MaxMetaSize is the largest .meta file read (0: DefaultMaxMetaSize).
	MaxMetaSize int64
	// MaxValuesSize is the largest layout accepted, in bytes of .values (0:
	// DefaultMaxValuesSize).
	MaxValuesSize int64
}

// OpenFile opens path read-only, without following a final symlink, without blocking (a FIFO
// cannot stall the caller) and close-on-exec, and refuses anything but a regular file. It is
// the default ReaderOptions.Open.
func OpenFile(path string) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		if err == unix.ELOOP {
			return nil, &fs.PathError{Op: "open", Path: path, Err: fmt.Errorf("refusing to follow a symlink: %w", err)}
		}
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, &fs.PathError{Op: "fstat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, &fs.PathError{Op: "open", Path: path, Err: errors.New("not a regular file")}
	}
	return os.NewFile(uintptr(fd), path), nil
}

// Snapshot is the result of one Reader.Read.
type Snapshot struct {
	// Layout is the parsed .meta file. It is immutable and may be kept.
	Layout *Layout
	// Values holds at least Layout.Size bytes of .values. It is owned by the Reader and valid
	// until its next Read or Close.
	Values []byte
	// Changed is true when Layout differs from the one the previous successful Read returned
	// (always true for the first).
	Changed bool
}

// fileID identifies a version of a file: a replaced file has another inode, a file rewritten in
// place (which the protocol forbids for .meta) another size or mtime.
type fileID struct {
	dev, ino uint64
	size     int64
	mtimeNs  int64
}

func idOf(st *unix.Stat_t) fileID {
	return fileID{dev: uint64(st.Dev), ino: uint64(st.Ino), size: st.Size, mtimeNs: st.Mtim.Nano()}
}

// inode identifies a file regardless of its contents.
type inode struct{ dev, ino uint64 }

func inodeOf(st *unix.Stat_t) inode { return inode{dev: uint64(st.Dev), ino: uint64(st.Ino)} }

// Reader reads the metrics one application publishes at a base path. It keeps the .values
// file open and memory-mapped between reads, re-parses .meta only when its (device, inode, size,
// mtime) changed, and copies values out of the mapping into a buffer it reuses, so that a
// steady-state Read costs one system call (lstat of .meta; none for ReadUnchanged) and no
// allocation. An application truncating its .values file cannot crash the reader: the copy runs
// with debug.SetPanicOnFault, a fault (SIGBUS) becomes an ErrShortValues error, and the file is
// read with pread(2) until it is long enough again. (A file cut short within its last page
// reads as zeros there, as the kernel fills the page.) A file that cannot be mapped is read
// with pread(2).
//
// Values are always read through the descriptor opened for the .values file that was present
// when the current .meta was parsed, so they are never decoded with another file's layout: while
// a restarting writer is between its two renames (new .values, old .meta) a Read returns the old
// file's last values; once the new .meta lands the pair is taken again. A writer that replaces
// .values but never .meta is therefore read frozen at its first file.
//
// A Reader is not safe for concurrent use.
type Reader struct {
	opt                  ReaderOptions
	base                 string
	metaPath, valuesPath cpath

	st unix.Stat_t // scratch, kept here so it does not escape per call

	layout   *Layout
	reported *Layout // layout of the previous successful Read
	metaID   fileID  // identity of the parsed .meta
	paired   inode   // .values seen when layout was parsed
	stale    bool    // .meta changed since layout was parsed

	badMeta    fileID // identity of a .meta that failed to parse
	badMetaErr error

	values   *os.File
	valuesID inode
	mapped   []byte // mapping of values, nil when not mapped
	noMap    bool   // values cannot be mapped: read it with pread
	buf      []byte
}

// NewReader returns a Reader of the files base+".meta" and base+".values", where base is the
// application's CANTAL_PATH (as seen from the reader: inside a container, under
// /proc/PID/root). It does not touch the file system; errors surface from Read.
func NewReader(base string, opt ReaderOptions) *Reader {
	if opt.Open == nil {
		opt.Open = OpenFile
	}
	if opt.MaxMetaSize <= 0 {
		opt.MaxMetaSize = DefaultMaxMetaSize
	}
	if opt.MaxValuesSize <= 0 {
		opt.MaxValuesSize = DefaultMaxValuesSize
	}
	return &Reader{
		opt:        opt,
		base:       base,
		metaPath:   newCPath(base + ".meta"),
		valuesPath: newCPath(base + ".values"),
	}
}

// Base returns the base path given to NewReader.
func (r *Reader) Base() string { return r.base }

// errRetry makes Read start over.
var errRetry = errors.New("retry")

// Read returns the current layout and values. Errors wrap fs.ErrNotExist when a file is
// missing (the application has not started or has exited), ErrNotReady when the application is
// replacing its files (read again later), ErrShortValues, ErrTooLarge, or describe a malformed
// .meta file as "path:line: reason". They never quote the files (see ParseMeta).
func (r *Reader) Read() (Snapshot, error) { return r.read(true) }

// ReadUnchanged is Read without looking for a replaced .meta, for a caller that learns another
// way (inotify on the directory, say) that the files may have changed and calls Read then. With
// a layout loaded and the .values file mapped it makes no system call. It parses .meta as Read
// does when no layout is loaded: at the first read, after Close, and after a Read found .meta
// replaced or missing (until the files are back, every read then fails).
func (r *Reader) ReadUnchanged() (Snapshot, error) { return r.read(false) }

func (r *Reader) read(check bool) (Snapshot, error) {
	for range maxAttempts {
		if r.layout == nil || r.stale {
			if err := r.loadMeta(); err != nil {
				if err == errRetry {
					continue
				}
				return Snapshot{}, err
			}
		}
		if r.values == nil || r.valuesID != r.paired {
			if err := r.openValues(); err != nil {
				if err == errRetry {
					continue
				}
				return Snapshot{}, err
			}
		}
		n := r.layout.Size
		if cap(r.buf) < n {
			r.buf = make([]byte, n)
		}
		buf := r.buf[:n]
		if err := r.readValues(buf); err != nil {
			return Snapshot{}, err
		}
		// A .meta replaced while we read means the application restarted: what we read is
		// consistent (the open file is the one paired with the layout) but stale.
		if check {
			if err := r.checkMeta(); err != nil {
				if err == errRetry {
					continue
				}
				return Snapshot{}, err
			}
		}
		changed := r.layout != r.reported
		r.reported = r.layout
		return Snapshot{Layout: r.layout, Values: buf, Changed: changed}, nil
	}
	return Snapshot{}, fmt.Errorf("%s: files replaced during %d attempts to read them: %w", r.base, maxAttempts, ErrNotReady)
}

// checkMeta returns errRetry (and marks the layout stale) if .meta is no longer the parsed one.
// A .meta that cannot be found marks it stale too: until it is back, no read (ReadUnchanged
// included) returns the values of the file that was paired with it.
func (r *Reader) checkMeta() error {
	if err := lstat(&r.metaPath, &r.st); err != nil {
		r.stale = true
		return &fs.PathError{Op: "lstat", Path: r.metaPath.s, Err: err}
	}
	if idOf(&r.st) != r.metaID {
		r.stale = true
		return errRetry
	}
	return nil
}

// loadMeta reads and parses .meta and pairs it with the current .values.
func (r *Reader) loadMeta() error {
	if r.badMetaErr != nil {
		// Do not re-parse a broken file every scan.
		if err := lstat(&r.metaPath, &r.st); err != nil {
			return &fs.PathError{Op: "lstat", Path: r.metaPath.s, Err: err}
		}
		if idOf(&r.st) == r.badMeta {
			return r.badMetaErr
		}
		r.badMetaErr = nil
	}
	f, err := r.opt.Open(r.metaPath.s)
	if err != nil {
		return fmt.Errorf("open meta: %w", err)
	}
	defer f.Close()
	var st unix.Stat_t
	if err := fstat(f, &st); err != nil {
		return err
	}
	id := idOf(&st)
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Errorf("%s: not a regular file", r.metaPath.s)
	}
	if st.Size > r.opt.MaxMetaSize {
		return fmt.Errorf("%s: %d bytes, limit %d: %w", r.metaPath.s, st.Size, r.opt.MaxMetaSize, ErrTooLarge)
	}
	data, err := io.ReadAll(io.NewSectionReader(f, 0, r.opt.MaxMetaSize+1))
	if err != nil {
		return fmt.Errorf("read meta: %w", err)
	}
	if err := fstat(f, &st); err != nil {
		return err
	}
	if idOf(&st) != id || int64(len(data)) != st.Size {
		return errRetry // rewritten while we read it
	}
	lay, err := ParseMeta(r.metaPath.s, data)
	if err == nil && int64(lay.Size) > r.opt.MaxValuesSize {
		err = fmt.Errorf("%s: layout larger than the limit of %d bytes: %w", r.metaPath.s, r.opt.MaxValuesSize, ErrTooLarge)
	}
	if err != nil {
		if err := lstat(&r.metaPath, &r.st); err == nil && idOf(&r.st) == id {
			r.badMeta, r.badMetaErr = id, err
		}
		return err
	}
	// Pair the layout with the .values file present now, then make sure .meta did not change
	// meanwhile: the pair seen is then one that existed at a single moment.
	if err := lstat(&r.valuesPath, &r.st); err != nil {
		return &fs.PathError{Op: "lstat", Path: r.valuesPath.s, Err: err}
	}
	paired := inodeOf(&r.st)
	if err := lstat(&r.metaPath, &r.st); err != nil {
		return &fs.PathError{Op: "lstat", Path: r.metaPath.s, Err: err}
	}
	if idOf(&r.st) != id {
		return errRetry
	}
	// That moment may still be the one between a restarting writer's two renames, if it
	// did not remove its old .meta first. Clients create .values before .meta, so a .values
	// born after this .meta belongs to the next .meta. Only a young .values is suspect: files
	// copied by other tools can have any birth order, and a writer is between its renames
	// for microseconds, not for a whole youngValues.
	if mb, ok := birthNs(r.metaPath.s); ok {
		if vb, ok := birthNs(r.valuesPath.s); ok && vb > mb && time.Now().UnixNano()-vb < youngValues.Nanoseconds() {
			return fmt.Errorf("%s: values file is newer than meta file: %w", r.base, ErrNotReady)
		}
	}
	r.layout, r.metaID, r.paired, r.stale = lay, id, paired, false
	return nil
}

// openValues opens .values and checks it is the file paired with the layout.
func (r *Reader) openValues() error {
	r.closeValues()
	f, err := r.opt.Open(r.valuesPath.s)
	if err != nil {
		return fmt.Errorf("open values: %w", err)
	}
	var st unix.Stat_t
	if err := fstat(f, &st); err != nil {
		f.Close()
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		f.Close()
		return fmt.Errorf("%s: not a regular file", r.valuesPath.s)
	}
	if inodeOf(&st) != r.paired {
		f.Close()
		return errRetry // replaced between lstat and open
	}
	r.values, r.valuesID = f, r.paired
	return nil
}

// readValues fills buf from the open .values file: from its mapping when it is mapped and long
// enough, else with pread.
func (r *Reader) readValues(buf []byte) error {
	n := len(buf)
	if len(r.mapped) < n && !r.noMap {
		r.mapValues(n)
	}
	if len(r.mapped) >= n {
		if copyMapped(buf, r.mapped[:n]) {
			return nil
		}
		r.unmap() // truncated under the mapping: pread from now on tells how short it is
	}
	got, err := r.values.ReadAt(buf, 0)
	if got < n {
		if err == nil || err == io.EOF {
			return fmt.Errorf("%s: values file has %d bytes, fewer than its meta file describes: %w",
				r.valuesPath.s, got, ErrShortValues)
		}
		return fmt.Errorf("read values: %w", err)
	}
	return nil
}

// mapValues maps the first n bytes of the open .values file if it has that many; it leaves
// r.mapped nil otherwise (the file is read with pread, which reports it short).
func (r *Reader) mapValues(n int) {
	r.unmap()
	if n == 0 {
		return
	}
	var st unix.Stat_t
	if fstat(r.values, &st) != nil || st.Size < int64(n) {
		return
	}
	c, err := r.values.SyscallConn()
	if err != nil {
		r.noMap = true
		return
	}
	var m []byte
	var merr error
	if err := c.Control(func(fd uintptr) {
		m, merr = unix.Mmap(int(fd), 0, n, unix.PROT_READ, unix.MAP_SHARED)
	}); err != nil || merr != nil {
		r.noMap = true
		return
	}
	r.mapped = m
}

func (r *Reader) unmap() {
	if r.mapped != nil {
		unix.Munmap(r.mapped)
		r.mapped = nil
	}
}

// copyMapped copies src, a file mapping, to dst; it reports false if the file no longer backs
// all of src (reading there raises SIGBUS, which SetPanicOnFault turns into a panic recovered
// here).
func copyMapped(dst, src []byte) (ok bool) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if e := recover(); e != nil {
			if _, fault := e.(interface{ Addr() uintptr }); !fault {
				panic(e)
			}
			ok = false
		}
	}()
	copy(dst, src)
	return true
}

func (r *Reader) closeValues() error {
	r.unmap()
	r.noMap = false
	if r.values == nil {
		return nil
	}
	err := r.values.Close()
	r.values = nil
	return err
}

// Close closes the open .values file. The Reader may be used again; the next Read reopens it.
func (r *Reader) Close() error {
	r.layout, r.reported, r.stale = nil, nil, false
	return r.closeValues()
}

func fstat(f *os.File, st *unix.Stat_t) error {
	c, err := f.SyscallConn()
	if err != nil {
		return fmt.Errorf("fstat %s: %w", f.Name(), err)
	}
	var serr error
	if err := c.Control(func(fd uintptr) { serr = unix.Fstat(int(fd), st) }); err != nil {
		return fmt.Errorf("fstat %s: %w", f.Name(), err)
	}
	if serr != nil {
		return &fs.PathError{Op: "fstat", Path: f.Name(), Err: serr}
	}
	return nil
}
