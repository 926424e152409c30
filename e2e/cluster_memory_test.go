package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// vmHWM is the peak resident set of process pid, in bytes.
func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

// historyRounds is how many rounds of points TestParallelClusterHistoryMemoryBounded pushes:
// $CANTAL_E2E_HISTORY_ROUNDS (at least 60: an answer of over 10 MiB), else 60. The bound it
// checks is relative to one answer, so a smaller history drives the same code; the failure it
// defends against (each query holding copies of the whole history) grows with it either way.
func historyRounds(t *testing.T) int {
	t.Helper()
	n := 60
	if v := os.Getenv("CANTAL_E2E_HISTORY_ROUNDS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 60 {
			t.Fatalf("CANTAL_E2E_HISTORY_ROUNDS=%q: want a number of at least 60 (%v)", v, err)
		}
	}
	return n
}

// TestParallelClusterHistoryMemoryBounded: six cluster/history?window=1h at once, each of a
// local history of about 12 MB (historyRounds: 60 rounds of 10000 points; 200, 40 MB, with
// $CANTAL_E2E_HISTORY_ROUNDS=200 as `make test-long` runs it), raise the agent's peak RSS by at most four times one answer:
// the local part is built under the query slot, one at a time, with the node label written
// directly. Before, each built its local history and a decoded copy of it in parallel: six
// such queries took the agent to 1.5 GB with 57 MB answers (issue 31, N7: 1.97 GB).
func TestParallelClusterHistoryMemoryBounded(t *testing.T) {
	aside(t)
	a := startAgentOwnPIDs(t, "--cluster-name", "n7-memory", "--node-name", "n1", "--interval", "100ms")
	const nseries = 10000
	rounds := historyRounds(t)
	for r := range rounds {
		var body strings.Builder
		for i := range nseries {
			fmt.Fprintf(&body, "e2e_cluster_history,tag_a=value_%06d v=%d\n", i, r)
		}
		if code, msg := a.raw("POST", "/write", body.String()); code != http.StatusNoContent {
			t.Fatalf("POST /write = %d %.300s", code, msg)
		}
		time.Sleep(20 * time.Millisecond) // spread the rounds over scans: a point per scan
	}
	const path = "/api/v1/history?match=e2e_cluster_history.v&window=1h"
	code, local := a.raw("GET", path, "")
	if code != 200 || len(local) < 10<<20 {
		t.Fatalf("local history = %d, %d bytes; want 200 and at least 10 MiB", code, len(local))
	}
	size := len(local)
	pid := a.pid()
	before := vmHWM(t, pid)
	var wg sync.WaitGroup
	results := make([]string, 6)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("GET", a.URL+"/api/v1/cluster/history?match=e2e_cluster_history.v&window=1h", nil)
			resp, err := (&http.Client{Timeout: 3 * time.Minute}).Do(req)
			if err != nil {
				results[i] = err.Error()
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			switch {
			case resp.StatusCode == 200 && len(b) >= size:
				results[i] = "ok"
			case resp.StatusCode == http.StatusServiceUnavailable && strings.Contains(string(b), "busy"):
				results[i] = "busy"
			default:
				results[i] = fmt.Sprintf("%d, %d bytes: %.200s", resp.StatusCode, len(b), b)
			}
		}()
	}
	wg.Wait()
	after := vmHWM(t, pid)
	oks := 0
	for i, r := range results {
		switch r {
		case "ok":
			oks++
		case "busy":
		default:
			t.Errorf("cluster history %d: %s; want the whole answer or 503 busy", i, r)
		}
	}
	if oks == 0 {
		t.Errorf("none of six cluster histories was answered: %v", results)
	}
	t.Logf("answer %d bytes; peak RSS %d MiB before, %d MiB after six parallel cluster histories (%d answered)", size, before>>20, after>>20, oks)
	if grew := after - before; grew > 4*int64(size) {
		t.Errorf("six parallel cluster histories of %d bytes raised the peak RSS by %d MiB; want at most four answers' worth (%d MiB)", size, grew>>20, 4*size>>20)
	}
}
