package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// amAlert is an alert of Alertmanager's GET /api/v2/alerts.
type amAlert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	StartsAt    time.Time         `json:"startsAt"`
	EndsAt      time.Time         `json:"endsAt"`
	Status      struct {
		State string `json:"state"`
	} `json:"status"`
}

// webhook records Alertmanager's webhook deliveries: per alertname, the statuses delivered.
type webhook struct {
	mu  sync.Mutex
	got map[string][]string
}

func (w *webhook) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	var msg struct {
		Alerts []struct {
			Status string            `json:"status"`
			Labels map[string]string `json:"labels"`
		} `json:"alerts"`
	}
	b, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(b, &msg); err != nil {
		http.Error(rw, err.Error(), 400)
		return
	}
	w.mu.Lock()
	for _, a := range msg.Alerts {
		w.got[a.Labels["alertname"]] = append(w.got[a.Labels["alertname"]], a.Status)
	}
	w.mu.Unlock()
}

func (w *webhook) statuses(name string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.got[name]...)
}

var amListening = regexp.MustCompile(`msg="Listening on" address=(\S+)`)

// startAlertmanager starts Debian's prometheus-alertmanager on a port the kernel chooses, with
// its own storage directory and no cluster listener, routing every alert to hook (with its
// resolution) at once; it returns its base URL.
func startAlertmanager(t *testing.T, hook string) string {
	t.Helper()
	amBin, err := exec.LookPath("prometheus-alertmanager")
	if err != nil {
		t.Fatalf("prometheus-alertmanager not installed (scripts/install-deps.sh): %v", err)
	}
	dir := t.TempDir()
	cfg := fmt.Sprintf(`route:
  receiver: hook
  group_by: ['...']
  group_wait: 0s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: hook
    webhook_configs:
      - url: %s
        send_resolved: true
`, hook)
	if err := os.WriteFile(filepath.Join(dir, "am.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startProc(t, nil, nil, amBin, "--config.file="+filepath.Join(dir, "am.yml"), "--storage.path="+filepath.Join(dir, "data"),
		"--web.listen-address=127.0.0.1:0", "--cluster.listen-address=")
	var base string
	waitFor(t, 30*time.Second, func() error {
		m := amListening.FindStringSubmatch(p.out.String())
		if m == nil {
			return fmt.Errorf("alertmanager not listening yet: %s", p.out)
		}
		base = "http://" + m[1]
		resp, err := http.Get(base + "/-/ready")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("alertmanager /-/ready: %s", resp.Status)
		}
		return nil
	})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("alertmanager output:\n%s", p.out)
		}
	})
	return base
}

// amAlerts returns Alertmanager's alerts (GET /api/v2/alerts: the unresolved ones) named name.
func amAlerts(base, name string) ([]amAlert, error) {
	resp, err := http.Get(base + "/api/v2/alerts")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var all []amAlert
	if err := json.NewDecoder(resp.Body).Decode(&all); err != nil {
		return nil, err
	}
	var out []amAlert
	for _, a := range all {
		if a.Labels["alertname"] == name {
			out = append(out, a)
		}
	}
	return out, nil
}

const amRules = `groups:
- name: e2e-alertmanager
  rules:
  # node-mixin-like, on this machine's own series: it has CPUs, so this always fires.
  - alert: E2EMachineHasCPUs
    expr: count by (instance) (node_cpu_seconds_total{mode="idle"}) > 0
    labels:
      severity: info
    annotations:
      summary: '{{ $value }} CPUs on {{ $labels.instance }}'
  # The test's probe (/write): fires at 42, resolves at 0.
  - alert: E2EAMProbeHigh
    expr: e2e_am_probe_value > 10
    labels:
      severity: warning
`

