package agent

import (
	"bytes"
	"context"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestTakeReloadableCoversEveryName: takeReloadable copies each setting named reloadable, and
// nothing else, so the table and the copy cannot drift apart.
func TestTakeReloadableCoversEveryName(t *testing.T) {
	other := map[string]string{"log-level": "debug", "alert-rules": "/r.yml", "alert-cpu": "50", "alert-memory": "5",
		"alert-disk": "3", "alert-for": "1m0s", "alert-node-down": "false", "remote-write": "http://x/w",
		"remote-write-config": "/rw.yml", "carbon": "127.0.0.1:2003", "carbon-interval": "3s", "carbon-prefix": "p",
		"carbon-match": "metric=x", "statsd": "127.0.0.1:8125", "peer": "10.0.0.1:22682",
		"rule-files": "/rules/*.yml", "alertmanager": "http://am:9093", "alertmanager-config": "/am.yml"}
	for n := range reloadable {
		if _, ok := other[n]; !ok {
			t.Fatalf("no test value for reloadable %q", n)
		}
	}
	base := flagValues(DefaultConfig())
	var v, ch bool
	src := DefaultConfig()
	fs := src.flagSet("", &v, &ch)
	// Every setting differs in src: the reloadable ones by other, the rest by a value of
	// their type.
	fs.VisitAll(func(f *flag.Flag) {
		if commandOnly[f.Name] {
			return
		}
		val, ok := other[f.Name]
		if !ok {
			switch f.Value.(type) {
			case flag.Getter:
				switch f.Value.(flag.Getter).Get().(type) {
				case bool:
					val = map[string]string{"true": "false", "false": "true"}[f.Value.String()]
				case int, int64, float64:
					val = "7"
				case string:
					val = "changed"
				default:
					val = "11s"
				}
			}
		}
		if l, ok := f.Value.(interface{ Reset() }); ok {
			l.Reset()
		}
		if err := f.Value.Set(val); err != nil {
			t.Fatalf("%s=%q: %v", f.Name, val, err)
		}
	})
	want := flagValues(src)
	dst := DefaultConfig()
	takeReloadable(&dst, src)
	got := flagValues(dst)
	for n := range base {
		switch {
		case want[n] == base[n]:
			t.Errorf("test did not change %s", n)
		case reloadable[n] && got[n] != want[n]:
			t.Errorf("reloadable %s = %q after takeReloadable; want %q", n, got[n], want[n])
		case !reloadable[n] && got[n] != base[n]:
			t.Errorf("%s (needs a restart) = %q after takeReloadable; want %q kept", n, got[n], base[n])
		}
	}
}

// TestLogLevelChangesForDerivedLoggers: setLogLevel changes the level of the loggers already
// derived with With (each subsystem's), as a reload of --log-level needs.
func TestLogLevelChangesForDerivedLoggers(t *testing.T) {
	var buf bytes.Buffer
	log, err := NewLogger(&buf, "info", "text")
	if err != nil {
		t.Fatal(err)
	}
	sub := log.With("subsystem", "x")
	sub.Debug("before")
	if ok, err := setLogLevel(log, "debug"); !ok || err != nil {
		t.Fatalf("setLogLevel = %v, %v", ok, err)
	}
	sub.Debug("after")
	if s := buf.String(); strings.Contains(s, "before") || !strings.Contains(s, "after") {
		t.Errorf("log %q: want only the debug line written after the change", s)
	}
	if _, err := setLogLevel(log, "loud"); err == nil {
		t.Error("a bad level was taken")
	}
}

// TestReloadAppliesOrRefuses reloads an agent (not running: no goroutines) from its file:
// a reloadable change is applied and listed, a restart-only change is listed as such, a broken
// file keeps everything and is reported in the status.
func TestReloadAppliesOrRefuses(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "agent.yml")
	rules := filepath.Join(dir, "rules.yml")
	write := func(p, s string) {
		t.Helper()
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(rules, "rules:\n  - name: many\n    selector: '{metric=\"cpu.count\"}'\n    op: '>'\n    threshold: 0\n")
	write(file, "log-level: info\ninterval: 1s\nalert-cpu: 90\n")
	cfg, err := ParseFlags("cantal-agent", []string{"--config", file, "--listen", "127.0.0.1:0", "--state-dir", "", "--rrdd-dir", ""}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	log, _ := NewLogger(&logs, cfg.LogLevel, "text")
	a, err := New(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	engine := a.alerts.cur.Load()

	write(file, "log-level: debug\ninterval: 2s\nalert-cpu: 90\nalert-rules: "+rules+"\n")
	res := a.Reload()
	if res.Status != "success" || !slices.Equal(res.Changed, []string{"alert-rules", "log-level"}) || !slices.Equal(res.NeedsRestart, []string{"interval"}) {
		t.Fatalf("reload = %+v; want alert-rules and log-level changed, interval needing a restart", res)
	}
	if !a.log.Enabled(context.Background(), -4) {
		t.Error("log level not debug after the reload")
	}
	if a.alerts.next.Load() == nil || a.alerts.next.Load() == engine {
		t.Error("alert engine not replaced")
	}
	if a.cfg.Interval.String() != "1s" {
		t.Errorf("interval %s changed without a restart", a.cfg.Interval)
	}
	if st := a.configStatus(); !st.LastReloadSuccessful || st.Reloads != 1 || !slices.Equal(st.NeedsRestart, []string{"interval"}) {
		t.Errorf("status %+v", st)
	}

	// The same file again: nothing changed, the restart still pending.
	if res := a.Reload(); res.Status != "success" || len(res.Changed) != 0 || !slices.Equal(res.NeedsRestart, []string{"interval"}) {
		t.Errorf("second reload = %+v", res)
	}

	// Broken: a wrong type, then a rules file that does not parse. Nothing changes.
	engine = a.alerts.next.Load()
	for _, tc := range []struct{ file, rules, want string }{
		{"log-level: info\nalert-cpu: lots\n", "", file + ":2"},
		{"log-level: info\nalert-rules: " + rules + "\n", "rules:\n  - name: x\n    op: '?'\n", "--alert-rules"},
		{"log-level: shouting\n", "", "--log-level"},
	} {
		write(file, tc.file)
		if tc.rules != "" {
			write(rules, tc.rules)
		}
		res := a.Reload()
		if res.Status != "error" || !strings.Contains(res.Error, tc.want) {
			t.Errorf("reload of %q = %+v; want an error naming %s", tc.file, res, tc.want)
		}
		if !a.log.Enabled(context.Background(), -4) || a.alerts.next.Load() != engine {
			t.Errorf("a refused reload (%q) changed the configuration", tc.file)
		}
		if st := a.configStatus(); st.LastReloadSuccessful || st.LastReloadError != res.Error {
			t.Errorf("status after a refused reload: %+v", st)
		}
	}
	if !strings.Contains(logs.String(), "configuration reload failed") {
		t.Error("refused reload not logged")
	}
}

// TestReloadTableNamesEverySetting keeps docs/configuration.md's reload table current: every
// setting is in a row, and those in "reloadable" rows are exactly the ones reload.go applies
// (web-config's contents row aside: its path needs a restart).
func TestReloadTableNamesEverySetting(t *testing.T) {
	doc, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(doc), "| setting | on reload | how |")
	table, _, _ = strings.Cut(table, "\n\n")
	if !ok {
		t.Fatal("docs/configuration.md has no reload table")
	}
	named := map[string]string{} // setting → its row's verdict
	for _, row := range strings.Split(table, "\n") {
		cells := strings.Split(row, "|")
		if len(cells) < 4 || strings.HasPrefix(strings.TrimSpace(cells[1]), "---") {
			continue
		}
		verdict := strings.TrimSpace(cells[2])
		if strings.Contains(cells[1], "contents") && strings.HasPrefix(strings.TrimSpace(cells[1]), "`web-config`:") {
			continue
		}
		parts := strings.Split(cells[1], "`")
		for i := 1; i < len(parts); i += 2 {
			if _, seen := named[parts[i]]; !seen {
				named[parts[i]] = verdict
			}
		}
	}
	for n := range flagValues(DefaultConfig()) {
		v, ok := named[n]
		switch {
		case !ok:
			t.Errorf("the reload table does not name %s", n)
		case reloadable[n] != strings.HasPrefix(v, "reloadable"):
			t.Errorf("the reload table says %s is %q; reload.go: reloadable %v", n, v, reloadable[n])
		}
	}
}

// BenchmarkReloadUnchanged is the cost of a reload that finds nothing changed (parse the file
// and the command line, read the rules file, build the engine it then drops): what a
// configuration-management run that reloads on every pass costs the agent.
func BenchmarkReloadUnchanged(b *testing.B) {
	dir := b.TempDir()
	file := filepath.Join(dir, "agent.yml")
	rules := filepath.Join(dir, "rules.yml")
	os.WriteFile(rules, []byte("rules:\n  - name: many\n    selector: '{metric=\"cpu.count\"}'\n    op: '>'\n    threshold: 0\n"), 0o600)
	os.WriteFile(file, []byte("log-level: info\nalert-rules: "+rules+"\nremote-write: [http://127.0.0.1:1/w]\n"), 0o600)
	cfg, err := ParseFlags("cantal-agent", []string{"--config", file, "--listen", "127.0.0.1:0", "--state-dir", "", "--rrdd-dir", ""}, nil)
	if err != nil {
		b.Fatal(err)
	}
	log, _ := NewLogger(io.Discard, "warn", "text")
	a, err := New(cfg, log)
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	b.ReportAllocs()
	for b.Loop() {
		if res := a.Reload(); res.Status != "success" || len(res.Changed) != 0 {
			b.Fatalf("%+v", res)
		}
	}
}
