package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func need(t *testing.T, prog string) string {
	t.Helper()
	p, err := exec.LookPath(prog)
	if err != nil {
		t.Fatalf("%s is not installed: run `make setup` (scripts/install-deps.sh)", prog)
	}
	return p
}

func httpJSON(u string, v any) error {
	resp, err := http.Get(u)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return fmt.Errorf("GET %s: %s %s", u, resp.Status, b)
	}
	return json.Unmarshal(b, v)
}

// TestPrometheusScrapesAgent: a real Prometheus scraping the agent's /metrics every 2 s holds
// an application's counter, rising at the application's rate.
func TestPrometheusScrapesAgent(t *testing.T) {
	serial(t)
	prom := need(t, "prometheus")
	a := startAgent(t)
	app := startProc(t, []string{"CANTAL_PATH=" + filepath.Join(t.TempDir(), "app")}, nil,
		filepath.Join(bin, "testapp"), "-rate", "100")
	dir := t.TempDir()
	cfg := fmt.Sprintf("global:\n  scrape_interval: 2s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: cantal\n    static_configs: [{targets: [%q]}]\n",
		strings.TrimPrefix(a.URL, "http://"))
	os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644)
	addr := freePort(t)
	startProc(t, nil, nil, prom, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr, "--log.level=warn")
	api := "http://" + addr
	type answer struct {
		Data struct {
			Result []struct {
				Metric map[string]string
				Value  [2]any
			}
		}
	}
	q := fmt.Sprintf(`rate(requests_number_total{pid=%q}[10s])`, app.pid())
	waitFor(t, 60*time.Second, func() error {
		var ans answer
		if err := httpJSON(api+"/api/v1/query?query="+url.QueryEscape(q), &ans); err != nil {
			return err
		}
		if len(ans.Data.Result) != 1 {
			return fmt.Errorf("%s: %d results", q, len(ans.Data.Result))
		}
		r := ans.Data.Result[0]
		if r.Metric["process"] != "testapp" {
			return fmt.Errorf("labels %v; want process=testapp", r.Metric)
		}
		v := num(r.Value[1])
		if v < 80 || v > 120 {
			return fmt.Errorf("Prometheus sees a rate of %v; want about 100/s", v)
		}
		return nil
	})
	// The agent's own machine series are there too.
	var ans answer
	if err := httpJSON(api+"/api/v1/query?query="+url.QueryEscape(`up{job="cantal"}`), &ans); err != nil || len(ans.Data.Result) != 1 || num(ans.Data.Result[0].Value[1]) != 1 {
		t.Errorf("up{job=cantal} = %+v, %v; want 1", ans, err)
	}
}

