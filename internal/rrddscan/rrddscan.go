// Package rrddscan is the agent's collector for XAPI rrdd plugin files: every scan it reads each
// file in a directory (by default /dev/shm/metrics) with package rrdd and turns each datasource
// into a series.
//
// Series are labelled {metric=<datasource>, plugin=<file name>, owner=<host|vm UUID|sr UUID>,
// units=<units>} (units omitted when empty). A derive datasource is a series.Counter (the agent
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
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cantal-go/cantal/internal/safefile"
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
	policy  safefile.Policy
	plugins map[string]*plugin
	scan    uint64
	buf     bytes.Buffer

	files, updates, noUpdates, torn, failures atomic.Uint64
}

// plugin is what the Collector keeps per file between scans.
type plugin struct {
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
		policy:  safefile.Policy{MaxSize: opt.MaxSize}, // plugins run as root: no owner check
		plugins: map[string]*plugin{},
	}
}

// Stats returns the Collector's counters.
func (c *Collector) Stats() Stats {
	return Stats{Files: c.files.Load(), Updates: c.updates.Load(), NoUpdates: c.noUpdates.Load(),
		Torn: c.torn.Load(), Failures: c.failures.Load()}
}

// Collect reads every plugin file in the directory into sink. A missing directory yields no
// series and no error; an unreadable one is an error. Files whose names start with "." are
// skipped (temporary files); files that disappeared are forgotten.
func (c *Collector) Collect(ctx context.Context, sink series.Sink) error {
	c.scan++
	entries, err := os.ReadDir(c.dir)
	if errors.Is(err, fs.ErrNotExist) {
		clear(c.plugins)
		return nil
	}
	if err != nil {
		return fmt.Errorf("list rrdd plugin directory: %w", err)
	}
	now := c.opt.Now()
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue
		}
		p := c.plugins[name]
		if p == nil {
			p = &plugin{}
			c.plugins[name] = p
		}
		p.seen = c.scan
		c.collectFile(p, name, now, sink)
	}
	for name, p := range c.plugins {
		if p.seen != c.scan {
			delete(c.plugins, name)
		}
	}
	return nil
}

func (c *Collector) collectFile(p *plugin, name string, now time.Time, sink series.Sink) {
	path := filepath.Join(c.dir, name)
	c.files.Add(1)
	data, err := c.read(path)
	if err != nil {
		c.failures.Add(1)
		p.good = false
		sink.Problem(path, err.Error())
		return
	}
	err = p.r.Read(data)
	switch {
	case err == nil:
		c.updates.Add(1)
		p.good, p.tornRun = true, 0
		if g := p.r.MetadataGeneration(); g != p.gen || p.outs == nil {
			p.gen = g
			p.outs = c.outputs(p.r.Datasources(), name, sink, p.outs)
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

// read reads the whole file at path under the file-safety policy, into c.buf.
func (c *Collector) read(path string) ([]byte, error) {
	f, err := c.policy.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	c.buf.Reset()
	if _, err := c.buf.ReadFrom(io.LimitReader(f, c.opt.MaxSize+1)); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(c.buf.Len()) > c.opt.MaxSize {
		return nil, fmt.Errorf("%s grew past the limit of %d bytes", path, c.opt.MaxSize)
	}
	return c.buf.Bytes(), nil
}

// outputs registers the series of dss, keeping the derive state of datasources that are still
// there with the same definition.
func (c *Collector) outputs(dss []rrdd.Datasource, file string, sink series.Sink, old []output) []output {
	prev := make(map[string]*output, len(old))
	for i := range old {
		prev[old[i].ds.Name] = &old[i]
	}
	outs := make([]output, len(dss))
	for i, ds := range dss {
		labels := series.Labels{"metric": ds.Name, "plugin": file, "owner": ds.Owner}
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
