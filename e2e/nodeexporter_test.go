package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The node_exporter side-by-side tests: the real node_exporter (Debian
// prometheus-node-exporter 1.5, scripts/install-deps.sh) and the real agent on the same
// machine, scraped at the same moment; a real Prometheus evaluating node-mixin's rules and
// alerts against the agent alone; promtool on the agent's live /metrics.

// startNodeExporter starts node_exporter with its default collectors on a free loopback port.
func startNodeExporter(t *testing.T) string {
	t.Helper()
	return startNodeExporterArgs(t)
}

// startNodeExporterArgs starts node_exporter with args (besides its listen address and log
// level) on a free loopback port and returns its /metrics URL.
func startNodeExporterArgs(t *testing.T, args ...string) string {
	t.Helper()
	ne, err := exec.LookPath("prometheus-node-exporter")
	if err != nil {
		t.Fatalf("prometheus-node-exporter is not installed: run `make setup` (scripts/install-deps.sh)")
	}
	addr := freePort(t)
	startProc(t, nil, nil, ne, append([]string{"--web.listen-address=" + addr, "--log.level=warn"}, args...)...)
	u := "http://" + addr + "/metrics"
	waitFor(t, 15*time.Second, func() error { _, err := scrapeFamilies(u); return err })
	return u
}

// debianMountPointsExclude is the default --collector.filesystem.mount-points-exclude of
// Debian's prometheus-node-exporter package.
const debianMountPointsExclude = `^/(dev|proc|run|sys|mnt|media|var/lib/docker/.+|var/lib/containers/storage/.+)($|/)`

type scrape struct {
	fams       map[string]*dto.MetricFamily
	start, end time.Time
}

// scrapeFamilies GETs u and parses the text exposition with prometheus/common's parser (the
// one Prometheus' own tools use).
func scrapeFamilies(u string) (map[string]*dto.MetricFamily, error) {
	req, _ := http.NewRequest("GET", u, nil)
	req.Header.Set("Accept", "text/plain; version=0.0.4")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(bytes.NewReader(body))
}

// scrapeBoth scrapes both URLs at the same moment.
func scrapeBoth(t *testing.T, a, b string) (sa, sb scrape) {
	t.Helper()
	var wg sync.WaitGroup
	var ea, eb error
	do := func(u string, s *scrape, e *error) {
		defer wg.Done()
		s.start = time.Now()
		s.fams, *e = scrapeFamilies(u)
		s.end = time.Now()
	}
	wg.Add(2)
	go do(a, &sa, &ea)
	go do(b, &sb, &eb)
	wg.Wait()
	if err := errors.Join(ea, eb); err != nil {
		t.Fatal(err)
	}
	return sa, sb
}

func seriesKey(m *dto.Metric) string {
	ls := m.GetLabel()
	parts := make([]string, 0, len(ls))
	for _, l := range ls {
		// A label with an empty value is no label to Prometheus, which drops it at ingestion:
		// node_exporter writes node_interrupts_total's devices="" of named interrupts, the
		// agent leaves it out, and both are the same series once scraped.
		if l.GetValue() != "" {
			parts = append(parts, l.GetName()+"="+l.GetValue())
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

func labelNames(f *dto.MetricFamily) []string {
	set := map[string]bool{}
	for _, m := range f.GetMetric() {
		for _, l := range m.GetLabel() {
			set[l.GetName()] = true
		}
	}
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func metricValue(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Untyped != nil:
		return m.GetUntyped().GetValue()
	}
	return math.NaN()
}

func values(f *dto.MetricFamily) map[string]float64 {
	out := make(map[string]float64, len(f.GetMetric()))
	if f == nil {
		return out
	}
	for _, m := range f.GetMetric() {
		out[seriesKey(m)] = metricValue(m)
	}
	return out
}

// nodeMixinFamilies are the node_exporter families node-mixin's recording rules and alerts use
// on Linux (docs/node-mixin/rules/rules.libsonnet and alerts/alerts.libsonnet of
// prometheus/node_exporter), leaving out node_md_* (no software RAID here, node_exporter has
// none either) and node_textfile_scrape_error (node_exporter's own text-file collector).
var nodeMixinFamilies = []string{
	"node_cpu_seconds_total", "node_load1", "node_memory_MemAvailable_bytes",
	"node_memory_MemTotal_bytes", "node_memory_Buffers_bytes", "node_memory_Cached_bytes",
	"node_memory_MemFree_bytes", "node_memory_Slab_bytes", "node_vmstat_pgmajfault",
	"node_vmstat_pgpgin", "node_vmstat_pgpgout", "node_vmstat_pswpin", "node_vmstat_pswpout",
	"node_disk_io_time_seconds_total", "node_disk_io_time_weighted_seconds_total",
	"node_disk_read_bytes_total", "node_disk_written_bytes_total",
	"node_network_receive_bytes_total", "node_network_transmit_bytes_total",
	"node_network_receive_drop_total", "node_network_transmit_drop_total",
	"node_network_receive_errs_total", "node_network_transmit_errs_total",
	"node_network_receive_packets_total", "node_network_transmit_packets_total",
	"node_filesystem_avail_bytes", "node_filesystem_size_bytes", "node_filesystem_readonly",
	"node_filesystem_files_free", "node_filesystem_files",
	"node_nf_conntrack_entries", "node_nf_conntrack_entries_limit",
	"node_timex_offset_seconds", "node_timex_sync_status", "node_timex_maxerror_seconds",
	"node_filefd_allocated", "node_filefd_maximum",
}

// tolerance returns how far the agent's value of a series may be from node_exporter's: the
// series' rate of change (from two node_exporter scrapes) times the time between what the two
// programs read, plus a slack suited to the family (gauges that jump between two reads).
func tolerance(fam string, neValue, rate, skew, memTotal float64) float64 {
	tol := math.Abs(rate)*skew*1.5 + 1e-9*math.Abs(neValue)
	switch {
	case strings.HasPrefix(fam, "node_sockstat_") && strings.Contains(fam, "_mem"):
		// Socket buffer memory moves by megabytes within a millisecond on a busy machine.
		tol += math.Abs(neValue) + 1024
		if strings.HasSuffix(fam, "_bytes") {
			tol += 4 << 20
		}
	case strings.HasPrefix(fam, "node_cpu_"):
		tol += 0.1 // ticks of 10 ms, read a scan apart (CI at b232b70: 0.16 s apart, 0.14 allowed)
	case fam == "node_memory_Committed_AS_bytes":
		// The commit charge of every process: a browser starting beside (internal/web's) commits
		// gigabytes between the agent's scan and node_exporter's read (CI at 8bd376f: 4.2 GB
		// and 1.5 GB).
		tol += 0.02*memTotal + 4<<30
	case fam == "node_sockstat_sockets_used":
		tol += 0.05*math.Abs(neValue) + 100 // the same browser's sockets (CI at 8bd376f: 91 and 20)
	case strings.HasPrefix(fam, "node_memory_") && strings.HasSuffix(fam, "_bytes"):
		tol += 0.02 * memTotal // a compiler next door allocates between the two reads
	case fam == "node_filefd_allocated":
		// Every program beside (the other integration packages, this package's second line)
		// opens and closes files between the two reads: CI at e3579d7 read 776 and 841.
		tol += 0.15*math.Abs(neValue) + 50
	case fam == "node_procs_running" || fam == "node_procs_blocked" || fam == "node_disk_io_now":
		tol += 20
	case fam == "node_boot_time_seconds":
		tol += 1.5 // node_exporter's btime is whole seconds; the agent's comes from the uptime
	case fam == "node_time_seconds":
		tol += skew + 1
	case strings.HasPrefix(fam, "node_load"):
		tol += 0.5 + 0.1*math.Abs(neValue)
	case strings.HasPrefix(fam, "node_timex_"):
		tol += 0.01 + 0.1*math.Abs(neValue)
	default:
		// Gauges within 5 %, and counters that moved in the skew more than their rate says.
		tol += 0.05*math.Abs(neValue) + 20
	}
	return tol
}

// compareWithNodeExporter compares every family both expose in ne2 and ag (ne1 a read of
// node_exporter's before ne2, for the rates): types, label names, series and values. It
// returns the differences, and fills the family lists and the report's "In both" table.
func compareWithNodeExporter(ne1, ne2, ag scrape, both, onlyNE, onlyAgent *[]string, report *strings.Builder) []string {
	var errs []string
	dt := ne2.start.Sub(ne1.start).Seconds()
	// What the agent serves was read by its last scan, up to one interval (500 ms) before.
	skew := ag.end.Sub(ne2.start).Seconds() + 0.5 + ne2.end.Sub(ne2.start).Seconds()
	if skew < 0 {
		skew = -skew
	}
	memTotal := 0.0
	if f := ne2.fams["node_memory_MemTotal_bytes"]; f != nil && len(f.Metric) == 1 {
		memTotal = metricValue(f.Metric[0])
	}

	*both, *onlyNE, *onlyAgent = nil, nil, nil
	report.Reset()
	for name := range ne2.fams {
		if strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") || strings.HasPrefix(name, "promhttp_") {
			continue // each program's own: process_* of two processes (the agent's are checked by TestTextfileSideBySide)
		}
		if _, ok := ag.fams[name]; ok {
			*both = append(*both, name)
		} else {
			*onlyNE = append(*onlyNE, name)
		}
	}
	for name := range ag.fams {
		if _, ok := ne2.fams[name]; !ok && strings.HasPrefix(name, "node_") {
			*onlyAgent = append(*onlyAgent, name)
		}
	}
	sort.Strings(*both)
	sort.Strings(*onlyNE)
	sort.Strings(*onlyAgent)

	fmt.Fprintf(report, "# node_exporter 1.5 (default collectors) against cantal-agent /metrics\n\n")
	fmt.Fprintf(report, "Scraped at the same moment on %s (%d CPUs); skew between the reads %.3f s.\n\n", runtime.GOOS, runtime.NumCPU(), skew)
	fmt.Fprintf(report, "| | families |\n|---|---|\n| in both | %d |\n| only in node_exporter | %d |\n| only in the agent (node_*) | %d |\n\n", len(*both), len(*onlyNE), len(*onlyAgent))
	fmt.Fprintf(report, "## In both\n\n| family | type | labels | series (node_exporter / agent / equal values) |\n|---|---|---|---|\n")

	for _, name := range *both {
		nf, af := ne2.fams[name], ag.fams[name]
		if nf.GetType() != af.GetType() {
			errs = append(errs, fmt.Sprintf("%s: type %v in node_exporter, %v in the agent", name, nf.GetType(), af.GetType()))
		}
		nl, al := labelNames(nf), labelNames(af)
		if !slices.Equal(nl, al) {
			errs = append(errs, fmt.Sprintf("%s: labels %v in node_exporter, %v in the agent", name, nl, al))
		}
		nv, av, nv1 := values(nf), values(af), values(ne1.fams[name])
		equal := 0
		for k, n := range nv {
			v, ok := av[k]
			if !ok {
				errs = append(errs, fmt.Sprintf("%s{%s}: in node_exporter (%v), not in the agent", name, k, n))
				continue
			}
			rate, moved := 0.0, 0.0
			if n1, ok := nv1[k]; ok && dt > 0 {
				rate, moved = (n-n1)/dt, math.Abs(n-n1)
			}
			tol := tolerance(name, n, rate, skew, memTotal)
			if nf.GetType() == dto.MetricType_GAUGE {
				tol += moved // what node_exporter itself saw the gauge move between its two reads
			}
			if math.Abs(v-n) > tol {
				errs = append(errs, fmt.Sprintf("%s{%s}: agent %v, node_exporter %v (tolerance %v)", name, k, v, n, tol))
				continue
			}
			equal++
		}
		for k, v := range av {
			if _, ok := nv[k]; !ok {
				errs = append(errs, fmt.Sprintf("%s{%s}: in the agent (%v), not in node_exporter", name, k, v))
			}
		}
		fmt.Fprintf(report, "| `%s` | %s | %s | %d / %d / %d |\n", name, strings.ToLower(nf.GetType().String()),
			strings.Join(nl, ", "), len(nv), len(av), equal)
	}
	return errs
}

// TestNodeExporterSideBySide scrapes node_exporter and the agent at the same moment and
// compares every family both expose: names, label names, types, series and values. It writes
// the coverage table to artifacts/nodeexporter-coverage.md and requires node-mixin's families
// in both.
func TestNodeExporterSideBySide(t *testing.T) {
	quiet(t)
	neURL := startNodeExporter(t)
	// Debian's node_exporter excludes more mount points than upstream's (the agent's default).
	a := startAgent(t, "--fs-mount-points-exclude", debianMountPointsExclude)
	agURL := a.URL + "/metrics"
	a.waitScans(5) // a few scans: rates and the every-5th-scan collectors
	// The whole machine moves between the two programs' reads (other tests' processes,
	// browsers, veths come and go): a comparison that finds differences is made again on new
	// reads, up to three times; a difference of the agent's own stays in all three.
	var (
		ne2, ag                 scrape
		both, onlyNE, onlyAgent []string
		report                  strings.Builder
	)
	ne1, _ := scrapeBoth(t, neURL, agURL)
	for attempt := 1; ; attempt++ {
		time.Sleep(2 * time.Second)
		ne2, ag = scrapeBoth(t, neURL, agURL)
		errs := compareWithNodeExporter(ne1, ne2, ag, &both, &onlyNE, &onlyAgent, &report)
		if len(errs) == 0 {
			break
		}
		if attempt == 3 {
			for _, e := range errs {
				t.Error(e)
			}
			break
		}
		t.Logf("attempt %d: %d differences, the first %q; reading both again", attempt, len(errs), errs[0])
		ne1 = ne2
	}
	fmt.Fprintf(&report, "\n## Only in node_exporter\n\n")
	for _, n := range onlyNE {
		fmt.Fprintf(&report, "- `%s`\n", n)
	}
	fmt.Fprintf(&report, "\n## Only in the agent\n\n")
	for _, n := range onlyAgent {
		fmt.Fprintf(&report, "- `%s`\n", n)
	}
	writeArtifact(t, "nodeexporter-coverage.md", report.String())

	for _, f := range nodeMixinFamilies {
		_, inNE := ne2.fams[f]
		_, inAgent := ag.fams[f]
		if !inNE || !inAgent {
			t.Errorf("node-mixin family %s: in node_exporter %v, in the agent %v", f, inNE, inAgent)
		}
	}
	t.Logf("families in both %d, only in node_exporter %d, only in the agent %d", len(both), len(onlyNE), len(onlyAgent))
}

// writeArtifact writes a test artifact under $ARTIFACTS, else artifacts/ at the repository root.
func writeArtifact(t *testing.T, name, content string) {
	t.Helper()
	dir := os.Getenv("ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("..", "artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", p)
}

// TestPromtoolOnLiveMetrics runs `promtool check metrics` on the agent's live /metrics. The only
// findings allowed are those promtool also reports on node_exporter's own exposition of the
// same families (node_exporter's names, such as node_memory_MemAvailable_bytes, are not
// snake_case, and that is what dashboards expect).
func TestPromtoolOnLiveMetrics(t *testing.T) {
	serial(t)
	promtool := need(t, "promtool")
	neURL := startNodeExporter(t)
	statsd := freePort(t)
	a := startAgent(t, "--statsd", statsd)
	// An application and a statsd timer, so their families are checked too.
	startProc(t, []string{"CANTAL_PATH=" + filepath.Join(t.TempDir(), "app")}, nil, filepath.Join(bin, "testapp"), "-rate", "10")
	conn, err := net.Dial("udp", statsd)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("api.latency_seconds:0.012|ms|#route:/a\napi.latency_seconds:0.030|ms|#route:/a\njobs.done:1|c\n")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 15*time.Second, func() error {
		resp, err := http.Get(a.URL + "/metrics")
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, want := range []string{"# TYPE api_latency_seconds summary", `api_latency_seconds_count{route="/a",source="push"} 2`, "requests_number_total{"} {
			if !strings.Contains(string(body), want) {
				return fmt.Errorf("/metrics has no %s yet", want)
			}
		}
		return nil
	})
	check := func(u string) map[string]string {
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, promtool, "check", "metrics")
		cmd.Stdin = bytes.NewReader(body)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if err != nil && !(errors.As(err, &ee) && ee.ExitCode() == 3) {
			t.Fatalf("promtool check metrics %s: %v\n%s", u, err, out)
		}
		findings := map[string]string{} // family → problem
		for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
			if name, problem, ok := strings.Cut(line, " "); ok {
				findings[name] = problem
			}
		}
		return findings
	}
	// Applications' and pushed families keep the names their authors chose (other tests'
	// applications on this machine included); the agent's own, and this test's timer, are
	// checked.
	apps := map[string]bool{}
	fams, err := scrapeFamilies(a.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if n := l.GetName(); n == "pid" || n == "plugin" || n == "source" {
					apps[name] = !strings.HasPrefix(name, "api_latency_seconds")
				}
			}
		}
	}
	neFindings := check(neURL)
	allowed := 0
	for name, problem := range check(a.URL + "/metrics") {
		if neFindings[name] == problem || apps[strings.TrimSuffix(strings.TrimSuffix(name, "_total"), "_count")] || apps[name] {
			allowed++
			continue
		}
		t.Errorf("promtool check metrics: %s %s", name, problem)
	}
	t.Logf("%d findings allowed: on node_exporter's names, which node_exporter's own exposition has too (camelCase kernel field names, bits), or on applications' own names", allowed)
}

