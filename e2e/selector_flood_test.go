package e2e

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestSelectorFloodKeepsPeersHealthy: two real agents on loopback; a client floods the first
// with 331 distinct cluster selectors (history and metrics alternately). The second node is
// never shown unreachable — past the bounds it is "busy" with the reason —, the first node's
// peak RSS stays bounded, and a normal cluster query is still answered with both nodes ok.
// Before, every selector kept a subscription and a 5-minute chunk at every peer, and past the
// peer's 256 subscriptions healthy peers showed unreachable for 3 minutes. (Issue 31, N8.)
func TestSelectorFloodKeepsPeersHealthy(t *testing.T) {
	quiet(t)
	a1 := startAgent(t, "--cluster-name", "flood-cluster", "--node-name", "n1")
	u, _ := url.Parse(a1.URL)
	startAgent(t, "--cluster-name", "flood-cluster", "--node-name", "n2", "--peer", u.Host)
	type answer struct {
		Nodes []struct {
			Node, Status, Error string
			Series              []json.RawMessage
		}
	}
	ask := func(route, match string) (n2 string, errMsg string, n2series int) {
		t.Helper()
		var ans answer
		if err := a1.get("/api/v1/cluster/"+route+"?window=1m&match="+url.QueryEscape(match), &ans); err != nil {
			t.Fatal(err)
		}
		for _, n := range ans.Nodes {
			if n.Node == "n2" {
				return n.Status, n.Error, len(n.Series)
			}
		}
		return "missing", "", 0
	}
	const normal = "system.uptime_s"
	waitFor(t, 60*time.Second, func() error {
		if st, e, n := ask("metrics", normal); st != "ok" || n != 1 {
			return fmt.Errorf("n2 %s %q with %d series", st, e, n)
		}
		return nil
	})
	pid := a1.cmd.Process.Pid
	before := vmHWM(t, pid)
	counts := map[string]int{}
	for i := range 331 {
		route := []string{"history", "metrics"}[i%2]
		st, e, _ := ask(route, fmt.Sprintf(`{metric=~"system.*", flood!="%d"}`, i))
		counts[st]++
		if st == "busy" && !strings.Contains(e, "too many") {
			t.Errorf("selector %d: n2 busy with %q; want the reason", i, e)
		}
		if st != "ok" && st != "busy" {
			t.Fatalf("selector %d (%s): n2 %s %q; want ok or busy, never unreachable", i, route, st, e)
		}
	}
	after := vmHWM(t, pid)
	t.Logf("n2 over 331 selectors: %v; n1 peak RSS %d MiB before, %d MiB after", counts, before>>20, after>>20)
	if counts["busy"] == 0 {
		t.Errorf("no selector of 331 from one client was refused: %v", counts)
	}
	if grew := after - before; grew > 150<<20 {
		t.Errorf("the flood raised n1's peak RSS by %d MiB; want at most 150", grew>>20)
	}
	if st, e, n := ask("metrics", normal); st != "ok" || n != 1 {
		t.Errorf("a normal query after the flood: n2 %s %q with %d series; want ok with 1", st, e, n)
	}
	if st, e, n := ask("history", normal); st != "ok" || n != 1 {
		t.Errorf("a normal history query after the flood: n2 %s %q with %d series; want ok with 1", st, e, n)
	}
}
