// Command cantal-agent is the per-node agent: it scans the machine and every instrumented
// application every interval, keeps an hour of history, and serves the API and the web UI.
// Flags are documented in README.md and by -help; everything is built in package agent.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/cantal-go/cantal/internal/agent"
	"github.com/cantal-go/cantal/internal/buildinfo"
	"github.com/cantal-go/cantal/internal/gcpace"
)

func main() {
	cfg, mode, err := agent.Load(os.Args[0], os.Args[1:], os.Getenv)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return
	case mode == agent.ModeVersion:
		fmt.Println("cantal-agent", buildinfo.Get())
		return
	case mode == agent.ModeCheckConfig && err != nil:
		fmt.Fprintln(os.Stderr, "cantal-agent: configuration refused:", err)
		os.Exit(1)
	case mode == agent.ModeCheckConfig:
		fmt.Println("cantal-agent: configuration OK")
		return
	case err != nil:
		fmt.Fprintln(os.Stderr, "cantal-agent:", err)
		os.Exit(2)
	}
	log, err := agent.NewLogger(os.Stderr, cfg.LogLevel, cfg.LogFormat)
	if err != nil {
		fmt.Fprintln(os.Stderr, "cantal-agent:", err)
		os.Exit(2)
	}
	// The heap is mostly long-lived (series table, history) and a scan makes little garbage:
	// collect when the heap has grown by 15 % of the live heap, without the runtime's forced
	// collection every two minutes; under heavy process churn, which makes much garbage, the
	// growth adapts up to half the live heap (see package gcpace). GOGC or GOMEMLIMIT in the
	// environment leave the runtime's own pacing in place.
	if os.Getenv("GOGC") == "" && os.Getenv("GOMEMLIMIT") == "" {
		defer gcpace.Start(0.15).Stop()
	}
	a, err := agent.New(cfg, log)
	if err != nil {
		log.Error("cannot start", "err", err)
		os.Exit(1)
	}
	if err := a.Run(context.Background()); err != nil {
		log.Error("stopped", "err", err)
		os.Exit(1)
	}
}