// promAnswer is a Prometheus /api/v1/query answer.
type promAnswer struct {
	Status string
	Error  string
	Data   struct {
		Result []struct {
			Metric map[string]string
			Value  [2]any
		}
	}
}

// startPrometheusFor starts a real Prometheus scraping target every 5 s (the agent serves every
// series of the machine, other tests' applications included: megabytes, slow to encode on a
// machine the whole suite shares); it returns its API URL.
func startPrometheusFor(t *testing.T, target string, rules string) string {
	t.Helper()
	prom := need(t, "prometheus")
	dir := t.TempDir()
	cfg := fmt.Sprintf("global:\n  scrape_interval: 5s\n  scrape_timeout: 5s\n  evaluation_interval: 5s\n"+
		"rule_files: [%q]\nscrape_configs:\n  - job_name: node\n    static_configs: [{targets: [%q]}]\n",
		filepath.Join(dir, "rules.yml"), target)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rules.yml"), []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freePort(t)
	startProc(t, nil, nil, prom, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr, "--log.level=warn")
	return "http://" + addr
}

func promQuery(api, q string) (promAnswer, error) {
	var ans promAnswer
	err := httpJSON(api+"/api/v1/query?query="+url.QueryEscape(q), &ans)
	if err == nil && ans.Status != "success" {
		err = fmt.Errorf("%s: %s", q, ans.Error)
	}
	return ans, err
}

