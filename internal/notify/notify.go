// Package notify sends the agent's alerts to Alertmanagers (--alertmanager,
// --alertmanager-config) with Alertmanager's v2 API (POST /api/v2/alerts), through
// Prometheus's own notifier package (notifier.Manager): the same queue, batching, per-request
// timeout and payload Prometheus uses, and the same hook its rule manager calls
// (rules.SendAlerts over a Sender is the rules' NotifyFunc).
//
// Two sources feed one Sender: the rule files' alerting rules (package promrules, whose
// rules.Manager resends firing alerts every resend delay with EndsAt 4 resend delays ahead, and
// resolved ones with EndsAt = ResolvedAt for 15 minutes), and the built-in threshold engine
// (package alerts), whose snapshots a Tracker turns into the same notifications by the same
// rules. Alerts about the cluster (node_down) are sent by one member only, the one Chosen picks.
//
// # Bounds
//
// Each Alertmanager has a queue of at most QueueCapacity alerts (the oldest dropped beyond, as
// Prometheus does, and counted), and every alert is cut to at most MaxAlertBytes of labels and
// annotations before it is queued (annotations shortened first; an alert whose labels alone
// are larger is dropped and counted), so a queue holds at most QueueCapacity × MaxAlertBytes.
// Each request has the Alertmanager's timeout, which covers the connection, TLS, the request
// and the answer. Send never waits for the network: it appends to the queues under a mutex;
// each Alertmanager's send loop posts in its own goroutine.
//
// # Concurrency
//
// A Sender is safe for concurrent use; Run is its one goroutine that applies target changes.
// A Tracker is used by one goroutine.
package notify

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"
	promconfig "github.com/prometheus/prometheus/config"
	"github.com/prometheus/prometheus/discovery/targetgroup"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/notifier"
	"google.golang.org/protobuf/proto"

	"github.com/cantal-go/cantal/internal/apiwire"
)

// MaxAlertBytes bounds one alert's labels and annotations (names and values).
const MaxAlertBytes = 16 << 10

// Sender queues alerts for every configured Alertmanager. Make one with New, run it with Run,
// give it Alertmanagers with Apply.
type Sender struct {
	log   *slog.Logger
	reg   *prometheus.Registry
	mgr   *notifier.Manager
	tsets chan map[string][]*targetgroup.Group

	mu      sync.Mutex // Apply
	targets atomic.Pointer[[]TargetConfig]
	tooBig  atomic.Int64
}

// New returns a Sender with room for capacity alerts per Alertmanager (0: the default). The
// capacity is fixed for the Sender's life.
func New(capacity int, log *slog.Logger) *Sender {
	if capacity <= 0 {
		capacity = DefaultQueueCapacity
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Sender{log: log, reg: prometheus.NewRegistry(), tsets: make(chan map[string][]*targetgroup.Group, 1)}
	s.mgr = notifier.NewManager(&notifier.Options{
		QueueCapacity: capacity,
		Registerer:    s.reg,
	}, model.UTF8Validation, log)
	s.targets.Store(&[]TargetConfig{})
	return s
}

// Apply makes targets the Alertmanagers alerts go to. An Alertmanager whose settings did not
// change keeps its queue and send loop; one removed or changed drops its queue. Safe for
// concurrent use; effective once Run runs.
func (s *Sender) Apply(targets []TargetConfig) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	// The notifier keeps an Alertmanager's client and queue when its settings marshal the same,
	// and secrets marshal as "<secret>": an Alertmanager whose settings changed in a way that
	// does not show (a new password) is first removed, so that it gets a new client.
	prev := map[string]TargetConfig{}
	for _, t := range *s.targets.Load() {
		prev[t.URL] = t
	}
	var kept []TargetConfig
	for _, t := range targets {
		if p, ok := prev[t.URL]; !ok || reflect.DeepEqual(p, t) {
			kept = append(kept, t)
		}
	}
	if len(kept) < len(targets) {
		if err := s.apply(kept); err != nil {
			return err
		}
	}
	if err := s.apply(targets); err != nil {
		return err
	}
	cp := append([]TargetConfig(nil), targets...)
	s.targets.Store(&cp)
	return nil
}

// apply gives the notifier targets (s.mu held).
func (s *Sender) apply(targets []TargetConfig) error {
	conf := &promconfig.Config{}
	groups := map[string][]*targetgroup.Group{}
	for i, t := range targets {
		u, err := url.Parse(t.URL)
		if err != nil {
			return fmt.Errorf("alertmanager %s: %w", t.Name(), err)
		}
		am := &promconfig.AlertmanagerConfig{
			HTTPClientConfig: t.HTTPClientConfig,
			Scheme:           u.Scheme,
			PathPrefix:       strings.TrimRight(u.Path, "/"),
			Timeout:          t.Timeout,
			APIVersion:       promconfig.AlertmanagerAPIVersionV2,
		}
		conf.AlertingConfig.AlertmanagerConfigs = append(conf.AlertingConfig.AlertmanagerConfigs, am)
		groups[fmt.Sprintf("config-%d", i)] = []*targetgroup.Group{{
			Targets: []model.LabelSet{{model.AddressLabel: model.LabelValue(u.Host)}},
			Source:  t.Name(),
		}}
	}
	if err := s.mgr.ApplyConfig(conf); err != nil {
		return fmt.Errorf("alertmanagers: %w", err)
	}
	// The latest target groups replace any Run has not taken yet.
	select {
	case <-s.tsets:
	default:
	}
	s.tsets <- groups
	return nil
}

