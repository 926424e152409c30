// Package promapi serves Prometheus's HTTP query API (the read part of /api/v1: query,
// query_range, series, labels, label/<name>/values, metadata, status/buildinfo) over a
// promstore.Storage, evaluated by Prometheus's own PromQL engine, with Prometheus's answer
// format ({"status":"success","data":...}) and errors ({"status":"error","errorType":...,
// "error":...} with the same HTTP codes). A Grafana Prometheus data source, or anything else
// that speaks the API, can be pointed at it.
//
// Prometheus's own web/api/v1 is not mounted: its NewAPI wants the whole server (scrape
// manager, rule manager, TSDB admin, notifier) and pulls their packages into the binary; the
// handlers here are the thin read part, answering as it does.
//
// Limits are Prometheus's: a query's timeout and samples (the engine's Timeout and
// MaxSamples: "query timed out", "query processing would load too many samples into
// memory"), queries evaluated at once (the others wait, as in Prometheus's queue), and
// query_range's 11,000 points per series. The agent also runs each request under a query slot
// (internal/querylimit, mounted around the mux), so queries never take the CPU the scans need.
//
// A Handler is safe for concurrent use.
package promapi

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
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/util/annotations"

	"github.com/cantal-go/cantal/internal/apiwire"
	"github.com/cantal-go/cantal/internal/buildinfo"
	"github.com/cantal-go/cantal/internal/promstore"
	"github.com/cantal-go/cantal/internal/querylimit"
)

// Prefix is where the agent mounts the API: a Grafana data source's URL is
// http://NODE:22682/prometheus.
const Prefix = "/prometheus/api/v1/"

// ClusterPrefix is where the agent mounts the cluster-wide API (Options.Queryable a
// promcluster.Queryable): a Grafana data source's URL is http://NODE:22682/cluster/prometheus.
const ClusterPrefix = "/cluster/prometheus/api/v1/"

// Options are the limits of a Handler, named after Prometheus's flags.
type Options struct {
	Timeout        time.Duration // --query.timeout (default 2m)
	MaxSamples     int           // --query.max-samples (default 50 000 000)
	MaxConcurrency int           // --query.max-concurrency (default 20)
	LookbackDelta  time.Duration // default 5m, as Prometheus
	// Window is how far back a series or label request without start reaches (the history
	// held); default 1h.
	Window time.Duration
	Now    func() time.Time // default time.Now
	// Prefix is where the Handler is mounted (default Prefix).
	Prefix string
	// Queryable, when set, is what queries, series and labels read instead of the Storage
	// (the cluster's series, promcluster); metadata is the Storage's all the same.
	Queryable storage.Queryable
	// Share, when set, is a Handler whose engine and --query-max-concurrency slots this one
	// uses too (the cluster API beside the node's: one bound for both).
	Share *Handler
	// Planner, when set, plans every query and query_range before the engine evaluates it
	// (the cluster API's pushdown, promcluster.Queryable.Plan).
	Planner Planner
	// Rules, when set, are the rule files' groups /api/v1/rules and /api/v1/alerts list;
	// nil: both answer empty lists.
	Rules RuleSource
}

// A Planner may answer a query by another query over another Queryable that gives the same
// answer (promcluster's pushdown). Plan is called with the query's context (its timeout,
// its caller) once its slot is taken, with the engine that then evaluates what it returns;
// step is 0 for an instant query at start. It never fails: a query it cannot plan comes
// back as it is, over the Handler's Queryable, for the engine to answer or refuse.
type Planner interface {
	Plan(ctx context.Context, ng *promql.Engine, qs string, start, end time.Time, step time.Duration) (storage.Queryable, string)
}

// Handler serves the API. Make one with New.
type Handler struct {
	st     *promstore.Storage
	q      storage.Queryable // st, or Options.Queryable
	ng     *promql.Engine
	opt    Options
	parser parser.Parser
	slots  chan struct{}
	mux    *http.ServeMux
}

