package export

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/series"
)

// lockedBuffer collects a program's output for failure messages.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startProgram starts a real program from Debian's packages, stopped when the test ends. It
// fails the test with an install hint if the program is missing.
func startProgram(t *testing.T, name string, args ...string) *lockedBuffer {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s not found (%v): run scripts/install-deps.sh", name, err)
	}
	logs := &lockedBuffer{}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", name, logs.String())
		}
	})
	return logs
}

// waitFor polls cond every 200 ms until it returns nil or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s: %v", timeout, what, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func getJSON(u string, v any) error {
	resp, err := http.Get(u)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("GET %s: %s: %s", u, resp.Status, body)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	return dec.Decode(v)
}

// TestRealPrometheus has a real Prometheus scrape, every 2 s, an exposition whose counter grows
// at each scrape, once as negotiated (Prometheus asks for OpenMetrics) and once forced to the
// text format; the values it then holds must be exactly the ones served.
func TestRealPrometheus(t *testing.T) {
	var scrapes atomic.Uint64
	served := sync.Map{} // counter values served
	source := func() []series.Sample {
		n := scrapes.Add(1)
		v := n * 10
		served.Store(v, true)
		s := agentSamples()
		s = append(s,
			series.Sample{Labels: series.Labels{"metric": "test.scrapes", "job_kind": "eco"}, Kind: series.Counter, Bits: v, TS: time.Now().UnixMilli()},
			series.Sample{Labels: series.Labels{"metric": "test.ratio"}, Kind: series.Float, Bits: math.Float64bits(0.25), TS: time.Now().UnixMilli()},
		)
		return s
	}
	negotiated := PrometheusHandler(source, Options{})
	var formats sync.Map
	mux := http.NewServeMux()
	mux.HandleFunc("/om/metrics", func(w http.ResponseWriter, r *http.Request) {
		formats.Store(Negotiate(r.Header.Get("Accept")), true)
		negotiated.ServeHTTP(w, r)
	})
	mux.HandleFunc("/text/metrics", func(w http.ResponseWriter, r *http.Request) {
		r.Header.Del("Accept")
		negotiated.ServeHTTP(w, r)
	})
	target := httptest.NewServer(mux)
	defer target.Close()
	host := target.Listener.Addr().String()

	dir := t.TempDir()
	cfg := fmt.Sprintf(`global:
  scrape_interval: 2s
  scrape_timeout: 1s
scrape_configs:
  - job_name: om
    metrics_path: /om/metrics
    static_configs: [{targets: [%q]}]
  - job_name: text
    metrics_path: /text/metrics
    static_configs: [{targets: [%q]}]
`, host, host)
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	api := fmt.Sprintf("http://127.0.0.1:%d", port)
	startProgram(t, "prometheus",
		"--config.file="+cfgPath,
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", port),
		"--log.level=warn")
	waitFor(t, 30*time.Second, "prometheus ready", func() error {
		resp, err := http.Get(api + "/-/ready")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("ready: %s", resp.Status)
		}
		return nil
	})

	type result struct {
		Metric map[string]string `json:"metric"`
		Values [][2]any          `json:"values"`
		Value  [2]any            `json:"value"`
	}
	type answer struct {
		Status string `json:"status"`
		Data   struct {
			Result []result `json:"result"`
		} `json:"data"`
	}
	query := func(q string) (answer, error) {
		var a answer
		err := getJSON(api+"/api/v1/query?query="+url.QueryEscape(q), &a)
		return a, err
	}
	// Both jobs up and at least three scrapes each.
	waitFor(t, 40*time.Second, "three scrapes of both targets", func() error {
		a, err := query(`count_over_time(test_scrapes_total[1m])`)
		if err != nil {
			return err
		}
		if len(a.Data.Result) != 2 {
			return fmt.Errorf("%d series; want 2 (one per job)", len(a.Data.Result))
		}
		for _, r := range a.Data.Result {
			if n, _ := strconv.Atoi(r.Value[1].(string)); n < 3 {
				return fmt.Errorf("job %s has %d samples", r.Metric["job"], n)
			}
		}
		return nil
	})
	a, err := query(`up`)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range a.Data.Result {
		if r.Value[1] != "1" {
			t.Errorf("up{job=%q} = %v; want 1", r.Metric["job"], r.Value[1])
		}
	}
	if _, ok := formats.Load(FormatOpenMetrics); !ok {
		t.Error("Prometheus never negotiated OpenMetrics")
	}
	// Every value Prometheus holds was served, and it grew.
	a, err = query(`test_scrapes_total[1m]`)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range a.Data.Result {
		if r.Metric["job_kind"] != "eco" {
			t.Errorf("labels %v; want job_kind=eco", r.Metric)
		}
		prev := -1.0
		for _, pt := range r.Values {
			v, _ := strconv.ParseFloat(pt[1].(string), 64)
			if _, ok := served.Load(uint64(v)); !ok {
				t.Errorf("job %s holds %v, a value never served", r.Metric["job"], v)
			}
			if v <= prev {
				t.Errorf("job %s: counter went from %v to %v", r.Metric["job"], prev, v)
			}
			prev = v
		}
	}
	// The other kinds, labels and escapes, through both formats.
	for q, want := range map[string]string{
		`requests_number_total{pid="42",process="nginx"}`:                "7",
		`requests_number_total{pid="43",path="/a \"quoted\" \\ path\n"}`: "8",
		`memory_used_bytes`:                             "1073741824",
		`queue_depth{cgroup="/system.slice/x.service"}`: "-5",
		`load_one`:              "0.42",
		`test_ratio`:            "0.25",
		`latency_p99{pid="43"}`: "+Inf",
		`worker_state{pid="42",state="processing \"job\" 7"}`: "1",
		`http_server_active_conns{listen_addr="0.0.0.0:80"}`:  "3",
	} {
		a, err := query(q)
		if err != nil {
			t.Fatal(err)
		}
		if len(a.Data.Result) != 2 {
			t.Errorf("%s: %d series; want 2 (one per job): %+v", q, len(a.Data.Result), a.Data.Result)
			continue
		}
		for _, r := range a.Data.Result {
			if r.Value[1] != want {
				t.Errorf("%s{job=%q} = %v; want %s", q, r.Metric["job"], r.Value[1], want)
			}
		}
	}
}

