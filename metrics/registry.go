package metrics

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Errors returned by Registry.Add and Registry.Remove (wrapped).
var (
	ErrDuplicate     = errors.New("duplicate metric name")
	ErrNotRegistered = errors.New("metric not registered")
	ErrInvalidName   = errors.New("invalid metric name")
)

// DefaultTimeout bounds a Registry snapshot served over HTTP without a ?timeout= parameter
// when Registry.Timeout is zero.
const DefaultTimeout = 10 * time.Second

// Registry is the set of metrics an application reports: libprocess' metrics process. Metrics
// appear only after an explicit Add and disappear after Remove. The zero value is an empty
// registry ready to use. All methods are safe for concurrent use.
//
// A Registry is an http.Handler serving the snapshot as one flat JSON object.
type Registry struct {
	// Timeout bounds an HTTP snapshot that has no ?timeout= parameter (DefaultTimeout if zero).
	// Set it before serving.
	Timeout time.Duration

	mu      sync.RWMutex
	metrics map[string]Metric
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{} }

// Add registers m under its name. A name already registered, or an empty name or one with
// control characters, is an error (wrapping ErrDuplicate or ErrInvalidName).
func (r *Registry) Add(m Metric) error {
	if m == nil {
		return fmt.Errorf("add metric: %w: nil metric", ErrInvalidName)
	}
	name := m.Name()
	if err := checkName(name); err != nil {
		return fmt.Errorf("add metric %q: %w", name, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.metrics[name]; ok {
		return fmt.Errorf("add metric %q: %w", name, ErrDuplicate)
	}
	if r.metrics == nil {
		r.metrics = make(map[string]Metric)
	}
	r.metrics[name] = m
	return nil
}

func checkName(name string) error {
	if name == "" {
		return fmt.Errorf("%w: empty", ErrInvalidName)
	}
	if strings.ContainsFunc(name, func(c rune) bool { return c < 0x20 || c == 0x7f }) {
		return fmt.Errorf("%w: control character", ErrInvalidName)
	}
	return nil
}

// Remove unregisters m. It is an error (wrapping ErrNotRegistered) if m itself is not
// registered, even when another metric of the same name is.
func (r *Registry) Remove(m Metric) error {
	if m == nil {
		return fmt.Errorf("remove metric: %w: nil metric", ErrNotRegistered)
	}
	name := m.Name()
	r.mu.Lock()
	defer r.mu.Unlock()
	if got, ok := r.metrics[name]; !ok || got != m {
		return fmt.Errorf("remove metric %q: %w", name, ErrNotRegistered)
	}
	delete(r.metrics, name)
	return nil
}

// Metrics returns the registered metrics sorted by name.
func (r *Registry) Metrics() []Metric {
	r.mu.RLock()
	ms := make([]Metric, 0, len(r.metrics))
	for _, m := range r.metrics {
		ms = append(ms, m)
	}
	r.mu.RUnlock()
	slices.SortFunc(ms, func(a, b Metric) int { return strings.Compare(a.Name(), b.Name()) })
	return ms
}

type result struct {
	m     Metric
	v     float64
	stats Statistics
	ok    bool // v is valid
	hasSt bool
}

func evaluate(ctx context.Context, m Metric) result {
	r := result{m: m}
	v, err := m.Snapshot(ctx)
	if err == nil && !math.IsNaN(v) && !math.IsInf(v, 0) {
		r.v, r.ok = v, true
	}
	r.stats, r.hasSt = m.Statistics()
	return r
}

// Snapshot evaluates every registered metric and returns the flat map libprocess serves: each
// metric's value under its name and, for a metric with at least two values in its window, its
// statistics under name/count, name/min, name/max, name/mean, name/p50, name/p90, name/p95,
// name/p99, name/p999 and name/p9999.
//
// Counters, Gauges and Timers are read directly. Other metrics (GaugeFunc, custom ones) are
// evaluated concurrently, each in its own goroutine; those not finished when ctx is done are
// left out, as are metrics whose Snapshot fails or returns NaN or an infinity. Snapshot returns
// when all are done or when ctx is; a function ignoring ctx may keep running after that.
func (r *Registry) Snapshot(ctx context.Context) map[string]float64 {
	ms := r.Metrics()
	out := make(map[string]float64, len(ms))
	put := func(k string, v float64) {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			out[k] = v
		}
	}
	add := func(res result) {
		if res.ok {
			out[res.m.Name()] = res.v
		}
		if res.hasSt {
			res.stats.entries(res.m.Name(), put)
		}
	}
	ch := make(chan result, len(ms)) // buffered: late goroutines never block
	pending := 0
	for _, m := range ms {
		switch g := m.(type) {
		case *Counter, *Gauge, *Timer:
			add(evaluate(ctx, m))
		case *GaugeFunc:
			pending++
			go func() {
				var once sync.Once // one result per metric, whichever comes first
				send := func(r result) { once.Do(func() { ch <- r }) }
				gctx := ctx
				if g.timeout > 0 {
					var cancel context.CancelFunc
					gctx, cancel = context.WithTimeout(ctx, g.timeout)
					defer cancel()
					// At the gauge's own deadline, stop waiting: report it absent.
					stop := context.AfterFunc(gctx, func() { send(result{m: m}) })
					defer stop()
				}
				send(evaluate(gctx, m))
			}()
		default:
			pending++
			go func() { ch <- evaluate(ctx, m) }()
		}
	}
	for ; pending > 0; pending-- {
		select {
		case res := <-ch:
			add(res)
		case <-ctx.Done():
			return out
		}
	}
	return out
}

// ServeHTTP serves the snapshot as a JSON object with sorted keys (libprocess'
// /metrics/snapshot). The optional query parameter timeout bounds how long pulled metrics are
// waited for; it takes a Go duration ("1.5s", "250ms") or a libprocess one ("5secs", "1mins").
func (r *Registry) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, http.StatusMethodNotAllowed, "method "+req.Method+" not allowed")
		return
	}
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	if s := req.URL.Query().Get("timeout"); s != "" {
		d, err := ParseTimeout(s)
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		timeout = d
	}
	ctx, cancel := context.WithTimeout(req.Context(), timeout)
	defer cancel()
	body, err := json.Marshal(r.Snapshot(ctx))
	if err != nil { // cannot happen: finite floats only
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(append(body, '\n'))
}