// New returns a Handler answering from st.
func New(st *promstore.Storage, opt Options) *Handler {
	if opt.Timeout <= 0 {
		opt.Timeout = 2 * time.Minute
	}
	if opt.MaxSamples <= 0 {
		opt.MaxSamples = 50_000_000
	}
	if opt.MaxConcurrency <= 0 {
		opt.MaxConcurrency = 20
	}
	if opt.LookbackDelta <= 0 {
		opt.LookbackDelta = 5 * time.Minute
	}
	if opt.Window <= 0 {
		opt.Window = time.Hour
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Prefix == "" {
		opt.Prefix = Prefix
	}
	var q storage.Queryable = st
	if opt.Queryable != nil {
		q = opt.Queryable
	}
	p := parser.NewParser(parser.Options{})
	h := &Handler{
		st:  st,
		q:   q,
		opt: opt,
		ng: promql.NewEngine(promql.EngineOpts{
			MaxSamples:           opt.MaxSamples,
			Timeout:              opt.Timeout,
			LookbackDelta:        opt.LookbackDelta,
			EnableAtModifier:     true,
			EnableNegativeOffset: true,
			Parser:               p,
		}),
		parser: p,
		slots:  make(chan struct{}, opt.MaxConcurrency),
		mux:    http.NewServeMux(),
	}
	if opt.Share != nil {
		h.ng, h.slots = opt.Share.ng, opt.Share.slots
	}
	h.route("query", h.query)
	h.route("query_range", h.queryRange)
	h.route("series", h.series)
	h.route("labels", h.labels)
	h.mux.HandleFunc("GET "+opt.Prefix+"label/{name}/values", h.wrap(h.labelValues))
	h.mux.HandleFunc("GET "+opt.Prefix+"metadata", h.wrap(h.metadata))
	h.mux.HandleFunc("GET "+opt.Prefix+"status/buildinfo", h.wrap(h.buildInfo))
	h.mux.HandleFunc("GET "+opt.Prefix+"rules", h.wrap(h.rules))
	h.mux.HandleFunc("GET "+opt.Prefix+"alerts", h.wrap(h.alerts))
	h.mux.HandleFunc(opt.Prefix, func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &apiError{typ: errNotFound, err: errors.New("not found")})
	})
	return h
}

// ReadOnlyPost reports whether r is a POST that only reads: Prometheus takes the query,
// query_range, series and labels parameters as a form body too (Grafana posts them).
func ReadOnlyPost(r *http.Request) bool {
	if r.Method != http.MethodPost {
		return false
	}
	var name string
	switch {
	case strings.HasPrefix(r.URL.Path, Prefix):
		name = strings.TrimPrefix(r.URL.Path, Prefix)
	case strings.HasPrefix(r.URL.Path, ClusterPrefix):
		name = strings.TrimPrefix(r.URL.Path, ClusterPrefix)
	default:
		return false
	}
	switch name {
	case "query", "query_range", "series", "labels":
		return true
	}
	return false
}

func (h *Handler) route(name string, fn func(*http.Request) (any, annotations.Annotations, *apiError)) {
	h.mux.HandleFunc("GET "+h.opt.Prefix+name, h.wrap(fn))
	h.mux.HandleFunc("POST "+h.opt.Prefix+name, h.wrap(fn))
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// The error types of Prometheus's API, with their HTTP codes.
type errorType struct {
	name string
	code int
}

var (
	errBadData  = errorType{"bad_data", http.StatusBadRequest}
	errExec     = errorType{"execution", http.StatusUnprocessableEntity}
	errCanceled = errorType{"canceled", 499}
	errTimeout  = errorType{"timeout", http.StatusServiceUnavailable}
	errInternal = errorType{"internal", http.StatusInternalServerError}
	errNotFound = errorType{"not_found", http.StatusNotFound}
)

type apiError struct {
	typ errorType
	err error
}

func badData(err error) *apiError { return &apiError{typ: errBadData, err: err} }

func invalidParam(err error, name string) *apiError {
	return badData(fmt.Errorf("invalid parameter %q: %w", name, err))
}

// engineError classifies an error of the engine as Prometheus's API does.
func engineError(err error) *apiError {
	var eqc promql.ErrQueryCanceled
	var eqt promql.ErrQueryTimeout
	var es promql.ErrStorage
	switch {
	case errors.As(err, &eqc), errors.Is(err, context.Canceled):
		return &apiError{typ: errCanceled, err: err}
	case errors.As(err, &eqt), errors.Is(err, context.DeadlineExceeded):
		return &apiError{typ: errTimeout, err: err}
	case errors.As(err, &es):
		return &apiError{typ: errInternal, err: err}
	}
	return &apiError{typ: errExec, err: err}
}

type response struct {
	Status    string   `json:"status"`
	Data      any      `json:"data,omitempty"`
	ErrorType string   `json:"errorType,omitempty"`
	Error     string   `json:"error,omitempty"`
	Warnings  []string `json:"warnings,omitempty"`
	Infos     []string `json:"infos,omitempty"`
}

func (h *Handler) wrap(fn func(*http.Request) (any, annotations.Annotations, *apiError)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			writeError(w, badData(fmt.Errorf("error parsing form values: %w", err)))
			return
		}
		data, annos, aerr := fn(r)
		if aerr != nil {
			writeError(w, aerr)
			return
		}
		warn, info := annos.AsStrings(r.FormValue("query"), 10, 10)
		if qd, ok := data.(queryData); ok {
			writeQueryAnswer(w, qd, warn, info)
			return
		}
		if pp, ok := data.(peerPart); ok {
			w.Header().Set("Content-Type", apiwire.PeerSelectType)
			w.Write(apiwire.AppendPeerStrings(apiwire.AppendPeerStrings(pp, warn), info))
			return
		}
		writeJSON(w, http.StatusOK, response{Status: "success", Data: data, Warnings: warn, Infos: info})
	}
}

