package main

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type resilienceOpts struct {
	Agent, Loadgen string
	Apps, Metrics  int
	Warmup         time.Duration
	Dir            string
	Port           int
	Cluster        string // output of go test -v ./e2e/cluster/, or empty
}

// appPid finds the process that names path as its CANTAL_PATH among the children of parent.
func appPid(parent int, path string) (int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, fmt.Errorf("read /proc: %w", err)
	}
	want := []byte("CANTAL_PATH=" + path + "\x00")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		st, err := parseStat(b)
		if err != nil || st.PPID != parent {
			continue
		}
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err == nil && bytes.Contains(env, want) {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("no child of %d with CANTAL_PATH=%s", parent, path)
}

// historyTS returns the timestamps of the single series steadySel names over the last 20 min.
func historyTS(ctx context.Context, a *agentProc, steadySel string) ([]int64, error) {
	var ans struct {
		Series []struct {
			Points [][2]float64 `json:"points"`
		} `json:"series"`
	}
	u := a.url + "/api/v1/history?window=20m&match=" + url.QueryEscape(steadySel)
	if err := getJSON(ctx, u, &ans); err != nil {
		return nil, err
	}
	if len(ans.Series) != 1 {
		return nil, fmt.Errorf("history of %s: %d series, want 1", steadySel, len(ans.Series))
	}
	ts := make([]int64, len(ans.Series[0].Points))
	for i, p := range ans.Series[0].Points {
		ts[i] = int64(p[0])
	}
	return ts, nil
}

// waitNextScan returns once the agent has done a scan after the call.
func waitNextScan(ctx context.Context, a *agentProc) error {
	s0, err := a.Status(ctx)
	if err != nil {
		return err
	}
	return waitFor(ctx, 30*time.Second, "next scan", func() error {
		s, err := a.Status(ctx)
		if err != nil {
			return err
		}
		if s.LastScan.Scans <= s0.LastScan.Scans {
			return errNotYet
		}
		return nil
	})
}

type restartResult struct {
	Signal        string
	Before, Lost  int
	Gap           time.Duration
	Downtime      time.Duration
	SinceSnapshot string
}

func runResilience(ctx context.Context, o resilienceOpts) (string, error) {
	shm := fmt.Sprintf("/dev/shm/cantal-report-res-%d", os.Getpid())
	lg, err := spawn("loadgen", filepath.Join(o.Dir, "res-loadgen.out"), nil, -1, -1,
		o.Loadgen, "-apps", fmt.Sprint(o.Apps), "-metrics", fmt.Sprint(o.Metrics), "-dir", shm)
	if err != nil {
		return "", err
	}
	defer func() { lg.Stop(30 * time.Second); os.RemoveAll(shm) }()
	if err := waitFor(ctx, 5*time.Minute, "loadgen", func() error {
		b, _ := os.ReadFile(filepath.Join(o.Dir, "res-loadgen.out"))
		if !strings.Contains(string(b), "loadgen:") {
			return errNotYet
		}
		return nil
	}); err != nil {
		return "", err
	}
	pid, err := appPid(lg.Pid(), filepath.Join(shm, "app0"))
	if err != nil {
		return "", err
	}
	// load.counter.1 of the first app grows by one every second (bench/loadgen).
	steadySel := fmt.Sprintf(`{metric="load.counter.1",pid="%d"}`, pid)
	state := filepath.Join(o.Dir, "res-state")
	flags := []string{"--state-dir", state, "--snapshot-interval", "10s", "--interval", "2s"}
	ag, err := startAgent(ctx, o.Agent, o.Dir, o.Port, flags...)
	if err != nil {
		return "", err
	}
	defer func() { ag.Stop(30 * time.Second) }()
	loadStart := loadavg()
	var res []restartResult
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(o.Warmup):
		}
		if err := waitNextScan(ctx, ag); err != nil {
			return "", err
		}
		before, err := historyTS(ctx, ag, steadySel)
		if err != nil {
			return "", err
		}
		t0 := time.Now()
		ag.Signal(sig)
		if !ag.Wait(60 * time.Second) {
			return "", fmt.Errorf("agent did not exit in 60 s after %v", sig)
		}
		ag, err = startAgent(ctx, o.Agent, o.Dir, o.Port, flags...)
		if err != nil {
			return "", fmt.Errorf("restart after %v: %w", sig, err)
		}
		down := time.Since(t0)
		if err := waitNextScan(ctx, ag); err != nil {
			return "", err
		}
		after, err := historyTS(ctx, ag, steadySel)
		if err != nil {
			return "", err
		}
		have := map[int64]bool{}
		for _, t := range after {
			have[t] = true
		}
		r := restartResult{Signal: sig.String(), Before: len(before), Downtime: down}
		for _, t := range before {
			if !have[t] {
				r.Lost++
			}
		}
		if len(before) > 0 {
			last := before[len(before)-1]
			for _, t := range after {
				if t > last {
					r.Gap = time.Duration(t-last) * time.Millisecond
					break
				}
			}
		}
		res = append(res, r)
	}
	var md strings.Builder
	md.WriteString("## 4. Resilience\n\n")
	fmt.Fprintf(&md, "Restart under load: %d loadgen processes × %d metrics, `--interval 2s --snapshot-interval 10s`, the same `--state-dir`. "+
		"Before the signal the report waits for a fresh scan and reads the hour of a steady counter (`%s`); after the restart and one scan it reads "+
		"it again. *Lost* = points of the first read missing from the second. *Gap* = time from the last point before the stop to the first point after the restart "+
		"(no scan can happen while no agent runs). Load average %s → %s.\n\n", o.Apps, o.Metrics, steadySel, loadStart, loadavg())
	md.WriteString("| signal | points before | points lost | gap s | stop → restarted s | bound |\n|---|---:|---:|---:|---:|---|\n")
	for _, r := range res {
		bound := "0 (final snapshot on SIGTERM)"
		ok := r.Lost == 0
		if r.Signal == syscall.SIGKILL.String() {
			bound = "≤ 10 s / 2 s = 5 (+1 for the scan in flight)"
			ok = r.Lost <= 6
		}
		fmt.Fprintf(&md, "| %s | %d | %d | %.1f | %.1f | %s: %s |\n", r.Signal, r.Before, r.Lost, r.Gap.Seconds(), r.Downtime.Seconds(), bound, verdict(ok))
	}
	md.WriteString("\n### Partition and heal (e2e/cluster)\n\n")
	if o.Cluster == "" {
		md.WriteString("Pending: the cluster end-to-end tests' output was not available in this run.\n\n")
	} else {
		var lines []string
		for _, l := range strings.Split(o.Cluster, "\n") {
			if i := strings.Index(l, "MEASURE "); i >= 0 {
				lines = append(lines, "- "+strings.TrimSpace(l[i+len("MEASURE "):]))
			}
		}
		verdictLine := "unknown"
		for _, l := range strings.Split(o.Cluster, "\n") {
			if strings.HasPrefix(l, "ok ") || strings.HasPrefix(l, "FAIL") || strings.HasPrefix(l, "--- FAIL") {
				verdictLine = strings.TrimSpace(l)
			}
		}
		if len(lines) == 0 {
			fmt.Fprintf(&md, "Pending: `go test -v ./e2e/cluster/` reported no MEASURE line (last result line: `%s`).\n\n", verdictLine)
		} else {
			fmt.Fprintf(&md, "From `go test -v -count 1 ./e2e/cluster/` in this run (result: `%s`), its MEASURE lines:\n\n%s\n\n", verdictLine, strings.Join(lines, "\n"))
		}
	}
	return md.String(), nil
}
