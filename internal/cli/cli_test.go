package cli

import (
	"bytes"
	"context"
	"encoding/binary"
	"flag"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// now is the fixed clock of the tests: 2023-11-14 22:13:20 UTC.
const nowMs = 1_700_000_000_000

// fakeAgent serves the DESIGN.md shapes and records the queries it got.
func fakeAgent(t *testing.T) (*httptest.Server, *[]string) {
	t.Helper()
	var queries []string
	mux := http.NewServeMux()
	reply := func(path, body string) {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			queries = append(queries, r.URL.Path+"?"+r.URL.RawQuery)
			if m := r.URL.Query().Get("match"); m == "{bad" {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				w.Write([]byte(`{"error":"bad match: selector: at offset 4: expected '=', '!=', '=~' or '!~' after label name \"bad\", found end of input"}` + "\n"))
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(body))
		})
	}
	reply("/api/v1/status", `{"node_id":"4f2a","node_name":"web-1","hostname":"web-1.example","version":"0.1.0",
		"started":1699999000000,"uptime_s":1000.25,"interval_ms":2000,"history_s":3600,"pid":321,
		"last_scan":{"ts":1699999998000,"duration_ms":12.345,"scans":500},
		"counts":{"series":104321,"live_series":100000,"processes":250,"apps":3,"problems":2,"history_points":9000000,"history_bytes":52428800},
		"problems":[{"source":"/proc/77/environ","reason":"permission denied"},{"source":"/run/app.meta","reason":"not a regular file"}]}`)
	reply("/api/v1/processes", `{"processes":[
		{"pid":900,"ppid":1,"uid":1000,"name":"app","cmdline":["/usr/bin/app","--port","8080"],"state":"S","start_time":1699999000000,"threads":8,"cpu_user":1.5,"cpu_system":0.5,"cpu_percent":12.34,"rss":104857600,"vsz":1073741824,"swap":0,"read_bytes":0,"write_bytes":0,"cgroup":"app","appname":"shop","metrics":true},
		{"pid":1,"ppid":0,"uid":0,"name":"systemd","cmdline":["/sbin/init"],"state":"S","start_time":1690000000000,"threads":1,"cpu_user":100,"cpu_system":50,"cpu_percent":0.1,"rss":12582912,"vsz":167772160,"swap":0,"read_bytes":0,"write_bytes":0,"cgroup":"","metrics":false},
		{"pid":2,"ppid":0,"uid":0,"name":"kthreadd","cmdline":[],"state":"S","start_time":1690000000000,"threads":1,"cpu_user":0,"cpu_system":0,"cpu_percent":0,"rss":0,"vsz":0,"swap":0,"read_bytes":0,"write_bytes":0,"cgroup":"","metrics":false}]}`)
	reply("/api/v1/containers", `{"containers":[
		{"id":"28b5dec444b2","name":"web-1","image":"localhost/shop:1","cgroup":"libpod_parent.libpod-28b5","cpu_percent":49.87,"cpu_periods":10,"cpu_throttled_periods":8,"cpu_throttled_ms":312.5,"throttled_percent":80,"memory_usage":134217728,"memory_working_set":104857600,"memory_rss":90000000,"memory_cache":30000000,"memory_limit":536870912,"oom_events":3,"oom_kills":2,"processes":4,"io_read_rate":5120,"io_write_rate":0,"net_rx_rate":2048,"net_tx_rate":1000,"ts":1699999998000},
		{"id":"f00dcafe0001","name":"api-0","image":"registry.example/api:2","pod":"api-7d9f","namespace":"shop","cgroup":"kubepods.pod1.cri-containerd-f0","cpu_percent":3.2,"cpu_periods":0,"cpu_throttled_periods":0,"cpu_throttled_ms":0,"throttled_percent":0,"memory_usage":20000000,"memory_working_set":10485760,"memory_rss":0,"memory_cache":0,"memory_limit":0,"oom_events":0,"oom_kills":0,"processes":1,"ts":1699999998000},
		{"id":"0123456789ab","name":"evil\u001b[31m","image":"x","cgroup":"docker.0123","cpu_percent":0,"cpu_periods":0,"cpu_throttled_periods":0,"cpu_throttled_ms":0,"throttled_percent":0,"memory_usage":0,"memory_working_set":0,"memory_rss":0,"memory_cache":0,"memory_limit":0,"oom_events":0,"oom_kills":0,"processes":0,"ts":1699999998000}],"total":3}`)
	reply("/api/v1/metrics", `{"series":[
		{"labels":{"metric":"requests.number","pid":"900","process":"app"},"kind":"counter","value":18446744073709551615,"ts":1699999998000,"rate":12.5},
		{"labels":{"metric":"memory.used","unit":"bytes","pid":"900"},"kind":"level","value":-1572864,"ts":1699999998000},
		{"labels":{"metric":"load","pid":"900"},"kind":"float","value":"NaN","ts":1699999998000},
		{"labels":{"metric":"temperature"},"kind":"float","value":21.125,"ts":1699999998000},
		{"labels":{"metric":"sql.state","pid":"900"},"kind":"state","value":"SELECT\t1","ts":1699999998000,"text":"SELECT\t1","since":1699999940000},
		{"labels":{"metric":"idle.state"},"kind":"state","value":"","ts":1699999998000,"text":"","since":0},
		{"labels":{"metric":"evil name","x":"a\u001b[31mred"},"kind":"counter","value":1,"ts":1699999998000}]}`)
	reply("/api/v1/history", `{"series":[
		{"labels":{"metric":"requests.number","pid":"900"},"kind":"counter","fn":"rate","points":[[1699999970000,7],[1699999990000,10],[1699999992000,12.5],[1699999994000,"NaN"],[1699999996000,11],[1700000000000,9]]},
		{"labels":{"metric":"disk.bytes","unit":"bytes"},"kind":"level","points":[[1699999996000,1024],[1699999998000,1536]]}]}`)
	reply("/api/v1/stats", `{"series":[
		{"labels":{"metric":"requests.number","pid":"900"},"count":30,"min":0,"max":25,"mean":12.5,"median":12,"p90":22.5,"p95":24,"p99":24.8,"slope":0.2678571428571428},
		{"labels":{"metric":"empty"},"count":0,"min":"NaN","max":"NaN","mean":"NaN","median":"NaN","p90":"NaN","p95":"NaN","p99":"NaN","slope":"NaN"},
		{"labels":{"metric":"heap","unit":"bytes"},"count":2,"min":1048576,"max":3145728,"mean":2097152,"median":2097152,"p90":2936012.8,"p95":3040870.4,"p99":3124756.48,"slope":"NaN"}]}`)
	reply("/api/v1/peers", `{"peers":[
		{"id":"b1","name":"web-2","addr":"10.0.0.2:22682","http":"http://10.0.0.2:22682","status":"alive","rtt_ms":0.42,"last_seen":1699999999000},
		{"id":"a9","name":"db-1","addr":"10.0.0.9:22682","http":"http://10.0.0.9:22682","status":"suspect","rtt_ms":null,"last_seen":1699999700000}]}`)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, &queries
}

