package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestProcessChurn: two thousand short-lived processes, each naming a CANTAL_PATH that exists
// for a moment or not at all, neither stall the scans nor leave applications or processes behind
// in the agent's tables once they are gone.
func TestProcessChurn(t *testing.T) {
	quiet(t)
	a := startAgent(t)
	scans := func() int64 {
		var st struct {
			LastScan struct{ Scans int64 } `json:"last_scan"`
		}
		if err := a.get("/api/v1/status", &st); err != nil {
			t.Fatal(err)
		}
		return st.LastScan.Scans
	}
	scans0 := scans()
	dir := t.TempDir()
	// The churn's processes run sleep under a name of their own (a process's name is the name
	// it was executed by), so what is left of them is told apart from the processes and
	// applications of the tests other packages run beside this one.
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	const name = "cchurnsleep"
	churner := filepath.Join(dir, name)
	if err := os.Symlink(sleep, churner); err != nil {
		t.Fatal(err)
	}
	// 20 waves of 100 processes (2000 in all), each living 0-300 ms; half name files.
	script := fmt.Sprintf(`for w in $(seq 20); do
  for i in $(seq 100); do
    if [ $((i %% 2)) = 0 ]; then CANTAL_PATH=%s/p$w.$i %s 0.$((i %% 3)) & else %s 0.$((i %% 4)) & fi
  done
  wait
done`, dir, churner, churner)
	start := time.Now()
	if out, err := exec.Command("sh", "-c", script).CombinedOutput(); err != nil {
		t.Fatalf("churn: %v %s", err, out)
	}
	t.Logf("2000 processes started and ended in %s", time.Since(start).Round(time.Millisecond))
	if scans1 := scans(); scans1 <= scans0 {
		t.Errorf("no scan during the churn (%d then %d)", scans0, scans1)
	}
	// Once they are gone, nothing of them stays in the live tables: no process of the churn,
	// none of them counted as an application.
	waitFor(t, 10*time.Second, func() error {
		var ans struct {
			Processes []struct {
				Name    string `json:"name"`
				Metrics bool   `json:"metrics"`
			} `json:"processes"`
		}
		if err := a.get("/api/v1/processes?fields=name,metrics", &ans); err != nil {
			return err
		}
		procs, apps := 0, 0
		for _, p := range ans.Processes {
			if p.Name == name {
				procs++
				if p.Metrics {
					apps++
				}
			}
		}
		if procs > 0 || apps > 0 {
			return fmt.Errorf("after the churn the agent still lists %d of its processes, %d as applications", procs, apps)
		}
		return nil
	})
}

// TestAppAmidChurn (issue 22): an application started amid heavy process churn (about 200
// processes started a second, 1500 alive, 1 in 10 naming a CANTAL_PATH that does not exist) is
// read in every scan from the first that began after its files were ready: its series has a
// point at the time of each scan the agent's own series has one. It asserts on the points in the
// history, never on how long anything took.
func TestAppAmidChurn(t *testing.T) {
	quiet(t)
	a := startAgent(t)
	dir := t.TempDir()
	// 20 processes every 100 ms, each sleeping 5–10 s, for at most 60 s.
	script := fmt.Sprintf(`end=$(($(date +%%s) + 60)); n=0
while [ $(date +%%s) -lt $end ]; do
  for i in 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19; do
    n=$((n + 1))
    if [ $((n %% 10)) = 0 ]; then CANTAL_PATH=%s/none$n sleep $((5 + n %% 6)) & else sleep $((5 + n %% 6)) & fi
  done
  sleep 0.1
done
wait`, dir)
	churn := exec.Command("sh", "-c", script)
	churn.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := churn.Start(); err != nil {
		t.Fatal(err)
	}
	stopChurn := func() {
		syscall.Kill(-churn.Process.Pid, syscall.SIGKILL)
		churn.Wait()
	}
	t.Cleanup(stopChurn)
	type scanStatus struct {
		LastScan struct {
			TS    int64
			Scans int64
		} `json:"last_scan"`
		Counts      struct{ Processes int }
		ProcessScan struct {
			Deferred int64 `json:"deferred_details"`
		} `json:"process_scan"`
	}
	status := func() scanStatus {
		var st scanStatus
		if err := a.get("/api/v1/status", &st); err != nil {
			t.Fatal(err)
		}
		return st
	}
	base := status().ProcessScan.Deferred
	waitFor(t, 30*time.Second, func() error {
		if st := status(); st.ProcessScan.Deferred < base+300 {
			return fmt.Errorf("%d new processes seen since the churn began; want 300", st.ProcessScan.Deferred-base)
		}
		return nil
	})
	app := startProc(t, []string{"CANTAL_PATH=" + filepath.Join(dir, "app"), "CANTAL_APPNAME=amid"}, nil, filepath.Join(bin, "testapp"))
	waitFor(t, 10*time.Second, func() error {
		if !strings.Contains(app.out.String(), "started") {
			return fmt.Errorf("testapp has not started: %q", app.out.String())
		}
		return nil
	})
	ready := time.Now().UnixMilli() // the files exist; every scan from now on must read them
	st0 := status()
	waitFor(t, 60*time.Second, func() error {
		if st := status(); st.LastScan.Scans < st0.LastScan.Scans+20 {
			return fmt.Errorf("%d scans since the application started; want 20", st.LastScan.Scans-st0.LastScan.Scans)
		}
		return nil
	})
	end := time.Now().UnixMilli() // scans that began before this one ended while it ran
	st1 := status()
	stopChurn()
	app.kill()

	scans, err := a.series("/api/v1/history?window=5m", `{metric="system.uptime_s"}`)
	if err != nil || len(scans) != 1 {
		t.Fatalf("the agent's uptime series: %v, %v", scans, err)
	}
	points, err := a.series("/api/v1/history?window=5m", `{metric="requests.number", process="testapp"}`)
	if err != nil || len(points) != 1 {
		t.Fatalf("the application's requests.number: %v, %v", points, err)
	}
	have := map[int64]bool{}
	for _, p := range points[0].Points {
		have[int64(p[0])] = true
	}
	var want, missing []int64
	for _, p := range scans[0].Points {
		if ts := int64(p[0]); ts >= ready && ts < end {
			want = append(want, ts)
			if !have[ts] {
				missing = append(missing, ts)
			}
		}
	}
	if len(want) < 15 {
		t.Fatalf("%d scans of the application's life in the history; want at least 15", len(want))
	}
	if len(missing) > 0 {
		t.Errorf("the application was not read in %d of the %d scans of its life (started %d): %v", len(missing), len(want), ready, missing)
	}
	if d := st1.ProcessScan.Deferred - st0.ProcessScan.Deferred; d < 100 {
		t.Errorf("only %d processes started during the application's life had their details deferred: was there churn?", d)
	}
	t.Logf("%d scans of the application's life, %d missing; %d processes in the table at the end; %d deferred",
		len(want), len(missing), st1.Counts.Processes, st1.ProcessScan.Deferred-st0.ProcessScan.Deferred)
}