// TestInfluxDBTakesAgentOutput: a real InfluxDB 1.x accepts the agent's whole /influx output
// and returns an application's value by query.
func TestInfluxDBTakesAgentOutput(t *testing.T) {
	serial(t)
	influxd := need(t, "influxd")
	a := startAgent(t)
	app := startProc(t, []string{"CANTAL_PATH=" + filepath.Join(t.TempDir(), "app")}, nil,
		filepath.Join(bin, "testapp"), "-level", "1234")
	waitFor(t, 5*time.Second, func() error {
		ss, err := a.series("/api/v1/metrics", fmt.Sprintf(`{pid=%q, metric="queue.length"}`, app.pid()))
		if err == nil && len(ss) != 1 {
			err = fmt.Errorf("queue.length not read yet")
		}
		return err
	})
	dir := t.TempDir()
	httpAddr, rpcAddr := freePort(t), freePort(t)
	cfg := fmt.Sprintf("reporting-disabled = true\nbind-address = %q\n[meta]\n  dir = %q\n[data]\n  dir = %q\n  wal-dir = %q\n  query-log-enabled = false\n[http]\n  bind-address = %q\n  log-enabled = false\n[monitor]\n  store-enabled = false\n",
		rpcAddr, filepath.Join(dir, "meta"), filepath.Join(dir, "data"), filepath.Join(dir, "wal"), httpAddr)
	os.WriteFile(filepath.Join(dir, "influxdb.conf"), []byte(cfg), 0o644)
	startProc(t, nil, nil, influxd, "-config", filepath.Join(dir, "influxdb.conf"))
	api := "http://" + httpAddr
	waitFor(t, 30*time.Second, func() error {
		resp, err := http.Get(api + "/ping")
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	})
	if resp, err := http.Post(api+"/query?q="+url.QueryEscape("CREATE DATABASE cantal"), "", nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("CREATE DATABASE: %v %v", resp, err)
	}
	code, lines := a.raw("GET", "/influx", "")
	if code != 200 || !strings.Contains(lines, "queue") {
		t.Fatalf("GET /influx = %d, %d bytes without queue.length", code, len(lines))
	}
	resp, err := http.Post(api+"/write?db=cantal&precision=ns", "text/plain", bytes.NewBufferString(lines))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 204 {
		t.Fatalf("InfluxDB refused the agent's output: %s %s", resp.Status, body)
	}
	var ans struct {
		Results []struct {
			Series []struct {
				Columns []string
				Values  [][]any
			}
		}
	}
	q := fmt.Sprintf(`SELECT "length" FROM "queue" WHERE "pid" = '%s'`, app.pid())
	if err := httpJSON(api+"/query?db=cantal&q="+url.QueryEscape(q), &ans); err != nil {
		t.Fatal(err)
	}
	if len(ans.Results) == 0 || len(ans.Results[0].Series) == 0 || len(ans.Results[0].Series[0].Values) == 0 {
		t.Fatalf("%s: no rows: %+v", q, ans)
	}
	row := ans.Results[0].Series[0].Values[0]
	if num(row[len(row)-1]) != 1234 {
		t.Errorf("InfluxDB holds queue.length = %v; want 1234", row)
	}
	// Every line names the node with a host tag, as Telegraf's do.
	var st struct {
		NodeName string `json:"node_name"`
	}
	if err := a.get("/api/v1/status", &st); err != nil || st.NodeName == "" {
		t.Fatalf("status: %v %+v", err, st)
	}
	q = fmt.Sprintf(`SELECT count("length") FROM "queue" WHERE "host" = '%s' AND "pid" = '%s'`, st.NodeName, app.pid())
	ans.Results = nil
	if err := httpJSON(api+"/query?db=cantal&q="+url.QueryEscape(q), &ans); err != nil {
		t.Fatal(err)
	}
	if len(ans.Results) == 0 || len(ans.Results[0].Series) == 0 || len(ans.Results[0].Series[0].Values) == 0 {
		t.Errorf("%s: no rows: the host tag is missing", q)
	}
}

// TestPushIngest: lines POSTed to /write and statsd packets join the agent's series and history.
func TestPushIngest(t *testing.T) {
	serial(t)
	statsd := freePort(t)
	a := startAgent(t, "--statsd", statsd)
	code, body := a.raw("POST", "/write?precision=s", "jobs,queue=mail pending=7i\nnot a valid line\njobs,queue=mail done=3u\n")
	if code != 400 || !strings.Contains(body, "line 2") {
		t.Errorf("partial write = %d %s; want 400 naming line 2", code, body)
	}
	conn, err := net.Dial("udp", statsd)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	waitFor(t, 10*time.Second, func() error {
		conn.Write([]byte("shop.orders:1|c|#region:eu\nshop.cart:5|g"))
		ss, err := a.series("/api/v1/metrics", `{metric=~"jobs.*|shop.*"}`)
		if err != nil {
			return err
		}
		if s := find(ss, "jobs.pending"); s == nil || s.Kind != "level" || num(s.Value) != 7 || s.Labels["queue"] != "mail" {
			return fmt.Errorf("jobs.pending = %+v; want level 7 queue=mail", s)
		}
		if s := find(ss, "jobs.done"); s == nil || s.Kind != "counter" || num(s.Value) != 3 {
			return fmt.Errorf("jobs.done = %+v; want counter 3", s)
		}
		if s := find(ss, "shop.orders"); s == nil || s.Kind != "counter" || s.Labels["region"] != "eu" {
			return fmt.Errorf("shop.orders = %+v; want a counter with region=eu", s)
		}
		if s := find(ss, "shop.cart"); s == nil || num(s.Value) != 5 {
			return fmt.Errorf("shop.cart = %+v; want 5", s)
		}
		return nil
	})
	// One push is one point, stored once at its scan, however many scans follow.
	time.Sleep(2 * time.Second) // four scans at 500 ms
	ss, err := a.series("/api/v1/history?window=1m", `jobs.pending`)
	if err != nil || len(ss) != 1 || len(ss[0].Points) != 1 || ss[0].Points[0][1] != 7 {
		t.Errorf("history of one push = %v, %v; want exactly one point, 7", ss, err)
	}
}
