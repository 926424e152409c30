// Package api serves the agent's HTTP API (DESIGN.md's contract): status, processes, metrics,
// history, stats and peers as JSON, with errors as {"error": "..."} and a 4xx/5xx code.
//
// A Server reads the registry's latest View and the history store; it never blocks a scan.
// Handlers are safe for concurrent use.
//
// Every answer holds only what the request's caller may see (privacy.go): the series of the
// processes it may see (Server.SeriesVisible, from the access.Caller the Guard put in the
// request's context) and the rows of /api/v1/processes its Processes func returns for it.
//
// The answers' Go types are in internal/apiwire: the hot routes are written here with
// appenders, the others encoded from those types; both give the bytes apiwire encodes (a
// test decodes and re-encodes every route's answer).
package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cantal-go/cantal/internal/access"
	"github.com/klauspost/compress/gzhttp"

	"github.com/cantal-go/cantal/internal/alerts"
	"github.com/cantal-go/cantal/internal/apiwire"
	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/hub"
	"github.com/cantal-go/cantal/internal/querylimit"
	"github.com/cantal-go/cantal/internal/registry"
	"github.com/cantal-go/cantal/internal/selector"
	"github.com/cantal-go/cantal/internal/series"
	"github.com/cantal-go/cantal/internal/stats"
)

// Peers is the cluster membership as the API needs it. A nil Peers means gossip is off.
type Peers interface {
	// Peers returns the known peers (not the node itself).
	Peers() []apiwire.Peer
	// Join adds a peer by its gossip address.
	Join(addr string) error
}

// Server holds what the handlers read. Fields are set before Handler is called and not changed
// after.
type Server struct {
	Registry *registry.Registry
	Status   func(ctx context.Context) apiwire.Status // the /api/v1/status answer for the caller in ctx
	// Processes returns the /api/v1/processes answer for the caller in ctx (access.FromContext):
	// only the processes it may see, ordered and cut as q asks (its Fields are q.Fields).
	Processes func(ctx context.Context, q ProcessQuery) apiwire.ProcessesAnswer
	Peers     Peers
	Log       *slog.Logger
	// MaxWindow bounds the window of history and stats queries (the retention).
	MaxWindow time.Duration
	// NodeName is the local node's name, its "node" label in cluster answers.
	NodeName string
	// Cluster answers for the peers; nil when gossip is off.
	Cluster Cluster
	// ClusterTimeout bounds how long a cluster answer waits to connect to a peer.
	ClusterTimeout time.Duration
	// ProcessUID returns the uid of a live process, for deciding whether a caller may see its
	// details (see SeriesVisible); ok is false for a pid that is not a live process. nil means
	// no uid is known: only callers who see every process see per-process series.
	ProcessUID func(pid int) (uid uint32, ok bool)
	// WSOriginPatterns are the origins besides the request's own host whose pages may open the
	// WebSocket (websocket.AcceptOptions.OriginPatterns: host patterns such as
	// "grafana.example.com" or "https://*.example.com"). A request without an Origin header
	// (peers, the cantal CLI, any non-browser client) is always accepted.
	WSOriginPatterns []string
	// MaxWebSockets bounds the WebSockets open at once (the next is answered 503); 0: no bound.
	MaxWebSockets int
	wsOpen        atomic.Int64

	// Slots are the agent's query slots (package querylimit): the cluster routes, which the
	// limiter lets through without one, take one around their local part. nil: no limit.
	Slots *querylimit.Limiter

	// Alerts returns the latest evaluation of the alert rules (/api/v1/alerts); nil: none.
	Alerts func() *alerts.Snapshot

	// Targets returns the Prometheus service-discovery groups of /api/v1/targets: every live
	// member's scrape address, the node itself included; nil: none.
	Targets func() []apiwire.TargetGroup

	// wsBudget bounds the bytes of answers waiting on one WebSocket connection; 0:
	// defaultWSBudget. Tests make it small.
	wsBudget int

	fetcherOnce sync.Once
	fetcher     *hub.Fetcher // see fetch
}

