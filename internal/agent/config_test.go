package agent

import (
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseFlags(t *testing.T) {
	env := map[string]string{"CANTAL_INTERVAL": "5s", "CANTAL_NODE_NAME": "from-env", "CANTAL_PEER": "a:1,b:2"}
	cfg, err := ParseFlags("cantal-agent", []string{"--listen", "0.0.0.0:9", "--node-name", "flag", "--peer", "c:3"},
		func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen != "0.0.0.0:9" || cfg.Interval != 5*time.Second || cfg.NodeName != "flag" {
		t.Errorf("cfg = %+v; want listen from the flag, interval from env, node name from the flag (flag wins)", cfg)
	}
	// The flag was given, so the environment's peers are not added.
	if !reflect.DeepEqual(cfg.Peers, []string{"c:3"}) {
		t.Errorf("peers = %v; want [c:3]", cfg.Peers)
	}
	d := DefaultConfig()
	if d.Listen != "127.0.0.1:22682" || d.Interval != 2*time.Second || d.History != time.Hour || d.RRDDDir != "/dev/shm/metrics" {
		t.Errorf("defaults = %+v; want DESIGN.md's", d)
	}
}

func TestParseFlagsErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--interval", "1ms"}, nil, "too short"},
		{[]string{"--history", "1s", "--interval", "2s"}, nil, "shorter than"},
		{[]string{"--nope"}, nil, "not defined"},
		{[]string{"stray"}, nil, "unexpected argument"},
		{nil, map[string]string{"CANTAL_INTERVAL": "soon"}, "CANTAL_INTERVAL"},
		{[]string{"--influx-path", "influx"}, nil, "must start with /"},
		{[]string{"--timer-slack", "-1ms"}, nil, "--timer-slack"},
		{[]string{"--timer-slack", "2s"}, nil, "--timer-slack"},
		{[]string{"--max-answer-bytes", "1000"}, nil, "--max-answer-bytes"},
		{[]string{"--max-answer-bytes", "1000000", "--answer-budget", "999999"}, nil, "--answer-budget"},
	} {
		_, err := ParseFlags("cantal-agent", tc.args, func(k string) string { return tc.env[k] })
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseFlags(%v, %v) = %v; want an error containing %q", tc.args, tc.env, err, tc.want)
		}
	}
}

func TestAdvertisedHTTP(t *testing.T) {
	for _, tc := range []struct{ listen, gossip, want string }{
		{"127.0.0.1:22682", "127.0.0.1:22682", "127.0.0.1:22682"},
		{"0.0.0.0:22682", "10.1.2.3:22682", "10.1.2.3:22682"},
		{"[::]:80", "[fd00::1]:80", "[fd00::1]:80"},
		{"0.0.0.0:22682", "0.0.0.0:22682", "0.0.0.0:22682"},
	} {
		if got := advertisedHTTP(tc.listen, tc.gossip); got != tc.want {
			t.Errorf("advertisedHTTP(%q, %q) = %q; want %q", tc.listen, tc.gossip, got, tc.want)
		}
	}
	if !sameAddr("0.0.0.0:5", "127.0.0.1:5") || sameAddr("127.0.0.1:5", "127.0.0.1:6") {
		t.Error("sameAddr is wrong")
	}
}

// TestSegmentScans checks the history's segment length: one snapshot interval of scans, kept
// between 16 and 64.
func TestSegmentScans(t *testing.T) {
	for _, tc := range []struct {
		interval, snapshot time.Duration
		want               int
	}{
		{2 * time.Second, time.Minute, 30},
		{time.Second, time.Minute, 60},
		{100 * time.Millisecond, time.Minute, 64},
		{2 * time.Second, 10 * time.Second, 16},
		{time.Minute, time.Minute, 16},
	} {
		cfg := DefaultConfig()
		cfg.Interval, cfg.SnapshotInterval = tc.interval, tc.snapshot
		if got := segmentScans(cfg); got != tc.want {
			t.Errorf("interval %s, snapshot interval %s: %d scans, want %d", tc.interval, tc.snapshot, got, tc.want)
		}
	}
}

// writeConfig writes a configuration file of the agent's own (0600) and returns its path.
func writeConfig(t *testing.T, doc string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "agent.yml")
	if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestLoadConfigFile checks the sources' order: defaults, then the file, then CANTAL_*, then
