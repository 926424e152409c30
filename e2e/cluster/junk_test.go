package cluster

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestJunkGossipPacketsLogThrottled: an agent with a gossip key sent thousands of junk
// datagrams on its gossip port (each one a "Decrypt packet failed" ERROR line of memberlist's
// before the fix: 23 893 lines in 5 s) writes at most its gossip log budget (5 lines a second
// after a burst of 5) plus a summary line saying how many it held back, and keeps working.
//
// Security finding 14.
func TestJunkGossipPacketsLogThrottled(t *testing.T) {
	t.Parallel() // two at a time (-parallel: GOMAXPROCS); each owns its lab (see harness_test.go)
	lab := newLab(t, 2, "10.77.9")
	hosts := lab.Hosts()
	key := writeGossipKey(t, t.TempDir(), "gossip.key")
	n := startAgent(t, hosts[0], "a", nil, "--gossip-key", key)
	waitScanned(t, n)
	time.Sleep(time.Second) // the start-up lines are out
	before := strings.Count(n.proc.Output(), "\n")

	// From the other host: 20 000 datagrams over about 4 s.
	conn, err := dialIn(context.Background(), hosts[1].NS, "udp", n.gaddr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const junk = 20000
	start := time.Now()
	sent := 0
	for i := range junk {
		if _, err := conn.Write([]byte("junk " + strings.Repeat("x", i%200))); err == nil {
			sent++
		}
		if i%1000 == 999 {
			time.Sleep(200 * time.Millisecond)
		}
	}
	time.Sleep(time.Second)
	elapsed := time.Since(start)
	out := n.proc.Output()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")[before:]
	var gossip, other []string
	for _, l := range lines {
		if strings.Contains(l, "component=memberlist") {
			gossip = append(gossip, l)
		} else {
			other = append(other, l)
		}
	}
	budget := int(5 + 5*elapsed.Seconds() + 1)
	t.Logf("MEASURE junk gossip: %d datagrams sent in %s; the agent wrote %d lines (%d gossip, budget %d; %d others)",
		sent, elapsed.Round(time.Millisecond), len(lines), len(gossip), budget, len(other))
	if len(gossip) > budget {
		t.Errorf("%d gossip log lines in %s; want at most %d:\n%s", len(gossip), elapsed, budget, tail(strings.Join(gossip, "\n"), 10))
	}
	if len(other) > 20 {
		t.Errorf("%d other log lines during the flood; want few:\n%s", len(other), tail(strings.Join(other, "\n"), 20))
	}
	// The summary comes within 10 s of the first line held back.
	waitFor(t, 15*time.Second, func() error {
		if !strings.Contains(n.proc.Output(), "gossip log lines suppressed in the last 10s") {
			return errLine("no summary of the suppressed lines yet")
		}
		return nil
	})
	var st struct {
		LastScan struct{ Scans int } `json:"last_scan"`
	}
	if err := n.get("/api/v1/status", &st); err != nil {
		t.Fatalf("the agent after the flood: %v", err)
	}
}

type errLine string

func (e errLine) Error() string { return string(e) }