// Register adds the API routes to mux.
func (s *Server) Register(mux *http.ServeMux) {
	handle(mux, "/api/v1/status", map[string]http.HandlerFunc{"GET": s.status})
	handle(mux, "/api/v1/processes", map[string]http.HandlerFunc{"GET": s.processes})
	handle(mux, "/api/v1/containers", map[string]http.HandlerFunc{"GET": s.containers})
	handle(mux, "/api/v1/cluster/containers", map[string]http.HandlerFunc{"GET": s.clusterContainers})
	handle(mux, "/api/v1/metrics", map[string]http.HandlerFunc{"GET": s.metrics})
	handle(mux, "/api/v1/history", map[string]http.HandlerFunc{"GET": s.history})
	handle(mux, "/api/v1/stats", map[string]http.HandlerFunc{"GET": s.stats})
	handle(mux, "/api/v1/labels", map[string]http.HandlerFunc{"GET": s.labels})
	handle(mux, "/api/v1/peers", map[string]http.HandlerFunc{"GET": s.peers, "POST": s.addPeer})
	handle(mux, "/api/v1/ws", map[string]http.HandlerFunc{"GET": s.ws})
	handle(mux, "/api/v1/alerts", map[string]http.HandlerFunc{"GET": s.alerts})
	handle(mux, "/api/v1/cluster/alerts", map[string]http.HandlerFunc{"GET": s.clusterAlerts})
	s.registerCluster(mux)
	s.registerTargets(mux)
	mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		Error(w, http.StatusNotFound, fmt.Sprintf("no such API route: %s", r.URL.Path))
	})
}

// handle registers a path answering the given methods, with a JSON 405 for the others.
func handle(mux *http.ServeMux, path string, methods map[string]http.HandlerFunc) {
	allow := make([]string, 0, len(methods))
	for m := range methods {
		allow = append(allow, m)
	}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, ok := methods[r.Method]
		if !ok && r.Method == http.MethodHead {
			h, ok = methods[http.MethodGet]
		}
		if !ok {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			Error(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed on %s", r.Method, path))
			return
		}
		h(w, r.WithContext(hub.WithCaller(r.Context(), callerName(r))))
	})
	if path != "/api/v1/ws" {
		// JSON answers are gzipped for clients that accept it (gzhttp: Accept-Encoding with
		// q-values, Vary, answers under 1 KiB left alone); the WebSocket is not wrapped.
		mux.Handle(path, gzhttp.GzipHandler(handler))
	} else {
		mux.Handle(path, handler)
	}
}

// callerName names the caller of r for the bounds the cluster hub keeps per caller (distinct
// remote selectors, hub.Config.MaxSelectorsPerCaller): its user or certificate name, its uid
// on the Unix socket, else its network address.
func callerName(r *http.Request) string {
	c, ok := access.FromContext(r.Context())
	switch {
	case ok && c.Name != "":
		return c.Via + ":" + c.Name
	case ok && c.Unix:
		return "uid:" + strconv.FormatUint(uint64(c.UID), 10)
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return "addr:" + host
}

// Error writes {"error": msg} with code.
func Error(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	b, _ := json.Marshal(apiwire.ErrorAnswer{Error: msg})
	w.Write(append(b, '\n'))
}

// WriteJSON writes v as JSON with code 200.
func WriteJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		Error(w, http.StatusInternalServerError, "encode answer: "+err.Error())
		return
	}
	writeRaw(w, append(b, '\n'))
}

// writeRaw writes the JSON answer b, handing it to the query limiter's answer when w is one
// (no copy: b is not used afterwards).
func writeRaw(w http.ResponseWriter, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	querylimit.WriteOwned(w, b)
}

// answerLimit is the limit for historyJSON and windowJSON of an answer written to w: what the
// query limiter lets it take (0: none).
func answerLimit(w http.ResponseWriter) int {
	if n := querylimit.Room(w); n < math.MaxInt {
		return max(n, 1)
	}
	return 0
}

// tooLarge answers 422 to a query whose answer grew past its limit.
func tooLarge(w http.ResponseWriter, limit int) {
	Error(w, http.StatusUnprocessableEntity, querylimit.TooLarge(int64(limit)))
}

func (s *Server) status(w http.ResponseWriter, r *http.Request) { WriteJSON(w, s.Status(r.Context())) }
func (s *Server) processes(w http.ResponseWriter, r *http.Request) {
	q, err := ParseProcessQuery(r.URL.Query())
	if err != nil {
		Error(w, http.StatusBadRequest, err.Error())
		return
	}
	WriteJSON(w, s.Processes(r.Context(), q))
}

