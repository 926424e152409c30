package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"time"
)

// beatOpts are the options of `report beat`: issue 22's load, the scan period under heavy
// process churn.
type beatOpts struct {
	Agent       string
	Churn       int
	ChurnLife   time.Duration
	Dur, Warmup time.Duration
	Dir         string
	Port        int
	Flags       []string // extra agent flags
}

// processScan is the agent's "process_scan" object of /api/v1/status (absent from builds
// before issue 22, which then read as zeros). It is decoded here on its own so that the report
// can measure those builds too.
type processScan struct {
	Scans          int64 `json:"scans"`
	ShedScans      int64 `json:"shed_scans"`
	ShedDetails    int64 `json:"shed_details"`
	SkippedBusy    int64 `json:"skipped_busy"`
	DeferredDetail int64 `json:"deferred_details"`
}

func fetchProcessScan(ctx context.Context, url string) (processScan, error) {
	var raw struct {
		ProcessScan processScan `json:"process_scan"`
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/api/v1/status", nil)
	if err != nil {
		return processScan{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return processScan{}, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil {
		return processScan{}, fmt.Errorf("status: %w", err)
	}
	return raw.ProcessScan, nil
}

// runBeat starts the churn generator (Churn processes alive, each living ChurnLife/2 to
// 3·ChurnLife/2, so Churn/ChurnLife started per second; 1 in 10 names a CANTAL_PATH), waits
// until it is full, starts one agent, and measures over Dur after Warmup: the scan period's
// p50/p99/max (from consecutive scans' timestamps), the scan duration, the agent's CPU per
// scan (user+system of its process tree, which includes serving the report's status polls),
// its RSS, and what the process scan shed (process_scan in /api/v1/status).
func runBeat(ctx context.Context, o beatOpts) (string, error) {
	ch, err := spawnChurn(ctx, o.Dir, o.Churn, o.ChurnLife)
	if err != nil {
		return "", err
	}
	defer ch.Stop(30 * time.Second)
	ch.WaitFull(ctx, 4*time.Minute)
	flags := append([]string{"--state-dir", filepath.Join(o.Dir, "beat-state")}, o.Flags...)
	ag, err := startAgent(ctx, o.Agent, o.Dir, o.Port, flags...)
	if err != nil {
		return "", err
	}
	defer ag.Stop(30 * time.Second)
	var ps0 processScan
	s0, _ := ch.Counts()
	r, err := measureAgent(ctx, ag, "beat", o.Warmup, o.Dur, func(d time.Duration, _ *sampler) {
		ps0, _ = fetchProcessScan(ctx, ag.url)
		select {
		case <-ctx.Done():
		case <-time.After(d):
		}
	})
	if err != nil {
		return "", err
	}
	s1, alive := ch.Counts()
	ps1, err := fetchProcessScan(ctx, ag.url)
	if err != nil {
		return "", err
	}
	scans := max(1, r.Scan.Scans)
	var md strings.Builder
	fmt.Fprintf(&md, "| load | window | load avg start → end | processes | apps | scans | period ms p50 / p99 / max | scan ms p50 / p99 | CPU ms/scan | RSS start / peak / end MiB | shed scans | details shed | busy skipped | details deferred |\n")
	fmt.Fprintf(&md, "|---|---:|---|---:|---:|---:|---|---|---:|---|---:|---:|---:|---:|\n")
	c := r.Scan.Last.Counts
	fmt.Fprintf(&md, "| %d alive, %.0f started/s (lifetime %s–%s, 1 in 10 with CANTAL_PATH); %d alive at the end | %s | %s → %s | %d | %d | %d | %.0f / %.0f / %.0f | %.1f / %.1f | %.1f | %.0f / %.0f / %.0f | %d | %d | %d | %d |\n",
		o.Churn, float64(s1-s0)/r.Window.Seconds(), o.ChurnLife/2, o.ChurnLife*3/2, alive,
		r.Window.Round(time.Second), r.LoadStart, r.LoadEnd, c.Processes, c.Apps, r.Scan.Scans,
		r.Scan.PeriodP50, r.Scan.PeriodP99, r.Scan.PeriodMax, r.Scan.DurP50, r.Scan.DurP99,
		r.CPU.Seconds()*1000/float64(scans), mib(r.RSSStart), mib(r.RSSPeak), mib(r.RSSEnd),
		ps1.ShedScans-ps0.ShedScans, ps1.ShedDetails-ps0.ShedDetails, ps1.SkippedBusy-ps0.SkippedBusy,
		ps1.DeferredDetail-ps0.DeferredDetail)
	return md.String(), nil
}
