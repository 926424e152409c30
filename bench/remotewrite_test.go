package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/prompb"

	"github.com/cantal-go/cantal/internal/export"
	"github.com/cantal-go/cantal/internal/history"
	"github.com/cantal-go/cantal/internal/remotewrite"
	"github.com/cantal-go/cantal/internal/series"
	"github.com/cantal-go/cantal/internal/testsupport/cputime"
)

// The remote-write benchmarks compare the agent's remote_write (internal/remotewrite reading the
// history) with vmagent (Debian victoria-metrics 1.79, scripts/install-deps.sh)
// scraping the same series from the agent's /metrics exposition and remote-writing them:
//
//	cd bench && go test -run '^$' -bench 'RemoteWrite' -benchtime 20x -timeout 30m
//
// Reported per sample delivered: CPU (ns), bytes on the wire (snappy-compressed request
// bodies), and for vmagent also what its scrapes cost the agent (the exposition).

const rwSeries = 10_000

// rwStore returns a history of n agent-shaped series (exportSamples' labels) and their keys.
func rwStore(b testing.TB, n int) (*history.Store, []history.ID, []series.Sample) {
	samples := exportSamples(n)
	h := history.New(history.Options{Retention: time.Hour, Interval: 2 * time.Second})
	ids := make([]history.ID, n)
	for i := range samples {
		id, err := h.Series(samples[i].Labels.Key(), samples[i].Kind)
		if err != nil {
			b.Fatal(err)
		}
		ids[i] = id
	}
	return h, ids, samples
}

// rwScan commits one scan: counters grow, levels and floats move.
func rwScan(h *history.Store, ids []history.ID, samples []series.Sample, ts int64, k int) {
	h.Begin(ts)
	for i, id := range ids {
		var bits uint64
		switch samples[i].Kind {
		case series.Counter:
			bits = uint64(i*1000 + k*(i%17))
		case series.Level:
			bits = uint64(i + k%5)
		default:
			bits = math.Float64bits(float64(i)/7 + float64(k%3))
		}
		h.Add(id, bits)
		samples[i].Bits, samples[i].TS = bits, ts
	}
	h.Commit()
}

// countingReceiver decodes remote-write requests with prompb (the Prometheus module's own
// types) and counts samples and compressed bytes; fail makes it answer 503.
type countingReceiver struct {
	samples, bytes, reqs atomic.Int64
	fail                 atomic.Bool
	decode               bool
}