func testCLI(env map[string]string) (*CLI, *bytes.Buffer, *bytes.Buffer) {
	var out, errb bytes.Buffer
	return &CLI{
		Stdout:   &out,
		Stderr:   &errb,
		Getenv:   func(k string) string { return env[k] },
		Now:      func() time.Time { return time.UnixMilli(nowMs) },
		Location: time.UTC,
	}, &out, &errb
}

func golden(t *testing.T, name string, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("output of %s differs from %s:\n--- got\n%s--- want\n%s", name, path, got, want)
	}
}

func TestAgentCommandsGolden(t *testing.T) {
	srv, queries := fakeAgent(t)
	for _, tc := range []struct {
		name  string
		args  []string
		query string // the request the agent must have received
	}{
		{"status", []string{"status"}, "/api/v1/status?"},
		{"processes", []string{"processes"}, "/api/v1/processes?"},
		{"processes_cpu", []string{"processes", "--sort", "cpu"}, "/api/v1/processes?"},
		{"containers", []string{"containers"}, "/api/v1/containers?"},
		{"containers_mem", []string{"containers", "--sort", "mem"}, "/api/v1/containers?sort=mem"},
		{"metrics", []string{"metrics", "--match", `{pid="900"}`}, "/api/v1/metrics?match=" + url.QueryEscape(`{pid="900"}`)},
		{"history", []string{"history", "requests.number", "--window", "10s", "--rate"}, "/api/v1/history?fn=rate&match=requests.number&window=10s"},
		{"stats", []string{"stats", "--window=1m"}, "/api/v1/stats?window=1m"},
		// README documents stats --rate: the statistics of counters' rates (fn=rate).
		{"stats", []string{"stats", "--rate", "--window=1m"}, "/api/v1/stats?fn=rate&window=1m"},
		{"peers", []string{"peers"}, "/api/v1/peers?"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			*queries = nil
			c, out, errb := testCLI(map[string]string{"CANTAL_AGENT": srv.URL})
			if code := c.Run(context.Background(), tc.args); code != 0 {
				t.Fatalf("Run(%q) = %d; stderr: %s", tc.args, code, errb)
			}
			if len(*queries) != 1 || (*queries)[0] != tc.query {
				t.Errorf("Run(%q) sent %q; want [%q]", tc.args, *queries, tc.query)
			}
			golden(t, tc.name, out.String())
		})
	}
}

