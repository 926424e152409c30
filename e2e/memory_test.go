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
	"time"
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
// Made once per run (compressing 64 MiB under the race detector takes seconds) and shared by
// the tests, which only read them.
var amplifying = sync.OnceValues(func() (proto, json []byte) {
	const size = 32<<20 - 1024
	proto = gzipped(bytes.Repeat([]byte{0x0a, 0x00}, size/2))
	head, tail := `{"resourceMetrics":[`, `{}]}`
	json = gzipped([]byte(head + strings.Repeat(`{},`, (size-len(head)-len(tail))/3) + tail))
	return proto, json
})

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
	aside(t)
	a := startAgentOwnPIDs(t)
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
	hwm := statusKB(t, a.pid(), "VmHWM")
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

// decodableOTLP is a protobuf OTLP request that passes the agent's caps and is decoded in full:
// n data points of a metric without a name (refused after decoding, so the agent keeps no
// series of them), each with three attributes.
func decodableOTLP(n int) []byte {
	var pts []byte
	for i := range n {
		var dp []byte
		for _, kv := range [][2]string{{"route", fmt.Sprintf("/r%d", i)}, {"code", "200"}, {"host", "web-1"}} {
			// KeyValue{key: 1, value: AnyValue{string_value: 1}}
			v := protoBytes(1, []byte(kv[1]))
			attr := append(protoBytes(1, []byte(kv[0])), protoBytes(2, v)...)
			dp = append(dp, protoBytes(7, attr)...) // NumberDataPoint.attributes
		}
		dp = append(dp, 0x31, 1, 0, 0, 0, 0, 0, 0, 0) // as_int (6, fixed64... sfixed64) = 1
		pts = append(pts, protoBytes(1, dp)...)       // Gauge.data_points
	}
	metric := protoBytes(5, pts)               // Metric.gauge
	scope := protoBytes(2, metric)             // ScopeMetrics.metrics
	return protoBytes(1, protoBytes(2, scope)) // MetricsData.resource_metrics > scope_metrics
}

// protoBytes is field num (length-delimited) holding b.
func protoBytes(num byte, b []byte) []byte {
	out := []byte{num<<3 | 2}
	for n := len(b); ; n >>= 7 {
		if n < 0x80 {
			out = append(out, byte(n))
			break
		}
		out = append(out, byte(n)|0x80)
	}
	return append(out, b...)
}

// After a spike of memory (for some seconds, clients sending N3's amplifying bodies, which are
// decompressed before they are refused, and large OTLP requests that pass the caps and are
// decoded in full), the agent returns the memory: its RSS is back within
// twice its level before the spike within 2 minutes, with no traffic to trigger a collection.
// The GC pacer kept 2.4 GB of heap 5 minutes after N3. (issue 31, N9)
func TestMemoryReturnedAfterSpike(t *testing.T) {
	detach := aside(t)        // the spike is heavy: not beside a quiet test, not before the lines start
	a := startAgentOwnPIDs(t) // its RSS is its own: not grown by the processes of the tests beside it
	pid := a.pid()
	// The level before: once the agent has scanned a few times.
	waitFor(t, 30*time.Second, func() error {
		var st struct {
			LastScan struct{ Scans int } `json:"last_scan"`
		}
		if err := a.get("/api/v1/status", &st); err != nil {
			return err
		}
		if st.LastScan.Scans < 10 {
			return fmt.Errorf("%d scans", st.LastScan.Scans)
		}
		return nil
	})
	before := statusKB(t, pid, "VmRSS")
	// The spike: N3's amplifying bodies, now refused once decompressed (32 MiB each, taken
	// from the body budget), beside requests decoded in full.
	decodable := decodableOTLP(12000)
	amp, _ := amplifying()
	// The clients send until the spike is there (the peak at three times the level before, some
	// requests stored), at least 8 s, at most a minute: a loaded machine serves fewer requests a
	// second, so a fixed length would bet on the machine's speed.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var accepted sync.Map
	for c := range 6 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				body := decodable
				if c%2 == 1 {
					body = amp
				}
				req, _ := http.NewRequest(http.MethodPost, a.URL+"/v1/metrics", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/x-protobuf")
				if c%2 == 1 {
					req.Header.Set("Content-Encoding", "gzip")
				}
				resp, err := a.do(req)
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					accepted.Store(c, true)
				}
			}
		})
	}
	stored := func() int {
		n := 0
		accepted.Range(func(any, any) bool { n++; return true })
		return n
	}
	spiked := time.Now()
	for time.Since(spiked) < 8*time.Second ||
		(time.Since(spiked) < time.Minute && (stored() == 0 || statusKB(t, pid, "VmHWM") < 3*before)) {
		time.Sleep(200 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	peak := statusKB(t, pid, "VmHWM")
	n := stored()
	t.Logf("RSS %d MB before; peak %d MB after %s of spike; %d clients had requests stored", before>>10, peak>>10, time.Since(spiked).Round(time.Second), n)
	if n == 0 || peak < 3*before {
		t.Fatalf("no spike to return from: peak %d MB, %d MB before, %d clients decoded", peak>>10, before>>10, n)
	}
	detach() // the rest waits for the pacer's timers: the other tests run meanwhile
	start := time.Now()
	var rss int64
	for time.Since(start) < 2*time.Minute {
		if rss = statusKB(t, pid, "VmRSS"); rss <= 2*before {
			break
		}
		time.Sleep(time.Second)
	}
	t.Logf("RSS %d MB %v after the spike", rss>>10, time.Since(start).Round(time.Second))
	if rss > 2*before {
		t.Errorf("RSS %d MB 2 minutes after the spike; want within twice the %d MB before", rss>>10, before>>10)
	}
}
