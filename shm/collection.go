package shm

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrStarted is returned when a metric is declared after Start, or Start is called twice.
var ErrStarted = errors.New("collection already started")

// ErrClosed is returned by Start after Close.
var ErrClosed = errors.New("collection closed")

// cacheLine is the alignment of states, so that writing one never contends with counters.
const cacheLine = 64

// Options configures a Collection. The zero value is ready to use.
type Options struct {
	// Path is the base path of the files (Path+".meta", Path+".values"). Empty means
	// DefaultPath.
	Path string
	// Logger receives the warning that the agent cannot discover a fallback path. nil means
	// slog.Default().
	Logger *slog.Logger
}

// DefaultPath returns the base path the agent expects, $CANTAL_PATH, and true. Without it, it
// returns the fallback the existing clients use, $XDG_RUNTIME_DIR/cantal.PID or else
// /tmp/cantal.UID.PID, and false: the agent discovers applications only through CANTAL_PATH,
// though the cantal CLI can still read the fallback.
func DefaultPath() (string, bool) {
	if p := os.Getenv("CANTAL_PATH"); p != "" {
		return p, true
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return d + "/cantal." + strconv.Itoa(os.Getpid()), false
	}
	return "/tmp/cantal." + strconv.Itoa(os.Getuid()) + "." + strconv.Itoa(os.Getpid()), false
}

// Collection is the set of metrics one application publishes. Declare metrics with Counter,
// Integer, Float and State, then call Start, which lays them out and creates the files; metrics
// work before Start (their values are carried over) and after Close (they are just no longer
// published). Close removes the files.
//
// All methods, and all methods of the metrics, are safe for concurrent use.
type Collection struct {
	opt Options

	mu      sync.Mutex // guards everything below, and metrics' pre-start values
	metrics []metric
	names   map[string]bool // labelsKey of every declared metric
	started bool
	closed  bool
	path    string
	mapping []byte   // never unmapped: metrics may still point into it
	files   [2]inode // .meta and .values as created, so Close removes only ours
}

// metric is a declared metric waiting for Start.
type metric struct {
	labels map[string]string
	keys   []string // sorted
	name   []byte   // JSON as written to .meta
	typ    string   // "counter 8", "state 64"...
	size   int
	cell   *cell  // 8-byte metrics
	state  *State // states
}

// NewCollection returns an empty Collection.
func NewCollection(opt Options) *Collection {
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	return &Collection{opt: opt, names: map[string]bool{}}
}

// Path returns the base path of the files, once Start has chosen it.
func (c *Collection) Path() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.path
}

// add registers a metric. c.mu must not be held.
func (c *Collection) add(labels map[string]string, typ string, size int, cl *cell, st *State) error {
	if len(labels) == 0 {
		return errors.New("metric needs at least one label")
	}
	m := metric{labels: make(map[string]string, len(labels)), typ: typ, size: size, cell: cl, state: st}
	for k, v := range labels {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return fmt.Errorf("label %q=%q is not valid UTF-8", k, v)
		}
		m.labels[k] = v
		m.keys = append(m.keys, k)
	}
	slices.Sort(m.keys)
	m.name = appendLabelsJSON(nil, m.keys, m.labels)
	id := labelsKey(m.keys, m.labels)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started || c.closed {
		return fmt.Errorf("declare %s: %w", m.name, ErrStarted)
	}
	if c.names[id] {
		return fmt.Errorf("duplicate metric %s", m.name)
	}
	c.names[id] = true
	c.metrics = append(c.metrics, m)
	return nil
}

// Counter declares a counter ("counter 8"). labels are copied.
func (c *Collection) Counter(labels map[string]string) (*Counter, error) {
	m := &Counter{cell: cell{coll: c}}
	if err := c.add(labels, "counter 8", 8, &m.cell, nil); err != nil {
		return nil, err
	}
	return m, nil
}

// Integer declares a signed integer level ("level 8 signed"). labels are copied.
func (c *Collection) Integer(labels map[string]string) (*Integer, error) {
	m := &Integer{cell: cell{coll: c}}
	if err := c.add(labels, "level 8 signed", 8, &m.cell, nil); err != nil {
		return nil, err
	}
	return m, nil
}

// Float declares a floating-point level ("level 8 float"). labels are copied.
func (c *Collection) Float(labels map[string]string) (*Float, error) {
	m := &Float{cell: cell{coll: c}}
	if err := c.add(labels, "level 8 float", 8, &m.cell, nil); err != nil {
		return nil, err
	}
	return m, nil
}

// State declares a state ("state SIZE"): SIZE bytes holding the 8-byte unix-ms time the state
// was entered and SIZE-8 bytes of text. SIZE must be in 9..65535; 0 means 64, one cache line,
// as the Python client does. labels are copied.
func (c *Collection) State(labels map[string]string, size int) (*State, error) {
	if size == 0 {
		size = cacheLine
	}
	if size < MinStateSize || size > MaxStateSize {
		return nil, fmt.Errorf("state size %d out of range %d..%d", size, MinStateSize, MaxStateSize)
	}
	s := &State{coll: c, buf: make([]byte, size)}
	if err := c.add(labels, "state "+strconv.Itoa(size), size, nil, s); err != nil {
		return nil, err
	}
	return s, nil
}

