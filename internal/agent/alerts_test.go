package agent

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestAlertFlags(t *testing.T) {
	d := DefaultConfig()
	if d.AlertCPU != 90 || d.AlertMemory != 10 || d.AlertDisk != 10 || d.AlertFor != 5*time.Minute || !d.AlertNodeDown || d.AlertRules != "" {
		t.Errorf("alert defaults = cpu %v memory %v disk %v for %v node-down %v rules %q; want 90, 10, 10, 5m, on, none",
			d.AlertCPU, d.AlertMemory, d.AlertDisk, d.AlertFor, d.AlertNodeDown, d.AlertRules)
	}
	dir := t.TempDir()
	good := filepath.Join(dir, "rules.yml")
	os.WriteFile(good, []byte("rules:\n  - {name: q, selector: queue.len, op: '>', threshold: 5}\n"), 0o600)
	cfg, err := ParseFlags("cantal-agent", []string{"--alert-rules", good, "--alert-cpu", "0", "--alert-for", "1m", "--alert-node-down=false", "--state-dir", ""}, nil)
	if err != nil {
		t.Fatal(err)
	}
	a := &Agent{cfg: cfg, log: slog.New(slog.DiscardHandler)}
	if err := a.openAlerts(); err != nil {
		t.Fatalf("openAlerts with a good file: %v", err)
	}
	if a.alerts == nil || len(a.alerts.Alerts().Alerts) != 0 {
		t.Fatalf("engine %v; want one with no alerts yet", a.alerts)
	}

	for _, args := range [][]string{{"--alert-cpu", "101"}, {"--alert-memory", "-1"}, {"--alert-disk", "NaN"}, {"--alert-for", "-1s"}} {
		if _, err := ParseFlags("cantal-agent", append(args, "--state-dir", ""), nil); err == nil {
			t.Errorf("ParseFlags(%v) succeeded; want an error", args)
		}
	}
	const secret = "root:$6$hash-of-a-password"
	bad := filepath.Join(dir, "shadow")
	os.WriteFile(bad, []byte(secret+":19000:0:99999:7:::\n"), 0o600)
	for file, want := range map[string]string{bad: "not valid YAML", filepath.Join(dir, "missing"): "--alert-rules"} {
		cfg, _ := ParseFlags("cantal-agent", []string{"--alert-rules", file, "--state-dir", ""}, nil)
		a := &Agent{cfg: cfg, log: slog.New(slog.DiscardHandler)}
		err := a.openAlerts()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("--alert-rules %s: %v; want an error about %q", file, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "hash-of") {
			t.Errorf("--alert-rules %s: error %q quotes the file", file, err)
		}
	}
}