func writeError(w http.ResponseWriter, e *apiError) {
	writeJSON(w, e.typ.code, response{Status: "error", ErrorType: e.typ.name, Error: e.err.Error()})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		code = http.StatusInternalServerError
		b, _ = json.Marshal(response{Status: "error", ErrorType: errInternal.name, Error: "encoding the answer: " + err.Error()})
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(b)
}

// writeQueryAnswer writes the answer json.Marshal(response{Status: "success", Data: qd,
// Warnings: warn, Infos: info}) would, without encoding/json compacting the result again
// (it does for every json.RawMessage: a second pass over the largest answers).
func writeQueryAnswer(w http.ResponseWriter, qd queryData, warn, info []string) {
	rt, err1 := json.Marshal(qd.ResultType)
	tail, err2 := json.Marshal(struct {
		Warnings []string `json:"warnings,omitempty"`
		Infos    []string `json:"infos,omitempty"`
	}{warn, info})
	raw, _ := qd.Result.(json.RawMessage)
	if err1 != nil || err2 != nil || raw == nil {
		writeJSON(w, http.StatusOK, response{Status: "success", Data: qd, Warnings: warn, Infos: info})
		return
	}
	b := make([]byte, 0, len(raw)+len(rt)+len(tail)+64)
	b = append(b, `{"status":"success","data":{"resultType":`...)
	b = append(b, rt...)
	b = append(b, `,"result":`...)
	b = append(b, raw...)
	b = append(b, '}')
	if len(tail) > 2 { // not {}
		b = append(b, ',')
		b = append(b, tail[1:]...)
	} else {
		b = append(b, '}')
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(b)
}

// queryData is the data of a query answer.
type queryData struct {
	ResultType parser.ValueType `json:"resultType"`
	Result     any              `json:"result"`
}

// slot takes one of the concurrent-query slots, waiting as long as ctx lets it.
func (h *Handler) slot(ctx context.Context) (func(), *apiError) {
	select {
	case h.slots <- struct{}{}:
		return func() { <-h.slots }, nil
	case <-ctx.Done():
		return nil, engineError(fmt.Errorf("waiting for one of --query-max-concurrency's slots: %w", ctx.Err()))
	}
}

// queryContext is r's context with the timeout parameter, when given and shorter than the
// engine's.
func (h *Handler) queryContext(r *http.Request) (context.Context, context.CancelFunc, *apiError) {
	ctx := r.Context()
	if s := r.FormValue("timeout"); s != "" {
		d, err := parseDuration(s)
		if err != nil {
			return nil, nil, invalidParam(err, "timeout")
		}
		c, cancel := context.WithTimeout(ctx, d)
		return c, cancel, nil
	}
	c, cancel := context.WithCancel(ctx)
	return c, cancel, nil
}

func (h *Handler) run(r *http.Request, mk func(ctx context.Context) (promql.Query, error)) (any, annotations.Annotations, *apiError) {
	ctx, cancel, aerr := h.queryContext(r)
	if aerr != nil {
		return nil, nil, aerr
	}
	defer cancel()
	if _, aerr := h.slot(ctx); aerr != nil {
		return nil, nil, aerr
	}
	// The slot travels in ctx, so that a cluster query waiting for its peers gives it back
	// meanwhile (querylimit.Away), as it does the agent's.
	ctx, held := querylimit.Hold(ctx, func() { <-h.slots }, func(ctx context.Context) error {
		_, aerr := h.slot(ctx)
		if aerr != nil {
			return aerr.err
		}
		return nil
	})
	defer held.Release()
	qry, err := mk(ctx)
	if err != nil {
		return nil, nil, invalidParam(err, "query")
	}
	defer qry.Close()
	res := qry.Exec(ctx)
	if res.Err != nil {
		return nil, res.Warnings, engineError(res.Err)
	}
	var out any = res.Value
	switch v := res.Value.(type) {
	case promql.Vector:
		if v == nil {
			out = promql.Vector{}
		}
	case promql.Matrix:
		if v == nil {
			out = promql.Matrix{}
		}
	}
	if m, ok := res.Value.(promql.Matrix); ok && r.FormValue(apiwire.PeerPartParam) == apiwire.PeerPartV1 {
		// A cluster query's pushed part (apiwire): packed, read by the asking node without JSON.
		b, err := appendPeerPart(nil, m)
		if err != nil {
			return nil, nil, &apiError{typ: errInternal, err: fmt.Errorf("encoding the result: %w", err)}
		}
		return peerPart(b), res.Warnings, nil
	}
	// Written before qry.Close (deferred) gives the result's points back to the engine's
	// pools, where the next query reuses them: marshalled after, an answer could carry
	// another query's values.
	b, err := appendResult(nil, out)
	if err != nil {
		return nil, nil, &apiError{typ: errInternal, err: fmt.Errorf("encoding the result: %w", err)}
	}
	return queryData{ResultType: res.Value.Type(), Result: json.RawMessage(b)}, res.Warnings, nil
}

func (h *Handler) query(r *http.Request) (any, annotations.Annotations, *apiError) {
	ts, err := parseTimeParam(r, "time", h.opt.Now())
	if err != nil {
		return nil, nil, invalidParam(err, "time")
	}
	return h.run(r, func(ctx context.Context) (promql.Query, error) {
		q, qs := h.plan(ctx, r.FormValue("query"), ts, ts, 0)
		return h.ng.NewInstantQuery(ctx, q, nil, qs, ts)
	})
}

// plan is Options.Planner's plan of qs, or qs over the Handler's Queryable.
func (h *Handler) plan(ctx context.Context, qs string, start, end time.Time, step time.Duration) (storage.Queryable, string) {
	if h.opt.Planner == nil {
		return h.q, qs
	}
	return h.opt.Planner.Plan(ctx, h.ng, qs, start, end, step)
}

// maxPoints is query_range's bound of points per series, Prometheus's.
const maxPoints = 11000

func (h *Handler) queryRange(r *http.Request) (any, annotations.Annotations, *apiError) {
	start, err := parseTime(r.FormValue("start"))
	if err != nil {
		return nil, nil, invalidParam(err, "start")
	}
	end, err := parseTime(r.FormValue("end"))
	if err != nil {
		return nil, nil, invalidParam(err, "end")
	}
	if end.Before(start) {
		return nil, nil, invalidParam(errors.New("end timestamp must not be before start time"), "end")
	}
	step, err := parseDuration(r.FormValue("step"))
	if err != nil {
		return nil, nil, invalidParam(err, "step")
	}
	if step <= 0 {
		return nil, nil, invalidParam(errors.New("zero or negative query resolution step widths are not accepted. Try a positive integer"), "step")
	}
	if end.Sub(start)/step > maxPoints {
		return nil, nil, badData(errors.New("exceeded maximum resolution of 11,000 points per timeseries. Try decreasing the query resolution (?step=XX)"))
	}
	return h.run(r, func(ctx context.Context) (promql.Query, error) {
		q, qs := h.plan(ctx, r.FormValue("query"), start, end, step)
		return h.ng.NewRangeQuery(ctx, q, nil, qs, start, end, step)
	})
}

// window is the [start, end] of a series or label request: the held history by default.
func (h *Handler) window(r *http.Request) (int64, int64, *apiError) {
	now := h.opt.Now()
	start, err := parseTimeParam(r, "start", now.Add(-h.opt.Window))
	if err != nil {
		return 0, 0, invalidParam(err, "start")
	}
	end, err := parseTimeParam(r, "end", now)
	if err != nil {
		return 0, 0, invalidParam(err, "end")
	}
	if end.Before(start) {
		return 0, 0, invalidParam(errors.New("end timestamp must not be before start time"), "end")
	}
	return start.UnixMilli(), end.UnixMilli(), nil
}

func (h *Handler) matchers(r *http.Request, required bool) ([][]*labels.Matcher, *apiError) {
	ms := r.Form["match[]"]
	if len(ms) == 0 {
		if required {
			return nil, badData(errors.New("no match[] parameter provided"))
		}
		return nil, nil
	}
	sets, err := h.parser.ParseMetricSelectors(ms)
	if err != nil {
		return nil, invalidParam(err, "match[]")
	}
	for _, set := range sets {
		if !matchesSomething(set) {
			return nil, badData(errors.New("match[] must contain at least one non-empty matcher"))
		}
	}
	return sets, nil
}

// matchesSomething is Prometheus's check that a selector has a matcher that fails the empty
// string.
func matchesSomething(ms []*labels.Matcher) bool {
	return slices.ContainsFunc(ms, func(m *labels.Matcher) bool { return !m.Matches("") })
}

// limit is the limit parameter: 0 for none.
func limit(r *http.Request) (int, *apiError) {
	s := r.FormValue("limit")
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, invalidParam(errors.New("limit must be a non-negative integer"), "limit")
	}
	return n, nil
}

