package export

import (
	"bytes"
	"errors"
	"math"
	"os/exec"
	"strings"
	"testing"

	"github.com/cantal-go/cantal/internal/promname"
	"github.com/cantal-go/cantal/internal/series"
)

// agentSamples is what an agent holds: machine, process and application series of every kind.
func agentSamples() []series.Sample {
	f := func(v float64) uint64 { return math.Float64bits(v) }
	return []series.Sample{
		{Labels: series.Labels{"metric": "cpu.user_seconds"}, Kind: series.Counter, Bits: 12345, TS: 1700000000000},
		{Labels: series.Labels{"metric": "memory.used_bytes"}, Kind: series.Level, Bits: 1 << 30, TS: 1700000000000},
		{Labels: series.Labels{"metric": "load.one"}, Kind: series.Float, Bits: f(0.42), TS: 1700000000000},
		{Labels: series.Labels{"metric": "requests.number", "pid": "42", "process": "nginx"}, Kind: series.Counter, Bits: 7, TS: 1700000000000},
		{Labels: series.Labels{"metric": "net.rx_bytes", "interface": "eth0"}, Kind: series.Counter, Bits: 99, TS: 1700000000000},
		{Labels: series.Labels{"metric": "requests.number", "pid": "43", "process": "nginx", "path": `/a "quoted" \ path` + "\n"}, Kind: series.Counter, Bits: 8, TS: 1700000000000},
		{Labels: series.Labels{"metric": "net.rx_bytes", "interface": "lo"}, Kind: series.Counter, Bits: 100, TS: 1700000000000},
		{Labels: series.Labels{"metric": "queue.depth", "cgroup": "/system.slice/x.service", "empty": ""}, Kind: series.Level, Bits: uint64(1<<64 - 5), TS: 1700000000000},
		{Labels: series.Labels{"metric": "latency.p99", "pid": "42"}, Kind: series.Float, Bits: f(math.NaN()), TS: 1700000000000},
		{Labels: series.Labels{"metric": "latency.p99", "pid": "43"}, Kind: series.Float, Bits: f(math.Inf(1)), TS: 1700000000000},
		{Labels: series.Labels{"metric": "worker.state", "pid": "42"}, Kind: series.State, Text: "processing \"job\" 7", Since: 1699999999000, TS: 1700000000000},
		{Labels: series.Labels{"metric": "worker.state", "pid": "44"}, Kind: series.State, Text: "", Since: 0, TS: 1700000000000},
		{Labels: series.Labels{"metric": "httpServer.activeConns", "listenAddr": "0.0.0.0:80"}, Kind: series.Level, Bits: 3, TS: 1700000000000},
	}
}

func TestPromText(t *testing.T) {
	var e Prom
	out := string(e.Append(nil, agentSamples(), FormatText))
	for _, want := range []string{
		"# HELP cpu_user_seconds_total Cantal metric cpu.user_seconds\n# TYPE cpu_user_seconds_total counter\ncpu_user_seconds_total 12345\n",
		"# TYPE requests_number_total counter\nrequests_number_total{pid=\"42\",process=\"nginx\"} 7\nrequests_number_total{path=\"/a \\\"quoted\\\" \\\\ path\\n\",pid=\"43\",process=\"nginx\"} 8\n",
		"# TYPE net_rx_bytes_total counter\nnet_rx_bytes_total{interface=\"eth0\"} 99\nnet_rx_bytes_total{interface=\"lo\"} 100\n",
		"queue_depth{cgroup=\"/system.slice/x.service\"} -5\n",
		"latency_p99{pid=\"42\"} NaN\nlatency_p99{pid=\"43\"} +Inf\n",
		"# TYPE worker_state gauge\nworker_state{pid=\"42\",state=\"processing \\\"job\\\" 7\"} 1\n",
		"http_server_active_conns{listen_addr=\"0.0.0.0:80\"} 3\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text exposition lacks\n%s\ngot:\n%s", want, out)
		}
	}
	if strings.Contains(out, `pid="44"`) {
		t.Error("a state series with no state was exported")
	}
	if strings.Contains(out, "# EOF") {
		t.Error("text format ends with # EOF")
	}
	checkContiguous(t, out)
}

// checkContiguous fails if a family's samples are not all under its TYPE line.
func checkContiguous(t *testing.T, out string) {
	t.Helper()
	seen := map[string]bool{}
	cur := ""
	for line := range strings.SplitSeq(strings.TrimSuffix(out, "\n"), "\n") {
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			cur = strings.Fields(rest)[0]
			if seen[cur] {
				t.Errorf("family %s appears twice", cur)
			}
			seen[cur] = true
			continue
		}
		if strings.HasPrefix(line, "#") {
			continue
		}
		name := line[:strings.IndexAny(line, "{ ")]
		if name != cur && strings.TrimSuffix(name, "_total") != cur {
			t.Errorf("sample %q outside its family (current %s)", line, cur)
		}
	}
}