// Must returns m, or panics if err is not nil. It is meant for declaring metrics in package
// variables: var requests = shm.Must(coll.Counter(map[string]string{"metric": "requests"})).
func Must[M any](m M, err error) M {
	if err != nil {
		panic(err)
	}
	return m
}

// layout assigns offsets: 8-byte values first, sorted by name (as the Python client does),
// then states sorted by (size, name), each starting a cache line. It returns the meta file
// contents, the offset of every metric and the values size.
func layoutMetrics(ms []metric) (meta []byte, offsets []int, size int) {
	order := make([]int, len(ms))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		ma, mb := &ms[a], &ms[b]
		if sa, sb := ma.state != nil, mb.state != nil; sa != sb {
			if sa {
				return 1
			}
			return -1
		}
		if ma.size != mb.size {
			return ma.size - mb.size
		}
		return strings.Compare(string(ma.name), string(mb.name))
	})
	offsets = make([]int, len(ms))
	pad := func(to int) {
		if n := (to - size%to) % to; n > 0 {
			meta = append(meta, "pad "...)
			meta = strconv.AppendInt(meta, int64(n), 10)
			meta = append(meta, '\n')
			size += n
		}
	}
	for _, i := range order {
		m := &ms[i]
		if m.state != nil {
			pad(cacheLine)
		} else {
			pad(8)
		}
		offsets[i] = size
		meta = append(meta, m.typ...)
		meta = append(meta, ": "...)
		meta = append(meta, m.name...)
		meta = append(meta, '\n')
		size += m.size
	}
	return meta, offsets, size
}

// Start lays the metrics out, creates Path+".values" (through a temporary file and a rename),
// maps it and switches every metric to it, then creates Path+".meta" the same way. Values
// written before Start are carried over. A Collection with no metrics cannot start.
func (c *Collection) Start() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	if c.started {
		return ErrStarted
	}
	if len(c.metrics) == 0 {
		return errors.New("start: no metrics declared")
	}
	path := c.opt.Path
	if path == "" {
		var ok bool
		path, ok = DefaultPath()
		if !ok {
			c.opt.Logger.Warn("CANTAL_PATH is not set; the cantal agent will not discover this process's metrics", "path", path)
		}
	}
	meta, offsets, size := layoutMetrics(c.metrics)
	metaPath, valuesPath := path+".meta", path+".values"

	// Remove the old .meta first: a reader must never pair our new .values with it.
	for _, p := range []string{metaPath, valuesPath} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("start: %w", err)
		}
	}
	mapping, err := createValues(valuesPath, size)
	if err != nil {
		return fmt.Errorf("start: %w", err)
	}
	// Switch the metrics to the mapping with c.mu held: pre-start writers take c.mu, so no
	// update is lost between the copy and the switch.
	for i := range c.metrics {
		m := &c.metrics[i]
		off := offsets[i]
		if m.cell != nil {
			p := (*uint64)(unsafe.Pointer(&mapping[off]))
			atomic.StoreUint64(p, m.cell.pre)
			m.cell.setPtr(p)
		} else {
			m.state.switchTo(mapping[off : off+m.size])
		}
	}
	if err := writeFileAtomic(metaPath, meta); err != nil {
		os.Remove(valuesPath)
		return fmt.Errorf("start: %w", err)
	}
	c.started, c.path, c.mapping = true, path, mapping
	for i, p := range []string{metaPath, valuesPath} {
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err == nil {
			c.files[i] = inodeOf(&st)
		}
	}
	return nil
}

// createValues creates the zero-filled .values file of size bytes through a temporary file and
// a rename, and returns its shared mapping.
func createValues(path string, size int) ([]byte, error) {
	tmp := path + ".tmp"
	os.Remove(tmp)
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := f.Truncate(int64(size)); err != nil {
		os.Remove(tmp)
		return nil, err
	}
	mapping, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		os.Remove(tmp)
		return nil, fmt.Errorf("mmap %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		unix.Munmap(mapping)
		os.Remove(tmp)
		return nil, err
	}
	return mapping, nil
}

// writeFileAtomic writes data to path through a temporary file and a rename.
func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	os.Remove(tmp)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// Close removes the .meta and then the .values file, unless another process has replaced
// them meanwhile. Metrics stay usable: the memory stays mapped (it is released when the process
// exits), but nobody reads it anymore. Close is idempotent; after it, Start fails.
func (c *Collection) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	if !c.started {
		return nil
	}
	var errs []error
	for i, p := range []string{c.path + ".meta", c.path + ".values"} {
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil || inodeOf(&st) != c.files[i] {
			continue // gone, or no longer ours
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close: %w", err)
	}
	return nil
}
