package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// probeRules is a rule file on a series the test controls through /write
// (e2e_rule_probe value=N is e2e_rule_probe_value{source="push"}): a recording rule, and an
// alerting rule with for, keep_firing_for, labels and templated annotations.
const probeRules = `groups:
- name: probe
  rules:
  - record: e2e:rule_probe:doubled
    expr: e2e_rule_probe_value * 2
  - alert: E2EProbeHigh
    expr: e2e_rule_probe_value > 10
    for: 3s
    keep_firing_for: 1s
    labels:
      severity: page
    annotations:
      summary: 'probe at {{ $value }} on {{ $labels.instance }}'
`

type promRulesAnswer struct {
	Status string
	Data   struct {
		Groups []struct {
			Name  string
			File  string
			Rules []struct {
				Name   string
				Type   string
				Health string
				State  string
				Query  string
			}
		}
	}
}

type promAlertsAnswer struct {
	Status string
	Data   struct {
		Alerts []struct {
			Labels      map[string]string
			Annotations map[string]string
			State       string
			Value       string
		}
	}
}

// TestRuleFiles: node-mixin's rules.yaml and alerts.yaml load unchanged with --rule-files
// beside a probe file; /prometheus/api/v1/rules lists their groups; the probe's recording rule's
// series is queryable through /prometheus/api/v1/query under its recorded name and listed by
// /api/v1/metrics (source="rule"); the probe's alert goes pending, then firing with its labels
// and rendered annotations in /prometheus/api/v1/alerts; a reload with a broken file fails
// and keeps the rules; a broken file at the start is refused with its file:line.
func TestRuleFiles(t *testing.T) {
	serial(t)
	dir := t.TempDir()
	probe := filepath.Join(dir, "probe.yaml")
	if err := os.WriteFile(probe, []byte(probeRules), 0o644); err != nil {
		t.Fatal(err)
	}
	mixin, err := filepath.Abs("testdata/node-mixin")
	if err != nil {
		t.Fatal(err)
	}
	a := startAgent(t, "--rule-files", filepath.Join(mixin, "*.yaml"), "--rule-files", probe)

	var rules promRulesAnswer
	if err := a.get("/prometheus/api/v1/rules", &rules); err != nil {
		t.Fatal(err)
	}
	groups := map[string]int{}
	for _, g := range rules.Data.Groups {
		groups[g.Name] = len(g.Rules)
	}
	if rules.Status != "success" || groups["node-exporter.rules"] != 11 || groups["node-exporter"] != 10 || groups["probe"] != 2 {
		t.Fatalf("/prometheus/api/v1/rules: groups %v (status %q); want node-exporter.rules 11, node-exporter 10, probe 2", groups, rules.Status)
	}

	// The probe: pushed at every step of the wait, so its series always has a fresh point.
	push := func(v int) {
		if code, body := a.raw("POST", "/write", fmt.Sprintf("e2e_rule_probe value=%d\n", v)); code != 204 {
			t.Fatalf("POST /write = %d %s", code, body)
		}
	}
	alertState := func() (string, promAlertsAnswer, error) {
		var al promAlertsAnswer
		if err := a.get("/prometheus/api/v1/alerts", &al); err != nil {
			return "", al, err
		}
		for _, x := range al.Data.Alerts {
			if x.Labels["alertname"] == "E2EProbeHigh" {
				return x.State, al, nil
			}
		}
		return "", al, nil
	}
	seen := map[string]bool{}
	var last promAlertsAnswer
	waitFor(t, 60*time.Second, func() error {
		push(42)
		st, al, err := alertState()
		if err != nil {
			return err
		}
		seen[st], last = true, al
		if !seen["firing"] {
			return fmt.Errorf("E2EProbeHigh not firing yet (seen %v): %+v", seen, al.Data.Alerts)
		}
		return nil
	})
	if !seen["pending"] {
		t.Errorf("E2EProbeHigh fired without being seen pending first (for: 3s); states seen %v", seen)
	}
	for _, x := range last.Data.Alerts {
		if x.Labels["alertname"] != "E2EProbeHigh" {
			continue
		}
		if x.Labels["severity"] != "page" || x.Labels["source"] != "push" {
			t.Errorf("alert labels %v; want severity=page and the series' source=push", x.Labels)
		}
		if want := "probe at 42 on "; !strings.HasPrefix(x.Annotations["summary"], want) || x.Annotations["summary"] == want {
			t.Errorf("summary annotation %q; want it rendered as %q followed by the instance", x.Annotations["summary"], want)
		}
	}

	// The recorded series, under its recorded name, in both APIs.
	waitFor(t, 30*time.Second, func() error {
		push(42)
		ans, err := promQuery(a.URL+"/prometheus", `e2e:rule_probe:doubled`)
		if err != nil {
			return err
		}
		if len(ans.Data.Result) != 1 || num(ans.Data.Result[0].Value[1]) != 84 {
			return fmt.Errorf("e2e:rule_probe:doubled = %+v; want one series of 84", ans.Data.Result)
		}
		ss, err := a.series("/api/v1/metrics", `{source="rule"}`)
		if err != nil {
			return err
		}
		if s := find(ss, "e2e:rule_probe:doubled"); s == nil || num(s.Value) != 84 {
			return fmt.Errorf("/api/v1/metrics {source=\"rule\"}: no e2e:rule_probe:doubled of 84 in %+v", ss)
		}
		return nil
	})
	// ALERTS, as Prometheus records it: firing, and no longer pending (the pending series got
	// its stale marker when the alert fired).
	waitFor(t, 30*time.Second, func() error {
		push(42)
		ans, err := promQuery(a.URL+"/prometheus", `ALERTS{alertname="E2EProbeHigh"}`)
		if err != nil {
			return err
		}
		if len(ans.Data.Result) != 1 || ans.Data.Result[0].Metric["alertstate"] != "firing" {
			return fmt.Errorf("ALERTS{alertname=\"E2EProbeHigh\"}: %+v; want one series, alertstate=firing", ans.Data.Result)
		}
		return nil
	})

	// A reload with a broken file fails and keeps the rules; the status says why, with the line.
	if err := os.WriteFile(probe, []byte(probeRules+"  - record: broken\n    expr: sum(\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a.cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, 30*time.Second, func() error {
		var st reloadStatus
		if err := a.get("/api/v1/status", &st); err != nil {
			return err
		}
		if st.Config.Reloads < 1 {
			return fmt.Errorf("no reload yet")
		}
		if st.Config.LastReloadSuccessful || !strings.Contains(st.Config.LastReloadError, "probe.yaml: 15:") {
			return fmt.Errorf("reload with a broken rule file: %+v; want a failure naming probe.yaml: 15:", st.Config)
		}
		return nil
	})
	if err := a.get("/prometheus/api/v1/rules", &rules); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range rules.Data.Groups {
		n += len(g.Rules)
	}
	if n != 23 {
		t.Errorf("after a failed reload: %d rules; want the 23 loaded before", n)
	}

	// At the start, the same file is refused with its file:line.
	out, err := exec.Command(filepath.Join(bin, "cantal-agent"), "--listen", freePort(t), "--state-dir", t.TempDir(),
		"--rule-files", probe).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "probe.yaml: 15:") {
		t.Errorf("agent started with a broken rule file: err %v, output %s; want a refusal naming probe.yaml: 15:", err, out)
	}
}