func writeError(w http.ResponseWriter, code int, msg string) {
	body, _ := json.Marshal(map[string]string{"error": msg})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(append(body, '\n'))
}

// mesosUnits are libprocess' Duration suffixes, longest first where one is a suffix of another.
var mesosUnits = []struct {
	suffix string
	d      time.Duration
}{
	{"ns", time.Nanosecond}, {"us", time.Microsecond}, {"ms", time.Millisecond},
	{"secs", time.Second}, {"mins", time.Minute}, {"hrs", time.Hour},
	{"days", 24 * time.Hour}, {"weeks", 7 * 24 * time.Hour},
}

// ParseTimeout parses a snapshot timeout: a Go duration ("1.5s", "250ms") or a libprocess one
// (a decimal number followed by ns, us, ms, secs, mins, hrs, days or weeks). It must not be
// negative and must fit a time.Duration.
func ParseTimeout(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		d, err = parseMesosDuration(s)
	}
	if err != nil {
		return 0, fmt.Errorf("parse timeout %q: %w", s, err)
	}
	if d < 0 {
		return 0, fmt.Errorf("parse timeout %q: negative", s)
	}
	return d, nil
}

var errBadDuration = errors.New("not a duration")

func parseMesosDuration(s string) (time.Duration, error) {
	for _, u := range mesosUnits {
		num, ok := strings.CutSuffix(s, u.suffix)
		if !ok || num == "" {
			continue
		}
		if strings.ContainsFunc(num, func(c rune) bool { return (c < '0' || c > '9') && c != '.' }) {
			continue // "5mins" also ends in "ns"
		}
		f, err := strconv.ParseFloat(num, 64)
		if err != nil {
			return 0, errBadDuration
		}
		ns := f * float64(u.d)
		if math.IsNaN(ns) || ns >= math.MaxInt64 {
			return 0, fmt.Errorf("%w: out of range", errBadDuration)
		}
		return time.Duration(ns), nil
	}
	return 0, errBadDuration
}
