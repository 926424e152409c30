package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// agentRun is the agent's figures over one measured window.
type agentRun struct {
	Label           string
	Window          time.Duration
	CPU             time.Duration
	RSSStart        uint64
	RSSPeak, RSSEnd uint64
	FDStart, FDEnd  int
	Scan            scanStats
	LoadStart       string
	LoadEnd         string
	Extra           string
	StatusStart     status
}

func (r agentRun) bytesPerPoint() float64 {
	c := r.Scan.Last.Counts
	if c.HistoryPoints == 0 {
		return 0
	}
	return float64(c.HistoryBytes) / float64(c.HistoryPoints)
}

// measureAgent waits warmup, then watches the agent for d. during, if not nil, runs the
// window's load instead of a plain wait; it gets the window's sampler of the agent's process
// tree (its peak counts from the window's start).
func measureAgent(ctx context.Context, ag *agentProc, label string, warmup, d time.Duration, during func(time.Duration, *sampler)) (agentRun, error) {
	r := agentRun{Label: label}
	select {
	case <-ctx.Done():
		return r, ctx.Err()
	case <-time.After(warmup):
	}
	r.LoadStart = loadavg()
	sm := newSampler(ag.Pid(), time.Second)
	defer sm.Stop()
	u0 := sm.Now()
	r.RSSStart = u0.RSS
	r.FDStart, _ = fdCount(ag.Pid())
	r.StatusStart, _ = ag.Status(ctx)
	sw := watchScans(ctx, ag)
	t0 := time.Now()
	if during != nil {
		during(d, sm)
	} else {
		select {
		case <-ctx.Done():
		case <-time.After(d):
		}
	}
	if err := ctx.Err(); err != nil {
		sw.Stop()
		return r, err
	}
	r.Window = time.Since(t0)
	u1 := sm.Now()
	r.FDEnd, _ = fdCount(ag.Pid())
	sw.Stop()
	r.Scan = sw.Stats()
	r.CPU = u1.CPU - u0.CPU
	r.RSSPeak, r.RSSEnd = sm.Peak(), u1.RSS
	r.LoadEnd = loadavg()
	select {
	case <-ag.done:
		return r, fmt.Errorf("%s: the agent exited during the run: %v", label, ag.err)
	default:
	}
	return r, nil
}

type scaleOpts struct {
	Agent, Loadgen string
	Apps, Metrics  int
	Churn          int
	ChurnLife      time.Duration
	Dur, Warmup    time.Duration
	Dir            string
	Port           int
}

func runScale(ctx context.Context, o scaleOpts) (string, error) {
	var rows []agentRun
	// A: APPS × METRICS shm metrics.
	r, err := func() (agentRun, error) {
		shm := fmt.Sprintf("/dev/shm/cantal-report-load-%d", os.Getpid())
		lg, err := spawn("loadgen", filepath.Join(o.Dir, "loadgen.out"), nil, -1, -1,
			o.Loadgen, "-apps", fmt.Sprint(o.Apps), "-metrics", fmt.Sprint(o.Metrics), "-dir", shm)
		if err != nil {
			return agentRun{}, err
		}
		defer func() { lg.Stop(30 * time.Second); os.RemoveAll(shm) }()
		if err := waitFor(ctx, 5*time.Minute, "loadgen's processes", func() error {
			b, _ := os.ReadFile(filepath.Join(o.Dir, "loadgen.out"))
			if !strings.Contains(string(b), "loadgen:") {
				return errNotYet
			}
			return nil
		}); err != nil {
			return agentRun{}, err
		}
		ag, err := startAgent(ctx, o.Agent, o.Dir, o.Port, "--state-dir", filepath.Join(o.Dir, "scale-state"))
		if err != nil {
			return agentRun{}, err
		}
		defer ag.Stop(30 * time.Second)
		return measureAgent(ctx, ag, fmt.Sprintf("%d processes × %d shm metrics", o.Apps, o.Metrics), o.Warmup, o.Dur, nil)
	}()
	if err != nil {
		return "", fmt.Errorf("scale, shm load: %w", err)
	}
	rows = append(rows, r)
	// B: churn.
	r, err = func() (agentRun, error) {
		ch, err := spawnChurn(ctx, o.Dir, o.Churn, o.ChurnLife)
		if err != nil {
			return agentRun{}, err
		}
		defer ch.Stop(30 * time.Second)
		ch.WaitFull(ctx, 4*time.Minute)
		ag, err := startAgent(ctx, o.Agent, o.Dir, o.Port, "--state-dir", filepath.Join(o.Dir, "churn-state"))
		if err != nil {
			return agentRun{}, err
		}
		defer ag.Stop(30 * time.Second)
		s0, _ := ch.Counts()
		r, err := measureAgent(ctx, ag, fmt.Sprintf("%d processes churning (lifetime %s–%s, 1 in 10 with CANTAL_PATH)", o.Churn, o.ChurnLife/2, o.ChurnLife*3/2), o.Warmup, o.Dur, nil)
		s1, alive := ch.Counts()
		r.Extra = fmt.Sprintf("%.0f processes started/s during the window, %d alive at the end", float64(s1-s0)/r.Window.Seconds(), alive)
		return r, err
	}()
	if err != nil {
		return "", fmt.Errorf("scale, churn: %w", err)
	}
	rows = append(rows, r)

	var md strings.Builder
	md.WriteString("## 2. Scale\n\n")
	md.WriteString("One fresh agent per load, `--interval 2s`, measured for the window after the warm-up. Scan duration is the agent's own " +
		"`last_scan.duration_ms`, read after every scan (the report polls /api/v1/status 5 times a second, and the agent's CPU figures include serving those polls); " +
		"the period is the difference of consecutive scans' timestamps.\n\n")
	md.WriteString("| load | window | load avg start → end | series (live) | processes | apps | scans | scan ms p50 | p99 | max | period ms p50 / p99 | CPU % of a core | CPU ms/scan | RSS start / peak / end MiB | history B/point | notes |\n")
	md.WriteString("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---|---:|---|\n")
	for _, r := range rows {
		c := r.Scan.Last.Counts
		fmt.Fprintf(&md, "| %s | %s | %s → %s | %d (%d) | %d | %d | %d | %.1f | %.1f | %.1f | %.0f / %.0f | %.1f | %.1f | %.0f / %.0f / %.0f | %.2f | %s |\n",
			r.Label, r.Window.Round(time.Second), r.LoadStart, r.LoadEnd, c.Series, c.LiveSeries, c.Processes, c.Apps, r.Scan.Scans,
			r.Scan.DurP50, r.Scan.DurP99, r.Scan.DurMax, r.Scan.PeriodP50, r.Scan.PeriodP99,
			100*r.CPU.Seconds()/r.Window.Seconds(), r.CPU.Seconds()*1000/max(1, float64(r.Scan.Scans)),
			mib(r.RSSStart), mib(r.RSSPeak), mib(r.RSSEnd), r.bytesPerPoint(), r.Extra)
	}
	md.WriteString("\nHistory bytes per point is `counts.history_bytes / counts.history_points` from /api/v1/status: compressed " +
		"closed segments plus the open (uncompressed, 64-scan) segment, so short runs overstate it; internal/history/README.md has the steady-state figures.\n\n")
	return md.String(), nil
}