// nodeMixinRules are node-mixin's recording rules (docs/node-mixin/rules/rules.libsonnet of
// prometheus/node_exporter) with the selector job="node" and a rate interval of 1m; the
// disk-device selector is the mixin's default.
const nodeMixinRules = `groups:
- name: node-exporter.rules
  rules:
  - record: instance:node_num_cpu:sum
    expr: count without (cpu, mode) (node_cpu_seconds_total{job="node",mode="idle"})
  - record: instance:node_cpu_utilisation:rate1m
    expr: 1 - avg without (cpu) (sum without (mode) (rate(node_cpu_seconds_total{job="node", mode=~"idle|iowait|steal"}[1m])))
  - record: instance:node_load1_per_cpu:ratio
    expr: (node_load1{job="node"} / instance:node_num_cpu:sum{job="node"})
  - record: instance:node_memory_utilisation:ratio
    expr: 1 - ((node_memory_MemAvailable_bytes{job="node"} or (node_memory_Buffers_bytes{job="node"} + node_memory_Cached_bytes{job="node"} + node_memory_MemFree_bytes{job="node"} + node_memory_Slab_bytes{job="node"})) / node_memory_MemTotal_bytes{job="node"})
  - record: instance:node_vmstat_pgmajfault:rate1m
    expr: rate(node_vmstat_pgmajfault{job="node"}[1m])
  - record: instance_device:node_disk_io_time_seconds:rate1m
    expr: rate(node_disk_io_time_seconds_total{job="node", device=~"(/dev/)?(mmcblk.p.+|nvme.+|rbd.+|sd.+|vd.+|xvd.+|dm-.+|md.+|dasd.+)"}[1m])
  - record: instance_device:node_disk_io_time_weighted_seconds:rate1m
    expr: rate(node_disk_io_time_weighted_seconds_total{job="node", device=~"(/dev/)?(mmcblk.p.+|nvme.+|rbd.+|sd.+|vd.+|xvd.+|dm-.+|md.+|dasd.+)"}[1m])
  - record: instance:node_network_receive_bytes_excluding_lo:rate1m
    expr: sum without (device) (rate(node_network_receive_bytes_total{job="node", device!="lo"}[1m]))
  - record: instance:node_network_transmit_bytes_excluding_lo:rate1m
    expr: sum without (device) (rate(node_network_transmit_bytes_total{job="node", device!="lo"}[1m]))
  - record: instance:node_network_receive_drop_excluding_lo:rate1m
    expr: sum without (device) (rate(node_network_receive_drop_total{job="node", device!="lo"}[1m]))
  - record: instance:node_network_transmit_drop_excluding_lo:rate1m
    expr: sum without (device) (rate(node_network_transmit_drop_total{job="node", device!="lo"}[1m]))
`