// ProcessQuery is what /api/v1/processes?sort=cpu|rss&limit=N asks: the processes ordered by
// CPU share or resident memory, largest first (ties by pid), and only the first Limit (0:
// all), so a page showing a top ten fetches ten rows, not every process.
//
// Fields, when not empty, keeps only those keys of each row (fields=pid,name,cpu_percent):
// a page that shows four columns does not fetch every process's command line each refresh.
type ProcessQuery struct {
	Sort   string // "", "cpu" or "rss"
	Limit  int
	Fields []string // row keys to keep, each one of apiwire.ProcessFields, without repeats; nil: all
}

// maxProcessLimit bounds limit= (more than any process table holds).
const maxProcessLimit = 1 << 22

// ParseProcessQuery reads sort, limit and fields from v; an unknown sort, a limit that is not
// a number from 1 to 4194304, or a field that is not one of apiwire.ProcessFields is an error naming
// the parameter.
func ParseProcessQuery(v url.Values) (ProcessQuery, error) {
	var q ProcessQuery
	switch s := v.Get("sort"); s {
	case "", "cpu", "rss":
		q.Sort = s
	default:
		return q, fmt.Errorf("bad sort %q: want cpu or rss", s)
	}
	if l := v.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > maxProcessLimit {
			return q, fmt.Errorf("bad limit %q: want a number from 1 to %d", l, maxProcessLimit)
		}
		q.Limit = n
	}
	if f := v.Get("fields"); f != "" {
		for _, name := range strings.Split(f, ",") {
			if !slices.Contains(apiwire.ProcessFields, name) {
				return q, fmt.Errorf("bad fields: %q is not a process field (want some of %s)", name, strings.Join(apiwire.ProcessFields, ","))
			}
			if slices.Contains(q.Fields, name) {
				return q, fmt.Errorf("bad fields: %q given twice", name)
			}
			q.Fields = append(q.Fields, name)
		}
	}
	return q, nil
}

// Query is a parsed series query: ?match=SEL&window=DUR&fn=rate.
type Query struct {
	Sel    *selector.Selector
	Window time.Duration
	Rate   bool
	// Visible, when not nil, leaves out the series it refuses: the caller's view
	// (Server.SeriesVisible). ParseQuery leaves it nil.
	Visible func(series.Labels) bool
}

// parseQuery is ParseQuery with Visible set for the request's caller.
func (s *Server) parseQuery(r *http.Request, defWindow time.Duration) (Query, error) {
	q, err := ParseQuery(r, defWindow, s.MaxWindow)
	q.Visible = s.SeriesVisible(r.Context())
	return q, err
}

// ParseQuery reads match, window and fn from r. An empty match selects every series.
func ParseQuery(r *http.Request, defWindow, maxWindow time.Duration) (Query, error) {
	q := Query{Window: defWindow}
	v := r.URL.Query()
	sel, err := selector.Parse(v.Get("match"))
	if err != nil {
		return q, fmt.Errorf("bad match: %w", err)
	}
	q.Sel = sel
	if ws := v.Get("window"); ws != "" {
		d, err := time.ParseDuration(ws)
		if err != nil {
			return q, fmt.Errorf("bad window %q: %w", ws, err)
		}
		if d <= 0 {
			return q, fmt.Errorf("bad window %q: must be positive", ws)
		}
		if maxWindow > 0 && d > maxWindow {
			return q, fmt.Errorf("bad window %q: longer than the history kept (%s)", ws, maxWindow)
		}
		q.Window = d
	}
	switch fn := v.Get("fn"); fn {
	case "":
	case "rate":
		q.Rate = true
	default:
		return q, fmt.Errorf("bad fn %q: the only function is rate", fn)
	}
	return q, nil
}

// LatestJSON appends the {"series": [...]} answer of the latest values of the series q selects
// (q.Sel, q.Visible) to b. It visits only the live series of the names q.Sel allows
// (registry.View.Select).
func LatestJSON(b []byte, reg *registry.Registry, q Query) []byte {
	b = append(b, `{"series":[`...)
	n := 0
	reg.View().EachLatest(q.Sel, q.Visible, func(_ registry.Handle, smp series.Sample) bool {
		if n > 0 {
			b = append(b, ',')
		}
		n++
		b = smp.AppendJSON(b)
		return true
	})
	return append(b, "]}\n"...)
}