func TestPromOpenMetrics(t *testing.T) {
	var e Prom
	out := string(e.Append(nil, agentSamples(), FormatOpenMetrics))
	for _, want := range []string{
		"# TYPE requests_number counter\nrequests_number_total{pid=\"42\",process=\"nginx\"} 7\n",
		"# HELP cpu_user_seconds Cantal metric cpu.user_seconds\n# TYPE cpu_user_seconds counter\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("OpenMetrics lacks\n%s\ngot:\n%s", want, out)
		}
	}
	if !strings.HasSuffix(out, "# EOF\n") {
		t.Error("OpenMetrics does not end with # EOF")
	}
}

func TestPromNames(t *testing.T) {
	for in, want := range map[string]string{
		"requests.number": "requests_number",
		"fooBar":          "foo_bar",
		"HTTPServer":      "http_server",
		"a:b-c d":         "a_b_c_d",
		"9lives":          "_9lives",
		"":                "_",
		"ünï":             "_n_",
		"cpu.user_ms2":    "cpu.user_ms2"[:0] + "cpu_user_ms2",
	} {
		if got := promname.Name(in, true); got != want {
			t.Errorf("promName(%q) = %q; want %q", in, got, want)
		}
	}
	if got := promname.Name("__name__", false); got != "label__name__" {
		t.Errorf("promName(__name__, label) = %q", got)
	}
}

func TestPromCollisions(t *testing.T) {
	samples := []series.Sample{
		{Labels: series.Labels{"metric": "a.b", "x.y": "1", "x_y": "2"}, Kind: series.Level, Bits: 1},
		{Labels: series.Labels{"metric": "a_b"}, Kind: series.Level, Bits: 2},
		{Labels: series.Labels{"metric": "c"}, Kind: series.Counter, Bits: 3},
		{Labels: series.Labels{"metric": "c.total"}, Kind: series.Float, Bits: math.Float64bits(4)},
	}
	var e Prom
	out := string(e.Append(nil, samples, FormatText))
	for _, want := range []string{
		`a_b{x_y="1",x_y_="2",cantal_metric="a.b"} 1`,
		`a_b{cantal_metric="a_b"} 2`,
		"c_total 3",
		"c_total_gauge 4",
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	promtool(t, []byte(out), false)
}

func TestNegotiate(t *testing.T) {
	for accept, want := range map[string]Format{
		"":           FormatText,
		"text/plain": FormatText,
		"application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1": FormatOpenMetrics,
		"application/openmetrics-text; version=1.0.0; q=0.2, text/plain; q=0.9":                                                                 FormatText,
		"application/openmetrics-text;version=2.0.0":                                                                                            FormatText,
		"application/openmetrics-text;q=0":                                                                                                      FormatText,
	} {
		if got := Negotiate(accept); got != want {
			t.Errorf("Negotiate(%q) = %v; want %v", accept, got, want)
		}
	}
}

// promtool runs `promtool check metrics` on out. With lint, any finding fails the test;
// otherwise only a parse error (exit 1) does (lint findings exit 3).
func promtool(t *testing.T, out []byte, lint bool) {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool not found (%v): run scripts/install-deps.sh", err)
	}
	cmd := exec.Command(path, "check", "metrics")
	cmd.Stdin = bytes.NewReader(out)
	msg, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee) && ee.ExitCode() == 3 && !lint:
		t.Logf("promtool lint findings (allowed here):\n%s", msg)
	default:
		t.Errorf("promtool check metrics: %v\n%s\ninput:\n%s", err, msg, out)
	}
}

func TestPromtoolCheckMetrics(t *testing.T) {
	var e Prom
	promtool(t, e.Append(nil, agentSamples(), FormatText), true)
	e.Timestamps = true
	promtool(t, e.Append(nil, agentSamples(), FormatText), true)
}

func TestPromtoolHostileNames(t *testing.T) {
	// Whatever the names, the output parses (lint findings about user names are allowed).
	var samples []series.Sample
	for i, name := range []string{"", "é.x", "a b", "__name__", "x\ny", "Ünicode:Name", "0x.count", "t\\", "a\"b", "{}", "\xff\xfe"} {
		samples = append(samples, series.Sample{Labels: series.Labels{"metric": name, name: name, "le": "x", "": "y"}, Kind: series.Kind(i%4 + 1), Bits: uint64(i), Text: name, Since: 1})
	}
	var e Prom
	promtool(t, e.Append(nil, samples, FormatText), false)
}
