package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cantal-go/cantal/e2e/cluster/fleet"
	"github.com/cantal-go/cantal/internal/testsupport/netns"
)

// BenchmarkClusterFleet runs the fleet scenario of issue 24 (e2e/cluster/fleet) with real
// cantal-agent processes, one per network namespace on this machine, at 10, 50 and 150 nodes:
// convergence after the last start, a rejoin, the first cluster queries at node 1, 20 s of
// steady-state queries with the answering node's CPU time and memory less a non-answering
// node's (per peer), a half/half partition of 60 s and its heal with queries all along, and
// the log line rate, and every node's scan periods (scans on time: p99, max, late scans, from
// each agent's own history) in the steady state and through the partition and heal. Each size runs once (b.N is ignored: it is a scenario, not a loop); the
// figures are reported as metrics and logged. It needs root and iproute2 and fails without.
//
//	cd bench && go test -run '^$' -bench ClusterFleet -benchtime 1x -timeout 60m -v
//
// FLEET_SIZES (comma-separated, default 10,50,150), FLEET_INTERVAL (the agents' --interval,
// default 1s), FLEET_PARTITION (default 60s) and FLEET_AGENT (a cantal-agent binary to run
// instead of building this tree's) change the run; FLEET_PROFILE_DIR runs node 1 with --pprof
// and writes its CPU profile over the heal's first 6 s there (heal-N.pprof); FLEET_HEAL_POLL
// is how often every node's membership is polled after the heal (default 100ms). The heal's
// slowest queries are also reported as node 1 saw them (its Server-Timing: the whole answer),
// so that an answer slow at the client can be told from one slow at node 1. Every figure is measured on
// two cores shared by all N agents (and whatever else the machine runs: the load average is
// reported), so it is an upper bound for N separate machines.
func BenchmarkClusterFleet(b *testing.B) {
	if err := netns.Available(); err != nil {
		b.Fatalf("the fleet benchmark needs network namespaces (root, iproute2: scripts/install-deps.sh): %v", err)
	}
	sizes := fleetSizes(b)
	interval := envDuration(b, "FLEET_INTERVAL", time.Second)
	partition := envDuration(b, "FLEET_PARTITION", 60*time.Second)
	agent := fleetAgent(b)
	for _, n := range sizes {
		b.Run("nodes="+strconv.Itoa(n), func(b *testing.B) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
			defer cancel()
			opts := fleet.Options{Agent: agent, N: n, Subnet: "10.77.124", Interval: interval, Dir: b.TempDir(), OwnPIDs: true}
			sc := fleet.Scenario{Partition: partition, Steady: 20 * time.Second, Converge: 5 * time.Minute, Logf: b.Logf}
			sc.HealPoll = envDuration(b, "FLEET_HEAL_POLL", 100*time.Millisecond)
			if dir := os.Getenv("FLEET_PROFILE_DIR"); dir != "" {
				opts.FirstExtra = []string{"--pprof"}
				sc.HealProfile = filepath.Join(dir, fmt.Sprintf("heal-%d.pprof", n))
			}
			f, err := fleet.Start(ctx, opts)
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			b.ResetTimer()
			rep, err := sc.Run(ctx, f)
			b.StopTimer()
			if err != nil {
				for _, nd := range f.Nodes[:2] {
					b.Logf("agent %s output, last 30 lines:\n%s", nd.Name, fleet.Tail(nd.Proc.Output(), 30))
				}
				b.Fatal(err)
			}
			ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
			b.ReportMetric(rep.Converged.Seconds(), "converge-s")
			b.ReportMetric(rep.Join.Seconds(), "join-s")
			b.ReportMetric(ms(rep.FirstMetrics), "first-metrics-ms")
			b.ReportMetric(ms(rep.FirstMetricsCPU), "first-metrics-node1-cpu-ms")
			b.ReportMetric(ms(rep.FirstHistory), "first-history-ms")
			b.ReportMetric(ms(fleet.Quantile(rep.Steady.Metrics, .5)), "metrics-p50-ms")
			b.ReportMetric(ms(fleet.Quantile(rep.Steady.Metrics, .99)), "metrics-p99-ms")
			b.ReportMetric(ms(fleet.Quantile(rep.Steady.History, .5)), "history-p50-ms")
			b.ReportMetric(ms(fleet.Quantile(rep.Steady.History, .99)), "history-p99-ms")
			b.ReportMetric(float64(rep.Steady.HistoryBytes)/1024, "history-KiB")
			b.ReportMetric(ms(rep.Cut.MaxMetrics()), "cut-max-metrics-ms")
			b.ReportMetric(ms(rep.Cut.MaxHistory()), "cut-max-history-ms")
			b.ReportMetric(rep.CutNotOK.Seconds(), "cut-notok-s")
			b.ReportMetric(ms(rep.Heal.MaxMetrics()), "heal-max-metrics-ms")
			b.ReportMetric(ms(rep.Heal.MaxHistory()), "heal-max-history-ms")
			b.ReportMetric(ms(rep.Heal.SlowestMetrics.Server), "heal-max-metrics-at-node1-ms")
			b.ReportMetric(ms(rep.Heal.SlowestHistory.Server), "heal-max-history-at-node1-ms")
			b.ReportMetric(rep.Whole.Seconds(), "heal-whole-s")
			b.ReportMetric(rep.AllOKAfterHeal.Seconds(), "heal-allok-s")
			b.ReportMetric(float64(rep.CPUPerPeerPerInterval)/1e3, "cpu-us/peer/interval")
			b.ReportMetric(float64(rep.SubsCPUPerPeerPerInterval)/1e3, "subs-cpu-us/peer/interval")
			b.ReportMetric(float64(rep.RSSPerPeer)/1024, "rss-KiB/peer")
			b.ReportMetric(rep.LogRate, "log-lines/s/node")
			b.ReportMetric(rep.Load, "loadavg")
			b.ReportMetric(ms(rep.ScansDisturbed.P99), "scan-period-p99-ms")
			b.ReportMetric(ms(rep.ScansDisturbed.Max), "scan-period-max-ms")
			b.ReportMetric(float64(rep.ScansDisturbed.Late), "late-scans")
			b.ReportMetric(100*rep.ScansDisturbed.WorstLateShare, "worst-node-late-%")
			b.Logf("N=%d: scans, steady state: %v; partition and heal: %v", n, rep.ScansSteady, rep.ScansDisturbed)
			b.Logf("N=%d: node 1 CPU %s/interval, node 2 %s; RSS %d / %d KiB; first metrics not ok: %v; cut never not ok: %v; query errors cut %d heal %d; %d log lines",
				n, rep.AnsweringCPU, rep.BaselineCPU, rep.AnsweringRSS>>10, rep.BaselineRSS>>10, rep.FirstNotOK, rep.CutNotOKMissing,
				len(rep.Cut.Errors), len(rep.Heal.Errors), rep.LogTotal)
		})
	}
}

