package main

import (
	"strings"
	"testing"
)

const benchOut = `goos: linux
pkg: github.com/cantal-go/cantal/bench
BenchmarkPaired/inc-2   	 1000	 12.5 ns/op	 3.1 shm-ns/op	 0.42 shm/prometheus	 0.40 shm/prometheus-cpu	 0 B/op	 0 allocs/op
BenchmarkClusterConvergence/nodes=100-2  1  494206220 ns/op  228.2 gossip-B/s/node  0.49 s/converge
BenchmarkHistoryShapes/constant-2 10 5.0 ns/sample 0.07 history/xor_bytes
BenchmarkLogOnly
    bench_test.go:12: some log line
PASS
`

func TestParseBench(t *testing.T) {
	lines, err := parseBench(strings.NewReader(benchOut))
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 3 {
		t.Fatalf("parseBench: %d lines; want 3", len(lines))
	}
	if lines[0].Pkg != "github.com/cantal-go/cantal/bench" || lines[0].N != 1000 || len(lines[0].Metrics) != 6 {
		t.Errorf("first line = %+v", lines[0])
	}
	var ratios []string
	for _, l := range lines {
		for _, m := range l.Metrics {
			if m.isRatio() {
				ratios = append(ratios, m.Unit)
			}
		}
	}
	if got, want := strings.Join(ratios, ","), "shm/prometheus,shm/prometheus-cpu,history/xor_bytes"; got != want {
		t.Errorf("ratios = %s; want %s", got, want)
	}
	md := benchMarkdown(lines)
	if !strings.Contains(md, "**0.42 shm/prometheus**") || !strings.Contains(md, "| BenchmarkHistoryShapes/constant-2 | 10 |") {
		t.Errorf("markdown:\n%s", md)
	}
}

func TestParseBenchBadValue(t *testing.T) {
	if _, err := parseBench(strings.NewReader("BenchmarkX-2 10 abc ns/op\n")); err == nil {
		t.Error("parseBench accepted a value that is not a number")
	}
	if _, err := parseBench(strings.NewReader("BenchmarkX-2 10 1.0 ns/op 2.0\n")); err == nil {
		t.Error("parseBench accepted an odd number of fields")
	}
}

func TestParseStat(t *testing.T) {
	s, err := parseStat([]byte("42 (a (weird) name) S 7 42 42 0 -1 4194560 100 0 0 0 11 22 3 4 20 0 1 0 100 1000000 250 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0"))
	if err != nil {
		t.Fatal(err)
	}
	if s.PID != 42 || s.PPID != 7 || s.Ticks != 11+22+3+4 || s.RSSPages != 250 {
		t.Errorf("parseStat = %+v; want pid 42 ppid 7 ticks 40 rss 250", s)
	}
	for _, bad := range []string{"", "42 no comm", "42 (x) S 1 2", "x (y) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22"} {
		if _, err := parseStat([]byte(bad)); err == nil {
			t.Errorf("parseStat(%q) accepted", bad)
		}
	}
}

func TestParseWrk(t *testing.T) {
	out := `Running 10s test @ http://127.0.0.1:1/api/v1/metrics
  1 threads and 2 connections
  Latency Distribution
     50%  192.73ms
     75%  300.00ms
     90%  1.00s
     99%    4.06s
  162 requests in 31.00s, 1.2GB read
  Socket errors: connect 0, read 0, write 0, timeout 3
  Non-2xx or 3xx responses: 2
Requests/sec:      5.23
`
	r, err := parseWrk(out)
	if err != nil {
		t.Fatal(err)
	}
	if r.Requests != 162 || r.Non2xx != 2 || r.RPS != 5.23 || r.P50 != "192.73ms" || r.P99 != "4.06s" || !strings.Contains(r.SocketErrors, "timeout 3") {
		t.Errorf("parseWrk = %+v", r)
	}
	if _, err := parseWrk("wrk: connection refused"); err == nil {
		t.Error("parseWrk accepted an output without a request count")
	}
}

func TestCountSamples(t *testing.T) {
	n, err := countSamples(strings.NewReader("# HELP a x\n# TYPE a counter\na 1\n\nb{x=\"y\"} 2\n"))
	if err != nil || n != 2 {
		t.Errorf("countSamples = %d, %v; want 2, nil", n, err)
	}
}

func TestQuantile(t *testing.T) {
	xs := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	if q := quantile(xs, 0.5); q != 5 {
		t.Errorf("quantile(0.5) = %v; want 5", q)
	}
	if q := quantile(xs, 0.99); q != 10 {
		t.Errorf("quantile(0.99) = %v; want 10", q)
	}
	if q := quantile(nil, 0.5); q != 0 {
		t.Errorf("quantile(nil) = %v; want 0", q)
	}
}

func FuzzParseBench(f *testing.F) {
	f.Add(benchOut)
	f.Add("BenchmarkX-2 1 NaN ns/op\n")
	f.Fuzz(func(t *testing.T, s string) {
		lines, err := parseBench(strings.NewReader(s))
		if err == nil {
			_ = benchMarkdown(lines)
		}
	})
}

func FuzzParseStat(f *testing.F) {
	f.Add([]byte("42 (a (weird) name) S 7 42 42 0 -1 4194560 100 0 0 0 11 22 3 4 20 0 1 0 100 1000000 250 1 1"))
	f.Add([]byte("1 (x)"))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = parseStat(b)
	})
}

func FuzzParseWrk(f *testing.F) {
	f.Add("162 requests in 31.00s\nNon-2xx or 3xx responses: 2\nRequests/sec: 5.2\n     99%  4.06s\n")
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = parseWrk(s)
	})
}