// the command line, each replacing the one before, lists included.
func TestLoadConfigFile(t *testing.T) {
	file := writeConfig(t, "listen: 0.0.0.0:9\ninterval: 5s\nnode-name: from-file\npeer: [a:1, b:2]\nwrite-users: [ops]\npprof: true\nhistory: 2h\n")
	env := map[string]string{"CANTAL_NODE_NAME": "from-env", "CANTAL_WRITE_USERS": "env-ops", "CANTAL_HISTORY": "3h"}
	cfg, mode, err := Load("cantal-agent", []string{"--config", file, "--peer", "c:3", "--history", "4h"}, func(k string) string { return env[k] })
	if err != nil || mode != ModeRun {
		t.Fatal(mode, err)
	}
	if cfg.Listen != "0.0.0.0:9" || cfg.Interval != 5*time.Second || !cfg.Pprof || cfg.ConfigFile != file {
		t.Errorf("cfg = %+v; want listen, interval and pprof from the file", cfg)
	}
	if cfg.NodeName != "from-env" || !reflect.DeepEqual(cfg.WriteUsers, []string{"env-ops"}) {
		t.Errorf("node name %q, write users %v; want the environment's over the file's", cfg.NodeName, cfg.WriteUsers)
	}
	if cfg.History != 4*time.Hour || !reflect.DeepEqual(cfg.Peers, []string{"c:3"}) {
		t.Errorf("history %s, peers %v; want the command line's over both", cfg.History, cfg.Peers)
	}
	// CANTAL_CONFIG names the file when --config does not.
	cfg, _, err = Load("cantal-agent", nil, func(k string) string { return map[string]string{"CANTAL_CONFIG": file}[k] })
	if err != nil || cfg.NodeName != "from-file" || !reflect.DeepEqual(cfg.Peers, []string{"a:1", "b:2"}) {
		t.Errorf("CANTAL_CONFIG: %+v, %v; want the file's settings", cfg, err)
	}
}

// TestLoadCheckConfig checks --check-config [FILE] and --version, and that errors in the file
// carry its path and line and are checked like the command line's.
func TestLoadCheckConfig(t *testing.T) {
	good := writeConfig(t, "interval: 5s\n")
	cfg, mode, err := Load("cantal-agent", []string{"--check-config", good}, nil)
	if err != nil || mode != ModeCheckConfig || cfg.Interval != 5*time.Second {
		t.Errorf("--check-config FILE = %v, %v, %s; want the file checked", mode, err, cfg.Interval)
	}
	for _, tc := range []struct{ doc, want string }{
		{"interval: 5s\nclusters: x\n", `agent.yml:2: unknown key "clusters"`},
		{"\ninterval: 5\n", "agent.yml:2: interval: want a duration"},
		{"alert-node-down: yes\n", "agent.yml:1: alert-node-down: want true or false"},
		{"peer: {a: b}\n", "agent.yml:1: peer: want a list of strings"},
		{"max-series: -1\n", "agent.yml:1: --max-series -1 is negative"},
		{"pprof: true\ninterval: 1ms\n", "agent.yml:2: --interval 1ms is too short"},
		{"version: true\n", "agent.yml:1: version cannot be set in a configuration file"},
	} {
		file := writeConfig(t, tc.doc)
		_, mode, err := Load("cantal-agent", []string{"--check-config", file}, nil)
		if mode != ModeCheckConfig || err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("--check-config of %q = %v, %v; want an error containing %q", tc.doc, mode, err, tc.want)
		}
		if _, err := ParseFlags("cantal-agent", []string{"--config", file}, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("--config of %q = %v; want the same error at a start", tc.doc, err)
		}
	}
	// A bad value from the command line is not placed in the file that a flag overrode.
	over := writeConfig(t, "interval: 5s\n")
	if _, err := ParseFlags("cantal-agent", []string{"--config", over, "--interval", "1ms"}, nil); err == nil || err.Error() != "--interval 1ms is too short" {
		t.Errorf("--interval 1ms over the file's = %v; want the flag's error without a file line", err)
	}
	if _, err := ParseFlags("cantal-agent", []string{"--config", filepath.Join(t.TempDir(), "none.yml")}, nil); err == nil {
		t.Error("a missing --config file was accepted")
	}
	if _, mode, err := Load("cantal-agent", []string{"--version", "--interval", "1ms"}, nil); mode != ModeVersion || err != nil {
		t.Errorf("--version = %v, %v; want ModeVersion and nothing checked", mode, err)
	}
	if _, _, err := Load("cantal-agent", []string{"stray"}, nil); err == nil {
		t.Error("a stray argument without --check-config was accepted")
	}
}

// TestConfigExample checks docs/configuration.md's example: it names every setting (every flag
// but --config, --check-config and --version) and loads to the embedded defaults.
func TestConfigExample(t *testing.T) {
	doc, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "## Example")
	_, rest, ok2 := strings.Cut(rest, "```yaml\n")
	example, _, ok3 := strings.Cut(rest, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("docs/configuration.md has no ## Example with a yaml block")
	}
	c := DefaultConfig()
	var v, ch bool
	c.flagSet("x", &v, &ch).VisitAll(func(f *flag.Flag) {
		if !commandOnly[f.Name] && !strings.Contains(example, "\n"+f.Name+":") && !strings.Contains(example, "# "+f.Name+":") {
			t.Errorf("the example lacks the key %s", f.Name)
		}
	})
	file := writeConfig(t, example)
	cfg, err := ParseFlags("cantal-agent", []string{"--config", file}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultConfig()
	want.ConfigFile = file
	cfg.inv = nil // what Load keeps to parse again at a reload
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("the example loads to\n%+v\nwant the defaults\n%+v", cfg, want)
	}
}

// TestReadmeListsEveryFlag keeps README.md's flag table current: every flag of the agent has
// a row naming it.
func TestReadmeListsEveryFlag(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	c := DefaultConfig()
	var v, ch bool
	c.flagSet("x", &v, &ch).VisitAll(func(f *flag.Flag) {
		if !strings.Contains(string(readme), "| `--"+f.Name) && !strings.Contains(string(readme), ", `--"+f.Name) {
			t.Errorf("README.md's flag table has no row for --%s", f.Name)
		}
	})
}
