// Package textfile is the agent's textfile collector (--textfile-dir): it reads the *.prom
// files that cron jobs and scripts write for node_exporter's textfile collector, in the
// Prometheus text format, and writes their samples into the scan's series.Sink like every other
// collector, so that they join the history, the API and cluster queries.
//
// # Series
//
// Each sample of a file is a series.Float series labelled {metric=<name>, textfile=<path>,
// <its labels>...} (empty label values left out); /metrics writes it under its own name and
// labels, without textfile (internal/promname maps a series with the textfile label verbatim,
// with the family's type from Collector.Type). A histogram or summary is written as its lines:
// <name>_bucket{le}, <name>_sum, <name>_count, <name>{quantile}, untyped. Besides the files'
// series, the collector writes node_exporter's own: textfile.mtime_s{file=<path>} (exported as
// node_textfile_mtime_seconds), the mtime in whole seconds of each file read successfully, and
// textfile.scrape_error (node_textfile_scrape_error): 1 when any file, or the directory, could
// not be read or was refused, else 0.
//
// # Hostile files
//
// The agent runs as root; the directory may be writable by others. So:
//
//   - The directory is opened with confined.OpenTrustedDir: a directory or symlink squatted in a
//     world-writable directory is refused whatever it points to.
//   - Each file is opened by name in that directory (confined.Policy.OpenAt): never through a
//     symlink (a symlink, even to a file in the directory, is refused), never a FIFO or device,
//     only a regular file of at most Options.MaxFileSize bytes (1 MiB). Only files owned by root
//     or by the directory's owner are read, and none that every user may write to; others are
//     refused without being read.
//   - A file is read whole, once, into memory, and parsed (Parse) all or nothing: a malformed
//     line, a client-side timestamp, a series twice, a reserved label refuse the whole file
//     (its series are not written this scan; the other files' are). The file is stat'ed again
//     after the read: a file that changed while it was read (written in place) is not taken
//     this scan, nor is a file modified less than Options.Settle (100 ms) ago unless it was
//     the same at the previous scan: a writer writing in place is given time to finish, the
//     previous version's values standing meanwhile. Writing to a temporary name and renaming
//     into place, as node_exporter's documentation asks, is never read half-written; a file
//     written in place by a writer that stalls longer than that mid-write can be caught as a
//     prefix, which is refused unless it ends on a line boundary.
//   - The files' sizes together are capped (Options.MaxTotalSize, 16 MiB), and so are their
//     series (Options.MaxSeries, 50 000): a file beyond either is refused.
//   - A series already taken from an earlier file (in name order) refuses the later file, and
//     so does a family typed otherwise there: /metrics never has a series twice.
//   - Problems name the file and what is wrong, never its contents.
//
// A file is parsed again only when its inode, size, mtime or ctime changed since the last scan;
// otherwise its last values are written again without reading it. Names starting with "."
// (temporary files) are skipped, as are names not ending in ".prom".
package textfile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cantal-go/cantal/internal/confined"
	"github.com/cantal-go/cantal/internal/series"
)

// Defaults of Options.
const (
	DefaultMaxFileSize  = 1 << 20
	DefaultMaxTotalSize = 16 << 20
	DefaultMaxSeries    = 50000
)

// Options tune a Collector; the zero value takes the defaults.
type Options struct {
	MaxFileSize  int64 // a larger file is refused
	MaxTotalSize int64 // files beyond this many bytes together are refused
	MaxSeries    int   // files beyond this many series together are refused
	// Settle: a file modified less than this long ago is taken only once it is the same at two
	// scans in a row (a writer writing in place may not be done); DefaultSettle when zero,
	// none when negative.
	Settle time.Duration
	// Now is the clock Settle is measured with; time.Now when nil.
	Now func() time.Time
}

// DefaultSettle is the default Options.Settle: a cron job writing its file in place is done
// within milliseconds.
const DefaultSettle = 100 * time.Millisecond

// Collector reads one directory's *.prom files. Collect is called from the scan goroutine,
// never concurrently with itself; Type may be called from any goroutine.
type Collector struct {
	dir    string
	opt    Options
	policy confined.Policy
	files  map[string]*file // by name
	scan   uint64
	buf    []byte

	errRef *series.Ref
	taken  map[string]bool // series taken in this scan, by key (kept for its buckets)

	mu    sync.RWMutex
	types map[string]Type // family types of the files taken in the latest scan

	parses atomic.Uint64
}

