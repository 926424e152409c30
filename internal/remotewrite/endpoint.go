package remotewrite

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cantal-go/cantal/internal/apiwire"
	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/histread"
	"github.com/cantal-go/cantal/internal/logbudget"
	"github.com/cantal-go/cantal/internal/series"
	"github.com/cantal-go/cantal/internal/statedir"
)

// Source is the held history an Endpoint reads (with the shippers' one history reader,
// histread); *history.Store satisfies it. Its methods must be safe for concurrent use.
type Source = histread.Source

// Options are what an Endpoint needs from the agent.
type Options struct {
	Source Source
	// Namer names series; nil: DefaultNamer.
	Namer Namer
	// Position is the position file (named by the agent's state directory, statedir); nil:
	// the position is kept in memory only (a restart starts from the oldest point held).
	Position *statedir.PositionFile
	// Interval is the scan interval: how often Run looks for new scans when not notified.
	Interval time.Duration
	// DefaultLabels (instance, node) are added to series that lack them, after ExternalLabels.
	DefaultLabels []Label
	// Late tells the series that may get points late, at a scan already taken (pushed ones:
	// /write, statsd, OTLP); nil: none. They are held back until their scans are final
	// (Source.BackfillFrom), see the package comment.
	Late   func(series.Labels) bool
	Logger *slog.Logger
}

// Status is an endpoint's part of the agent's status: its position, lag and counters, as
// /api/v1/status writes them (apiwire.RemoteWrite). LastError holds the receiver's own text
// when it answered (which may echo what it was sent, or its internals): show it whole only to
// callers trusted with the agent's configuration, and ForReaders to the others.
type Status struct {
	apiwire.RemoteWrite

	brief string // LastError without the receiver's text
}

// ForReaders returns s with LastError cut to what the agent itself knows of the failure (the
// status code and its standard text, or the network error), without the receiver's text: for
// callers who may read the agent but not configure it (issue 31, N12).
func (s Status) ForReaders() Status {
	s.LastError = s.brief
	return s
}

// Endpoint sends the history to one receiver. Build it with New; Run is its sender goroutine.
type Endpoint struct {
	cfg    EndpointConfig
	opt    Options
	hc     *http.Client
	url    string // redacted
	log    *slog.Logger
	lim    *logbudget.Limiter
	notify chan struct{}
	ext    []Label

	// Sender goroutine only.
	cache     map[history.ID]*seriesInfo
	gen       uint32
	active    []*seriesInfo
	pts       []point
	sorted    []point
	scanTs    []int64
	req       []byte
	comp      []byte
	lastSave  time.Time
	reader    *histread.Reader
	cur       *seriesInfo // the series read is taking (wantFn's, for takeFn)
	from      int64       // the window read is reading from
	wantFn    func(s *histread.Series) (int64, bool)
	takeFn    func(s *histread.Series, pts []history.Point) bool
	sending   [2]int // series the last read of each pass (others, late) found to send; -1: none yet
	savedPos  int64
	savedLate int64
	late      bool // the pass under way reads (and positions) the late series
	saveError bool

	mu sync.Mutex
	st Status
}

type seriesInfo struct {
	key  string
	kind series.Kind
	send bool
	late bool     // may get points late: sent by the late pass only
	outs []output // the Prometheus series each point is sent as (Namer's), in order
	gen  uint32
}

// output is one Prometheus series a Cantal series is sent as.
type output struct {
	scale  float64
	div    float64 // 1/scale when that is an integer (values divided, exact as /metrics's)
	labels []byte  // encoded TimeSeries.labels
}

type point struct {
	si   int32 // index in active
	ts   int64
	bits uint64
}

