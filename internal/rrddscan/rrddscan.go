// Package rrddscan is the agent's collector for XAPI rrdd plugin files: every scan it reads each
// file in a directory (by default /dev/shm/metrics) with package rrdd and turns each datasource
// into a series.
//
// Series are labelled {metric=<datasource>, plugin=<file name>, owner=<host|vm UUID|sr UUID>,
// units=<units>} (units omitted when empty).
//
// # Whose files
//
// The agent reads the directory as root, and the default one lies in world-writable /dev/shm,
// where any user can create it first. So, every scan:
//
//   - The directory is opened with confined.OpenTrustedDir: walked from "/" without letting the
//     kernel follow symlinks, and refused unless root put every component of its path where it
//     is. A directory or symlink of another user in a world-writable (sticky) directory is
//     squatted: Collect fails with a refusal that does not depend on what it points to, and
//     nothing in it is read. A missing directory is no error.
//   - Each file is opened in that directory by name (confined.Policy.OpenAt): never through a
//     symlink, never a FIFO or device (opened O_PATH first, so there is no side effect), only a
//     regular file of at most Options.MaxSize bytes.
//   - XAPI plugins run as root, so only a file that root owns and that only root can have put in
//     the directory (confined.Dir.RootPlaced: the directory is root's and closed to others, or
//     sticky with the file root's and singly linked) publishes its datasources' owners as they
//     are written (host, vm UUID, sr UUID). Any other file — another user's, in a directory
//     others may write to — is read, but every one of its series is labelled owner="uid N",
//     N being the file's owner, whatever its metadata claims: it can never pass for the host's
//     (or a VM's), and its data is still there for whoever wants it.
//
// Problems never quote a file: rrdd.Reader's errors say what is wrong and where, not which bytes
// were found. A derive datasource is a series.Counter (the agent
// computes its rate); gauge and absolute ones are a Level (int64 values) or a Float (float
// values, or any value under the "inverse" transform, which is applied here as 1/x).
//
// Min and max are applied as xcp-rrdd applies them (rrd.ml ds_update): to the value it stores,
// which for gauge and absolute is the value itself and for derive is the per-second rate; a
// value out of range is unknown, so that scan has no sample for the series (a gap, never a
// clamped value). For a derive the rate is measured between this collector's reads with its own
// clock, as xcp-rrdd does; when a rate is out of range the counter's sample is dropped and the
// agent's rate over the gap includes the rejected increase.
//
// As xcp-rrdd does, an unchanged file (ErrNoUpdate) still reports its last values: the file says
// they are current. A torn read (checksum mismatch or truncation, normal while a plugin rewrites
// its file in place) also reports the last good values, and is reported as a problem only when
// it happens twice in a row; after three torn reads in a row the series get no samples until a
// good read. Any other failure (refused file, bad header, bad metadata) is reported with
// Sink.Problem every scan and the file is tried again next scan: unlike xcp-rrdd there is no
// exponential silencing.
package rrddscan

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cantal-go/cantal/internal/confined"
	"github.com/cantal-go/cantal/internal/series"
	"github.com/cantal-go/cantal/rrdd"
)

// DefaultMaxSize is the default cap on a plugin file's size: xcp-rrdd's file writer maps a few
// 4 KiB pages; 1 MiB holds thousands of datasources.
const DefaultMaxSize = 1 << 20

// Options tunes a Collector. The zero value is ready to use.
type Options struct {
	// MaxSize refuses plugin files larger than this many bytes; DefaultMaxSize when zero.
	MaxSize int64
	// Now is the clock used to measure derive rates for min/max; time.Now when nil.
	Now func() time.Time
}

// Stats counts what a Collector has read since it was made.
type Stats struct {
	Files     uint64 // plugin files read (whatever the result)
	Updates   uint64 // reads with new values
	NoUpdates uint64 // reads of an unchanged file
	Torn      uint64 // torn or corrupt reads (checksum mismatch, truncation)
	Failures  uint64 // files refused or unreadable, bad headers, bad metadata
}

// Collector reads the plugin files of one directory. It implements series.Collector: Collect is
// called from the scan goroutine, never concurrently with itself. Stats may be called from any
// goroutine.
type Collector struct {
	dir     string
	opt     Options
	policy  confined.Policy // no owner check: any owner may be read (see owner)
	plugins map[string]*plugin
	scan    uint64
	buf     bytes.Buffer

	files, updates, noUpdates, torn, failures atomic.Uint64
}