func TestJSONPassthrough(t *testing.T) {
	srv, _ := fakeAgent(t)
	c, out, _ := testCLI(nil)
	if code := c.Run(context.Background(), []string{"peers", "-o", "json", "--agent", srv.URL}); code != 0 {
		t.Fatalf("exit %d", code)
	}
	resp, err := http.Get(srv.URL + "/api/v1/peers")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var want bytes.Buffer
	want.ReadFrom(resp.Body)
	if out.String() != want.String()+"\n" {
		t.Errorf("-o json printed %q; want the agent's answer %q", out, want.String())
	}
}

func TestAgentErrors(t *testing.T) {
	srv, _ := fakeAgent(t)
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"metrics", "{bad", "--agent", srv.URL}, ExitError,
			`cantal: agent answered 400 Bad Request to /api/v1/metrics: bad match: selector: at offset 4: expected '=', '!=', '=~' or '!~' after label name "bad", found end of input`},
		{[]string{"metrics", "--agent", srv.URL + "/nothing-here"}, ExitError, "cantal: agent answered 404 Not Found to /nothing-here/api/v1/metrics: 404 page not found"},
		{[]string{"status", "--agent", "http://127.0.0.1:1"}, ExitError, "cantal: cannot reach the agent at http://127.0.0.1:1"},
		{[]string{"status", "--agent", "ftp://x"}, ExitUsage, `cantal: --agent "ftp://x": want an http:// or https:// URL`},
		{[]string{"frobnicate"}, ExitUsage, `cantal: unknown command "frobnicate"`},
		{nil, ExitUsage, "cantal: no command given"},
		{[]string{"status", "--rate"}, ExitUsage, "cantal: status: flag provided but not defined: -rate"},
		{[]string{"metrics", "a", "b"}, ExitUsage, `cantal: metrics: unexpected argument "b"`},
		{[]string{"metrics", "a", "--match", "b"}, ExitUsage, "cantal: metrics: give the selector either as an argument or with --match, not both"},
		{[]string{"history", "--window", "soon"}, ExitUsage, `cantal: history: --window "soon": want a positive duration`},
		{[]string{"metrics", "-o", "yaml"}, ExitUsage, `cantal: metrics: -o "yaml": want table or json`},
		{[]string{"processes", "--sort", "name"}, ExitUsage, `cantal: processes: --sort "name": want pid, cpu or rss`},
		{[]string{"containers", "--sort", "rss"}, ExitUsage, `cantal: containers: --sort "rss": want name, cpu or mem`},
	} {
		c, out, errb := testCLI(nil)
		code := c.Run(context.Background(), tc.args)
		if code != tc.code || !strings.HasPrefix(errb.String(), tc.msg) {
			t.Errorf("Run(%q) = %d, stderr %q; want %d, %q", tc.args, code, errb, tc.code, tc.msg)
		}
		if out.Len() != 0 {
			t.Errorf("Run(%q) printed %q to stdout on error", tc.args, out)
		}
	}
}

func TestBadAnswer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"series": [{"labels": 7}]}`))
	}))
	defer srv.Close()
	c, _, errb := testCLI(nil)
	if code := c.Run(context.Background(), []string{"metrics", "--agent", srv.URL}); code != ExitError || !strings.Contains(errb.String(), "unexpected shape") {
		t.Errorf("Run on a malformed answer = %d, %q; want exit 1 and a shape error", code, errb)
	}
}

func TestHelp(t *testing.T) {
	c, out, _ := testCLI(nil)
	if code := c.Run(context.Background(), []string{"help"}); code != 0 || !strings.Contains(out.String(), "Usage: cantal COMMAND") {
		t.Errorf("help = %d, %q", code, out)
	}
	c, out, _ = testCLI(nil)
	if code := c.Run(context.Background(), []string{"metrics", "-h"}); code != 0 || !strings.Contains(out.String(), "--match SEL") {
		t.Errorf("metrics -h = %d, %q", code, out)
	}
}

func TestNoSeries(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"series":[]}`))
	}))
	defer srv.Close()
	c, out, errb := testCLI(map[string]string{"CANTAL_AGENT": srv.URL})
	if code := c.Run(context.Background(), []string{"stats", "nothing"}); code != 0 || out.Len() != 0 || errb.String() != "no series match nothing\n" {
		t.Errorf("stats with no series = %d, %q, %q", code, out, errb)
	}
}

// ---- values ----

