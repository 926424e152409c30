package promrules

import (
	"context"
	"encoding/json"
	"math"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/promapi"
	"github.com/cantal-go/cantal/internal/promname"
	"github.com/cantal-go/cantal/internal/promstore"
	"github.com/cantal-go/cantal/internal/registry"
	"github.com/cantal-go/cantal/internal/selector"
	"github.com/cantal-go/cantal/internal/series"
)

const testRules = `groups:
- name: probe
  rules:
  - record: test:probe:doubled
    expr: probe_value * 2
    labels:
      source: recorded
  - alert: ProbeHigh
    expr: probe_value > 10
    for: 300ms
    labels:
      severity: page
    annotations:
      summary: 'probe at {{ $value }}'
`

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRulesRecordAndAlert: rules evaluated over a registry's series record a series that the
// next scan stores under source="rule" and that promstore serves under the recorded name and
// labels (a recorded label named source included); the alert goes pending then firing, and
// /api/v1/rules and /api/v1/alerts list them in Prometheus's JSON shape.
func TestRulesRecordAndAlert(t *testing.T) {
	hist := history.New(history.Options{})
	reg := registry.New(hist, time.Hour, nil)
	st := promstore.New(hist, promstore.RegistryCatalog(reg), promstore.Options{Instance: "n:1", Node: "n"})
	r := New(Options{Queryable: st, Interval: 100 * time.Millisecond})
	if err := r.Load([]string{writeFile(t, "probe.yaml", testRules)}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	api := promapi.New(st, promapi.Options{Rules: r})

	probe := reg.Series(series.Labels{"metric": "probe.value"}, series.Float)
	var sawPending, firing bool
	var recorded bool
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) && !(firing && recorded) {
		reg.Begin(time.Now().UnixMilli())
		reg.Put(probe, math.Float64bits(42))
		if err := r.Collect(ctx, reg); err != nil {
			t.Fatal(err)
		}
		reg.Commit()
		for _, ar := range r.AlertingRules() {
			for _, a := range ar.ActiveAlerts() {
				switch a.State.String() {
				case "pending":
					sawPending = true
				case "firing":
					firing = true
				}
			}
		}
		q, _ := st.Querier(time.Now().Add(-time.Minute).UnixMilli(), time.Now().UnixMilli())
		ss := q.Select(ctx, true, nil, labels.MustNewMatcher(labels.MatchEqual, labels.MetricName, "test:probe:doubled"))
		for ss.Next() {
			s := ss.At()
			if s.Labels().Get("source") != "recorded" || s.Labels().Get("instance") != "n:1" {
				t.Fatalf("recorded series labels %v; want source=recorded and instance=n:1", s.Labels())
			}
			it := s.Iterator(nil)
			for it.Next() != 0 {
				if _, v := it.At(); v == 84 {
					recorded = true
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !recorded || !firing || !sawPending {
		t.Fatalf("recorded 84: %v, alert seen pending: %v, firing: %v", recorded, sawPending, firing)
	}
	found := false
	reg.View().Select(selector.MustParse(`{source="rule"}`), 0, false, func(h registry.Handle) bool {
		if h.Labels()["metric"] == "test:probe:doubled" && h.Labels()[":source"] == "recorded" {
			found = true
		}
		return true
	})
	if !found {
		t.Errorf("no {metric=\"test:probe:doubled\", source=\"rule\", :source=\"recorded\"} in the registry")
	}

	var rules struct {
		Status string
		Data   struct {
			Groups []struct {
				Name, File string
				Interval   float64
				Rules      []map[string]any
			}
		}
	}
	get(t, api, "/prometheus/api/v1/rules", &rules)
	if rules.Status != "success" || len(rules.Data.Groups) != 1 || len(rules.Data.Groups[0].Rules) != 2 {
		t.Fatalf("/rules: %+v", rules)
	}
	g := rules.Data.Groups[0]
	rec, al := g.Rules[0], g.Rules[1]
	if g.Name != "probe" || g.Interval != 0.1 || rec["type"] != "recording" || rec["name"] != "test:probe:doubled" || rec["health"] != "ok" ||
		al["type"] != "alerting" || al["name"] != "ProbeHigh" || al["state"] != "firing" || al["duration"] != 0.3 {
		t.Errorf("/rules group %+v", g)
	}
	for _, k := range []string{"query", "labels", "annotations", "alerts", "evaluationTime", "lastEvaluation", "keepFiringFor"} {
		if _, ok := al[k]; !ok {
			t.Errorf("/rules alerting rule lacks %q: %v", k, al)
		}
	}
	var alerts struct {
		Status string
		Data   struct {
			Alerts []struct {
				Labels, Annotations map[string]string
				State, Value        string
				ActiveAt            time.Time
			}
		}
	}
	get(t, api, "/prometheus/api/v1/alerts", &alerts)
	if len(alerts.Data.Alerts) != 1 {
		t.Fatalf("/alerts: %+v", alerts)
	}
	a := alerts.Data.Alerts[0]
	if a.State != "firing" || a.Labels["alertname"] != "ProbeHigh" || a.Labels["severity"] != "page" ||
		a.Annotations["summary"] != "probe at 42" || a.Value != "4.2e+01" || a.ActiveAt.IsZero() {
		t.Errorf("/alerts: %+v", a)
	}
}

func get(t *testing.T, h *promapi.Handler, path string, v any) {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", path, nil))
	if w.Code != 200 {
		t.Fatalf("GET %s: %d %s", path, w.Code, w.Body)
	}
	if err := json.Unmarshal(w.Body.Bytes(), v); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}

// TestLoadRefusesBadFileAndKeepsRules: a file that does not parse is refused with its
// file: line:column, and the rules loaded before stay; a glob matching nothing is refused.
func TestLoadRefusesBadFileAndKeepsRules(t *testing.T) {
	hist := history.New(history.Options{})
	st := promstore.New(hist, promstore.StoreCatalog(hist), promstore.Options{})
	r := New(Options{Queryable: st})
	good := writeFile(t, "good.yaml", testRules)
	if err := r.Load([]string{good}); err != nil {
		t.Fatal(err)
	}
	bad := writeFile(t, "bad.yaml", "groups:\n- name: g\n  rules:\n  - record: x\n    expr: sum(\n")
	err := r.Load([]string{bad})
	if err == nil || !strings.Contains(err.Error(), "bad.yaml: 5:") {
		t.Errorf("Load(bad) = %v; want an error naming bad.yaml: 5:", err)
	}
	if n := len(r.Groups()); n != 1 || r.Files()[0] != good {
		t.Errorf("after a bad load: %d groups, files %v; want the good file's", n, r.Files())
	}
	if err := r.Load([]string{filepath.Join(t.TempDir(), "*.yaml")}); err == nil || !strings.Contains(err.Error(), "no file matches") {
		t.Errorf("Load(empty glob) = %v", err)
	}
	if _, err := Check([]string{bad}); err == nil {
		t.Error("Check(bad) passed")
	}
}

// FuzzCantalLabels: any Prometheus series a rule records maps back through promname to the
// same name and labels, whatever its label names ("metric" and "source" included).
func FuzzCantalLabels(f *testing.F) {
	f.Add("instance:node_cpu:rate1m", "mode", "idle", "source", "push")
	f.Add("ALERTS", "metric", "x", ":source", "y")
	f.Add("a", "b", "", "c", "d")
	m := promname.New(promname.Options{})
	f.Fuzz(func(t *testing.T, name, k1, v1, k2, v2 string) {
		if name == "" || k1 == "" || k2 == "" || k1 == k2 || k1 == labels.MetricName || k2 == labels.MetricName ||
			strings.HasPrefix(k1, ":") || strings.HasPrefix(k2, ":") {
			return // not a series the engine gives (colons lead no label name)
		}
		lb := labels.NewBuilder(labels.EmptyLabels())
		lb.Set(labels.MetricName, name)
		lb.Set(k1, v1)
		lb.Set(k2, v2) // an empty value is no label, as for Prometheus
		ls := lb.Labels()
		cl, ok := CantalLabels(ls)
		if !ok {
			t.Fatalf("CantalLabels(%v) refused", ls)
		}
		s, ok := m.Map(cl, series.Float)
		if !ok || s.Name != name {
			t.Fatalf("Map(%v) = %+v %v; want the name %q", cl, s, ok, name)
		}
		b := labels.NewBuilder(labels.FromStrings(labels.MetricName, s.Name))
		for _, l := range s.Labels {
			b.Set(PromLabelName(l.Name), l.Value)
		}
		if got := b.Labels(); !labels.Equal(got, ls) {
			t.Fatalf("round trip %v → %v → %v", ls, cl, got)
		}
	})
}