// Configured reports whether any Alertmanager is configured.
func (s *Sender) Configured() bool { return len(*s.targets.Load()) > 0 }

// Run applies target changes until ctx is done, then stops every send loop (what is queued is
// dropped: a stopping agent does not wait for an Alertmanager).
func (s *Sender) Run(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		s.mgr.Run(s.tsets)
		close(done)
	}()
	<-ctx.Done()
	s.mgr.Stop()
	<-done
	return nil
}

// Send queues alerts for every Alertmanager, each cut to MaxAlertBytes (see the package
// comment). It never blocks on the network. It is the rules' notifier.Sender.
func (s *Sender) Send(alerts ...*notifier.Alert) {
	if !s.Configured() {
		return
	}
	out := alerts[:0:0]
	for _, a := range alerts {
		if b, ok := bound(a); ok {
			out = append(out, b)
		} else {
			s.tooBig.Add(1)
			s.log.Warn("alert dropped: its labels are larger than an alert may be", "alertname", a.Name(), "max_bytes", MaxAlertBytes)
		}
	}
	if len(out) > 0 {
		s.mgr.Send(out...)
	}
}

// bound returns a within MaxAlertBytes: unchanged when it fits, else a copy with its
// annotations' values shortened (the longest first); false when its labels alone do not fit.
func bound(a *notifier.Alert) (*notifier.Alert, bool) {
	size := func(ls labels.Labels) int {
		n := 0
		ls.Range(func(l labels.Label) { n += len(l.Name) + len(l.Value) })
		return n
	}
	lb, ab := size(a.Labels), size(a.Annotations)
	if lb+ab <= MaxAlertBytes {
		return a, true
	}
	if lb > MaxAlertBytes {
		return nil, false
	}
	room := MaxAlertBytes - lb
	b := labels.NewBuilder(labels.EmptyLabels())
	n := a.Annotations.Len()
	a.Annotations.Range(func(l labels.Label) {
		// An equal share of what is left for each annotation still to place.
		share := max(0, room/n-len(l.Name))
		v := l.Value
		if len(v) > share {
			v = cut(v, share)
		}
		if len(l.Name)+len(v) <= room {
			b.Set(l.Name, v)
			room -= len(l.Name) + len(v)
		}
		n--
	})
	c := *a
	c.Annotations = b.Labels()
	return &c, true
}

// cut shortens s to at most n bytes, on a UTF-8 boundary, ending in "…" when there is room.
func cut(s string, n int) string {
	const ell = "…"
	if n >= len(ell) {
		n -= len(ell)
	} else {
		n = 0
	}
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	if n == 0 {
		return ""
	}
	return s[:n] + ell
}

// Status is one Alertmanager's counters (the status' wire form).
type Status = apiwire.Alertmanager

// Status returns the counters of every Alertmanager with a send loop, and the alerts dropped
// for their size. Safe for concurrent use.
func (s *Sender) Status() (per []Status, tooBig int64) {
	if s == nil {
		return nil, 0
	}
	mfs, err := s.reg.Gather()
	if err != nil {
		return nil, s.tooBig.Load()
	}
	byURL := map[string]*Status{}
	var order []string
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			u := labelValue(m, "alertmanager")
			if u == "" {
				continue
			}
			st := byURL[u]
			if st == nil {
				st = &Status{URL: u} // the post URL: credentials are in the client, never in it
				byURL[u] = st
				order = append(order, u)
			}
			switch mf.GetName() {
			case "prometheus_notifications_sent_total":
				st.Sent = m.GetCounter().GetValue()
			case "prometheus_notifications_errors_total":
				st.Errors = m.GetCounter().GetValue()
			case "prometheus_notifications_dropped_total":
				st.Dropped = m.GetCounter().GetValue()
			case "prometheus_notifications_queue_length":
				st.Queue = m.GetGauge().GetValue()
			}
		}
	}
	for _, u := range order {
		per = append(per, *byURL[u])
	}
	return per, s.tooBig.Load()
}

// Gather returns the notifier's counters as the agent's /metrics names its own: Prometheus's
// prometheus_notifications_* families (sent, errors, dropped, queue length and capacity, the
// Alertmanagers discovered, the latency), each renamed cantal_notifications_* with
// Prometheus's help and labels (alertmanager: the post URL, never credentials), and
// cantal_notifications_too_large_dropped_total, the alerts dropped for their size before
// they were queued. It makes a Sender a prometheus.Gatherer; safe for concurrent use, and on
// a nil Sender (nothing).
func (s *Sender) Gather() ([]*dto.MetricFamily, error) {
	if s == nil {
		return nil, nil
	}
	mfs, err := s.reg.Gather()
	for _, mf := range mfs {
		if name, ok := strings.CutPrefix(mf.GetName(), "prometheus_"); ok {
			mf.Name = proto.String("cantal_" + name)
		}
	}
	tooBig := float64(s.tooBig.Load())
	mfs = append(mfs, &dto.MetricFamily{
		Name:   proto.String("cantal_notifications_too_large_dropped_total"),
		Help:   proto.String("Total number of alerts dropped because their labels alone were larger than an alert may be."),
		Type:   dto.MetricType_COUNTER.Enum(),
		Metric: []*dto.Metric{{Counter: &dto.Counter{Value: &tooBig}}},
	})
	slices.SortFunc(mfs, func(a, b *dto.MetricFamily) int { return strings.Compare(a.GetName(), b.GetName()) })
	return mfs, err
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
