package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"

	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/promapi"
	"github.com/cantal-go/cantal/internal/promstore"
	"github.com/cantal-go/cantal/internal/registry"
	"github.com/cantal-go/cantal/internal/series"
)

// BenchmarkPromQLQueryRange compares the agent's /prometheus API with a real Prometheus
// (Debian's prometheus, scripts/install-deps.sh) holding the same samples: query_range of
// sum(rate(requests_total[1m])) over 1 h at a 2 s step (1800 steps) for 1, 100 and 10 000
// counters holding an hour of 2 s scans.
//
// The agent's side is its promapi.Handler over a promstore of a registry written scan by scan
// (the agent's own storage and engine), served over loopback HTTP by a child process (this
// test binary again, see TestMain and servePromQLBenchAgent), so that its CPU is counted as
// Prometheus's is: that process's alone, from /proc (10 ms ticks), without the client's. (It
// used to run in this process, whose CPU then carried the client's request and JSON decoding.)
// Prometheus gets the very series and points the agent's storage gives (read back through a
// promstore of the same scans made here), as a TSDB block written by the tsdb package of the
// Prometheus module into the data directory it then starts on. Both answers are compared
// (same series, values within 1e-9 relative). Reported per query: wall time and CPU, and
// their ratios agent/Prometheus:
//
//	cd bench && go test -run '^$' -bench 'PromQLQueryRange' -benchtime 5x -timeout 30m
func BenchmarkPromQLQueryRange(b *testing.B) {
	prom := "/usr/bin/prometheus"
	if _, err := os.Stat(prom); err != nil {
		b.Fatal("prometheus is not installed: run scripts/install-deps.sh")
	}
	for _, n := range []int{1, 100, 10_000} {
		b.Run(fmt.Sprintf("series=%d", n), func(b *testing.B) {
			end := time.Now().Truncate(time.Minute).Add(-time.Minute)
			t0 := end.Add(-(promqlBenchScans - 1) * 2 * time.Second).UnixMilli()
			agentAddr, agentPID := startPromQLBenchAgent(b, n, t0)
			st := promqlBenchStore(n, t0)

			dir := b.TempDir()
			writeBlock(b, st, t0, end.UnixMilli(), filepath.Join(dir, "data"))
			cfg := filepath.Join(dir, "prometheus.yml")
			if err := os.WriteFile(cfg, []byte("global: {}\n"), 0o644); err != nil {
				b.Fatal(err)
			}
			addr := benchFreePort(b)
			pid := startBenchProc(b, prom, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"),
				"--storage.tsdb.retention.time=30d", "--web.listen-address="+addr, "--log.level=warn",
				"--query.max-samples=1000000000", "--query.timeout=1h")
			waitReady(b, "http://"+addr+"/-/ready")

			params := url.Values{"query": {`sum(rate(requests_total[1m]))`},
				"start": {fmt.Sprint(t0 / 1000)}, "end": {fmt.Sprint(end.Unix())}, "step": {"2"}}
			agentURL := "http://" + agentAddr + "/prometheus/api/v1/query_range?" + params.Encode()
			promURL := "http://" + addr + "/api/v1/query_range?" + params.Encode()
			// The same answer from both (and warm-up: Prometheus's first query reads the block).
			a, p := rangeValues(b, agentURL), rangeValues(b, promURL)
			if len(a) < promqlBenchScans-40 || len(a) != len(p) {
				b.Fatalf("agent %d points, Prometheus %d", len(a), len(p))
			}
			for ts, v := range a {
				if w, ok := p[ts]; !ok || math.Abs(v-w) > 1e-9*math.Max(1, math.Abs(w)) {
					b.Fatalf("at %v: agent %v, Prometheus %v (present %v)", ts, v, w, ok)
				}
			}

			var aWall, pWall, aCPU, pCPU time.Duration
			b.ResetTimer()
			for b.Loop() {
				t, c := time.Now(), procCPU(b, agentPID)
				rangeValues(b, agentURL)
				aWall += time.Since(t)
				aCPU += procCPU(b, agentPID) - c
				t, c = time.Now(), procCPU(b, pid)
				rangeValues(b, promURL)
				pWall += time.Since(t)
				pCPU += procCPU(b, pid) - c
			}
			N := float64(b.N)
			b.ReportMetric(float64(aWall.Milliseconds())/N, "agent-ms/query")
			b.ReportMetric(float64(pWall.Milliseconds())/N, "prom-ms/query")
			b.ReportMetric(float64(aCPU.Milliseconds())/N, "agent-cpu-ms/query")
			b.ReportMetric(float64(pCPU.Milliseconds())/N, "prom-cpu-ms/query")
			b.ReportMetric(float64(aWall)/float64(pWall), "time-ratio")
			if pCPU > 0 {
				b.ReportMetric(float64(aCPU)/float64(pCPU), "cpu-ratio")
			}
		})
	}
}

// promqlBenchScans is the scans BenchmarkPromQLQueryRange's counters hold: an hour at 2 s.
const promqlBenchScans = 1800