func (h *Handler) querier(r *http.Request) (storage.Querier, context.Context, context.CancelFunc, *apiError) {
	mint, maxt, aerr := h.window(r)
	if aerr != nil {
		return nil, nil, nil, aerr
	}
	q, err := h.q.Querier(mint, maxt)
	if err != nil {
		return nil, nil, nil, &apiError{typ: errInternal, err: err}
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.opt.Timeout)
	return q, ctx, cancel, nil
}

func (h *Handler) series(r *http.Request) (any, annotations.Annotations, *apiError) {
	sets, aerr := h.matchers(r, true)
	if aerr != nil {
		return nil, nil, aerr
	}
	n, aerr := limit(r)
	if aerr != nil {
		return nil, nil, aerr
	}
	q, ctx, cancel, aerr := h.querier(r)
	if aerr != nil {
		return nil, nil, aerr
	}
	defer cancel()
	defer q.Close()
	hints := &storage.SelectHints{Func: "series", Start: math.MinInt64, End: math.MaxInt64}
	var all []labels.Labels
	seen := map[string]bool{}
	var annos annotations.Annotations
	for _, set := range sets {
		ss := q.Select(ctx, true, hints, set...)
		for ss.Next() {
			l := ss.At().Labels()
			if k := l.String(); !seen[k] {
				seen[k] = true
				all = append(all, l)
			}
		}
		if err := ss.Err(); err != nil {
			return nil, nil, engineError(err)
		}
		annos.Merge(ss.Warnings())
	}
	slices.SortFunc(all, labels.Compare)
	if n > 0 && len(all) > n {
		all = all[:n]
		annos.Add(errors.New("results truncated due to limit"))
	}
	if all == nil {
		all = []labels.Labels{}
	}
	return all, annos, nil
}