// plugin is what the Collector keeps per file between scans.
type plugin struct {
	owner   string // "" for the host's file, else the owner label of all its series ("uid N")
	r       rrdd.Reader
	gen     uint64 // the reader's metadata generation outs were built for
	outs    []output
	seen    uint64 // last scan the file was listed
	good    bool   // the reader holds good values
	tornRun int    // consecutive torn reads
}

// output is one datasource's series.
type output struct {
	ref       *series.Ref
	ds        rrdd.Datasource
	haveLast  bool // derive: last value and time, for the rate min/max apply to
	last      float64
	lastAt    time.Time
	boundRate bool // derive with a finite min or max
}

// New returns a Collector of the plugin files in dir.
func New(dir string, opt Options) *Collector {
	if opt.MaxSize <= 0 {
		opt.MaxSize = DefaultMaxSize
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	return &Collector{
		dir:     dir,
		opt:     opt,
		policy:  confined.Policy{MaxSize: opt.MaxSize},
		plugins: map[string]*plugin{},
	}
}

// Stats returns the Collector's counters.
func (c *Collector) Stats() Stats {
	return Stats{Files: c.files.Load(), Updates: c.updates.Load(), NoUpdates: c.noUpdates.Load(),
		Torn: c.torn.Load(), Failures: c.failures.Load()}
}

// Collect reads every plugin file in the directory into sink. A missing directory yields no
// series and no error; a squatted (see the package documentation) or unreadable one is an
// error. Files whose names start with "." are skipped (temporary files); files that disappeared
// are forgotten.
func (c *Collector) Collect(ctx context.Context, sink series.Sink) error {
	c.scan++
	d, err := confined.OpenTrustedDir(c.dir)
	if errors.Is(err, fs.ErrNotExist) {
		clear(c.plugins)
		return nil
	}
	if err != nil {
		clear(c.plugins)
		return fmt.Errorf("rrdd plugin directory: %w", err)
	}
	defer d.Close()
	names, err := d.Names()
	if err != nil {
		return fmt.Errorf("list rrdd plugin directory: %w", err)
	}
	now := c.opt.Now()
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return err
		}
		if strings.HasPrefix(name, ".") {
			continue
		}
		p := c.plugins[name]
		if p == nil {
			p = &plugin{}
			c.plugins[name] = p
		}
		p.seen = c.scan
		c.collectFile(d, p, name, now, sink)
	}
	for name, p := range c.plugins {
		if p.seen != c.scan {
			delete(c.plugins, name)
		}
	}
	return nil
}

func (c *Collector) collectFile(d *confined.Dir, p *plugin, name string, now time.Time, sink series.Sink) {
	path := filepath.Join(c.dir, name)
	c.files.Add(1)
	data, owner, err := c.read(d, name)
	if err != nil {
		c.failures.Add(1)
		p.good = false
		sink.Problem(path, err.Error())
		return
	}
	if owner != p.owner {
		// Another owner (a file replaced, or chowned): nothing read before is this file's.
		*p = plugin{owner: owner, seen: p.seen}
	}
	err = p.r.Read(data)
	switch {
	case err == nil:
		c.updates.Add(1)
		p.good, p.tornRun = true, 0
		if g := p.r.MetadataGeneration(); g != p.gen || p.outs == nil {
			p.gen = g
			p.outs = c.outputs(p.r.Datasources(), name, p.owner, sink, p.outs)
		}
	case errors.Is(err, rrdd.ErrNoUpdate):
		// The file holds exactly the data of the reader's last good read.
		c.noUpdates.Add(1)
		p.good, p.tornRun = p.outs != nil, 0
	case errors.Is(err, rrdd.ErrChecksum), errors.Is(err, rrdd.ErrTruncated):
		c.torn.Add(1)
		p.tornRun++
		if p.tornRun > 1 {
			sink.Problem(path, fmt.Sprintf("%d torn or corrupt reads in a row: %v", p.tornRun, err))
		}
		if p.tornRun > 3 {
			return
		}
	default:
		c.failures.Add(1)
		p.good = false
		sink.Problem(path, err.Error())
		return
	}
	if p.good {
		p.put(now, sink)
	}
}