// New returns the endpoint of cfg (SetDefaults and Validate done, as ParseFile and FromURL do)
// at the position of opt.Position.
func New(cfg EndpointConfig, opt Options) (*Endpoint, error) {
	if opt.Source == nil {
		return nil, errors.New("remote write: no source")
	}
	if opt.Namer == nil {
		opt.Namer = DefaultNamer
	}
	if opt.Interval <= 0 {
		opt.Interval = 2 * time.Second
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	hc, err := cfg.client()
	if err != nil {
		return nil, err
	}
	e := &Endpoint{
		cfg:     cfg,
		opt:     opt,
		hc:      hc,
		url:     RedactURL(cfg.URL),
		notify:  make(chan struct{}, 1),
		sending: [2]int{-1, -1},
		cache:   map[history.ID]*seriesInfo{},
		reader:  histread.New(opt.Source),
	}
	e.wantFn, e.takeFn = e.want, e.take // made once, so that a read does not allocate them
	name := cfg.Name
	if name == "" {
		if u, err := url.Parse(cfg.URL); err == nil {
			name = u.Host
		}
	}
	e.log = opt.Logger.With("remote_write", name)
	e.lim = logbudget.New(e.log, "remote write log lines")
	for k, v := range cfg.ExternalLabels {
		e.ext = append(e.ext, Label{k, v})
	}
	sort.Slice(e.ext, func(i, j int) bool { return e.ext[i].Name < e.ext[j].Name })
	e.st.Name, e.st.URL = name, e.url
	if opt.Position != nil {
		p, err := opt.Position.Load()
		if err != nil {
			// Start from the oldest point held: a receiver takes repeated points (see the
			// package comment), a lost position must not lose points.
			e.log.Warn("remote write position unreadable; sending all history held", "err", err)
		}
		e.st.PositionMs, e.savedPos = p.AckedMs, p.AckedMs
		// A file written before late positions existed: late series were sent with the others.
		if p.LateMs == 0 {
			p.LateMs = p.AckedMs
		}
		e.st.LatePositionMs, e.savedLate = p.LateMs, p.LateMs
	}
	return e, nil
}

// Notify tells Run that a scan was committed. It never blocks.
func (e *Endpoint) Notify() {
	select {
	case e.notify <- struct{}{}:
	default:
	}
}

// Status returns the endpoint's counters and position. Safe for concurrent use.
func (e *Endpoint) Status() Status {
	latest := e.opt.Source.Stats().LatestMs
	e.mu.Lock()
	s := e.st
	e.mu.Unlock()
	if latest > s.PositionMs && s.PositionMs > 0 {
		s.LagS = float64(latest-s.PositionMs) / 1000
	} else if s.PositionMs == 0 && latest > 0 {
		s.LagS = -1 // nothing acknowledged yet
	}
	return s
}

// position is the position of the pass under way (late series or the others).
func (e *Endpoint) position() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.late {
		return e.st.LatePositionMs
	}
	return e.st.PositionMs
}

// Run sends until ctx is done: whatever the history holds after the position, then each scan
// as it is committed. It returns nil when ctx is done.
func (e *Endpoint) Run(ctx context.Context) error {
	defer e.lim.Stop()
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			e.persist(true)
			return nil
		case <-e.notify:
		case <-t.C:
		}
		if err := e.catchUp(ctx); err != nil {
			e.persist(true)
			return nil
		}
		e.persist(true)
		t.Reset(e.opt.Interval)
	}
}

// catchUp sends every scan held after the position, oldest first, in chunks of at most
// Queue.ReadBytes of points: first the series that never get late points up to the newest
// scan, then the late series up to the last final scan (Source.BackfillFrom).
func (e *Endpoint) catchUp(ctx context.Context) error {
	e.late = false
	if err := e.pass(ctx); err != nil {
		return err
	}
	if e.opt.Late == nil {
		return nil
	}
	e.late = true
	defer func() { e.late = false }()
	return e.pass(ctx)
}

