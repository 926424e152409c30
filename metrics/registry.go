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

// DefaultRateLimit is the least time between two snapshots a Registry serves over HTTP unless
// built WithRateLimit or WithoutRateLimit: two per second, libprocess' default.
const DefaultRateLimit = 500 * time.Millisecond

// Registry is the set of metrics an application reports: libprocess' metrics process. Metrics
// appear only after an explicit Add and disappear after Remove. The zero value is an empty
// registry ready to use, with the default options. All methods are safe for concurrent use.
//
// A Registry is an http.Handler serving the snapshot as one flat JSON object, as libprocess'
// /metrics/snapshot does: at most two snapshots a second (a request that comes sooner waits its
// turn), optionally wrapped for JSONP.
type Registry struct {
	// Timeout bounds an HTTP snapshot that has no ?timeout= parameter. Zero, the default, is
	// libprocess' default: no bound (Duration::max), the snapshot waits for every pulled gauge,
	// or until the client goes away. Set it before serving.
	Timeout time.Duration

	opt registryOptions // set at construction

	mu      sync.RWMutex
	metrics map[string]Metric

	limitMu   sync.Mutex
	nextGrant time.Time // when the next HTTP snapshot may start
}

// RegistryOption configures a Registry at construction.
type RegistryOption func(*registryOptions)

type registryOptions struct {
	interval time.Duration // between two HTTP snapshots; 0: DefaultRateLimit; < 0: none
	mean     bool
	noJSONP  bool
	clock    clock // tests; nil: the real one
}

// WithRateLimit lets the Registry serve at most requests snapshots over HTTP per period, evenly
// spaced, as libprocess' RateLimiter (and its LIBPROCESS_METRICS_SNAPSHOT_ENDPOINT_RATE_LIMIT,
// "requests/period") does: a request that comes less than period/requests after the previous
// one started waits until then. requests or period of zero or less means no limit.
func WithRateLimit(requests int, period time.Duration) RegistryOption {
	return func(o *registryOptions) {
		if requests <= 0 || period <= 0 {
			o.interval = -1
			return
		}
		o.interval = max(period/time.Duration(requests), 1)
	}
}

// WithoutRateLimit lets the Registry serve snapshots over HTTP as fast as they are asked for
// (libprocess with LIBPROCESS_METRICS_SNAPSHOT_ENDPOINT_RATE_LIMIT set to "").
func WithoutRateLimit() RegistryOption {
	return func(o *registryOptions) { o.interval = -1 }
}

// WithMean adds each windowed metric's mean to the snapshot, as name/mean. libprocess reports
// no mean, so neither does a Registry by default.
func WithMean() RegistryOption {
	return func(o *registryOptions) { o.mean = true }
}

// WithoutJSONP makes the Registry ignore the jsonp query parameter and always serve plain JSON.
// JSONP lets any web page its users visit read the snapshot; turn it off where that matters.
func WithoutJSONP() RegistryOption {
	return func(o *registryOptions) { o.noJSONP = true }
}

// clock is the time source of the rate limit; tests replace it.
type clock interface {
	Now() time.Time
	// NewTimer returns a channel that receives after d and a function that stops the timer.
	NewTimer(d time.Duration) (<-chan time.Time, func() bool)
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) NewTimer(d time.Duration) (<-chan time.Time, func() bool) {
	t := time.NewTimer(d)
	return t.C, t.Stop
}

// NewRegistry returns an empty registry with the given options.
func NewRegistry(opts ...RegistryOption) *Registry {
	r := &Registry{}
	for _, f := range opts {
		if f != nil {
			f(&r.opt)
		}
	}
	return r
}

// statSuffixes returns the keys of a metric's statistics in r's snapshots, after its name.
func (r *Registry) statSuffixes() []string {
	if r.opt.mean {
		return statSuffixesMean
	}
	return statSuffixes
}

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