// read reads the whole file name of d under the file-safety policy, into c.buf, and returns
// the owner label of its series (see owner).
func (c *Collector) read(d *confined.Dir, name string) ([]byte, string, error) {
	f, st, err := c.policy.OpenAt(d, name)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	c.buf.Reset()
	if _, err := c.buf.ReadFrom(io.LimitReader(f, c.opt.MaxSize+1)); err != nil {
		return nil, "", fmt.Errorf("read %s: %w", f.Name(), err)
	}
	if int64(c.buf.Len()) > c.opt.MaxSize {
		return nil, "", fmt.Errorf("%s grew past the limit of %d bytes", f.Name(), c.opt.MaxSize)
	}
	return c.buf.Bytes(), owner(d, st), nil
}

// owner returns "" when the file with stat st is the host's: root's, and put in d by root (XAPI
// plugins run as root); otherwise "uid N", the owner label of all of its series, so that a file
// anyone else could have written never publishes series labelled as the host's or a VM's.
func owner(d *confined.Dir, st *unix.Stat_t) string {
	if st.Uid == 0 && d.RootPlaced(st) {
		return ""
	}
	return "uid " + strconv.FormatUint(uint64(st.Uid), 10)
}

// outputs registers the series of dss, keeping the derive state of datasources that are still
// there with the same definition. owner, when not empty, replaces every datasource's owner.
func (c *Collector) outputs(dss []rrdd.Datasource, file, owner string, sink series.Sink, old []output) []output {
	prev := make(map[string]*output, len(old))
	for i := range old {
		prev[old[i].ds.Name] = &old[i]
	}
	outs := make([]output, len(dss))
	for i, ds := range dss {
		labels := series.Labels{"metric": ds.Name, "plugin": file, "owner": ds.Owner}
		if owner != "" {
			labels["owner"] = owner
		}
		if ds.Units != "" {
			labels["units"] = ds.Units
		}
		kind := series.Float
		switch {
		case ds.Type == rrdd.Derive:
			kind = series.Counter
		case ds.ValueType == rrdd.Int64 && ds.Transform == rrdd.Identity:
			kind = series.Level
		}
		o := output{ref: sink.Series(labels, kind), ds: ds,
			boundRate: ds.Type == rrdd.Derive && (!math.IsInf(ds.Min, -1) || !math.IsInf(ds.Max, 1))}
		if p := prev[ds.Name]; p != nil && p.ds == ds {
			o.haveLast, o.last, o.lastAt = p.haveLast, p.last, p.lastAt
		}
		outs[i] = o
	}
	return outs
}

// put writes the reader's current values.
func (p *plugin) put(now time.Time, sink series.Sink) {
	vals := p.r.Values()
	for i := range p.outs {
		o := &p.outs[i]
		if bits, ok := o.sample(vals[i], now); ok {
			sink.Put(o.ref, bits)
		}
	}
}

// sample converts v to the bits of o's series, or reports that the value is unknown (out of
// min/max, or not representable as a counter).
func (o *output) sample(v rrdd.Value, now time.Time) (uint64, bool) {
	ds := &o.ds
	switch o.ref.Kind {
	case series.Counter:
		x := v.As(ds.ValueType)
		if !(x >= 0 && x < 1<<64) {
			return 0, false // a negative or non-finite counter has no uint64 form
		}
		bits := uint64(v.Int())
		if ds.ValueType == rrdd.Float {
			bits = uint64(x)
		}
		if !o.boundRate {
			return bits, true
		}
		ok := true
		if o.haveLast && x >= o.last && now.After(o.lastAt) {
			rate := (x - o.last) / now.Sub(o.lastAt).Seconds()
			ok = rate >= ds.Min && rate <= ds.Max
		}
		o.haveLast, o.last, o.lastAt = true, x, now
		return bits, ok
	case series.Level:
		x := v.Int()
		if f := float64(x); f < ds.Min || f > ds.Max {
			return 0, false
		}
		return uint64(x), true
	default:
		f := v.As(ds.ValueType)
		if ds.Transform == rrdd.Inverse {
			f = 1 / f
		}
		if f < ds.Min || f > ds.Max {
			return 0, false
		}
		return math.Float64bits(f), true
	}
}
