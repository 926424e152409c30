package e2e

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// statusKB returns a field of /proc/PID/status in kB (VmRSS, VmHWM).
func statusKB(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// gzipped compresses b.
func gzipped(b []byte) []byte {
	var out bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&out, gzip.BestCompression)
	zw.Write(b)
	zw.Close()
	return out.Bytes()
}

// amplifying returns the bodies of finding N3 of issue 31: just under 32 MiB of empty
// sub-messages (protobuf: empty resource_metrics, 2 bytes each; JSON: {} in resourceMetrics),
// gzip-compressed to some 32 KiB.
func amplifying() (proto, json []byte) {
	const size = 32<<20 - 1024
	proto = gzipped(bytes.Repeat([]byte{0x0a, 0x00}, size/2))
	head, tail := `{"resourceMetrics":[`, `{}]}`
	json = gzipped([]byte(head + strings.Repeat(`{},`, (size-len(head)-len(tail))/3) + tail))
	return proto, json
}

// postOTLP sends a gzip-compressed OTLP body and returns the answer's code and text.
func postOTLP(a *agent, ct string, body []byte) (int, string, error) {
	req, _ := http.NewRequest(http.MethodPost, a.URL+"/v1/metrics", bytes.NewReader(body))
	req.Header.Set("Content-Type", ct)
	req.Header.Set("Content-Encoding", "gzip")
	resp, err := a.do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// Amplifying OTLP bodies (32 KiB of gzip, 32 MiB of empty sub-messages), protobuf and JSON,
// three at once and repeated, are refused before they are decoded, with the limit in the
// answer, and the agent's peak RSS stays under 300 MB (it reached 1.6 GB for one, 4.8 GB for
// three). (issue 31, N3)
func TestOTLPAmplifyingBodiesKeepMemoryBounded(t *testing.T) {
	serial(t)
	a := startAgent(t)
	pb, js := amplifying()
	for round := range 3 {
		var wg sync.WaitGroup
		for i := range 6 {
			ct, body := "application/x-protobuf", pb
			if i%2 == 1 {
				ct, body = "application/json", js
			}
			wg.Go(func() {
				code, text, err := postOTLP(a, ct, body)
				if err != nil {
					t.Errorf("round %d, %s: %v", round, ct, err)
					return
				}
				// 413 with the limit crossed; 503 when the shared body budget is full.
				if !(code == http.StatusRequestEntityTooLarge && strings.Contains(text, "the limit per request")) && code != http.StatusServiceUnavailable {
					t.Errorf("round %d, %s: %d %.200q; want 413 naming the limit (or 503)", round, ct, code, text)
				}
			})
		}
		wg.Wait()
	}
	hwm := statusKB(t, a.cmd.Process.Pid, "VmHWM")
	t.Logf("peak RSS %d MB after 3 rounds of 3 protobuf and 3 JSON amplifying bodies at once", hwm>>10)
	if hwm > 300<<10 {
		t.Errorf("peak RSS %d MB; want under 300 MB", hwm>>10)
	}
	// The agent still takes an ordinary request.
	ok := gzipped([]byte(`{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"name":"after.attack","gauge":{"dataPoints":[{"asInt":"7"}]}}]}]}]}`))
	if code, text, err := postOTLP(a, "application/json", ok); err != nil || code != http.StatusOK {
		t.Errorf("ordinary request after the attack: %d %q %v; want 200", code, text, err)
	}
}