// pass is one catch-up of the series of e.late's kind.
func (e *Endpoint) pass(ctx context.Context) error {
	for {
		st := e.opt.Source.Stats()
		if e.late {
			// Only final scans: a late point never lands before one already sent.
			st.LatestMs = min(st.LatestMs, e.reader.Final())
		}
		pos := e.position()
		if st.LatestMs <= pos || st.LatestMs <= 0 {
			return nil
		}
		from := max(pos+1, st.OldestMs)
		// At most limit points of each series sent at once (Queue.ReadBytes of points in all):
		// the series the last read sent (those match selects), all of them before one.
		nsent := st.Series
		if n := e.sending[e.passIndex()]; n >= 0 {
			nsent = n
		}
		limit := e.cfg.Queue.ReadBytes / (max(nsent, 1) * 24)
		limit = min(max(limit, 1), 64)
		to := e.read(from, st.LatestMs, limit)
		e.log.Debug("remote write: read from the history", "late", e.late, "from", from, "to", to, "points", len(e.sorted), "series", len(e.active))
		if err := e.sendScans(ctx); err != nil {
			return err
		}
		e.setPosition(to)
		e.persist(false)
	}
}

// read collects the points in [from, to] of every series sent, at most limit per series, and
// groups them by scan in time order (e.sorted). It returns the end of what it read whole: to,
// or the earliest time at which a series reached its limit.
func (e *Endpoint) read(from, to int64, limit int) int64 {
	e.gen++
	e.sending[e.passIndex()] = 0
	e.active = e.active[:0]
	e.pts = e.pts[:0]
	e.from = from
	cut := e.reader.Read(from, to, limit, e.wantFn, e.takeFn)
	// Points after the cut are read again with the next chunk.
	if cut < to {
		j := 0
		for _, p := range e.pts {
			if p.ts <= cut {
				e.pts[j] = p
				j++
			}
		}
		e.pts = e.pts[:j]
	}
	// Forget series no longer held.
	if len(e.cache) > 2*len(e.active)+1024 {
		for id, si := range e.cache {
			if si.gen != e.gen {
				delete(e.cache, id)
			}
		}
	}
	// Group by scan (counting sort over the distinct times), keeping series order in a scan.
	e.scanTs = e.scanTs[:0]
	for _, p := range e.pts {
		i := scanIndex(e.scanTs, p.ts)
		if i == len(e.scanTs) || e.scanTs[i] != p.ts {
			e.scanTs = slices.Insert(e.scanTs, i, p.ts)
		}
	}
	counts := make([]int, len(e.scanTs)+1)
	for _, p := range e.pts {
		counts[scanIndex(e.scanTs, p.ts)+1]++
	}
	for i := 1; i < len(counts); i++ {
		counts[i] += counts[i-1]
	}
	if cap(e.sorted) < len(e.pts) {
		e.sorted = make([]point, len(e.pts))
	}
	e.sorted = e.sorted[:len(e.pts)]
	for _, p := range e.pts {
		i := scanIndex(e.scanTs, p.ts)
		e.sorted[counts[i]] = p
		counts[i]++
	}
	// Drop the big buffers after a catch-up so that steady state keeps only what it needs.
	if cap(e.pts) > 4*len(e.pts)+4096 {
		e.pts, e.sorted = nil, nil
	}
	return cut
}

// want tells read's Reader whether to read a series: one of the pass under way (e.late) that
// is sent.
func (e *Endpoint) want(s *histread.Series) (int64, bool) {
	si := e.info(s)
	if !si.send || si.late != e.late {
		return 0, false
	}
	e.sending[e.passIndex()]++
	e.cur = si
	return e.from, true
}

// take appends the points of the series want took (read's callback).
func (e *Endpoint) take(_ *histread.Series, pts []history.Point) bool {
	idx := int32(len(e.active))
	for _, p := range pts {
		e.pts = append(e.pts, point{idx, p.TS, p.Bits})
	}
	e.active = append(e.active, e.cur)
	return true
}

// scanIndex is where t is or would be inserted in the sorted ts.
func scanIndex(ts []int64, t int64) int {
	if n := len(ts); n > 0 && ts[n-1] < t {
		return n // the common case: points come in time order
	}
	i, _ := slices.BinarySearch(ts, t)
	return i
}