// labelList answers labels and label values: the union over the match[] sets (or every
// series), sorted.
func (h *Handler) labelList(r *http.Request, get func(ctx context.Context, q storage.Querier, ms []*labels.Matcher) ([]string, annotations.Annotations, error)) (any, annotations.Annotations, *apiError) {
	sets, aerr := h.matchers(r, false)
	if aerr != nil {
		return nil, nil, aerr
	}
	n, aerr := limit(r)
	if aerr != nil {
		return nil, nil, aerr
	}
	q, ctx, cancel, aerr := h.querier(r)
	if aerr != nil {
		return nil, nil, aerr
	}
	defer cancel()
	defer q.Close()
	if sets == nil {
		sets = [][]*labels.Matcher{nil}
	}
	set := map[string]struct{}{}
	var annos annotations.Annotations // the cluster's peers left out
	for _, ms := range sets {
		vs, a, err := get(ctx, q, ms)
		if err != nil {
			return nil, nil, engineError(err)
		}
		annos.Merge(a)
		for _, v := range vs {
			set[v] = struct{}{}
		}
	}
	out := make([]string, 0, len(set))
	for v := range set {
		out = append(out, v)
	}
	slices.Sort(out)
	if n > 0 && len(out) > n {
		out = out[:n]
		annos.Add(errors.New("results truncated due to limit"))
	}
	return out, annos, nil
}

