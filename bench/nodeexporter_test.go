package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkNodeExporterScrape scrapes, side by side in one run on this machine, the real
// node_exporter (Debian prometheus-node-exporter 1.5, default collectors;
// scripts/install-deps.sh) and the real cantal-agent's /metrics, as Prometheus 2.42 does
// (its Accept header, gzip), and reports the CPU each process spent per sample served: the
// CPU time of the process from /proc/PID/stat over all the scrapes, divided by the samples
// the scrapes returned. Target (issue 19): the agent ≤ 0.5× node_exporter per sample.
//
// node_exporter reads the kernel at each scrape; the agent reads it at each scan and a scrape
// only encodes what the last scan read. So the agent runs with a scan interval longer than the
// run (--interval 10m: one scan at start), and its figure is the scrape's cost alone; the
// scan's own cost is in BENCHMARKS.md (BenchmarkMachineScan and load.sh). Scrapes alternate
// between the two programs, so both see the same machine. Clock ticks are 10 ms: run with
// -benchtime 200x or more.
func BenchmarkNodeExporterScrape(b *testing.B) {
	ne, err := exec.LookPath("prometheus-node-exporter")
	if err != nil {
		b.Fatalf("prometheus-node-exporter not installed: run scripts/install-deps.sh")
	}
	dir := b.TempDir()
	build := exec.Command("go", "build", "-o", dir+"/", "./cmd/cantal-agent")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("build cantal-agent: %v\n%s", err, out)
	}
	neAddr, agAddr := benchFreePort(b), benchFreePort(b)
	nePID := startBenchProc(b, ne, "--web.listen-address="+neAddr, "--log.level=warn")
	agPID := startBenchProc(b, filepath.Join(dir, "cantal-agent"), "--listen", agAddr, "--interval", "10m",
		"--state-dir", filepath.Join(dir, "state"), "--rrdd-dir", "", "--log-level", "warn")
	neURL, agURL := "http://"+neAddr+"/metrics", "http://"+agAddr+"/metrics"
	for _, u := range []string{neURL, agURL} {
		deadline := time.Now().Add(30 * time.Second)
		for {
			if n, err := promScrape(u); err == nil && n > 100 {
				break
			} else if time.Now().After(deadline) {
				b.Fatalf("%s: %d samples, %v", u, n, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	for range 5 { // warm up both
		promScrape(neURL)
		promScrape(agURL)
	}
	var neSamples, agSamples int
	var neCPU, agCPU time.Duration
	for b.Loop() {
		c0 := benchProcCPU(b, nePID)
		n, err := promScrape(neURL)
		if err != nil {
			b.Fatal(err)
		}
		neCPU += benchProcCPU(b, nePID) - c0
		neSamples += n
		c0 = benchProcCPU(b, agPID)
		n, err = promScrape(agURL)
		if err != nil {
			b.Fatal(err)
		}
		agCPU += benchProcCPU(b, agPID) - c0
		agSamples += n
	}
	neNs := float64(neCPU.Nanoseconds()) / float64(neSamples)
	agNs := float64(agCPU.Nanoseconds()) / float64(agSamples)
	b.ReportMetric(neNs, "ne-cpu-ns/sample")
	b.ReportMetric(agNs, "agent-cpu-ns/sample")
	b.ReportMetric(agNs/neNs, "agent/ne")
	b.ReportMetric(float64(neSamples)/float64(b.N), "ne-samples/scrape")
	b.ReportMetric(float64(agSamples)/float64(b.N), "agent-samples/scrape")
	b.ReportMetric(float64(neCPU.Microseconds())/float64(b.N), "ne-cpu-us/scrape")
	b.ReportMetric(float64(agCPU.Microseconds())/float64(b.N), "agent-cpu-us/scrape")
}

// promScrape GETs u as Prometheus 2.42 does (OpenMetrics preferred, gzip) and counts the
// samples of the answer.
func promScrape(u string) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", u, nil)
	req.Header.Set("Accept", "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1")
	// The transport asks for gzip and inflates the answer, as Prometheus does.
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		io.Copy(io.Discard, resp.Body)
		return 0, fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	n := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if line := sc.Bytes(); len(line) > 0 && line[0] != '#' {
			n++
		}
	}
	return n, sc.Err()
}

func benchFreePort(b *testing.B) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startBenchProc starts a program, killed when the benchmark ends, and returns its pid.
func startBenchProc(b *testing.B, name string, args ...string) int {
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd.Process.Pid
}

// benchProcCPU is the user+system CPU time of process pid from /proc/PID/stat (clock ticks,
// USER_HZ = 100).
func benchProcCPU(b *testing.B, pid int) time.Duration {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		b.Fatal(err)
	}
	s := string(raw)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}