// info returns the cached naming of series id, computing it for a new or re-used ID.
func (e *Endpoint) info(s *histread.Series) *seriesInfo {
	id, key, kind := s.ID, s.Key, s.Kind
	si := e.cache[id]
	if si != nil && si.key == key && si.kind == kind {
		si.gen = e.gen
		return si
	}
	si = &seriesInfo{key: key, kind: kind, gen: e.gen}
	e.cache[id] = si
	if kind == series.State {
		return si
	}
	l := s.Labels()
	if l == nil { // a key that does not parse
		return si
	}
	if m := e.cfg.Selector(); m != nil && !m.Match(l) {
		return si
	}
	named := e.opt.Namer(l, kind)
	if len(named) == 0 {
		return si
	}
	si.send = true
	si.late = e.opt.Late != nil && e.opt.Late(l)
	si.outs = make([]output, len(named))
	for i, n := range named {
		o := &si.outs[i]
		o.scale = n.Scale
		if n.Scale != 0 && n.Scale != 1 {
			if d := math.Round(1 / n.Scale); d > 1 && 1/d == n.Scale {
				o.div = d
			}
		}
		o.labels = AppendLabels(nil, labelSet(n.Name, n.Labels, e.ext, e.opt.DefaultLabels))
	}
	return si
}

// value is the value of a point of a series of kind in o's unit.
func value(kind series.Kind, o *output, bits uint64) float64 {
	var v float64
	switch kind {
	case series.Counter:
		v = float64(bits)
	case series.Level:
		v = float64(int64(bits))
	default:
		v = math.Float64frombits(bits)
	}
	switch {
	case o.div != 0:
		v /= o.div
	case o.scale != 1 && o.scale != 0:
		v *= o.scale
	}
	return v
}

// sendScans sends e.sorted scan by scan, each in requests of at most MaxBatchBytes.
func (e *Endpoint) sendScans(ctx context.Context) error {
	pts := e.sorted
	for len(pts) > 0 {
		ts := pts[0].ts
		n := 0
		for n < len(pts) && pts[n].ts == ts {
			n++
		}
		scan := pts[:n]
		pts = pts[n:]
		e.req = e.req[:0]
		samples := 0
		for _, p := range scan {
			si := e.active[p.si]
			for i := range si.outs {
				o := &si.outs[i]
				if samples > 0 && len(e.req)+SeriesSize(len(o.labels), p.ts) > e.cfg.Queue.MaxBatchBytes {
					if err := e.send(ctx, samples); err != nil {
						return err
					}
					e.req, samples = e.req[:0], 0
				}
				e.req = AppendSeries1(e.req, o.labels, p.ts, value(si.kind, o, p.bits))
				samples++
			}
		}
		if samples > 0 {
			if err := e.send(ctx, samples); err != nil {
				return err
			}
		}
		e.setPosition(ts)
		e.persist(false)
	}
	return nil
}

// passIndex is 1 in the late series' pass, 0 in the other.
func (e *Endpoint) passIndex() int {
	if e.late {
		return 1
	}
	return 0
}

// setPosition moves the position of the pass under way forward to ts.
func (e *Endpoint) setPosition(ts int64) {
	e.mu.Lock()
	p := &e.st.PositionMs
	if e.late {
		p = &e.st.LatePositionMs
	}
	if ts > *p {
		*p = ts
	}
	e.mu.Unlock()
}

// persist writes the position when it moved, at most once a second unless force.
func (e *Endpoint) persist(force bool) {
	if e.opt.Position == nil {
		return
	}
	e.mu.Lock()
	pos, late := e.st.PositionMs, e.st.LatePositionMs
	e.mu.Unlock()
	if (pos == e.savedPos && late == e.savedLate) || (!force && time.Since(e.lastSave) < time.Second) {
		return
	}
	e.lastSave = time.Now()
	if err := e.opt.Position.Save(statedir.Position{AckedMs: pos, LateMs: late}); err != nil {
		if !e.saveError && e.lim.Allow() {
			e.log.Error("remote write position not saved", "err", err)
		}
		e.saveError = true
		return
	}
	e.saveError = false
	e.savedPos, e.savedLate = pos, late
}

// errPermanent is a response that retrying cannot change.
type errPermanent struct{ msg, brief string }

func (e errPermanent) Error() string { return e.msg }