func (h *Handler) labels(r *http.Request) (any, annotations.Annotations, *apiError) {
	return h.labelList(r, func(ctx context.Context, q storage.Querier, ms []*labels.Matcher) ([]string, annotations.Annotations, error) {
		return q.LabelNames(ctx, nil, ms...)
	})
}

func (h *Handler) labelValues(r *http.Request) (any, annotations.Annotations, *apiError) {
	name := r.PathValue("name")
	if strings.HasPrefix(name, "U__") {
		name = model.UnescapeName(name, model.ValueEncodingEscaping)
	}
	if !model.UTF8Validation.IsValidLabelName(name) {
		return nil, nil, badData(fmt.Errorf("invalid label name: %q", name))
	}
	return h.labelList(r, func(ctx context.Context, q storage.Querier, ms []*labels.Matcher) ([]string, annotations.Annotations, error) {
		return q.LabelValues(ctx, name, nil, ms...)
	})
}

// metadataEntry is one entry of a metadata answer.
type metadataEntry struct {
	Type string `json:"type"`
	Help string `json:"help"`
	Unit string `json:"unit"`
}

func (h *Handler) metadata(r *http.Request) (any, annotations.Annotations, *apiError) {
	n, aerr := limit(r)
	if aerr != nil {
		return nil, nil, aerr
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.opt.Timeout)
	defer cancel()
	md, err := h.st.Metadata(ctx, h.opt.Now().Add(-h.opt.Window).UnixMilli())
	if err != nil {
		return nil, nil, engineError(err)
	}
	metric := r.FormValue("metric")
	names := make([]string, 0, len(md))
	for name := range md {
		if metric == "" || name == metric {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	if n > 0 && len(names) > n {
		names = names[:n]
	}
	out := make(map[string][]metadataEntry, len(names))
	for _, name := range names {
		out[name] = []metadataEntry{{Type: md[name].Type, Help: md[name].Help}}
	}
	return out, nil, nil
}

// buildInfoData is status/buildinfo's data, Prometheus's fields.
type buildInfoData struct {
	Version   string `json:"version"`
	Revision  string `json:"revision"`
	Branch    string `json:"branch"`
	BuildUser string `json:"buildUser"`
	BuildDate string `json:"buildDate"`
	GoVersion string `json:"goVersion"`
}

func (h *Handler) buildInfo(*http.Request) (any, annotations.Annotations, *apiError) {
	in := buildinfo.Get()
	return buildInfoData{Version: in.Version, Revision: in.Revision, GoVersion: in.GoVersion}, nil, nil
}

// parseTimeParam is the time parameter name of r, or def when absent.
func parseTimeParam(r *http.Request, name string, def time.Time) (time.Time, error) {
	s := r.FormValue(name)
	if s == "" {
		return def, nil
	}
	return parseTime(s)
}

// parseTime reads a time as Prometheus does: unix seconds (with a fraction) or RFC 3339.
func parseTime(s string) (time.Time, error) {
	if t, err := strconv.ParseFloat(s, 64); err == nil {
		if math.IsNaN(t) || math.IsInf(t, 0) || math.Abs(t) > 1<<53/1000 {
			return time.Time{}, fmt.Errorf("cannot parse %q to a valid timestamp", s)
		}
		sec, ns := math.Modf(t)
		ns = math.Round(ns*1000) / 1000
		return time.Unix(int64(sec), int64(ns*float64(time.Second))).UTC(), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("cannot parse %q to a valid timestamp", s)
}

// parseDuration reads a duration as Prometheus does: seconds (with a fraction) or a
// Prometheus duration (5m, 1h30m).
func parseDuration(s string) (time.Duration, error) {
	if d, err := strconv.ParseFloat(s, 64); err == nil {
		ts := d * float64(time.Second)
		if math.IsNaN(ts) || ts >= float64(math.MaxInt64) || ts < float64(math.MinInt64) {
			return 0, fmt.Errorf("cannot parse %q to a valid duration. It overflows int64", s)
		}
		return time.Duration(ts), nil
	}
	if d, err := model.ParseDuration(s); err == nil {
		return time.Duration(d), nil
	}
	return 0, fmt.Errorf("cannot parse %q to a valid duration", s)
}