// TestAlertmanagerGetsFiringAndResolved: one agent with --alertmanager pointing at a real
// Alertmanager: a rule file's always-true alert, the probe's alert and a built-in one
// (memory_low at --alert-memory 100, which always holds) reach Alertmanager's /api/v2/alerts
// firing, with the node's labels and endsAt ahead; when the probe drops, its alert is resolved
// at Alertmanager (gone from the unresolved list, and delivered resolved to the webhook).
func TestAlertmanagerGetsFiringAndResolved(t *testing.T) {
	serial(t)
	hook := &webhook{got: map[string][]string{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hsrv := &http.Server{Handler: hook}
	go hsrv.Serve(ln)
	t.Cleanup(func() { hsrv.Close() })
	am := startAlertmanager(t, "http://"+ln.Addr().String()+"/hook")

	rules := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(rules, []byte(amRules), 0o644); err != nil {
		t.Fatal(err)
	}
	a := startAgent(t, "--rule-files", rules, "--alertmanager", am, "--alert-memory", "100", "--alert-for", "0s", "--node-name", "amnode")
	push := func(v int) {
		if code, body := a.raw("POST", "/write", fmt.Sprintf("e2e_am_probe value=%d\n", v)); code != 204 {
			t.Fatalf("POST /write = %d %s", code, body)
		}
	}
	firing := func(name string) (amAlert, error) {
		as, err := amAlerts(am, name)
		if err != nil {
			return amAlert{}, err
		}
		if len(as) != 1 {
			return amAlert{}, fmt.Errorf("alertmanager has %d %s alerts; want 1: %+v", len(as), name, as)
		}
		if as[0].Status.State != "active" || !as[0].EndsAt.After(time.Now()) {
			return as[0], fmt.Errorf("%s at alertmanager: %+v; want active, endsAt ahead", name, as[0])
		}
		return as[0], nil
	}
	var cpus, probe, mem amAlert
	waitFor(t, 90*time.Second, func() error {
		push(42)
		var err1, err2, err3 error
		cpus, err1 = firing("E2EMachineHasCPUs")
		probe, err2 = firing("E2EAMProbeHigh")
		mem, err3 = firing("memory_low")
		if err := fmt.Errorf("%v; %v; %v", err1, err2, err3); err1 != nil || err2 != nil || err3 != nil {
			return err
		}
		return nil
	})
	if cpus.Labels["node"] != "amnode" || cpus.Labels["severity"] != "info" || !strings.Contains(cpus.Annotations["summary"], " CPUs on ") {
		t.Errorf("E2EMachineHasCPUs at alertmanager: %+v; want node=amnode, severity=info and its rendered summary", cpus)
	}
	if probe.Labels["node"] != "amnode" || probe.Labels["severity"] != "warning" {
		t.Errorf("E2EAMProbeHigh at alertmanager: %+v; want node=amnode (from the series), severity=warning", probe)
	}
	if mem.Labels["node"] != "amnode" || mem.Labels["severity"] != "warning" || mem.Labels["instance"] == "" || mem.Annotations["value"] == "" {
		t.Errorf("memory_low (built-in) at alertmanager: %+v; want node, instance, severity=warning and its value", mem)
	}
	var st struct {
		Alertmanagers []struct {
			URL         string
			Sent, Queue float64
		}
	}
	if err := a.get("/api/v1/status", &st); err != nil || len(st.Alertmanagers) != 1 || st.Alertmanagers[0].Sent < 3 ||
		st.Alertmanagers[0].URL != am+"/api/v2/alerts" {
		t.Errorf("status alertmanagers %+v (%v); want %s/api/v2/alerts with at least the 3 alerts sent", st.Alertmanagers, err, am)
	}
	// Prometheus sends endsAt 4 resend delays (1 min) ahead.
	if d := time.Until(probe.EndsAt); d < 2*time.Minute || d > 5*time.Minute {
		t.Errorf("E2EAMProbeHigh endsAt %s from now; want about 4 min (4 × the 1 min resend delay)", d)
	}

	// The probe drops: its alert is resolved at Alertmanager; the others stay.
	waitFor(t, 60*time.Second, func() error {
		push(0)
		as, err := amAlerts(am, "E2EAMProbeHigh")
		if err != nil {
			return err
		}
		if len(as) != 0 {
			return fmt.Errorf("E2EAMProbeHigh still unresolved at alertmanager: %+v", as)
		}
		if st := hook.statuses("E2EAMProbeHigh"); !contains(st, "firing") || !contains(st, "resolved") {
			return fmt.Errorf("webhook deliveries of E2EAMProbeHigh: %v; want firing then resolved", st)
		}
		return nil
	})
	if _, err := firing("E2EMachineHasCPUs"); err != nil {
		t.Error(err)
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
