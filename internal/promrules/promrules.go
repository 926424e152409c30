// Package promrules evaluates Prometheus rule files (recording and alerting rules, the format
// of Prometheus's rule_files: groups, interval, for, keep_firing_for, labels, annotations with
// templates) over the agent's held history, with Prometheus's own rules package (rules.Manager,
// rulefmt) and PromQL engine reading a promstore.Storage. node-mixin's rules.yaml and
// alerts.yaml load unchanged.
//
// # Recorded series
//
// What the rules record (a recording rule's series, and ALERTS / ALERTS_FOR_STATE of alerting
// rules, as Prometheus writes them) goes into history like any other series: Rules is a
// series.Collector, and each scan stores the samples the rules appended since the previous scan.
// A recorded series is held under the Cantal labels {"metric": <its __name__>, "source": "rule",
// <its other labels>} (a Prometheus label named "metric" or "source" is held as ":metric" or
// ":source", names Prometheus never gives a label); promname maps a series with source="rule"
// back verbatim (its name, its labels without source, the colons restored), so /prometheus
// serves it under the recorded name with its recorded labels, and the JSON API, /metrics and
// remote write see it as a series like the others. A series a rule stops producing gets
// Prometheus's stale marker from the rules package and is dropped from the next scan.
//
// # Evaluation
//
// Each group is evaluated on its own ticker (rules.Manager), every Options.Interval unless the
// group says otherwise: evaluation never runs inside a scan, so a slow rule cannot delay one; a
// scan only copies the latest recorded values under a mutex.
//
// Rules is safe for concurrent use.
package promrules

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/rules"
	"github.com/prometheus/prometheus/storage"

	"github.com/cantal-go/cantal/internal/series"
)

// Options configure Rules.
type Options struct {
	// Queryable is what the rules read (the agent's promstore.Storage, without a caller's
	// visibility filter: rules see every series).
	Queryable storage.Queryable
	// Interval is a group's evaluation interval when it sets none (the agent's --interval).
	Interval time.Duration
	// Timeout and MaxSamples bound each rule's query (the engine's limits); defaults 2m and
	// 50 000 000, as Prometheus.
	Timeout    time.Duration
	MaxSamples int
	// ExternalURL is the URL alerts' generatorURL and templates' $externalURL point at.
	ExternalURL string
	Logger      *slog.Logger
	// Notify, when set, receives the alerts to send, as Prometheus's notifier would.
	Notify rules.NotifyFunc
}

// Rules holds a rules.Manager and the samples its rules recorded since the last scan. Make one
// with New, load files with Load, run it with Run.
type Rules struct {
	opt Options
	mgr *rules.Manager
	p   parser.Parser

	mu       sync.Mutex
	recorded map[string]*recorded // by the Prometheus label set's String
	files    []string             // the files of the last successful Load
}

// recorded is the latest sample of one recorded series and its Cantal identity.
type recorded struct {
	labels series.Labels
	ref    *series.Ref
	t      int64
	v      float64
	fresh  bool // appended since the last scan stored it
	stale  bool // v is Prometheus's stale marker: the series ended
}

// New returns Rules over opt.Queryable, with no rules loaded.
func New(opt Options) *Rules {
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	if opt.Interval <= 0 {
		opt.Interval = time.Minute
	}
	if opt.Timeout <= 0 {
		opt.Timeout = 2 * time.Minute
	}
	if opt.MaxSamples <= 0 {
		opt.MaxSamples = 50_000_000
	}
	if opt.Notify == nil {
		opt.Notify = func(context.Context, string, ...*rules.Alert) {}
	}
	r := &Rules{opt: opt, recorded: map[string]*recorded{}}
	r.p = parser.NewParser(parser.Options{})
	ng := promql.NewEngine(promql.EngineOpts{
		MaxSamples:           opt.MaxSamples,
		Timeout:              opt.Timeout,
		LookbackDelta:        5 * time.Minute,
		EnableAtModifier:     true,
		EnableNegativeOffset: true,
		Parser:               r.p,
	})
	var ext *url.URL
	if opt.ExternalURL != "" {
		ext, _ = url.Parse(opt.ExternalURL)
	}
	if ext == nil {
		ext = &url.URL{}
	}
	r.mgr = rules.NewManager(&rules.ManagerOptions{
		NameValidationScheme: model.UTF8Validation,
		ExternalURL:          ext,
		QueryFunc:            rules.EngineQueryFunc(ng, opt.Queryable),
		NotifyFunc:           opt.Notify,
		Context:              context.Background(),
		AppendableV2:         appendable{r},
		Queryable:            opt.Queryable,
		Logger:               opt.Logger,
		OutageTolerance:      time.Hour,
		ForGracePeriod:       10 * time.Minute,
		ResendDelay:          time.Minute,
		Parser:               r.p,
	})
	return r
}

// Expand returns the files the patterns name (filepath.Glob each, in order, without
// duplicates). A pattern matching no file is an error, so a typo is not a silent no-op.
func Expand(patterns []string) ([]string, error) {
	var files []string
	for _, p := range patterns {
		m, err := filepath.Glob(p)
		if err != nil {
			return nil, fmt.Errorf("rule files %q: %w", p, err)
		}
		if len(m) == 0 {
			return nil, fmt.Errorf("rule files %q: no file matches", p)
		}
		for _, f := range m {
			if !slices.Contains(files, f) {
				files = append(files, f)
			}
		}
	}
	return files, nil
}