func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	q, err := s.parseQuery(r, 0)
	if err != nil {
		Error(w, http.StatusBadRequest, err.Error())
		return
	}
	writeRaw(w, LatestJSON(make([]byte, 0, 4096), s.Registry, q))
}

// Points appends to dst the points of one series in [from, to], turned into per-second rates
// for a counter when rate is set (stats.Rates: reset- and gap-safe). Values are float64 (exact
// for integers up to 2^53).
func Points(dst []stats.Point, hist *history.Store, h registry.Handle, from, to int64, rate bool) []stats.Point {
	kind := h.Kind()
	start := len(dst)
	hist.Range(h.HistoryID(), from, to, func(ts int64, bits uint64) bool {
		dst = append(dst, stats.Point{TS: ts, Value: series.ToFloat(kind, bits)})
		return true
	})
	if rate && kind == series.Counter {
		raw := dst[start:]
		rates := stats.Rates(make([]stats.Point, 0, len(raw)), raw)
		dst = append(dst[:start], rates...)
	}
	return dst
}

func appendPoints(b []byte, pts []stats.Point) []byte {
	b = append(b, '[')
	for i, p := range pts {
		if i > 0 {
			b = append(b, ',')
		}
		b = apiwire.Point{TS: p.TS, Value: apiwire.Float(p.Value)}.AppendJSON(b)
	}
	return append(b, ']')
}

// HistoryJSON appends the {"series": [{"labels", "kind", "points"}]} answer for q to b. States,
// which keep no history, are left out; so are series with no point in the window.
func HistoryJSON(b []byte, reg *registry.Registry, q Query, now int64) []byte {
	b, _ = historyJSON(b, reg, q, now, 0)
	return b
}

// historyJSON is HistoryJSON that gives up, with complete false, once the answer has grown past
// limit bytes (0: no limit); b then holds a partial answer.
func historyJSON(b []byte, reg *registry.Registry, q Query, now int64, limit int) (_ []byte, complete bool) {
	return windowJSON(b, reg, q, now, limit, func(b []byte, pts []stats.Point) []byte {
		b = append(b, `,"points":`...)
		return appendPoints(b, pts)
	})
}

// windowJSON appends {"series": [...]} with one object per numeric series q selects that has
// points in q's window: its labels, kind and "fn" when rates were taken, then what member
// appends from the points. With a limit (bytes, 0: none) it stops once the answer is longer,
// reporting complete false. It visits only the series of the names q.Sel allows that may have a
// point in the window (registry.View.Select), not every series kept.
func windowJSON(b []byte, reg *registry.Registry, q Query, now int64, limit int, member func(b []byte, pts []stats.Point) []byte) (_ []byte, complete bool) {
	start := len(b)
	b = append(b, `{"series":[`...)
	rest := 0 // windowSeries's limit: what is left of limit after the prefix
	if limit > 0 {
		rest = max(limit-(len(b)-start), 1)
	}
	b, complete = windowSeries(b, reg, q, now, rest, "", member)
	return append(b, "]}\n"...), complete
}

// windowSeries appends windowJSON's series objects, comma-separated, without the array around
// them; node, when set, is added to every series' labels (the local node's part of a cluster
// answer). limit is windowJSON's, of the bytes appended here; below 1, none.
func windowSeries(b []byte, reg *registry.Registry, q Query, now int64, limit int, node string, member func(b []byte, pts []stats.Point) []byte) (_ []byte, complete bool) {
	view := reg.View()
	hist := reg.History()
	from := now - q.Window.Milliseconds()
	start := len(b)
	complete = true
	n := 0
	var pts []stats.Point
	view.Select(q.Sel, from, false, func(h registry.Handle) bool {
		if h.Kind() == series.State || q.Visible != nil && !q.Visible(h.Labels()) {
			return true
		}
		pts = Points(pts[:0], hist, h, from, now, q.Rate)
		if len(pts) == 0 {
			return true
		}
		if n > 0 {
			b = append(b, ',')
		}
		n++
		key := h.Key()
		if node != "" {
			key = apiwire.WithNode(h.Labels(), node).Key()
		}
		fn := ""
		if q.Rate && h.Kind() == series.Counter {
			fn = "rate"
		}
		b = apiwire.AppendSeriesHead(b, key, h.Kind().String(), fn)
		b = member(b, pts)
		b = append(b, '}')
		if limit > 0 && len(b)-start > limit {
			complete = false
			return false
		}
		return true
	})
	return b, complete
}