// promqlBenchStore is a promstore over n counters written scan by scan, promqlBenchScans
// scans 2 s apart from t0: the same points whenever it is made with the same n and t0.
func promqlBenchStore(n int, t0 int64) *promstore.Storage {
	hist := history.New(history.Options{})
	reg := registry.New(hist, 2*time.Hour, nil)
	refs := make([]*series.Ref, n)
	for i := range refs {
		refs[i] = reg.Series(series.Labels{"metric": "requests", "appname": "bench", "worker": fmt.Sprint(i)}, series.Counter)
	}
	for j := range promqlBenchScans {
		reg.Begin(t0 + int64(j)*2000)
		for i, r := range refs {
			reg.Put(r, uint64(j*(i%97+1)))
		}
		reg.Commit()
	}
	return promstore.New(hist, promstore.RegistryCatalog(reg), promstore.Options{Instance: "bench:22682", Node: "bench"})
}

// promqlBenchAgentEnv names, in the environment of a child of this test binary, the counters
// and start ("n t0") of the agent it is to serve (TestMain).
const promqlBenchAgentEnv = "CANTAL_BENCH_PROMQL_AGENT"

// startPromQLBenchAgent starts this test binary again as the agent's side of
// BenchmarkPromQLQueryRange (servePromQLBenchAgent), stopped when the benchmark ends, and
// returns its address and pid.
func startPromQLBenchAgent(b *testing.B, n int, t0 int64) (string, int) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d %d", promqlBenchAgentEnv, n, t0))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { stdin.Close(); cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatalf("the agent's process did not say its address: %v", err)
	}
	return strings.TrimSpace(line), cmd.Process.Pid
}

// servePromQLBenchAgent is the child of startPromQLBenchAgent: it serves promapi over
// promqlBenchStore(n, t0) on a loopback port, writes the address to stdout, and returns when
// stdin closes (its parent ended).
func servePromQLBenchAgent(spec string) error {
	var n int
	var t0 int64
	if _, err := fmt.Sscan(spec, &n, &t0); err != nil {
		return fmt.Errorf("%s=%q: %w", promqlBenchAgentEnv, spec, err)
	}
	st := promqlBenchStore(n, t0)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: promapi.New(st, promapi.Options{MaxSamples: 1e9, Timeout: time.Hour})}
	go srv.Serve(l)
	fmt.Println(l.Addr().String())
	io.Copy(io.Discard, os.Stdin)
	return srv.Close()
}

// TestMain runs the tests and benchmarks, or, in the child a benchmark starts, the agent's
// side of BenchmarkPromQLQueryRange.
func TestMain(m *testing.M) {
	if spec := os.Getenv(promqlBenchAgentEnv); spec != "" {
		if err := servePromQLBenchAgent(spec); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// writeBlock writes every series st holds in [mint, maxt] as one TSDB block in dir.
func writeBlock(b *testing.B, st *promstore.Storage, mint, maxt int64, dir string) {
	q, err := st.Querier(mint, maxt)
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close()
	ss := q.Select(context.Background(), true, nil, labels.MustNewMatcher(labels.MatchRegexp, labels.MetricName, ".+"))
	var list []storage.Series
	for ss.Next() {
		s := ss.At()
		var pts []chunkSample
		it := s.Iterator(nil)
		for it.Next() == chunkenc.ValFloat {
			t, v := it.At()
			pts = append(pts, chunkSample{t, v})
		}
		list = append(list, storage.NewListSeries(s.Labels(), toSamples(pts)))
	}
	if err := ss.Err(); err != nil {
		b.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	if _, err := tsdb.CreateBlock(list, dir, 2*time.Hour.Milliseconds(), slog.New(slog.DiscardHandler)); err != nil {
		b.Fatal(err)
	}
}

// waitReady waits (up to a minute) until url answers 200.
func waitReady(b *testing.B, url string) {
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s not ready: %v", url, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// rangeValues fetches a query_range answer of one series and returns its values by time.
func rangeValues(b *testing.B, url string) map[float64]float64 {
	resp, err := http.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		b.Fatalf("%s: %d %v %.300s", url, resp.StatusCode, err, body)
	}
	var ans struct {
		Data struct {
			Result []struct {
				Values [][2]any `json:"values"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &ans); err != nil || len(ans.Data.Result) != 1 {
		b.Fatalf("%s: %v %.300s", url, err, body)
	}
	out := map[float64]float64{}
	for _, p := range ans.Data.Result[0].Values {
		v, err := strconv.ParseFloat(p[1].(string), 64)
		if err != nil {
			b.Fatalf("%s: value %q: %v", url, p[1], err)
		}
		out[p[0].(float64)] = v
	}
	return out
}

// chunkSample is one float sample (chunks.Sample).
type chunkSample struct {
	t int64
	f float64
}

func (s chunkSample) T() int64                      { return s.t }
func (s chunkSample) ST() int64                     { return 0 }
func (s chunkSample) F() float64                    { return s.f }
func (s chunkSample) H() *histogram.Histogram       { return nil }
func (s chunkSample) FH() *histogram.FloatHistogram { return nil }
func (s chunkSample) Type() chunkenc.ValueType      { return chunkenc.ValFloat }
func (s chunkSample) Copy() chunks.Sample           { return s }

func toSamples(pts []chunkSample) []chunks.Sample {
	out := make([]chunks.Sample, len(pts))
	for i, p := range pts {
		out[i] = p
	}
	return out
}