// Parses returns how many times a file was read and parsed since the Collector was made (an
// unchanged file is not).
func (c *Collector) Parses() uint64 { return c.parses.Load() }

// file is what the Collector keeps of one file between scans.
type file struct {
	stat    statKey
	pending statKey // a version seen modified less than Options.Settle ago, not taken yet
	parsed  *File   // nil: the last read failed (err), or not read yet
	err     string  // why the last read failed
	refs    []*series.Ref
	mtime   *series.Ref
	mtimeS  float64
	seen    uint64
	path    string
}

// statKey is what tells a file changed.
type statKey struct {
	dev, ino   uint64
	size       int64
	mtime      unix.Timespec
	ctime      unix.Timespec
	uid, mode  uint32
	configured bool
}

func keyOf(st *unix.Stat_t) statKey {
	return statKey{dev: st.Dev, ino: st.Ino, size: st.Size, mtime: st.Mtim, ctime: st.Ctim, uid: st.Uid, mode: st.Mode, configured: true}
}

// New returns a Collector of the *.prom files in dir.
func New(dir string, opt Options) *Collector {
	if opt.MaxFileSize <= 0 {
		opt.MaxFileSize = DefaultMaxFileSize
	}
	if opt.MaxTotalSize <= 0 {
		opt.MaxTotalSize = DefaultMaxTotalSize
	}
	if opt.MaxSeries <= 0 {
		opt.MaxSeries = DefaultMaxSeries
	}
	if opt.Settle == 0 {
		opt.Settle = DefaultSettle
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	return &Collector{dir: dir, opt: opt, policy: confined.Policy{MaxSize: opt.MaxFileSize},
		files: map[string]*file{}, types: map[string]Type{}, taken: map[string]bool{}}
}

// Type returns the type of the family name as the files taken in the latest scan declare it.
func (c *Collector) Type(name string) (Type, bool) {
	c.mu.RLock()
	t, ok := c.types[name]
	c.mu.RUnlock()
	return t, ok
}

// Collect reads the directory's *.prom files into sink. Every failure is reported with
// sink.Problem and counted in textfile.scrape_error; Collect itself returns only ctx's error.
func (c *Collector) Collect(ctx context.Context, sink series.Sink) error {
	c.scan++
	if c.errRef == nil {
		c.errRef = sink.Series(series.Labels{"metric": "textfile.scrape_error"}, series.Level)
	}
	failed := false
	types := map[string]Type{}
	defer func() {
		v := int64(0)
		if failed {
			v = 1
		}
		sink.Put(c.errRef, uint64(v))
		c.mu.Lock()
		c.types = types
		c.mu.Unlock()
	}()
	d, err := confined.OpenTrustedDir(c.dir)
	if err != nil {
		failed = true
		clear(c.files)
		if errors.Is(err, fs.ErrNotExist) {
			sink.Problem(c.dir, "textfile directory does not exist")
		} else {
			sink.Problem(c.dir, "textfile directory: "+err.Error())
		}
		return nil
	}
	defer d.Close()
	names, err := d.Names()
	if err != nil {
		failed = true
		sink.Problem(c.dir, "list textfile directory: "+err.Error())
		return nil
	}
	var total int64
	nseries := 0
	taken := c.taken
	clear(taken)
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return err
		}
		if !strings.HasSuffix(name, ".prom") || strings.HasPrefix(name, ".") {
			continue
		}
		f := c.files[name]
		if f == nil {
			f = &file{path: filepath.Join(c.dir, name)}
			c.files[name] = f
		}
		f.seen = c.scan
		if err := c.read(d, name, f); err != nil {
			failed = true
			sink.Problem(f.path, err.Error())
			continue
		}
		if f.parsed == nil {
			continue // a new file still settling: taken at a later scan
		}
		total += f.stat.size
		if total > c.opt.MaxTotalSize {
			failed = true
			sink.Problem(f.path, fmt.Sprintf("refused: the *.prom files together are larger than %d bytes", c.opt.MaxTotalSize))
			continue
		}
		if nseries+len(f.parsed.Samples) > c.opt.MaxSeries {
			failed = true
			sink.Problem(f.path, fmt.Sprintf("refused: the *.prom files together have more than %d series", c.opt.MaxSeries))
			continue
		}
		if msg := conflict(f.parsed, taken, types); msg != "" {
			failed = true
			sink.Problem(f.path, "refused: "+msg)
			continue
		}
		nseries += len(f.parsed.Samples)
		for i := range f.parsed.Samples {
			s := &f.parsed.Samples[i]
			taken[s.key] = true
			types[s.Name] = f.parsed.Types[s.Name]
		}
		c.put(f, sink)
	}
	for name, f := range c.files {
		if f.seen != c.scan {
			delete(c.files, name)
		}
	}
	return nil
}

