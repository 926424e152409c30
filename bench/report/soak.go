package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

type soakOpts struct {
	Agent, Loadgen string
	Dur, Warmup    time.Duration
	History        time.Duration // the agent's --history; the second half of Dur must come after it filled
	Churn          int
	ChurnLife      time.Duration
	WrkConns, WS   int
	Dir            string
	Port           int
}

func runSoak(ctx context.Context, o soakOpts) (string, error) {
	if o.History <= 0 {
		return "", fmt.Errorf("soak: -history must be positive")
	}
	shm := fmt.Sprintf("/dev/shm/cantal-report-soak-%d", os.Getpid())
	lg, err := spawn("loadgen", filepath.Join(o.Dir, "soak-loadgen.out"), nil, -1, -1, o.Loadgen, "-apps", "50", "-metrics", "20", "-dir", shm)
	if err != nil {
		return "", err
	}
	defer func() { lg.Stop(30 * time.Second); os.RemoveAll(shm) }()
	ch, err := spawnChurn(ctx, o.Dir, o.Churn, o.ChurnLife)
	if err != nil {
		return "", err
	}
	defer ch.Stop(30 * time.Second)
	ho, err := startHostile(ctx, fmt.Sprintf("/dev/shm/cantal-report-hostile-%d", os.Getpid()))
	if err != nil {
		return "", err
	}
	defer ho.Stop()
	ag, err := startAgent(ctx, o.Agent, o.Dir, o.Port, "--state-dir", filepath.Join(o.Dir, "soak-state"), "--interval", "2s",
		"--history", o.History.String())
	if err != nil {
		return "", err
	}
	defer ag.Stop(30 * time.Second)
	ws := startWS(ctx, strings.Replace(ag.url, "http", "ws", 1)+"/api/v1/ws", o.WS,
		[]string{`{metric=~"cpu.*"}`, `{appname=~"load1.*"}`, `{metric=~"hostile.*"}`, `{metric="churn.counter.1"}`})
	defer ws.Stop()
	var wr wrkResult
	var wrErr error
	// The plateau: once the history retention has filled, memory and fds must stop growing.
	// RSS and fds at the end are compared with their peaks over the window's first half.
	var half struct {
		rssPeak uint64
		fdPeak  int
	}
	r, err := measureAgent(ctx, ag, "soak", o.Warmup, o.Dur, func(d time.Duration, sm *sampler) {
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			wr, wrErr = runWrk(ctx, ag.url+"/api/v1/metrics", d, o.WrkConns)
		}()
		go func() {
			defer wg.Done()
			end := time.Now().Add(d / 2)
			for time.Now().Before(end) && ctx.Err() == nil {
				if n, err := fdCount(ag.Pid()); err == nil {
					half.fdPeak = max(half.fdPeak, n)
				}
				time.Sleep(time.Second)
			}
			half.rssPeak = sm.Peak()
		}()
		wg.Wait()
	})
	if err != nil {
		return "", fmt.Errorf("soak: %w", err)
	}
	if wrErr != nil {
		return "", fmt.Errorf("soak: %w", wrErr)
	}
	st := r.Scan.Last
	interval := float64(st.IntervalMs)
	rssGrowth := float64(r.RSSEnd) - float64(r.RSSStart)
	histGrowth := float64(st.Counts.HistoryBytes - r.StatusStart.Counts.HistoryBytes)
	var md strings.Builder
	md.WriteString("## 3. Soak\n\n")
	fmt.Fprintf(&md, "%s with, all at once: %d processes churning (lifetime %s–%s, 1 in 10 with CANTAL_PATH; %s), 50 loadgen apps × 20 metrics, "+
		"hostile CANTAL_PATH files named by processes running as `nobody` (a FIFO, a 1 GiB sparse values file, root-owned 0600 files, a meta "+
		"rewritten in place every ms: %d rewrites), `wrk -t1 -c%d` against /api/v1/metrics for the whole window, and %d WebSocket clients "+
		"subscribed (history 5m, then an update per scan). Load average %s → %s.\n\n",
		r.Window.Round(time.Second), o.Churn, o.ChurnLife/2, o.ChurnLife*3/2, func() string { s, _ := ch.Counts(); return fmt.Sprintf("%d started", s) }(), ho.rewrites, o.WrkConns, o.WS, r.LoadStart, r.LoadEnd)
	md.WriteString("| check | start | end | result |\n|---|---:|---:|---|\n")
	fmt.Fprintf(&md, "| open fds (/proc/PID/fd) | %d | %d | peak over the first half %d: %s |\n", r.FDStart, r.FDEnd, half.fdPeak, verdict(r.FDEnd <= half.fdPeak+8))
	fmt.Fprintf(&md, "| apps (CANTAL_PATH processes read), processes | %d, %d | %d, %d | the fd count follows the apps on the machine |\n",
		r.StatusStart.Counts.Apps, r.StatusStart.Counts.Processes, st.Counts.Apps, st.Counts.Processes)
	fmt.Fprintf(&md, "| RSS MiB (peak %.1f) | %.1f | %.1f | peak over the first half %.1f, end %.1f: %s (growth over the whole window %.1f MiB, history growth %.1f MiB) |\n",
		mib(r.RSSPeak), mib(r.RSSStart), mib(r.RSSEnd), mib(half.rssPeak), mib(r.RSSEnd),
		verdict(r.RSSEnd <= half.rssPeak+32<<20), rssGrowth/(1<<20), histGrowth/(1<<20))
	fmt.Fprintf(&md, "| history bytes / points | %d / %d | %d / %d | retention %s |\n",
		r.StatusStart.Counts.HistoryBytes, r.StatusStart.Counts.HistoryPoints, st.Counts.HistoryBytes, st.Counts.HistoryPoints, o.History)
	fmt.Fprintf(&md, "| series, evicted by --max-series | %d, %d | %d, %d | |\n",
		r.StatusStart.Counts.Series, r.StatusStart.Counts.Evicted, st.Counts.Series, st.Counts.Evicted)
	fmt.Fprintf(&md, "| scan period ms p50 / p99 / min / max (%d periods) | | | %.0f / %.0f / %.0f / %.0f: p99 within 10%% of %.0f ms %s |\n",
		r.Scan.Periods, r.Scan.PeriodP50, r.Scan.PeriodP99, r.Scan.PeriodMin, r.Scan.PeriodMax, interval,
		verdict(r.Scan.PeriodP99 <= 1.1*interval && r.Scan.PeriodP99 >= 0.9*interval))
	fmt.Fprintf(&md, "| scan duration ms p50 / p99 / max | | | %.1f / %.1f / %.1f |\n", r.Scan.DurP50, r.Scan.DurP99, r.Scan.DurMax)
	fmt.Fprintf(&md, "| wrk requests (rps, latency p50 / p99) | | %d | %.0f req/s, %s / %s |\n", wr.Requests, wr.RPS, wr.P50, wr.P99)
	fmt.Fprintf(&md, "| wrk non-2xx responses | | %d | %s (socket errors: %s) |\n", wr.Non2xx, verdict(wr.Non2xx == 0), wr.SocketErrors)
	fmt.Fprintf(&md, "| WebSocket messages (history / update), errors+reconnects | | %d / %d | %d errors, %d reconnects (%d scans × %d clients = %d updates expected) |\n",
		ws.history.Load(), ws.updates.Load(), ws.errors.Load(), ws.reconnects.Load(), r.Scan.Scans, o.WS, r.Scan.Scans*int64(o.WS))
	fmt.Fprintf(&md, "| agent CPU %% of a core, series (live), processes | | | %.1f%%, %d (%d), %d |\n",
		100*r.CPU.Seconds()/r.Window.Seconds(), st.Counts.Series, st.Counts.LiveSeries, st.Counts.Processes)
	fmt.Fprintf(&md, "| problems listed in /api/v1/status (refused files) | %d | %d | |\n", r.StatusStart.Counts.Problems, st.Counts.Problems)
	fmt.Fprintf(&md, "| status polls that failed | | %d | |\n", r.Scan.StatusErrors)
	fmt.Fprintf(&md, "\nThe agent ran with `--history %s` so that its history fills within the window's first half: from then on it holds a "+
		"steady amount (points expire as fast as they come), and a leak shows as growth. RSS at the end may exceed the first half's peak by "+
		"a margin of 32 MiB for the Go heap's own variation; an fd count may move by a few (HTTP keep-alive connections of the clients).\n\n", o.History)
	return md.String(), nil
}