// Check parses the rule files the patterns name and reports every error, each as
// "file: line:column: what" (rulefmt's words), without loading them.
func Check(patterns []string) ([]string, error) {
	files, err := Expand(patterns)
	if err != nil {
		return nil, err
	}
	p := parser.NewParser(parser.Options{})
	var errs []error
	for _, f := range files {
		// rulefmt validates each rule and parses its expression and templates.
		_, es := rulefmt.ParseFile(f, false, model.UTF8Validation, p, nil)
		errs = append(errs, es...)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("rule files: %w", errors.Join(errs...))
	}
	return files, nil
}

// Load replaces the rules with those of the files the patterns name. On any error (a pattern
// matching nothing, a file that does not parse: "file: line:column: what") the rules loaded
// before stay and keep being evaluated.
func (r *Rules) Load(patterns []string) error {
	files, err := Check(patterns)
	if err != nil {
		return err
	}
	if err := r.mgr.Update(r.opt.Interval, files, labels.EmptyLabels(), r.opt.ExternalURL, nil); err != nil {
		return fmt.Errorf("rule files: %w", err)
	}
	r.mu.Lock()
	r.files = files
	r.mu.Unlock()
	return nil
}

// Files returns the files of the rules loaded.
func (r *Rules) Files() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.files)
}

// Run evaluates the rules until ctx is done, then stops every group.
func (r *Rules) Run(ctx context.Context) error {
	go r.mgr.Run()
	<-ctx.Done()
	r.mgr.Stop()
	return nil
}

// Groups returns the rule groups loaded, sorted by file and name (for /api/v1/rules).
func (r *Rules) Groups() []*rules.Group { return r.mgr.RuleGroups() }

// AlertingRules returns the alerting rules loaded (for /api/v1/alerts).
func (r *Rules) AlertingRules() []*rules.AlertingRule { return r.mgr.AlertingRules() }

// Collect implements series.Collector: it stores the latest sample of every series recorded
// since the previous scan, at this scan.
func (r *Rules) Collect(ctx context.Context, sink series.Sink) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for key, e := range r.recorded {
		if !e.fresh {
			continue
		}
		if e.ref == nil {
			e.ref = sink.Series(e.labels, series.Float)
		}
		sink.Put(e.ref, math.Float64bits(e.v))
		e.fresh = false
		if e.stale {
			delete(r.recorded, key)
		}
	}
	return nil
}

// CantalLabels returns the Cantal labels a recorded Prometheus series is held under (see the
// package doc), or false for a series without a name.
func CantalLabels(ls labels.Labels) (series.Labels, bool) {
	name := ls.Get(labels.MetricName)
	if name == "" {
		return nil, false
	}
	out := make(series.Labels, ls.Len()+1)
	ls.Range(func(l labels.Label) {
		switch l.Name {
		case labels.MetricName:
			out["metric"] = l.Value
		case "metric", series.SourceLabel:
			out[":"+l.Name] = l.Value
		default:
			out[l.Name] = l.Value
		}
	})
	out[series.SourceLabel] = series.SourceRule
	return out, true
}

// PromLabelName returns the Prometheus name of a recorded series' Cantal label (the inverse of
// CantalLabels): ":metric" and ":source" lose their colon.
func PromLabelName(cantal string) string {
	if cantal == ":metric" || cantal == ":source" {
		return strings.TrimPrefix(cantal, ":")
	}
	return cantal
}

// appendable is the rules' storage.AppendableV2: what they append is kept for the next scan.
type appendable struct{ r *Rules }

func (a appendable) AppenderV2(context.Context) storage.AppenderV2 {
	return &appender{r: a.r}
}

type sample struct {
	ls labels.Labels
	t  int64
	v  float64
}

// appender buffers one evaluation's samples until Commit.
type appender struct {
	r   *Rules
	buf []sample
}

func (a *appender) Append(_ storage.SeriesRef, ls labels.Labels, _, t int64, v float64, h *histogram.Histogram, fh *histogram.FloatHistogram, _ storage.AppendV2Options) (storage.SeriesRef, error) {
	if h != nil || fh != nil {
		return 0, errors.New("native histograms are not recorded")
	}
	a.buf = append(a.buf, sample{ls, t, v})
	return 0, nil
}

func (a *appender) Commit() error {
	r := a.r
	keys := make([]string, len(a.buf)) // made before the lock, which a scan may be waiting for
	for i, s := range a.buf {
		keys[i] = s.ls.String()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, s := range a.buf {
		key := keys[i]
		e := r.recorded[key]
		if value.IsStaleNaN(s.v) {
			// Stored as Prometheus stores it, so the engine sees the series end at once
			// rather than 5 minutes of lookback later; dropped after the next scan.
			if e != nil {
				e.v, e.fresh, e.stale = s.v, true, true
			}
			continue
		}
		if e == nil {
			l, ok := CantalLabels(s.ls)
			if !ok {
				continue
			}
			e = &recorded{labels: l}
			r.recorded[key] = e
		}
		if s.t >= e.t || e.stale {
			e.t, e.v, e.fresh, e.stale = s.t, s.v, true, false
		}
	}
	a.buf = nil
	return nil
}

func (a *appender) Rollback() error {
	a.buf = nil
	return nil
}