// nodeMixinAlertExprs are the expressions of node-mixin's alerts (alerts/alerts.libsonnet)
// with their thresholds taken out, so that each must return data on a healthy machine: the
// test asserts the series the alert compares exist and combine, not that the alert fires (an
// idle interface's error ratio is 0/0, NaN, which is data).
// The fs selectors are the mixin's defaults. node_md_* (software RAID) and
// node_textfile_scrape_error are left out: this VM has no md array and the agent's textfile
// collector is off by default; TestNodeMixinBareMetalAlertsSideBySide (baremetal_test.go)
// evaluates those alerts on a fixture tree and a textfile directory.
var nodeMixinAlertExprs = map[string]string{
	"NodeFilesystemSpaceFillingUp":       `node_filesystem_avail_bytes{job="node",fstype!="",mountpoint!=""} / node_filesystem_size_bytes{job="node",fstype!="",mountpoint!=""} * 100 and predict_linear(node_filesystem_avail_bytes{job="node",fstype!="",mountpoint!=""}[1m], 24*60*60) > -1e30 and node_filesystem_readonly{job="node",fstype!="",mountpoint!=""} >= 0`,
	"NodeFilesystemAlmostOutOfSpace":     `node_filesystem_avail_bytes{job="node",fstype!="",mountpoint!=""} / node_filesystem_size_bytes{job="node",fstype!="",mountpoint!=""} * 100 and node_filesystem_readonly{job="node",fstype!="",mountpoint!=""} >= 0`,
	"NodeFilesystemFilesFillingUp":       `node_filesystem_files_free{job="node",fstype!="",mountpoint!=""} / node_filesystem_files{job="node",fstype!="",mountpoint!=""} * 100 and predict_linear(node_filesystem_files_free{job="node",fstype!="",mountpoint!=""}[1m], 24*60*60) > -1e30 and node_filesystem_readonly{job="node",fstype!="",mountpoint!=""} >= 0`,
	"NodeFilesystemAlmostOutOfFiles":     `node_filesystem_files_free{job="node",fstype!="",mountpoint!=""} / node_filesystem_files{job="node",fstype!="",mountpoint!=""} * 100 and node_filesystem_readonly{job="node",fstype!="",mountpoint!=""} >= 0`,
	"NodeNetworkReceiveErrs":             `rate(node_network_receive_errs_total[1m]) / rate(node_network_receive_packets_total[1m])`,
	"NodeNetworkTransmitErrs":            `rate(node_network_transmit_errs_total[1m]) / rate(node_network_transmit_packets_total[1m])`,
	"NodeHighNumberConntrackEntriesUsed": `(node_nf_conntrack_entries / node_nf_conntrack_entries_limit) >= 0`,
	"NodeClockSkewDetected":              `(node_timex_offset_seconds{job="node"} > -1e30 and deriv(node_timex_offset_seconds{job="node"}[1m]) > -1e30)`,
	"NodeClockNotSynchronising":          `min_over_time(node_timex_sync_status{job="node"}[1m]) >= 0 and node_timex_maxerror_seconds{job="node"} >= 0`,
	"NodeFileDescriptorLimit":            `(node_filefd_allocated{job="node"} * 100 / node_filefd_maximum{job="node"} >= 0)`,
}