// nodeHistoryJSON appends the local node's series array of a cluster history answer: HistoryJSON's
// series, each labelled with node, within limit bytes (0: none; complete false past it).
func nodeHistoryJSON(b []byte, reg *registry.Registry, q Query, now int64, limit int, node string) (_ []byte, complete bool) {
	b = append(b, '[')
	b, complete = windowSeries(b, reg, q, now, limit, node, func(b []byte, pts []stats.Point) []byte {
		b = append(b, `,"points":`...)
		return appendPoints(b, pts)
	})
	return append(b, ']'), complete
}

// local runs fn, the local node's part of a cluster answer, under a query slot (Slots); it
// reports false, without running fn and having answered 503 to w, when no slot came free while
// the request could wait.
func (s *Server) local(w http.ResponseWriter, r *http.Request, fn func()) bool {
	release, err := s.Slots.Acquire(r.Context())
	if err != nil {
		querylimit.Busy(w)
		return false
	}
	defer release()
	fn()
	return true
}

func (s *Server) history(w http.ResponseWriter, r *http.Request) {
	q, err := s.parseQuery(r, 5*time.Minute)
	if err != nil {
		Error(w, http.StatusBadRequest, err.Error())
		return
	}
	limit := answerLimit(w)
	b, complete := historyJSON(make([]byte, 0, 4096), s.Registry, q, time.Now().UnixMilli(), limit)
	if !complete {
		tooLarge(w, limit)
		return
	}
	writeRaw(w, b)
}

func (s *Server) stats(w http.ResponseWriter, r *http.Request) {
	q, err := s.parseQuery(r, 5*time.Minute)
	if err != nil {
		Error(w, http.StatusBadRequest, err.Error())
		return
	}
	limit := answerLimit(w)
	b, complete := statsJSON(make([]byte, 0, 4096), s.Registry, q, time.Now().UnixMilli(), limit)
	if !complete {
		tooLarge(w, limit)
		return
	}
	writeRaw(w, b)
}

func (s *Server) peers(w http.ResponseWriter, r *http.Request) {
	if s.Peers == nil {
		WriteJSON(w, apiwire.PeersAnswer{Peers: []apiwire.Peer{}})
		return
	}
	peers := s.Peers.Peers()
	if peers == nil {
		peers = []apiwire.Peer{}
	}
	WriteJSON(w, apiwire.PeersAnswer{Peers: peers})
}

func (s *Server) addPeer(w http.ResponseWriter, r *http.Request) {
	var req apiwire.AddPeerRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		Error(w, http.StatusBadRequest, "bad body: want {\"addr\": \"host:port\"}: "+err.Error())
		return
	}
	if req.Addr == "" {
		Error(w, http.StatusBadRequest, "bad body: addr is empty")
		return
	}
	if s.Peers == nil {
		Error(w, http.StatusConflict, "gossip is off: start the agent with --cluster-name")
		return
	}
	if err := s.Peers.Join(req.Addr); err != nil {
		var he interface{ HTTPStatus() int }
		code := http.StatusBadGateway
		if errors.As(err, &he) {
			code = he.HTTPStatus()
		}
		Error(w, code, "join "+req.Addr+": "+err.Error())
		return
	}
	WriteJSON(w, apiwire.AddPeerAnswer{Joined: req.Addr})
}

// StatsJSON appends the {"series": [{"labels", "kind", "count", "min", ...}]} answer for q to b:
// the statistics of each matching series over the window (of its rates with fn=rate).
func StatsJSON(b []byte, reg *registry.Registry, q Query, now int64) []byte {
	b, _ = statsJSON(b, reg, q, now, 0)
	return b
}

// statsJSON is StatsJSON with windowJSON's limit.
func statsJSON(b []byte, reg *registry.Registry, q Query, now int64, limit int) (_ []byte, complete bool) {
	var z stats.Summarizer
	return windowJSON(b, reg, q, now, limit, func(b []byte, pts []stats.Point) []byte {
		b = append(b, ',')
		return z.Summarize(pts).AppendFields(b)
	})
}
