package e2e

import (
	"fmt"
	"os/exec"
	"testing"
	"time"
)

// TestProcessChurn: two thousand short-lived processes, each naming a CANTAL_PATH that exists
// for a moment or not at all, neither stall the scans nor leave applications or processes behind
// in the agent's tables once they are gone.
func TestProcessChurn(t *testing.T) {
	a := startAgent(t)
	type counts struct {
		Processes, Apps int
	}
	status := func() (int64, counts) {
		var st struct {
			LastScan struct{ Scans int64 } `json:"last_scan"`
			Counts   counts
		}
		if err := a.get("/api/v1/status", &st); err != nil {
			t.Fatal(err)
		}
		return st.LastScan.Scans, st.Counts
	}
	scans0, base := status()
	dir := t.TempDir()
	// 20 waves of 100 processes (2000 in all), each living 0-300 ms; half name files.
	script := fmt.Sprintf(`for w in $(seq 20); do
  for i in $(seq 100); do
    if [ $((i %% 2)) = 0 ]; then CANTAL_PATH=%s/p$w.$i sleep 0.$((i %% 3)) & else sleep 0.$((i %% 4)) & fi
  done
  wait
done`, dir)
	start := time.Now()
	if out, err := exec.Command("sh", "-c", script).CombinedOutput(); err != nil {
		t.Fatalf("churn: %v %s", err, out)
	}
	t.Logf("2000 processes started and ended in %s", time.Since(start).Round(time.Millisecond))
	scans1, _ := status()
	if scans1 <= scans0 {
		t.Errorf("no scan during the churn (%d then %d)", scans0, scans1)
	}
	// Once they are gone, nothing of them stays in the live tables.
	waitFor(t, 10*time.Second, func() error {
		_, c := status()
		if c.Apps > base.Apps || c.Processes > base.Processes+20 {
			return fmt.Errorf("after the churn: %+v; before it: %+v", c, base)
		}
		return nil
	})
}