// Remove unregisters the metric registered under m's name, as libprocess removes by name: m
// need not be the object that was added, only have its name. It is an error (wrapping
// ErrNotRegistered) if no metric of that name is registered.
func (r *Registry) Remove(m Metric) error {
	if m == nil {
		return fmt.Errorf("remove metric: %w: nil metric", ErrNotRegistered)
	}
	name := m.Name()
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.metrics[name]; !ok {
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
// statistics under name/count, name/min, name/max, name/p50, name/p90, name/p95, name/p99,
// name/p999 and name/p9999 (and name/mean if r was built WithMean). Snapshot is not rate
// limited; only ServeHTTP is.
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
			res.stats.entries(res.m.Name(), r.opt.mean, put)
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
// /metrics/snapshot), to requests of any method, as libprocess' routes answer them (a HEAD
// gets the headers only).
//
// The optional query parameter timeout bounds how long pulled metrics are waited for; it takes
// a Go duration ("1.5s", "250ms") or a libprocess one ("5secs", "1mins"). Without it the
// snapshot waits for every pulled metric as libprocess does (or Registry.Timeout, if set), and
// stops only if the client goes away. With the query parameter jsonp=CALLBACK the object is
// served as JavaScript, CALLBACK(OBJECT);, with the type text/javascript, as libprocess does;
// CALLBACK must be a JavaScript identifier or a dotted path of them (at most 128 bytes), and an
// empty one is ignored. The body is libprocess' byte for byte, numbers and escapes included
// (see the package documentation for the one deliberate difference).
//
// Snapshots are rate limited (DefaultRateLimit, WithRateLimit): as libprocess' RateLimiter, a
// request that comes too soon after the previous one is not refused but waits its turn, then
// is answered as usual; the timeout counts from then. A request whose client goes away while
// it waits gives its turn back if nobody queued behind it. Requests with a malformed timeout or
// callback are refused (400) without waiting.
func (r *Registry) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	query := req.URL.Query()
	timeout, bounded := r.Timeout, r.Timeout > 0 // unbounded by default, as libprocess
	if s := query.Get("timeout"); s != "" {
		d, err := ParseTimeout(s)
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		timeout, bounded = d, true // ?timeout=0secs: pulled gauges are not waited for
	}
	callback := ""
	if !r.opt.noJSONP {
		callback = query.Get("jsonp")
		if callback != "" && !validCallback(callback) {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("invalid jsonp callback %q: want a JavaScript identifier or a dotted path of them", callback))
			return
		}
	}
	if err := r.acquire(req.Context()); err != nil {
		writeError(w, http.StatusServiceUnavailable, "snapshot rate limit: "+err.Error())
		return
	}
	ctx := req.Context()
	if bounded {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	snap := r.Snapshot(ctx)
	// The body libprocess' http::OK(jsonify(snapshot), jsonp) writes, byte for byte (see
	// appendSnapshotJSON): OBJECT, or CALLBACK(OBJECT); with no newline after either.
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	var body []byte
	if callback != "" {
		h.Set("Content-Type", "text/javascript")
		body = append(body, callback...)
		body = append(body, '(')
		body = appendSnapshotJSON(body, snap)
		body = append(body, ");"...)
	} else {
		h.Set("Content-Type", "application/json")
		body = appendSnapshotJSON(body, snap)
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.Write(body)
}

// maxCallbackLen bounds a JSONP callback.
const maxCallbackLen = 128

// validCallback reports whether s is a JSONP callback a Registry accepts: one or more ASCII
// JavaScript identifiers ([A-Za-z_$][A-Za-z0-9_$]*) joined by dots, at most 128 bytes, such as
// "cb", "jQuery123_456" or "app.metrics.update".
func validCallback(s string) bool {
	if len(s) > maxCallbackLen {
		return false
	}
	start := true // at the start of an identifier
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '.':
			if start {
				return false
			}
			start = true
		case c == '_' || c == '$' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z':
			start = false
		case '0' <= c && c <= '9':
			if start {
				return false
			}
		default:
			return false
		}
	}
	return !start
}

// acquire waits for the rate limiter's permit to serve a snapshot, as libprocess'
// RateLimiter::acquire: permits are spaced by the limit's interval, in the order they were
// asked for. It returns ctx's error if ctx is done first.
func (r *Registry) acquire(ctx context.Context) error {
	interval := r.opt.interval
	if interval < 0 {
		return nil
	}
	if interval == 0 {
		interval = DefaultRateLimit
	}
	clk := r.opt.clock
	if clk == nil {
		clk = realClock{}
	}
	r.limitMu.Lock()
	now := clk.Now()
	at := now
	if r.nextGrant.After(now) {
		at = r.nextGrant
	}
	r.nextGrant = at.Add(interval)
	r.limitMu.Unlock()
	wait := at.Sub(now)
	if wait <= 0 {
		return nil
	}
	c, stop := clk.NewTimer(wait)
	select {
	case <-c:
		return nil
	case <-ctx.Done():
		stop()
		r.limitMu.Lock()
		if r.nextGrant.Equal(at.Add(interval)) { // nobody queued behind: give the turn back
			r.nextGrant = at
		}
		r.limitMu.Unlock()
		return ctx.Err()
	}
}

func writeError(w http.ResponseWriter, code int, msg string) {
	body, _ := json.Marshal(map[string]string{"error": msg})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
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
