package e2e

import (
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestCLICluster forms a cluster of two real agents on loopback and queries it through the
// first with `cantal cluster metrics|history|stats`: both nodes answer, tables show one row or
// column per node, and the aggregates are those of the nodes' values.
func TestCLICluster(t *testing.T) {
	serial(t)
	a1 := startAgent(t, "--cluster-name", "cli-cluster", "--node-name", "n1")
	u, _ := url.Parse(a1.URL)
	startAgent(t, "--cluster-name", "cli-cluster", "--node-name", "n2", "--peer", u.Host)
	agentArgs := []string{"--agent", a1.URL}
	run := func(args ...string) string {
		t.Helper()
		out, errs, code := cantalEnv(t, nil, append(args, agentArgs...)...)
		if code != 0 {
			t.Fatalf("cantal %q = %d\nstdout:\n%s\nstderr:\n%s", args, code, out, errs)
		}
		return out
	}

	// metrics, JSON: both nodes ok; the aggregate is the sum of their values.
	type metricsAnswer struct {
		Nodes []struct {
			Node, Status string
			Series       []struct {
				Value float64 `json:"value"`
			}
		}
		Aggregate []struct {
			Value float64 `json:"value"`
			Nodes int     `json:"nodes"`
		}
	}
	var ans metricsAnswer
	waitFor(t, 60*time.Second, func() error {
		out, errs, code := cantalEnv(t, nil, append([]string{"cluster", "metrics", "system.uptime_s", "--agg", "sum", "--json"}, agentArgs...)...)
		if code != 0 {
			return fmt.Errorf("exit %d: %s", code, errs)
		}
		ans = metricsAnswer{}
		if err := json.Unmarshal([]byte(out), &ans); err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		ok := 0
		for _, n := range ans.Nodes {
			if n.Status == "ok" && len(n.Series) == 1 {
				ok++
			}
		}
		if ok != 2 || len(ans.Aggregate) != 1 {
			return fmt.Errorf("want 2 nodes ok with one series each and an aggregate: %s", out)
		}
		return nil
	})
	if sum := ans.Nodes[0].Series[0].Value + ans.Nodes[1].Series[0].Value; ans.Aggregate[0].Nodes != 2 || math.Abs(ans.Aggregate[0].Value-sum) > 1e-6 {
		t.Errorf("aggregate %+v; want the sum %v of 2 nodes", ans.Aggregate[0], sum)
	}

	// metrics, table (a new selector: the peer's series follow its subscription).
	var out string
	waitFor(t, 30*time.Second, func() error {
		out = run("cluster", "metrics", "system.load_avg_1min", "--agg", "max")
		for _, row := range [][]string{{"NODE", "STATUS"}, {"n1", "ok"}, {"n2", "ok"}, {"system.load_avg_1min", "n1", "float"},
			{"system.load_avg_1min", "n2", "float"}, {"AGGREGATE", "(max"}, {"system.load_avg_1min", "float"}} {
			if !hasRow(out, row...) {
				return fmt.Errorf("cluster metrics lacks a row %q:\n%s", row, out)
			}
		}
		return nil
	})

	// history, table: one column per node and the aggregate.
	// The first query of a selector subscribes to the peers lazily: their points follow.
	waitFor(t, 30*time.Second, func() error {
		out = run("cluster", "history", `{metric="cpu.user_ms", cpu=""}`, "--rate", "--window", "1m", "--agg", "sum")
		if !strings.Contains(out, "cpu.user_ms (counter, per second, 2 series") || !hasRow(out, "TIME", "n1", "n2", "SUM") {
			return fmt.Errorf("cluster history:\n%s", out)
		}
		for _, l := range strings.Split(out, "\n") {
			f := strings.Fields(l)
			if len(f) == 4 && strings.Count(f[0], ":") == 2 && strings.HasSuffix(f[1], "/s") && strings.HasSuffix(f[2], "/s") {
				return nil // a time slot with a value of both nodes and their sum
			}
		}
		return fmt.Errorf("no time slot holds both nodes' points:\n%s", out)
	})

	// stats, JSON: per node and of the aggregate.
	var st struct {
		Nodes []struct {
			Node   string
			Series []struct{ Count int }
		}
		Aggregate []struct {
			Series, Count int
			Mean          float64
		}
	}
	out = run("cluster", "stats", "system.uptime_s", "--window", "1m", "--agg", "avg", "--json")
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("cluster stats --json: %v\n%s", err, out)
	}
	if len(st.Nodes) != 2 || len(st.Nodes[0].Series) != 1 || st.Nodes[0].Series[0].Count < 3 || len(st.Nodes[1].Series) != 1 ||
		len(st.Aggregate) != 1 || st.Aggregate[0].Series != 2 || st.Aggregate[0].Count < 3 || st.Aggregate[0].Mean <= 0 {
		t.Errorf("cluster stats --json = %+v", st)
	}
	out = run("cluster", "stats", "system.uptime_s", "--window", "1m", "--agg", "avg")
	if !hasRow(out, "system.uptime_s", "n1") || !hasRow(out, "system.uptime_s", "n2") || !hasRow(out, "system.uptime_s", "AVG") {
		t.Errorf("cluster stats table:\n%s", out)
	}
}

// hasRow reports whether a line of out starts with the fields want.
func hasRow(out string, want ...string) bool {
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) >= len(want) && strings.Join(f[:len(want)], " ") == strings.Join(want, " ") {
			return true
		}
	}
	return false
}