// conflict says why p cannot be taken beside the series and types taken from earlier files.
func conflict(p *File, taken map[string]bool, types map[string]Type) string {
	for i := range p.Samples {
		s := &p.Samples[i]
		if taken[s.key] {
			return "a series of family " + s.Name + " is in an earlier file too"
		}
		if t, ok := types[s.Name]; ok && t != p.Types[s.Name] {
			return "family " + s.Name + " has another type in an earlier file"
		}
	}
	return ""
}

// read makes f.parsed current: it opens the file under the policy and parses it again unless
// its stat is what it was at the last read.
func (c *Collector) read(d *confined.Dir, name string, f *file) error {
	fh, st, err := c.policy.OpenAt(d, name)
	if err != nil {
		f.parsed, f.stat = nil, statKey{}
		var re *confined.RefusedError
		if errors.As(err, &re) {
			return fmt.Errorf("refused: %s", re.Reason)
		}
		return err
	}
	defer fh.Close()
	if st.Uid != 0 && st.Uid != d.Stat().Uid {
		f.parsed, f.stat = nil, statKey{}
		return fmt.Errorf("refused: owned by uid %d, neither root nor the directory's owner", st.Uid)
	}
	if st.Mode&0o002 != 0 {
		f.parsed, f.stat = nil, statKey{}
		return errors.New("refused: every user may write to it")
	}
	k := keyOf(st)
	if k == f.stat {
		if f.parsed == nil {
			return errors.New(f.err)
		}
		return nil // unchanged: its last values stand
	}
	if mt := time.Unix(int64(st.Mtim.Sec), int64(st.Mtim.Nsec)); c.opt.Settle > 0 && c.opt.Now().Sub(mt) < c.opt.Settle && k != f.pending {
		// Modified a moment ago: a writer writing in place may not be done. The version it
		// had (if any) stands for this scan; this one is taken if it is the same next scan.
		f.pending = k
		return nil
	}
	c.buf = c.buf[:0]
	buf, err := readAll(fh, c.buf, c.opt.MaxFileSize)
	c.buf = buf[:0]
	if err != nil {
		f.parsed, f.stat = nil, statKey{}
		return err
	}
	var after unix.Stat_t
	if err := unix.Fstat(int(fh.Fd()), &after); err != nil {
		f.parsed, f.stat = nil, statKey{}
		return fmt.Errorf("stat: %w", err)
	}
	if keyOf(&after) != k || int64(len(buf)) != after.Size {
		f.parsed, f.stat = nil, statKey{}
		return errors.New("changed while it was read (written in place?): not taken this scan")
	}
	c.parses.Add(1)
	p, err := Parse(buf)
	f.stat = k
	if err != nil {
		f.parsed, f.err = nil, "refused: "+err.Error()
		return errors.New(f.err)
	}
	f.parsed, f.refs = p, nil
	f.mtimeS = float64(st.Mtim.Sec) // whole seconds, as node_exporter 1.5
	return nil
}

// readAll reads r into buf, refusing more than max bytes.
func readAll(r io.Reader, buf []byte, max int64) ([]byte, error) {
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > max {
			return buf, fmt.Errorf("refused: grew past the limit of %d bytes while read", max)
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, fmt.Errorf("read: %w", err)
		}
	}
}

// put writes f's samples and its mtime.
func (c *Collector) put(f *file, sink series.Sink) {
	if f.refs == nil {
		f.refs = make([]*series.Ref, len(f.parsed.Samples))
		for i := range f.parsed.Samples {
			s := &f.parsed.Samples[i]
			l := make(series.Labels, len(s.Labels)+2)
			for _, lp := range s.Labels {
				l[lp.Name] = lp.Value
			}
			l[MetricLabel], l[TextfileLabel] = s.Name, f.path
			f.refs[i] = sink.Series(l, series.Float)
		}
	}
	for i, r := range f.refs {
		sink.Put(r, math.Float64bits(f.parsed.Samples[i].Value))
	}
	if f.mtime == nil {
		f.mtime = sink.Series(series.Labels{"metric": "textfile.mtime_s", "file": f.path}, series.Float)
	}
	sink.Put(f.mtime, math.Float64bits(f.mtimeS))
}
