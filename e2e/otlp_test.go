package e2e

import (
	"fmt"
	"math"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// otelapp builds e2e/otelapp, a real OpenTelemetry Go SDK application in a module of its own
// (go.opentelemetry.io/otel/sdk/metric with the otlpmetrichttp exporter), once per run.
var otelappOnce = sync.OnceValues(func() (string, error) {
	out := filepath.Join(bin, "otelapp")
	cmd := exec.Command("go", "build", "-o", out, ".")
	cmd.Dir = "otelapp"
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build e2e/otelapp: %v\n%s", err, b)
	}
	return out, nil
})

// runOtelapp runs the SDK application against the agent and waits for it to exit.
func runOtelapp(t *testing.T, a *agent, args ...string) string {
	t.Helper()
	app, err := otelappOnce()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(app, append([]string{"-endpoint", strings.TrimPrefix(a.URL, "http://")}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil || strings.Contains(strings.ToLower(string(out)), "error") {
		t.Fatalf("otelapp %v: %v\n%s\nagent:\n%s", args, err, out, a.out)
	}
	return string(out)
}

// TestOTLPIngestOTelSDK: an application instrumented with the OpenTelemetry Go SDK pushes a
// counter, a gauge and a histogram over OTLP/HTTP (protobuf) to the agent, in 3 flushed rounds
// 2.5 s apart; the JSON API shows them with their values and labels (appname from service.name,
// instance from service.instance.id), and history holds one point per push.
func TestOTLPIngestOTelSDK(t *testing.T) {
	aside(t) // its agent sees pushed series only: its own PIDs keep it light beside the serial tests
	a := startAgentOwnPIDs(t)
	for _, c := range []struct {
		name  string
		delta bool
	}{{"cumulative", false}, {"delta", true}} {
		t.Run(c.name, func(t *testing.T) {
			svc := "shop-" + c.name
			// 2.5 s between flushes: five scans apart, so that each lands in a scan of its own
			// even when the loaded machine delays a scan.
			args := []string{"-service", svc, "-instance", "i-7", "-rounds", "3", "-pause", "2500ms"}
			if c.delta {
				args = append(args, "-delta")
			}
			runOtelapp(t, a, args...)
			want := map[string]struct {
				kind  string
				value float64
			}{
				"app.requests":      {"counter", 15}, // 3 rounds of 5; delta exports added up
				"app.temperature":   {"float", 24.5}, // the last round's gauge, 3 + 21.5
				"app.latency.count": {"counter", 300},
				"app.latency.sum":   {"float", 3 * 5050},
				"app.latency.p50":   {"float", 50}, // each round's 1..100 in bounds 10,25,50,75,100
				"app.latency.p90":   {"float", 90},
				"app.latency.p99":   {"float", 99},
			}
			var ss []Series
			waitFor(t, 10*time.Second, func() error {
				var err error
				ss, err = a.series("/api/v1/metrics", fmt.Sprintf(`{appname=%q}`, svc))
				if err != nil {
					return err
				}
				for m, w := range want {
					s := find(ss, m)
					if s == nil || s.Kind != w.kind || math.Abs(num(s.Value)-w.value) > 1e-9 {
						return fmt.Errorf("%s = %+v; want %s %v", m, s, w.kind, w.value)
					}
					if s.Labels["instance"] != "i-7" || s.Labels["source"] != "push" {
						return fmt.Errorf("%s labels %v; want instance=i-7 source=push", m, s.Labels)
					}
				}
				return nil
			})
			if s := find(ss, "app.requests"); s.Labels["route"] != "/a" {
				t.Errorf("app.requests labels %v; want route=/a (the data point's attribute)", s.Labels)
			}
			// Each flush is one point, at its own scan: 5, 10, 15 — never repeated.
			hs, err := a.series("/api/v1/history?window=5m", fmt.Sprintf(`{metric="app.requests", appname=%q}`, svc))
			if err != nil || len(hs) != 1 {
				t.Fatalf("history = %v, %v; want one series", hs, err)
			}
			var vals []float64
			for _, p := range hs[0].Points {
				vals = append(vals, p[1])
			}
			if fmt.Sprint(vals) != "[5 10 15]" {
				_, st := a.raw("GET", "/api/v1/status", "")
				t.Errorf("app.requests history %v; want [5 10 15], one point per push; status: %s", vals, st)
			}
		})
	}
}

// TestWriteTimestampsE2E: /write points with old, current and future timestamps, against the
// real agent (500 ms scans).
func TestWriteTimestampsE2E(t *testing.T) {
	serial(t)
	a := startAgent(t)
	a.waitScans(3)
	now := time.Now().UnixMilli()
	body := fmt.Sprintf("ts old=1 %d\nts far=2 %d\nts cur=3\n", now-10*60*1000, now+60*1000)
	code, ans := a.raw("POST", "/write?precision=ms", body)
	if code != 400 || !strings.Contains(ans, `"lines":[1,2]`) || !strings.Contains(ans, "too old") || !strings.Contains(ans, "ahead of the agent's clock") {
		t.Errorf("POST = %d %s; want 400 refusing line 1 (too old) and line 2 (too far ahead)", code, ans)
	}
	// A point 300 ms old is late: it goes to the scan already taken after its time. (Unless
	// that scan closed a history segment just now, 1 time in 64: then it is refused as too
	// old, and a fresh one is sent.)
	var late int64
	for try := 0; try < 2; try++ {
		late = time.Now().UnixMilli() - 300
		code, ans = a.raw("POST", "/write?precision=ms", fmt.Sprintf("ts late=4 %d\n", late))
		if code == 204 || !strings.Contains(ans, "too old") {
			break
		}
	}
	if code != 204 {
		t.Fatalf("POST of a late point = %d %s; want 204", code, ans)
	}
	var ss []Series
	waitFor(t, 10*time.Second, func() error {
		var err error
		ss, err = a.series("/api/v1/history?window=5m", `{metric=~"ts.*"}`)
		if err == nil && len(ss) != 2 {
			err = fmt.Errorf("history %v; want ts.cur and ts.late only", ss)
		}
		return err
	})
	time.Sleep(2 * time.Second) // more scans: still one point each
	ss, err := a.series("/api/v1/history?window=5m", `{metric=~"ts.*"}`)
	if err != nil || len(ss) != 2 {
		t.Fatalf("history %v, %v; want ts.cur and ts.late only", ss, err)
	}
	for _, s := range ss {
		if len(s.Points) != 1 {
			t.Errorf("%s: %v; want exactly one point", s.Labels["metric"], s.Points)
			continue
		}
		ts := int64(s.Points[0][0])
		if s.Labels["metric"] == "ts.late" && (ts < late || ts > late+2500) {
			t.Errorf("ts.late stored at %d; want the first scan at or after %d (within MaxSlot, 5 intervals)", ts, late)
		}
	}
}

// TestOTLPJSONCurl: an OTLP/JSON request sent by curl, the way a shell script or a collector
// configured for http/json would; the answer is an ExportMetricsServiceResponse in JSON, with
// partial_success for the refused data point.
func TestOTLPJSONCurl(t *testing.T) {
	serial(t)
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Fatalf("curl is needed (scripts/setup.sh installs it): %v", err)
	}
	a := startAgent(t)
	now := time.Now().UnixNano()
	body := fmt.Sprintf(`{"resourceMetrics":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"jsonsvc"}}]},
"scopeMetrics":[{"metrics":[
 {"name":"jobs.done","sum":{"aggregationTemporality":2,"isMonotonic":true,"dataPoints":[{"timeUnixNano":"%d","asInt":"42","attributes":[{"key":"queue","value":{"stringValue":"mail"}}]}]}},
 {"name":"jobs.bad","sum":{"isMonotonic":true,"dataPoints":[{"timeUnixNano":"%d","asInt":"1"}]}}
]}]}]}`, now, now)
	out, err := exec.Command(curl, "-sS", "-X", "POST", "-H", "Content-Type: application/json",
		"--data-binary", body, "-w", "\n%{http_code}", a.URL+"/v1/metrics").CombinedOutput()
	if err != nil {
		t.Fatalf("curl: %v: %s", err, out)
	}
	if !strings.HasSuffix(string(out), "\n200") || !strings.Contains(string(out), `"rejectedDataPoints":"1"`) ||
		!strings.Contains(string(out), "unspecified aggregation temporality") {
		t.Errorf("answer %s; want 200 with partial success: 1 rejected (unspecified temporality)", out)
	}
	waitFor(t, 10*time.Second, func() error {
		ss, err := a.series("/api/v1/metrics", `{appname="jsonsvc"}`)
		if err != nil {
			return err
		}
		if s := find(ss, "jobs.done"); s == nil || s.Kind != "counter" || num(s.Value) != 42 || s.Labels["queue"] != "mail" {
			return fmt.Errorf("jobs.done = %+v; want counter 42 queue=mail", s)
		}
		if s := find(ss, "jobs.bad"); s != nil {
			return fmt.Errorf("jobs.bad stored: %+v", s)
		}
		return nil
	})
}

// TestOTLPPartialSuccessOTelSDK: the SDK reads the agent's ExportMetricsServiceResponse: a data
// point the agent refuses (an attribute named "metric") comes back as a partial success that
// the SDK reports with the agent's reason, and the other metrics are stored.
func TestOTLPPartialSuccessOTelSDK(t *testing.T) {
	aside(t) // its agent sees pushed series only: its own PIDs keep it light beside the serial tests
	a := startAgentOwnPIDs(t)
	app, err := otelappOnce()
	if err != nil {
		t.Fatal(err)
	}
	// ForceFlush returns the partial success as an error: the app says it and exits 1.
	out, _ := exec.Command(app, "-endpoint", strings.TrimPrefix(a.URL, "http://"), "-service", "partial",
		"-rounds", "1", "-reserved").CombinedOutput()
	for _, want := range []string{"OTLP partial success", `attribute "metric" is reserved`, "(1 metric data points rejected)"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the SDK's report lacks %q:\n%s", want, out)
		}
	}
	waitFor(t, 10*time.Second, func() error {
		ss, err := a.series("/api/v1/metrics", `{appname="partial"}`)
		if err != nil {
			return err
		}
		if s := find(ss, "app.temperature"); s == nil || num(s.Value) != 22.5 {
			return fmt.Errorf("app.temperature = %+v; want 22.5 (stored beside the refused point)", s)
		}
		if s := find(ss, "app.requests"); s != nil {
			return fmt.Errorf("app.requests stored: %+v", s)
		}
		return nil
	})
}
