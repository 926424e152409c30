package agent

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/notifier"

	"github.com/cantal-go/cantal/internal/notify"
)

// TestReloadAlertmanagers: a reload applies a changed --alertmanager-config file (its contents,
// the path unchanged), refuses a broken one keeping the Alertmanagers in force, and finds
// nothing changed when nothing did.
func TestReloadAlertmanagers(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "agent.yml")
	amFile := filepath.Join(dir, "am.yml")
	write := func(p, s string) {
		t.Helper()
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(amFile, "alertmanagers: [{url: 'http://127.0.0.1:1'}]\n")
	write(file, "alertmanager-config: "+amFile+"\n")
	cfg, err := ParseFlags("cantal-agent", []string{"--config", file, "--listen", "127.0.0.1:0", "--state-dir", "", "--rrdd-dir", ""}, nil)
	if err != nil {
		t.Fatal(err)
	}
	log, _ := NewLogger(io.Discard, "info", "text")
	a, err := New(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	urls := func() []string {
		var out []string
		for _, c := range a.reload.am {
			out = append(out, c.URL)
		}
		return out
	}
	if got := urls(); !slices.Equal(got, []string{"http://127.0.0.1:1"}) || !a.notifier.Configured() {
		t.Fatalf("at start: %v; want the file's Alertmanager", got)
	}
	if res := a.Reload(); res.Status != "success" || len(res.Changed) != 0 {
		t.Errorf("unchanged reload = %+v; want nothing changed", res)
	}
	write(amFile, "alertmanagers: [{url: 'http://127.0.0.1:1'}, {url: 'https://127.0.0.1:2', timeout: 3s}]\n")
	if res := a.Reload(); res.Status != "success" || !slices.Equal(res.Changed, []string{"alertmanager-config"}) {
		t.Errorf("reload with the file changed = %+v; want alertmanager-config changed", res)
	}
	if got := urls(); !slices.Equal(got, []string{"http://127.0.0.1:1", "https://127.0.0.1:2"}) {
		t.Errorf("after the reload: %v; want both", got)
	}
	write(amFile, "alertmanagers: [{url: 'http://127.0.0.1:1', nope: 1}]\n")
	if res := a.Reload(); res.Status != "error" || !strings.Contains(res.Error, "alertmanager") {
		t.Errorf("reload with a broken file = %+v; want an error", res)
	}
	if got := urls(); len(got) != 2 {
		t.Errorf("after a refused reload: %v; want the two in force", got)
	}
	write(amFile, "alertmanagers: []\n")
	if res := a.Reload(); res.Status != "success" || a.notifier.Configured() {
		t.Errorf("reload with none = %+v, configured %v; want none configured", res, a.notifier.Configured())
	}
}

// TestNotifierCountersOnMetrics: the Alertmanager notifier's counters are on the agent's
// /metrics under its own names, as Prometheus exposes them for its notifier: alerts sent to an
// Alertmanager that takes them, errors of one that refuses them, the queue's length and
// capacity, the drops and the Alertmanagers discovered; none under Prometheus's own names.
func TestNotifierCountersOnMetrics(t *testing.T) {
	var good, bad atomic.Int32
	okAM := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "POST" && r.URL.Path == "/api/v2/alerts" {
			good.Add(1)
		}
	}))
	defer okAM.Close()
	failAM := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bad.Add(1)
		http.Error(w, "no", http.StatusInternalServerError)
	}))
	defer failAM.Close()
	cfg, err := ParseFlags("cantal-agent", []string{"--listen", "127.0.0.1:0", "--state-dir", "", "--rrdd-dir", "",
		"--alertmanager", okAM.URL, "--alertmanager", failAM.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	log, _ := NewLogger(io.Discard, "info", "text")
	a, err := New(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.notifier.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	metrics := func() map[string]*dto.MetricFamily {
		t.Helper()
		rec := httptest.NewRecorder()
		a.mux.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		p := expfmt.NewTextParser(model.UTF8Validation)
		mfs, err := p.TextToMetricFamilies(rec.Body)
		if rec.Code != 200 || err != nil {
			t.Fatalf("/metrics: %d %v", rec.Code, err)
		}
		return mfs
	}
	// The value of family name for the Alertmanager at base (any: the one series without labels).
	value := func(mfs map[string]*dto.MetricFamily, name, base string) (float64, bool) {
		for _, m := range mfs[name].GetMetric() {
			am := ""
			for _, l := range m.GetLabel() {
				if l.GetName() == "alertmanager" {
					am = l.GetValue()
				}
			}
			if base == "" || am == base+"/api/v2/alerts" {
				return m.GetCounter().GetValue() + m.GetGauge().GetValue(), true
			}
		}
		return 0, false
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		a.notifier.Send(&notifier.Alert{Labels: labels.FromStrings("alertname", "x", "node", "a"), StartsAt: time.Now(), EndsAt: time.Now().Add(time.Hour)})
		mfs := metrics()
		sent, _ := value(mfs, "cantal_notifications_sent_total", okAM.URL)
		errs, _ := value(mfs, "cantal_notifications_errors_total", failAM.URL)
		if good.Load() > 0 && bad.Load() > 0 && sent >= 1 && errs >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("posted %d and %d; sent_total %v, errors_total %v on /metrics", good.Load(), bad.Load(), sent, errs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	mfs := metrics()
	for name, want := range map[string]float64{
		"cantal_notifications_queue_capacity":           notify.DefaultQueueCapacity,
		"cantal_notifications_alertmanagers_discovered": 2,
	} {
		if v, ok := value(mfs, name, ""); !ok || v != want {
			t.Errorf("%s = %v (present %v); want %v", name, v, ok, want)
		}
	}
	for _, name := range []string{"cantal_notifications_dropped_total", "cantal_notifications_queue_length", "cantal_notifications_too_large_dropped_total"} {
		if _, ok := value(mfs, name, ""); !ok {
			t.Errorf("%s missing from /metrics", name)
		}
	}
	for name := range mfs {
		if strings.HasPrefix(name, "prometheus_") {
			t.Errorf("%s on /metrics: the agent's own counters are cantal_*", name)
		}
	}
}
