// Package procmix records and loads the "realistic mix": the series this agent sees on a real
// machine (system counters, memory levels, per-process CPU and memory, load averages), scanned
// from /proc at the agent's interval. The history package's tests and the peer benchmarks replay
// it, so compression ratios are measured on data shaped like production rather than on
// synthetic curves only.
//
// The file format is gzip-compressed JSON lines: the first line is the array of series
// ({"key", "kind"}); every following line is one scan {"ts": unix-ms, "v": [bits or null, ...]}
// with one entry per series in header order (null: the series was absent from that scan).
package procmix

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cantal-go/cantal/internal/series"
)

// SeriesInfo names one series of a Mix.
type SeriesInfo struct {
	Key  string      `json:"key"`
	Kind series.Kind `json:"kind"`
}

// Scan is one scan of a Mix: its time and, per series (in Mix.Series order), the raw value bits
// or nil when the series was absent.
type Scan struct {
	TS int64     `json:"ts"`
	V  []*uint64 `json:"v"`
}

// Mix is a recorded sequence of scans. A Mix is plain data; it is not safe for concurrent
// modification.
type Mix struct {
	Series []SeriesInfo
	Scans  []Scan
}

// Points returns the number of present values in m.
func (m *Mix) Points() int {
	n := 0
	for _, s := range m.Scans {
		for _, v := range s.V {
			if v != nil {
				n++
			}
		}
	}
	return n
}

// Column returns the values of series i, with ok[j] false where scan j has no value.
func (m *Mix) Column(i int) (ts []int64, vals []uint64, ok []bool) {
	for _, s := range m.Scans {
		ts = append(ts, s.TS)
		if i < len(s.V) && s.V[i] != nil {
			vals = append(vals, *s.V[i])
			ok = append(ok, true)
		} else {
			vals = append(vals, 0)
			ok = append(ok, false)
		}
	}
	return ts, vals, ok
}

// maxLine bounds one JSON line of a mix file.
const maxLine = 64 << 20

// Load reads a mix file written by Write.
func Load(path string) (*Mix, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load mix: %w", err)
	}
	defer f.Close()
	m, err := Read(f)
	if err != nil {
		return nil, fmt.Errorf("load mix %s: %w", path, err)
	}
	return m, nil
}

// Read decodes a mix from r (gzip-compressed JSON lines).
func Read(r io.Reader) (*Mix, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("read mix: %w", err)
	}
	defer zr.Close()
	sc := bufio.NewScanner(zr)
	sc.Buffer(make([]byte, 0, 1<<20), maxLine)
	m := &Mix{}
	if !sc.Scan() {
		return nil, fmt.Errorf("read mix: missing header: %w", errOr(sc.Err(), io.ErrUnexpectedEOF))
	}
	if err := json.Unmarshal(sc.Bytes(), &m.Series); err != nil {
		return nil, fmt.Errorf("read mix header: %w", err)
	}
	for sc.Scan() {
		var s Scan
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			return nil, fmt.Errorf("read mix scan %d: %w", len(m.Scans), err)
		}
		if len(s.V) > len(m.Series) {
			return nil, fmt.Errorf("read mix scan %d: %d values for %d series", len(m.Scans), len(s.V), len(m.Series))
		}
		for len(s.V) < len(m.Series) {
			s.V = append(s.V, nil)
		}
		m.Scans = append(m.Scans, s)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read mix: %w", err)
	}
	return m, nil
}

func errOr(err, def error) error {
	if err != nil {
		return err
	}
	return def
}

// Write encodes m to w.
func (m *Mix) Write(w io.Writer) error {
	zw := gzip.NewWriter(w)
	enc := json.NewEncoder(zw)
	if err := enc.Encode(m.Series); err != nil {
		return fmt.Errorf("write mix: %w", err)
	}
	for i := range m.Scans {
		if err := enc.Encode(&m.Scans[i]); err != nil {
			return fmt.Errorf("write mix: %w", err)
		}
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("write mix: %w", err)
	}
	return nil
}

// Recorder scans a proc file system and accumulates a Mix. It is not safe for concurrent use.
type Recorder struct {
	Proc  string // proc root, e.g. "/proc"
	index map[string]int
	mix   Mix
	buf   []byte
}