// TestNodeMixinOnAgent: a real Prometheus scraping only the agent evaluates node-mixin's
// recording rules and alert expressions; each returns data. It also checks that
// sum(rate(node_cpu_seconds_total[1m])) is the number of CPUs within 5 %. It mostly waits for
// its minute of points: it runs in the background (see scheduler), beside the other tests.
func TestNodeMixinOnAgent(t *testing.T) {
	detach := background(t)
	a := startAgent(t, "--interval", "1s")
	api := startPrometheusFor(t, strings.TrimPrefix(a.URL, "http://"), nodeMixinRules)
	detach()
	// A full minute of points, so that rate(...[1m]) is over a whole window.
	waitFor(t, 150*time.Second, func() error {
		ans, err := promQuery(api, `count_over_time(node_cpu_seconds_total{cpu="0",mode="idle"}[1m])`)
		if err != nil {
			return err
		}
		if len(ans.Data.Result) == 0 || num(ans.Data.Result[0].Value[1]) < 11 {
			up, _ := promQuery(api, `up`)
			return fmt.Errorf("less than a minute of points yet: %+v (up: %+v)", ans.Data.Result, up.Data.Result)
		}
		return nil
	})
	time.Sleep(6 * time.Second) // one more evaluation of the rules
	for _, rec := range []string{
		"instance:node_num_cpu:sum", "instance:node_cpu_utilisation:rate1m", "instance:node_load1_per_cpu:ratio",
		"instance:node_memory_utilisation:ratio", "instance:node_vmstat_pgmajfault:rate1m",
		"instance_device:node_disk_io_time_seconds:rate1m", "instance_device:node_disk_io_time_weighted_seconds:rate1m",
		"instance:node_network_receive_bytes_excluding_lo:rate1m", "instance:node_network_transmit_bytes_excluding_lo:rate1m",
		"instance:node_network_receive_drop_excluding_lo:rate1m", "instance:node_network_transmit_drop_excluding_lo:rate1m",
	} {
		ans, err := promQuery(api, rec)
		if err != nil {
			t.Errorf("recording rule %s: %v", rec, err)
			continue
		}
		if len(ans.Data.Result) == 0 {
			t.Errorf("recording rule %s: no data", rec)
		}
	}
	if ans, err := promQuery(api, "instance:node_num_cpu:sum"); err == nil && len(ans.Data.Result) == 1 {
		if n := num(ans.Data.Result[0].Value[1]); int(n) != runtime.NumCPU() {
			t.Errorf("instance:node_num_cpu:sum = %v; this machine has %d CPUs", n, runtime.NumCPU())
		}
	}
	names := make([]string, 0, len(nodeMixinAlertExprs))
	for n := range nodeMixinAlertExprs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, alert := range names {
		q := nodeMixinAlertExprs[alert]
		ans, err := promQuery(api, q)
		if err != nil {
			t.Errorf("alert %s: %v", alert, err)
			continue
		}
		if len(ans.Data.Result) == 0 {
			t.Errorf("alert %s: %s returns no data", alert, q)
		}
	}
	// sum(rate(node_cpu_seconds_total[1m])) is the number of CPUs: every CPU spends each second
	// in some mode, once (no all-CPU series is mixed in).
	ans, err := promQuery(api, `sum(rate(node_cpu_seconds_total[1m]))`)
	if err != nil || len(ans.Data.Result) != 1 {
		t.Fatalf("sum(rate(node_cpu_seconds_total[1m])): %+v %v", ans, err)
	}
	got, want := num(ans.Data.Result[0].Value[1]), float64(runtime.NumCPU())
	if math.Abs(got-want) > 0.05*want {
		// Prometheus stamps a sample with the scrape's start; the agent's values are from its
		// last scan before the answer was encoded. A scrape that takes seconds (a machine under
		// load, an exposition of megabytes) moves the values against their stamps.
		d, _ := promQuery(api, `max_over_time(scrape_duration_seconds[1m])`)
		load, _ := os.ReadFile("/proc/loadavg")
		t.Errorf("sum(rate(node_cpu_seconds_total[1m])) = %v; want %v CPUs within 5 %% (longest scrape in the window: %+v; load: %s)",
			got, want, d.Data.Result, strings.TrimSpace(string(load)))
	}
	t.Logf("sum(rate(node_cpu_seconds_total[1m])) = %v for %v CPUs", got, want)
}
