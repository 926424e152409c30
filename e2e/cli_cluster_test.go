package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strings"
	"sync"
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
	a2 := startAgent(t, "--cluster-name", "cli-cluster", "--node-name", "n2", "--peer", u.Host)
	// Each node's own level, pushed until the test ends: every complete slot of their sum is 65.
	pushCtx, stopPush := context.WithCancel(context.Background())
	var pushers sync.WaitGroup
	t.Cleanup(func() { stopPush(); pushers.Wait() })
	for _, p := range []struct {
		a *agent
		v int
	}{{a1, 15}, {a2, 50}} {
		pushers.Add(1)
		go func() {
			defer pushers.Done()
			for pushCtx.Err() == nil {
				if resp, err := http.Post(p.a.URL+"/write", "text/plain", strings.NewReader(fmt.Sprintf("e2e_level value=%d\n", p.v))); err == nil {
					resp.Body.Close()
				}
				select {
				case <-pushCtx.Done():
				case <-time.After(200 * time.Millisecond):
				}
			}
		}()
	}
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
		for _, row := range [][]string{{"NODE", "STATUS"}, {"n1", "ok"}, {"n2", "ok"}, {"system.load_avg_1min", "n1", "ok", "float"},
			{"system.load_avg_1min", "n2", "ok", "float"}, {"AGGREGATE", "(max"}, {"system.load_avg_1min", "float"}} {
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

	// history, JSON: the agent's aggregate; every complete slot of the pushed levels is their
	// sum, 65, whatever the nodes' scan phases; partial slots (the newest) say so.
	waitFor(t, 30*time.Second, func() error {
		var ha struct {
			Nodes     []struct{ Node string }
			Aggregate []struct {
				Series int
				StepMs int64        `json:"step_ms"`
				Points [][4]float64 `json:"points"`
			}
		}
		out = run("cluster", "history", "e2e_level.value", "--window", "1m", "--agg", "sum", "--json")
		if err := json.Unmarshal([]byte(out), &ha); err != nil {
			return fmt.Errorf("cluster history --json: %v\n%s", err, out)
		}
		if len(ha.Aggregate) != 1 || len(ha.Nodes) != 2 || ha.Aggregate[0].Series != 2 || ha.Aggregate[0].StepMs <= 0 {
			return fmt.Errorf("cluster history --agg sum --json: %s", out)
		}
		complete := 0
		for _, p := range ha.Aggregate[0].Points {
			if p[2] < p[3] {
				continue // partial: not a total
			}
			if p[3] == 1 {
				// A slot before the other node's series began (a series is expected from its
				// first point on; CI at 1099dac, loaded, began n2's some slots after n1's): one
				// node's level alone.
				if p[1] != 15 && p[1] != 50 {
					t.Errorf("slot %v: sum %v of 1 series; want one node's level, 15 or 50", int64(p[0]), p[1])
				}
				continue
			}
			complete++
			if p[1] != 65 || p[2] != 2 {
				t.Errorf("slot %v: sum %v of %v series; want 65 of 2", int64(p[0]), p[1], p[2])
			}
		}
		if complete < 5 {
			return fmt.Errorf("%d complete slots: %s", complete, out)
		}
		return nil
	})

	// --node and {node="..."}: the named node only; a node the cluster lacks is an error.
	for _, args := range [][]string{{"cluster", "metrics", "system.uptime_s", "--node", "n2"}, {"cluster", "metrics", `{node="n2", metric="system.uptime_s"}`}} {
		out = run(args...)
		if !hasRow(out, "n2", "ok", "1") || hasRow(out, "n1") || !hasRow(out, "system.uptime_s", "n2", "ok") {
			t.Errorf("cantal %q: want n2's row only:\n%s", args, out)
		}
	}
	if out, errs, code := cantalEnv(t, nil, append([]string{"cluster", "history", "system.uptime_s", "--node", "n9"}, agentArgs...)...); code != 1 ||
		!strings.Contains(errs, "unknown node n9") || !hasRow(out, "n9", "unknown") {
		t.Errorf("--node n9: exit %d\nstdout:\n%s\nstderr:\n%s\nwant 1 and n9 unknown", code, out, errs)
	}

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