// writeApp writes a CANTAL_PATH base by hand: meta and values as an application would.
func writeApp(t *testing.T, base string) {
	t.Helper()
	meta := "counter 8: {\"metric\": \"requests.number\"}\n" +
		"level 8 signed: {\"metric\": \"queue.size\"}\n" +
		"level 8 float: {\"metric\": \"load\"}\n" +
		"level 8 signed: {\"metric\": \"heap\", \"unit\": \"bytes\"}\n" +
		"pad 32\n" +
		"state 64: {\"metric\": \"sql\"}\n"
	values := make([]byte, 128)
	ne := binary.NativeEndian
	ne.PutUint64(values[0:], 97)
	ne.PutUint64(values[8:], uint64(^uint64(2)))  // -3
	ne.PutUint64(values[16:], 0x3ff8000000000000) // 1.5
	ne.PutUint64(values[24:], 3<<20)
	ne.PutUint64(values[64:], uint64(nowMs-90_000))
	copy(values[72:], "SELECT 1")
	if err := os.MkdirAll(filepath.Dir(base), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(base+".values", values, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(base+".meta", []byte(meta), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestValuesPath(t *testing.T) {
	base := filepath.Join(t.TempDir(), "app")
	writeApp(t, base)
	for _, arg := range []string{base, base + ".meta", base + ".values"} {
		c, out, errb := testCLI(nil)
		if code := c.Run(context.Background(), []string{"values", arg}); code != 0 {
			t.Fatalf("values %s = %d: %s", arg, code, errb)
		}
		golden(t, "values", out.String())
	}
	// From $CANTAL_PATH, as JSON.
	c, out, errb := testCLI(map[string]string{"CANTAL_PATH": base})
	if code := c.Run(context.Background(), []string{"values", "-o", "json"}); code != 0 {
		t.Fatalf("values -o json = %d: %s", code, errb)
	}
	golden(t, "values_json", out.String())
}

func TestValuesPID(t *testing.T) {
	// A fake /proc whose process 4242 lives in its own root, as in a container.
	proc := t.TempDir()
	dir := filepath.Join(proc, "4242")
	writeApp(t, filepath.Join(dir, "root", "run", "app"))
	os.WriteFile(filepath.Join(dir, "environ"), []byte("HOME=/\x00CANTAL_PATH=/run/app\x00CANTAL_APPNAME=shop\x00"), 0o644)
	os.WriteFile(filepath.Join(dir, "comm"), []byte("shopd\n"), 0o644)
	os.MkdirAll(filepath.Join(proc, "7"), 0o755)
	os.WriteFile(filepath.Join(proc, "7", "environ"), []byte("HOME=/\x00"), 0o644)

	c, out, errb := testCLI(nil)
	c.Proc = proc
	if code := c.Run(context.Background(), []string{"values", "4242"}); code != 0 {
		t.Fatalf("values 4242 = %d: %s", code, errb)
	}
	golden(t, "values_pid", out.String())

	for _, tc := range []struct{ pid, msg string }{
		{"7", "cantal: process 7 has no CANTAL_PATH in its environment"},
		{"99", "cantal: no process 99"},
	} {
		c, _, errb := testCLI(nil)
		c.Proc = proc
		if code := c.Run(context.Background(), []string{"values", tc.pid}); code != ExitError || !strings.HasPrefix(errb.String(), tc.msg) {
			t.Errorf("values %s = %d, %q; want 1, %q", tc.pid, code, errb, tc.msg)
		}
	}
}

func TestValuesErrors(t *testing.T) {
	dir := t.TempDir()
	c, _, errb := testCLI(nil)
	if code := c.Run(context.Background(), []string{"values"}); code != ExitUsage {
		t.Errorf("values with no argument and no CANTAL_PATH = %d, %q; want 2", code, errb)
	}
	c, _, errb = testCLI(nil)
	if code := c.Run(context.Background(), []string{"values", filepath.Join(dir, "missing")}); code != ExitError || !strings.Contains(errb.String(), "read metrics at") {
		t.Errorf("values of missing files = %d, %q", code, errb)
	}
	// A values file shorter than its layout.
	base := filepath.Join(dir, "short")
	os.WriteFile(base+".meta", []byte("counter 8: {\"metric\": \"x\"}\n"), 0o644)
	os.WriteFile(base+".values", []byte{1, 2}, 0o644)
	c, _, errb = testCLI(nil)
	if code := c.Run(context.Background(), []string{"values", base}); code != ExitError || !strings.Contains(errb.String(), "read metrics at") {
		t.Errorf("values of a short file = %d, %q", code, errb)
	}
}

func TestVersion(t *testing.T) {
	for _, arg := range []string{"version", "--version", "-version"} {
		c, out, _ := testCLI(nil)
		if code := c.Run(context.Background(), []string{arg}); code != 0 || !strings.HasPrefix(out.String(), "cantal version ") || !strings.Contains(out.String(), runtime.Version()) {
			t.Errorf("%s = %d, %q; want exit 0 and the version with Go's", arg, code, out)
		}
	}
}
