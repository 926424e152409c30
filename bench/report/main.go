// Command report drives the side-by-side performance and resilience report that
// scripts/bench-report.sh assembles into BENCHMARKS.md. Each subcommand runs one phase, starts
// and owns every process and file it needs, removes them on exit (also on SIGINT/SIGTERM), and
// writes its markdown section to -out:
//
//	report compare    -agent BIN -dur 10m              agent vs Netdata 1 s / 2 s vs node_exporter
//	report scale      -agent BIN -loadgen BIN -dur 2m  1000 × 100 shm metrics; 10k processes churning
//	report soak       -agent BIN -loadgen BIN -dur 30m -history 10m  churn, hostile files, wrk, WebSocket clients
//	report resilience -agent BIN -loadgen BIN          SIGTERM / kill -9 restart, points lost
//	report gobench    < go-test-bench-output           the micro-benchmarks as tables
//	report beat       -agent BIN[,BIN] -churn 10000 -churn-life 50s  the scan period under heavy churn (issue 22), builds side by side
//	report churn      -churn N -churn-life D -dir SHM  the churn generator alone (used by scale and soak)
//
// It must run as root (the agent reads other processes' files; Netdata and node_exporter are run
// as their unprivileged users).
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: report compare|scale|soak|resilience|gobench [flags]")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1], os.Args[2:]); err != nil {
		slog.Error("report", "phase", os.Args[1], "err", err)
		stop()
		os.Exit(1)
	}
}

func run(ctx context.Context, phase string, args []string) error {
	fs := flag.NewFlagSet(phase, flag.ContinueOnError)
	out := fs.String("out", "", "markdown output (default stdout)")
	agent := fs.String("agent", "cantal-agent", "agent binary")
	loadgen := fs.String("loadgen", "loadgen", "bench/loadgen binary")
	netdata := fs.String("netdata", "/usr/sbin/netdata", "netdata binary")
	nodeExporter := fs.String("node-exporter", "/usr/bin/prometheus-node-exporter", "node_exporter binary")
	dur := fs.Duration("dur", 2*time.Minute, "measured window")
	warmup := fs.Duration("warmup", 30*time.Second, "warm-up before measuring")
	dir := fs.String("dir", "", "work directory (logs, state); default a temporary one, removed at the end")
	port := fs.Int("port", 22750, "first TCP port to use (up to port+3)")
	apps := fs.Int("apps", 1000, "loadgen processes")
	metrics := fs.Int("metrics", 100, "loadgen metrics per process")
	churnN := fs.Int("churn", 10000, "churning processes alive at once")
	churnLife := fs.Duration("churn-life", 20*time.Second, "mean lifetime of a churning process")
	wrkConns := fs.Int("wrk-conns", 2, "wrk connections")
	history := fs.Duration("history", 10*time.Minute, "soak: the agent's --history (the window's second half should come after it filled)")
	wsN := fs.Int("ws", 8, "WebSocket clients")
	cluster := fs.String("cluster-log", "", "file with the output of go test -v ./e2e/cluster/")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" && phase != "churn" {
		d, err := os.MkdirTemp("", "cantal-report-")
		if err != nil {
			return err
		}
		os.Chmod(d, 0o755)
		defer os.RemoveAll(d)
		*dir = d
	}
	var md string
	var err error
	switch phase {
	case "compare":
		md, err = runCompare(ctx, compareOpts{Agent: *agent, Netdata: *netdata, NodeExporter: *nodeExporter, Dur: *dur, Warmup: *warmup, Dir: *dir, Port: *port})
	case "scale":
		md, err = runScale(ctx, scaleOpts{Agent: *agent, Loadgen: *loadgen, Apps: *apps, Metrics: *metrics, Churn: *churnN, ChurnLife: *churnLife,
			Dur: *dur, Warmup: *warmup, Dir: *dir, Port: *port})
	case "soak":
		md, err = runSoak(ctx, soakOpts{Agent: *agent, Loadgen: *loadgen, Dur: *dur, Warmup: *warmup, Churn: *churnN, ChurnLife: *churnLife,
			History: *history, WrkConns: *wrkConns, WS: *wsN, Dir: *dir, Port: *port})
	case "resilience":
		var cl []byte
		if *cluster != "" {
			cl, _ = os.ReadFile(*cluster)
		}
		md, err = runResilience(ctx, resilienceOpts{Agent: *agent, Loadgen: *loadgen, Apps: *apps, Metrics: *metrics, Warmup: *warmup,
			Dir: *dir, Port: *port, Cluster: string(cl)})
	case "beat":
		md, err = runBeat(ctx, beatOpts{Agents: strings.Split(*agent, ","), Churn: *churnN, ChurnLife: *churnLife, Dur: *dur, Warmup: *warmup, Dir: *dir, Port: *port})
	case "churn":
		if *dir == "" {
			return fmt.Errorf("churn: -dir is required")
		}
		return runChurnCmd(ctx, *churnN, *churnLife, *dir)
	case "gobench":
		var lines []benchLine
		lines, err = parseBench(os.Stdin)
		md = benchMarkdown(lines)
	default:
		return fmt.Errorf("unknown phase %q", phase)
	}
	if err != nil {
		return err
	}
	if *out == "" {
		_, err = os.Stdout.WriteString(md)
		return err
	}
	return os.WriteFile(*out, []byte(md), 0o644)
}