// errReceiver is a receiver's answer to retry: msg with its text, brief without.
type errReceiver struct{ msg, brief string }

func (e errReceiver) Error() string { return e.msg }

// briefError is err's text without the receiver's (see Status.ForReaders).
func briefError(err error) string {
	var p errPermanent
	if errors.As(err, &p) && p.brief != "" {
		return p.brief
	}
	var r errReceiver
	if errors.As(err, &r) {
		return r.brief
	}
	return err.Error()
}

// send posts e.req (samples samples) until the receiver takes it or refuses it for good. It
// returns only ctx's error.
func (e *Endpoint) send(ctx context.Context, samples int) error {
	e.comp = Compress(e.comp, e.req)
	minB, maxB := time.Duration(e.cfg.Queue.MinBackoff), time.Duration(e.cfg.Queue.MaxBackoff)
	backoff := minB
	for {
		retryAfter, err := e.post(ctx, e.comp)
		if err == nil {
			e.mu.Lock()
			e.st.SamplesSent += uint64(samples)
			e.st.RequestsSent++
			e.st.BytesSent += uint64(len(e.comp))
			e.st.Retrying = false
			e.mu.Unlock()
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var perm errPermanent
		now := time.Now().UnixMilli()
		if errors.As(err, &perm) {
			e.mu.Lock()
			e.st.FailedBatches++
			e.st.DroppedSamples += uint64(samples)
			e.st.LastError, e.st.LastErrorMs, e.st.brief = err.Error(), now, briefError(err)
			e.st.Retrying = false
			e.mu.Unlock()
			if e.lim.Allow() {
				e.log.Warn("remote write request refused; its samples are dropped", "samples", samples, "err", err)
			}
			return nil
		}
		e.mu.Lock()
		first := !e.st.Retrying
		e.st.Retries++
		e.st.Retrying = true
		e.st.LastError, e.st.LastErrorMs, e.st.brief = err.Error(), now, briefError(err)
		e.mu.Unlock()
		if first && e.lim.Allow() {
			e.log.Warn("remote write failed; retrying with backoff", "err", err)
		}
		// Full jitter: a random wait in [backoff/2, backoff], so that agents restarted together
		// do not hit the receiver together.
		wait := backoff/2 + rand.N(backoff/2+1)
		if retryAfter > 0 {
			wait = min(retryAfter, maxB)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		backoff = min(2*backoff, maxB)
	}
}

// post sends one compressed request. It returns nil on 2xx, errPermanent on a 4xx other than
// 429, and any other error (with the wait a 429's Retry-After asks for) for a retry.
func (e *Endpoint) post(ctx context.Context, body []byte) (time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return 0, errPermanent{msg: fmt.Sprintf("request: %v", err)}
	}
	req.Header.Set("Content-Encoding", "snappy")
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("X-Prometheus-Remote-Write-Version", "0.1.0")
	for k, v := range e.cfg.Headers {
		req.Header.Set(k, v)
	}
	resp, err := e.hc.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error quotes the URL, credentials and all
		}
		return 0, fmt.Errorf("post %s: %w", e.url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 == 2 {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return 0, nil
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	reason := fmt.Sprintf("%s: %s: %s", e.url, resp.Status, printable(msg))
	brief := fmt.Sprintf("%s: %d %s", e.url, resp.StatusCode, http.StatusText(resp.StatusCode))
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 {
		var ra time.Duration
		if resp.StatusCode == http.StatusTooManyRequests {
			if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
				ra = time.Duration(s) * time.Second
			}
		}
		return ra, errReceiver{reason, brief}
	}
	return 0, errPermanent{reason, brief}
}

// printable is a receiver's error text made safe for a log line: one line, printable ASCII,
// at most 200 bytes.
func printable(b []byte) string {
	s := strings.TrimSpace(string(b))
	var out strings.Builder
	for _, r := range s {
		if out.Len() >= 200 {
			out.WriteString("…")
			break
		}
		if r < 0x20 || r == 0x7f || r >= 0x80 {
			r = ' '
		}
		out.WriteRune(r)
	}
	return out.String()
}