// NewRecorder returns a Recorder reading the proc file system at procRoot.
func NewRecorder(procRoot string) *Recorder {
	return &Recorder{Proc: procRoot, index: map[string]int{}}
}

// Record scans n times, interval apart, stopping early when ctx is done.
func (r *Recorder) Record(ctx context.Context, n int, interval time.Duration) (*Mix, error) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for i := 0; i < n; i++ {
		if err := r.ScanOnce(time.Now()); err != nil {
			return nil, err
		}
		if i == n-1 {
			break
		}
		select {
		case <-ctx.Done():
			return &r.mix, ctx.Err()
		case <-t.C:
		}
	}
	return &r.mix, nil
}

// Mix returns what has been recorded so far. It shares memory with r.
func (r *Recorder) Mix() *Mix { return &r.mix }

type scanCtx struct {
	r    *Recorder
	vals map[int]uint64
}

func (c *scanCtx) put(labels series.Labels, kind series.Kind, bits uint64) {
	key := labels.Key()
	i, ok := c.r.index[key]
	if !ok {
		i = len(c.r.mix.Series)
		c.r.index[key] = i
		c.r.mix.Series = append(c.r.mix.Series, SeriesInfo{Key: key, Kind: kind})
	}
	c.vals[i] = bits
}

// ScanOnce reads the proc file system once and appends one scan stamped now.
func (r *Recorder) ScanOnce(now time.Time) error {
	c := &scanCtx{r: r, vals: map[int]uint64{}}
	if err := r.system(c); err != nil {
		return err
	}
	r.processes(c)
	s := Scan{TS: now.UnixMilli(), V: make([]*uint64, len(r.mix.Series))}
	for i, v := range c.vals {
		v := v
		s.V[i] = &v
	}
	// Earlier scans get nil for series first seen now.
	for j := range r.mix.Scans {
		for len(r.mix.Scans[j].V) < len(r.mix.Series) {
			r.mix.Scans[j].V = append(r.mix.Scans[j].V, nil)
		}
	}
	r.mix.Scans = append(r.mix.Scans, s)
	return nil
}

func (r *Recorder) read(rel string) (string, error) {
	b, err := os.ReadFile(filepath.Join(r.Proc, rel))
	if err != nil {
		return "", fmt.Errorf("record: %w", err)
	}
	return string(b), nil
}