// TestRealInfluxDB writes the whole Influx output to a real InfluxDB 1.x and reads values back.
func TestRealInfluxDB(t *testing.T) {
	dir := t.TempDir()
	httpPort, rpcPort := freePort(t), freePort(t)
	cfg := fmt.Sprintf(`reporting-disabled = true
bind-address = "127.0.0.1:%d"
[meta]
  dir = %q
[data]
  dir = %q
  wal-dir = %q
  query-log-enabled = false
[http]
  bind-address = "127.0.0.1:%d"
  log-enabled = false
[monitor]
  store-enabled = false
[continuous_queries]
  enabled = false
`, rpcPort, filepath.Join(dir, "meta"), filepath.Join(dir, "data"), filepath.Join(dir, "wal"), httpPort)
	cfgPath := filepath.Join(dir, "influxdb.conf")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	startProgram(t, "influxd", "-config", cfgPath)
	api := fmt.Sprintf("http://127.0.0.1:%d", httpPort)
	waitFor(t, 30*time.Second, "influxd ping", func() error {
		resp, err := http.Get(api + "/ping")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 204 {
			return fmt.Errorf("ping: %s", resp.Status)
		}
		return nil
	})
	post := func(u, ctype string, body []byte) (int, string) {
		resp, err := http.Post(u, ctype, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := post(api+"/query?q="+url.QueryEscape("CREATE DATABASE cantal"), "", nil); code != 200 {
		t.Fatalf("CREATE DATABASE = %d %s", code, body)
	}

	samples := agentSamples()
	samples = append(samples,
		series.Sample{Labels: series.Labels{"metric": "uptime"}, Kind: series.Level, Bits: 77, TS: 1700000000000},
		series.Sample{Labels: series.Labels{"metric": "big.counter"}, Kind: series.Counter, Bits: math.MaxUint64, TS: 1700000000000},
		series.Sample{Labels: series.Labels{"metric": "odd\x01name.f", "tag with space": "v,a=l"}, Kind: series.Float, Bits: math.Float64bits(1.5), TS: 1700000002000},
	)
	// Served through the handler, as Telegraf's inputs.http would read it.
	srv := httptest.NewServer(InfluxHandler(func() []series.Sample { return samples }, Influx{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if code, body := post(api+"/write?db=cantal", "text/plain", out); code != 204 {
		t.Fatalf("InfluxDB refused the output: %d %s\noutput:\n%s", code, body, out)
	}

	type answer struct {
		Results []struct {
			Series []struct {
				Name    string            `json:"name"`
				Tags    map[string]string `json:"tags"`
				Columns []string          `json:"columns"`
				Values  [][]any           `json:"values"`
			} `json:"series"`
			Error string `json:"error"`
		} `json:"results"`
	}
	check := func(q string, want any) {
		t.Helper()
		var a answer
		if err := getJSON(api+"/query?db=cantal&epoch=ms&q="+url.QueryEscape(q), &a); err != nil {
			t.Fatal(err)
		}
		if len(a.Results) != 1 || a.Results[0].Error != "" || len(a.Results[0].Series) != 1 || len(a.Results[0].Series[0].Values) != 1 {
			t.Errorf("%s: answer %+v; want one value", q, a)
			return
		}
		row := a.Results[0].Series[0].Values[0]
		if got := row[len(row)-1]; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s = %v (%T); want %v", q, got, got, want)
		}
	}
	check(`SELECT "user_seconds" FROM "cpu"`, 12345)
	check(`SELECT "number" FROM "requests" WHERE "pid" = '42' AND "process" = 'nginx'`, 7)
	check(`SELECT "number" FROM "requests" WHERE "pid" = '43'`, 8)
	check(`SELECT "rx_bytes" FROM "net" WHERE "interface" = 'lo'`, 100)
	check(`SELECT "used_bytes" FROM "memory"`, 1073741824)
	check(`SELECT "depth" FROM "queue" WHERE "cgroup" = '/system.slice/x.service'`, -5)
	check(`SELECT "one" FROM "load"`, 0.42)
	check(`SELECT "state" FROM "worker" WHERE "pid" = '42'`, `processing "job" 7`)
	check(`SELECT "value" FROM "uptime"`, 77)
	check(`SELECT "counter" FROM "big"`, int64(math.MaxInt64))
	check(`SELECT "f" FROM "odd_name" WHERE "tag with space" = 'v,a=l'`, 1.5)
	check(`SELECT time, "value" FROM "uptime"`, 77)
	var a answer
	if err := getJSON(api+"/query?db=cantal&epoch=ms&q="+url.QueryEscape(`SELECT "value" FROM "uptime"`), &a); err == nil &&
		len(a.Results) == 1 && len(a.Results[0].Series) == 1 {
		if ts := a.Results[0].Series[0].Values[0][0]; fmt.Sprint(ts) != "1700000000000" {
			t.Errorf("uptime time = %v; want 1700000000000 (ms)", ts)
		}
	}
	// NaN and +Inf, which line protocol cannot carry, were left out: p99 exists for no pid.
	var b answer
	if err := getJSON(api+"/query?db=cantal&q="+url.QueryEscape(`SELECT * FROM "latency"`), &b); err != nil {
		t.Fatal(err)
	}
	if len(b.Results) == 1 && len(b.Results[0].Series) != 0 {
		t.Errorf("latency has points %+v; want none", b.Results[0].Series)
	}
}