func (c *countingReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if c.fail.Load() {
		io.Copy(io.Discard, r.Body)
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	c.reqs.Add(1)
	if !c.decode { // count without holding the body: the benchmark measures the sender's heap
		n, _ := io.Copy(io.Discard, r.Body)
		c.bytes.Add(n)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	body, _ := io.ReadAll(r.Body)
	c.bytes.Add(int64(len(body)))
	raw, err := snappy.Decode(nil, body)
	if err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	var req prompb.WriteRequest
	if err := req.Unmarshal(raw); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	n := 0
	for _, ts := range req.Timeseries {
		n += len(ts.Samples)
	}
	c.samples.Add(int64(n))
	w.WriteHeader(http.StatusNoContent)
}

func newRWEndpoint(b testing.TB, url string, h *history.Store) *remotewrite.Endpoint {
	cfg, err := remotewrite.FromURL(url)
	if err != nil {
		b.Fatal(err)
	}
	e, err := remotewrite.New(cfg, remotewrite.Options{Source: h, Interval: time.Hour,
		DefaultLabels: []remotewrite.Label{{Name: "instance", Value: "bench:22682"}, {Name: "node", Value: "bench"}}})
	if err != nil {
		b.Fatal(err)
	}
	return e
}

// TestRemoteWriteWire checks the agent's encoding with prompb's decoder: the labels and
// samples the agent means are those Prometheus's own types read.
func TestRemoteWriteWire(t *testing.T) {
	var c countingReceiver
	c.decode = true
	srv := httptest.NewServer(&c)
	defer srv.Close()
	h, ids, samples := rwStore(t, 100)
	t0 := time.Now().UnixMilli() - 60_000
	for k := 0; k < 5; k++ {
		rwScan(h, ids, samples, t0+int64(k)*2000, k)
	}
	e := newRWEndpoint(t, srv.URL, h)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.Run(ctx); close(done) }()
	for i := 0; i < 500 && e.Status().PositionMs != t0+8000; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	if got := c.samples.Load(); got != 500 {
		t.Fatalf("prompb decoded %d samples; want 500", got)
	}
}

// BenchmarkRemoteWrite runs both side by side: agent (one scan of rwSeries series committed and
// sent per iteration) and vmagent (one scrape of the same series exposed as /metrics, scraped
// and remote-written per iteration).
func BenchmarkRemoteWrite(b *testing.B) {
	b.Run("agent", benchAgentRemoteWrite)
	b.Run("vmagent", benchVmagent)
}

func benchAgentRemoteWrite(b *testing.B) {
	var c countingReceiver
	srv := httptest.NewServer(&c)
	defer srv.Close()
	h, ids, samples := rwStore(b, rwSeries)
	t0 := time.Now().Add(-50 * time.Minute).UnixMilli()
	rwScan(h, ids, samples, t0, 0)
	e := newRWEndpoint(b, srv.URL, h)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	waitPos(b, e, t0)
	st0 := e.Status()
	var sendCPU time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	k := 1
	for b.Loop() {
		ts := t0 + int64(k)*2000
		rwScan(h, ids, samples, ts, k) // the scan itself is not remote write's
		c0 := cputime.Process()
		e.Notify()
		waitPos(b, e, ts)
		sendCPU += cputime.Process() - c0
		k++
	}
	b.StopTimer()
	st := e.Status()
	n := float64(st.SamplesSent - st0.SamplesSent)
	b.ReportMetric(float64(sendCPU.Nanoseconds())/n, "cpu-ns/sample")
	b.ReportMetric(float64(st.BytesSent-st0.BytesSent)/n, "wire-B/sample")
	b.ReportMetric(0, "scrape-cpu-ns/sample")
}

func waitPos(b *testing.B, e *remotewrite.Endpoint, ts int64) {
	for e.Status().PositionMs < ts {
		time.Sleep(200 * time.Microsecond)
	}
}

// benchVmagent: vmagent scrapes an exposition of the same series every second (the agent's
// /metrics encoder, internal/export, serving the latest scan) and remote-writes to the counting
// receiver. An iteration is one scrape delivered. vmagent's CPU comes from /proc/PID/stat; the
// exposition's CPU is measured in this process around the handler.
func benchVmagent(b *testing.B) {
	prog, err := exec.LookPath("vmagent")
	if err != nil {
		b.Fatal("vmagent is not installed: run scripts/install-deps.sh")
	}
	var c countingReceiver
	c.decode = true
	rcv := httptest.NewServer(&c)
	defer rcv.Close()

	h, ids, samples := rwStore(b, rwSeries)
	var mu sync.Mutex
	var scrapeCPU atomic.Int64
	var scrapes atomic.Int64
	k := 0
	t0 := time.Now().UnixMilli()
	rwScan(h, ids, samples, t0, 0)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		k++
		rwScan(h, ids, samples, t0+int64(k)*2000, k) // a new scan per scrape, not counted
		c1 := cputime.Process()
		var e export.Prom
		out := e.Append(nil, samples, export.FormatText)
		mu.Unlock()
		w.Header().Set("Content-Type", export.FormatText.ContentType())
		w.Write(out)
		scrapeCPU.Add(int64(cputime.Process() - c1))
		scrapes.Add(1)
	}))
	defer target.Close()

	dir := b.TempDir()
	cfg := fmt.Sprintf("global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: cantal\n    static_configs: [{targets: [%q]}]\n",
		strings.TrimPrefix(target.URL, "http://"))
	os.WriteFile(filepath.Join(dir, "scrape.yml"), []byte(cfg), 0o644)
	cmd := exec.Command(prog, "-promscrape.config="+filepath.Join(dir, "scrape.yml"),
		"-remoteWrite.url="+rcv.URL+"/api/v1/write", "-remoteWrite.tmpDataPath="+filepath.Join(dir, "tmp"),
		"-httpListenAddr=127.0.0.1:0", "-loggerLevel=ERROR", "-promscrape.disableCompression",
		"-remoteWrite.flushInterval=100ms")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	// Warm up: the first scrapes delivered.
	deadline := time.Now().Add(60 * time.Second)
	for c.samples.Load() < 2*rwSeries {
		if time.Now().After(deadline) {
			b.Fatalf("vmagent delivered %d samples in 60 s; output:\n%s", c.samples.Load(), out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	pid := cmd.Process.Pid
	cpu0 := procCPU(b, pid)
	s0, by0, sc0 := c.samples.Load(), c.bytes.Load(), scrapeCPU.Load()
	b.ResetTimer()
	for b.Loop() {
		want := c.samples.Load() + rwSeries
		for c.samples.Load() < want {
			time.Sleep(time.Millisecond)
		}
	}
	b.StopTimer()
	// Let the requests of the last scrape land before reading the counters.
	time.Sleep(300 * time.Millisecond)
	n := float64(c.samples.Load() - s0)
	b.ReportMetric(float64((procCPU(b, pid)-cpu0).Nanoseconds())/n, "cpu-ns/sample")
	b.ReportMetric(float64(c.bytes.Load()-by0)/n, "wire-B/sample")
	b.ReportMetric(float64(scrapeCPU.Load()-sc0)/n, "scrape-cpu-ns/sample")
}

// procCPU is the user+system CPU time of process pid (/proc/PID/stat, clock ticks of 10 ms).
func procCPU(b *testing.B, pid int) time.Duration {
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

// BenchmarkRemoteWriteOutage100k: 100k series, the receiver down for 150 scans (5 minutes at
// 2 s, committed as fast as the history takes them), then up again. Reported: the heap the
// endpoint holds beyond the history during the outage and at its peak while catching up, and
// the CPU per sample of the catch-up. Run with -benchtime 1x.
func BenchmarkRemoteWriteOutage100k(b *testing.B) {
	const n, outageScans = 100_000, 150
	for b.Loop() {
		var c countingReceiver
		srv := httptest.NewServer(&c)
		h, ids, samples := rwStore(b, n)
		t0 := time.Now().Add(-20 * time.Minute).UnixMilli()
		rwScan(h, ids, samples, t0, 0)
		e := newRWEndpoint(b, srv.URL, h)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { e.Run(ctx); close(done) }()
		waitPos(b, e, t0)

		heap := func() (int64, int64) {
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			st := h.Stats()
			return int64(ms.HeapAlloc), st.CompressedBytes + st.StagingBytes
		}
		heap0, hist0 := heap()
		c.fail.Store(true)
		for k := 1; k <= outageScans; k++ {
			rwScan(h, ids, samples, t0+int64(k)*2000, k)
			e.Notify()
		}
		for e.Status().Retries < 3 {
			time.Sleep(10 * time.Millisecond)
		}
		heap1, hist1 := heap()
		// Catch up, sampling the heap.
		var peak atomic.Int64
		stop := make(chan struct{})
		sampled := make(chan struct{})
		go func() {
			defer close(sampled)
			var ms runtime.MemStats
			for {
				select {
				case <-stop:
					return
				case <-time.After(20 * time.Millisecond):
				}
				runtime.ReadMemStats(&ms)
				if v := int64(ms.HeapAlloc); v > peak.Load() {
					peak.Store(v)
				}
			}
		}()
		st0 := e.Status()
		c0 := cputime.Process()
		c.fail.Store(false)
		waitPos(b, e, t0+outageScans*2000)
		cpu := cputime.Process() - c0
		close(stop)
		<-sampled
		st := e.Status()
		sent := float64(st.SamplesSent - st0.SamplesSent)
		// The heap's growth over the outage, history included (the history's own bytes
		// alongside): the endpoint holds nothing that grows with the outage.
		b.ReportMetric(float64(heap1-heap0)/(1<<20), "outage-heap-growth-MiB")
		b.ReportMetric(float64(hist1-hist0)/(1<<20), "history-growth-MiB")
		b.ReportMetric(float64(peak.Load()-heap1)/(1<<20), "catchup-peak-extra-MiB")
		b.ReportMetric(float64(cpu.Nanoseconds())/sent, "catchup-cpu-ns/sample")
		b.ReportMetric(float64(st.BytesSent-st0.BytesSent)/sent, "wire-B/sample")
		if sent != outageScans*n {
			b.Fatalf("caught up %v samples; want %d", sent, outageScans*n)
		}
		cancel()
		<-done
		srv.Close()
	}
}