func (r *Recorder) system(c *scanCtx) error {
	stat, err := r.read("stat")
	if err != nil {
		return err
	}
	for _, line := range strings.Split(stat, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch {
		case strings.HasPrefix(f[0], "cpu"):
			names := []string{"user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"}
			for i, n := range names {
				if i+1 < len(f) {
					if v, err := strconv.ParseUint(f[i+1], 10, 64); err == nil {
						c.put(series.Labels{"metric": "cpu." + n, "cpu": f[0]}, series.Counter, v)
					}
				}
			}
		case f[0] == "ctxt" || f[0] == "processes" || f[0] == "intr":
			if v, err := strconv.ParseUint(f[1], 10, 64); err == nil {
				c.put(series.Labels{"metric": "stat." + f[0]}, series.Counter, v)
			}
		case f[0] == "procs_running" || f[0] == "procs_blocked":
			if v, err := strconv.ParseInt(f[1], 10, 64); err == nil {
				c.put(series.Labels{"metric": "stat." + f[0]}, series.Level, uint64(v))
			}
		}
	}
	if mem, err := r.read("meminfo"); err == nil {
		for _, line := range strings.Split(mem, "\n") {
			f := strings.Fields(line)
			if len(f) >= 2 {
				if v, err := strconv.ParseInt(f[1], 10, 64); err == nil {
					mul := int64(1)
					if len(f) == 3 && f[2] == "kB" {
						mul = 1024
					}
					c.put(series.Labels{"metric": "memory." + strings.TrimSuffix(f[0], ":")}, series.Level, uint64(v*mul))
				}
			}
		}
	}
	if vm, err := r.read("vmstat"); err == nil {
		for _, line := range strings.Split(vm, "\n") {
			f := strings.Fields(line)
			if len(f) == 2 {
				if v, err := strconv.ParseUint(f[1], 10, 64); err == nil {
					c.put(series.Labels{"metric": "vmstat." + f[0]}, series.Counter, v)
				}
			}
		}
	}
	if la, err := r.read("loadavg"); err == nil {
		f := strings.Fields(la)
		for i, n := range []string{"load.1min", "load.5min", "load.15min"} {
			if i < len(f) {
				if v, err := strconv.ParseFloat(f[i], 64); err == nil {
					c.put(series.Labels{"metric": n}, series.Float, math.Float64bits(v))
				}
			}
		}
	}
	if up, err := r.read("uptime"); err == nil {
		f := strings.Fields(up)
		if len(f) == 2 {
			if v, err := strconv.ParseFloat(f[1], 64); err == nil {
				c.put(series.Labels{"metric": "uptime.idle_seconds"}, series.Float, math.Float64bits(v))
			}
		}
	}
	if nd, err := r.read("net/dev"); err == nil {
		names := []string{"rx_bytes", "rx_packets", "rx_errs", "rx_drop", "rx_fifo", "rx_frame", "rx_compressed", "rx_multicast",
			"tx_bytes", "tx_packets", "tx_errs", "tx_drop", "tx_fifo", "tx_colls", "tx_carrier", "tx_compressed"}
		for _, line := range strings.Split(nd, "\n") {
			dev, rest, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			f := strings.Fields(rest)
			for i, n := range names {
				if i < len(f) {
					if v, err := strconv.ParseUint(f[i], 10, 64); err == nil {
						c.put(series.Labels{"metric": "net." + n, "interface": strings.TrimSpace(dev)}, series.Counter, v)
					}
				}
			}
		}
	}
	if ds, err := r.read("diskstats"); err == nil {
		names := []string{"reads", "reads_merged", "sectors_read", "read_ms", "writes", "writes_merged", "sectors_written", "write_ms", "in_progress", "io_ms", "weighted_io_ms"}
		for _, line := range strings.Split(ds, "\n") {
			f := strings.Fields(line)
			if len(f) < 14 {
				continue
			}
			for i, n := range names {
				v, err := strconv.ParseUint(f[3+i], 10, 64)
				if err != nil {
					continue
				}
				kind := series.Counter
				if n == "in_progress" {
					kind = series.Level
				}
				c.put(series.Labels{"metric": "disk." + n, "device": f[2]}, kind, v)
			}
		}
	}
	return nil
}

func (r *Recorder) processes(c *scanCtx) {
	ents, err := os.ReadDir(r.Proc)
	if err != nil {
		return
	}
	for _, e := range ents {
		pid := e.Name()
		if _, err := strconv.Atoi(pid); err != nil {
			continue
		}
		st, err := r.read(filepath.Join(pid, "stat"))
		if err != nil {
			continue // the process exited
		}
		open := strings.IndexByte(st, '(')
		closeP := strings.LastIndexByte(st, ')')
		if open < 0 || closeP < open {
			continue
		}
		comm := st[open+1 : closeP]
		f := strings.Fields(st[closeP+1:])
		// f[0] is field 3 (state); field n is f[n-3].
		get := func(n int) (uint64, bool) {
			if n-3 >= len(f) {
				return 0, false
			}
			v, err := strconv.ParseUint(f[n-3], 10, 64)
			return v, err == nil
		}
		lab := func(m string) series.Labels { return series.Labels{"metric": m, "pid": pid, "process": comm} }
		for _, cnt := range []struct {
			n    int
			name string
		}{{10, "minflt"}, {12, "majflt"}, {14, "utime"}, {15, "stime"}} {
			if v, ok := get(cnt.n); ok {
				c.put(lab("process."+cnt.name), series.Counter, v)
			}
		}
		for _, lvl := range []struct {
			n    int
			name string
		}{{20, "threads"}, {23, "vsize"}, {24, "rss"}} {
			if v, ok := get(lvl.n); ok {
				c.put(lab("process."+lvl.name), series.Level, v)
			}
		}
		if io, err := r.read(filepath.Join(pid, "io")); err == nil {
			for _, line := range strings.Split(io, "\n") {
				k, v, ok := strings.Cut(line, ": ")
				if !ok {
					continue
				}
				if n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64); err == nil {
					c.put(lab("process.io."+k), series.Counter, n)
				}
			}
		}
	}
}