func envDuration(b *testing.B, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		b.Fatalf("%s: %v", name, err)
	}
	return d
}

// BenchmarkClusterFirstQuery shows where the first cluster metrics query's time goes at 10, 50
// and 150 nodes (FLEET_SIZES): real agents as in BenchmarkClusterFleet, node 1 at
// --log-level debug, which logs each new peer session's first message with its dial (TCP and
// WebSocket upgrade), wait (until the peer's answer to the subscription arrived) and decode
// times. After convergence one metrics query at node 1; reported: its wall time, node 1's CPU
// time over it (schedstat), and p50 / p99 / max of the per-peer phases. FLEET_AGENT runs
// another cantal-agent binary instead of this tree's (builds side by side, one after the other).
// FLEET_MATCH queries another selector than system.load_avg_1min, e.g. one with many series
// per node ({metric=~"system\\..*"}); the series per node are reported.
//
//	cd bench && go test -run '^$' -bench ClusterFirstQuery -benchtime 1x -timeout 30m -v
func BenchmarkClusterFirstQuery(b *testing.B) {
	if err := netns.Available(); err != nil {
		b.Fatalf("the fleet benchmark needs network namespaces (root, iproute2: scripts/install-deps.sh): %v", err)
	}
	sizes := fleetSizes(b)
	interval := envDuration(b, "FLEET_INTERVAL", time.Second)
	agent := fleetAgent(b)
	phase := regexp.MustCompile(`peer session: first message.* dial=(\S+) wait=(\S+) decode=(\S+)`)
	match := os.Getenv("FLEET_MATCH")
	if match == "" {
		match = fleet.ScanMatch
	}
	for _, n := range sizes {
		b.Run("nodes="+strconv.Itoa(n), func(b *testing.B) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			f, err := fleet.Start(ctx, fleet.Options{Agent: agent, N: n, Subnet: "10.77.125", Interval: interval, Dir: b.TempDir(), OwnPIDs: true,
				FirstExtra: []string{"--log-level", "debug"}})
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WaitScanned(ctx, 5*time.Minute); err != nil {
				b.Fatal(err)
			}
			if _, err := fleet.Poll(ctx, 5*time.Minute, 250*time.Millisecond, func() error { return fleet.AllKnow(ctx, f.Nodes, nil) }); err != nil {
				b.Fatal(err)
			}
			a := f.Nodes[0]
			skip := a.LogLines()
			b.ResetTimer()
			c0, err1 := a.SchedCPU()
			ans, err2 := a.Cluster(ctx, "/api/v1/cluster/metrics", match)
			c1, err3 := a.SchedCPU()
			b.StopTimer()
			if err := errors.Join(err1, err2, err3); err != nil {
				b.Fatal(err)
			}
			var dial, wait, decode []time.Duration
			deadline := time.Now().Add(5 * time.Second)
			for {
				dial, wait, decode = nil, nil, nil
				for _, l := range strings.Split(fleet.LogSample(a, skip, 1<<20), "\n") {
					m := phase.FindStringSubmatch(l)
					if m == nil {
						continue
					}
					d1, e1 := time.ParseDuration(m[1])
					d2, e2 := time.ParseDuration(m[2])
					d3, e3 := time.ParseDuration(m[3])
					if err := errors.Join(e1, e2, e3); err != nil {
						b.Fatalf("%q: %v", l, err)
					}
					dial, wait, decode = append(dial, d1), append(wait, d2), append(decode, d3)
				}
				if len(dial) >= n-1 || time.Now().After(deadline) {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
			nseries := 0
			for _, na := range ans.Nodes {
				nseries += len(na.Series)
			}
			b.ReportMetric(float64(nseries)/float64(max(len(ans.Nodes), 1)), "series/node")
			b.ReportMetric(ms(ans.Took), "first-metrics-ms")
			b.ReportMetric(ms(c1-c0), "node1-cpu-ms")
			b.ReportMetric(float64(c1-c0)/float64(n-1)/1e3, "node1-cpu-us/peer")
			if len(dial) == 0 && os.Getenv("FLEET_AGENT") != "" {
				b.Logf("N=%d: first metrics %s (%d not ok), node 1 CPU %s; no per-peer phases (a build that does not log them); load %.1f",
					n, ans.Took, len(ans.NotOK(f.Nodes)), c1-c0, fleet.LoadAvg())
				return
			}
			if len(dial) != n-1 {
				b.Fatalf("node 1 logged %d first messages; want one per peer, %d", len(dial), n-1)
			}
			for _, p := range []struct {
				name string
				ds   []time.Duration
			}{{"dial", dial}, {"wait", wait}, {"decode", decode}} {
				b.ReportMetric(ms(fleet.Quantile(p.ds, .5)), p.name+"-p50-ms")
				b.ReportMetric(ms(fleet.Quantile(p.ds, 1)), p.name+"-max-ms")
			}
			b.Logf("N=%d: first metrics %s (%d not ok), node 1 CPU %s; per peer: dial p50 %s p99 %s max %s, wait p50 %s p99 %s max %s, decode p50 %s max %s; load %.1f",
				n, ans.Took, len(ans.NotOK(f.Nodes)), c1-c0,
				fleet.Quantile(dial, .5), fleet.Quantile(dial, .99), fleet.Quantile(dial, 1),
				fleet.Quantile(wait, .5), fleet.Quantile(wait, .99), fleet.Quantile(wait, 1),
				fleet.Quantile(decode, .5), fleet.Quantile(decode, 1), fleet.LoadAvg())
		})
	}
}

// fleetSizes returns FLEET_SIZES (comma-separated), default 10, 50, 150.
func fleetSizes(b *testing.B) []int {
	v := os.Getenv("FLEET_SIZES")
	if v == "" {
		return []int{10, 50, 150}
	}
	var sizes []int
	for _, s := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			b.Fatalf("FLEET_SIZES: %v", err)
		}
		sizes = append(sizes, n)
	}
	return sizes
}

// fleetAgent returns FLEET_AGENT, or cmd/cantal-agent of this tree built into a temporary
// directory.
func fleetAgent(b *testing.B) string {
	if v := os.Getenv("FLEET_AGENT"); v != "" {
		return v
	}
	agent, err := fleet.Build(context.Background(), "..", b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	return agent
}
