package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// beatOpts are the options of `report beat`: issue 22's load, the scan period under heavy
// process churn.
type beatOpts struct {
	Agents      []string // measured side by side on the same churn
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
	StatReused     int64 `json:"stat_reused"`
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
// until it is full, starts the agents (side by side on the same churn, so that builds compare
// under the same load on a shared machine), and measures each over Dur after Warmup: the scan
// period's p50/p99/max (from consecutive scans' timestamps), the scan duration, the agent's CPU
// per scan (user+system of its process tree, which includes serving the report's status polls),
// its RSS, and what its process scan shed (process_scan in /api/v1/status).
func runBeat(ctx context.Context, o beatOpts) (string, error) {
	ch, err := spawnChurn(ctx, o.Dir, o.Churn, o.ChurnLife)
	if err != nil {
		return "", err
	}
	defer ch.Stop(30 * time.Second)
	ch.WaitFull(ctx, 4*time.Minute)
	type result struct {
		r        agentRun
		ps0, ps1 processScan
		err      error
	}
	res := make([]result, len(o.Agents))
	var ags []*agentProc
	for i, bin := range o.Agents {
		dir := filepath.Join(o.Dir, fmt.Sprintf("agent%d", i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", err
		}
		flags := append([]string{"--state-dir", filepath.Join(dir, "state")}, o.Flags...)
		ag, err := startAgent(ctx, bin, dir, o.Port+i, flags...)
		if err != nil {
			return "", err
		}
		defer ag.Stop(30 * time.Second)
		ags = append(ags, ag)
	}
	s0, _ := ch.Counts()
	var wg sync.WaitGroup
	for i, ag := range ags {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rs := &res[i]
			rs.r, rs.err = measureAgent(ctx, ag, o.Agents[i], o.Warmup, o.Dur, func(d time.Duration, _ *sampler) {
				rs.ps0, _ = fetchProcessScan(ctx, ag.url)
				select {
				case <-ctx.Done():
				case <-time.After(d):
				}
			})
			if rs.err == nil {
				rs.ps1, rs.err = fetchProcessScan(ctx, ag.url)
			}
		}()
	}
	wg.Wait()
	s1, alive := ch.Counts()
	var md strings.Builder
	fmt.Fprintf(&md, "Load: %d alive, %.0f started/s (lifetime %s–%s, 1 in 10 with CANTAL_PATH); %d alive at the end.\n\n",
		o.Churn, float64(s1-s0)/res[0].r.Window.Seconds(), o.ChurnLife/2, o.ChurnLife*3/2, alive)
	fmt.Fprintf(&md, "| agent | window | load avg start → end | processes | apps | scans | period ms p50 / p99 / max | scan ms p50 / p99 | CPU ms/scan | CPU %% of a core | RSS start / peak / end MiB | shed scans | details shed | busy skipped | details deferred | stat lines reused per scan |\n")
	fmt.Fprintf(&md, "|---|---:|---|---:|---:|---:|---|---|---:|---:|---|---:|---:|---:|---:|---:|\n")
	for _, rs := range res {
		if rs.err != nil {
			return "", rs.err
		}
		r, ps0, ps1 := rs.r, rs.ps0, rs.ps1
		c := r.Scan.Last.Counts
		fmt.Fprintf(&md, "| %s | %s | %s → %s | %d | %d | %d | %.0f / %.0f / %.0f | %.1f / %.1f | %.1f | %.1f | %.0f / %.0f / %.0f | %d | %d | %d | %d | %.0f |\n",
			r.Label, r.Window.Round(time.Second), r.LoadStart, r.LoadEnd, c.Processes, c.Apps, r.Scan.Scans,
			r.Scan.PeriodP50, r.Scan.PeriodP99, r.Scan.PeriodMax, r.Scan.DurP50, r.Scan.DurP99,
			r.CPU.Seconds()*1000/float64(max(1, r.Scan.Scans)), 100*r.CPU.Seconds()/r.Window.Seconds(), mib(r.RSSStart), mib(r.RSSPeak), mib(r.RSSEnd),
			ps1.ShedScans-ps0.ShedScans, ps1.ShedDetails-ps0.ShedDetails, ps1.SkippedBusy-ps0.SkippedBusy,
			ps1.DeferredDetail-ps0.DeferredDetail, float64(ps1.StatReused-ps0.StatReused)/float64(max(1, ps1.Scans-ps0.Scans)))
	}
	if len(res) > 1 && res[0].r.CPU > 0 {
		for _, rs := range res[1:] {
			fmt.Fprintf(&md, "\nCPU per scan of %s against %s: %.2f×.\n", rs.r.Label, res[0].r.Label,
				(rs.r.CPU.Seconds()/float64(max(1, rs.r.Scan.Scans)))/(res[0].r.CPU.Seconds()/float64(max(1, res[0].r.Scan.Scans))))
		}
	}
	return md.String(), nil
}
