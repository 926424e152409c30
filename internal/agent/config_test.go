package agent

import (
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
