package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// nodeMixinExprs are node-mixin's (and the Node Exporter Full dashboard's) kinds of
// expression: rates of counters by instance, ratios of gauges, counts, *_over_time, topk.
// Ranges are 30s so that a minute of data gives every one an answer.
var nodeMixinExprs = []string{
	`node_load1`,
	`count without (cpu, mode) (node_cpu_seconds_total{mode="idle"})`,
	`1 - avg without (cpu) (sum without (mode) (rate(node_cpu_seconds_total{mode=~"idle|iowait|steal"}[30s])))`,
	`sum by (instance, mode) (rate(node_cpu_seconds_total{mode!="idle"}[30s]))`,
	`1 - node_memory_MemAvailable_bytes / node_memory_MemTotal_bytes`,
	`node_memory_MemTotal_bytes - node_memory_MemFree_bytes - node_memory_Buffers_bytes - node_memory_Cached_bytes`,
	`rate(node_network_receive_bytes_total{device!="lo"}[30s])`,
	`sum without (device) (rate(node_network_transmit_packets_total[30s]))`,
	`rate(node_disk_read_bytes_total[30s]) + rate(node_disk_written_bytes_total[30s])`,
	`rate(node_disk_io_time_seconds_total[30s])`,
	`node_filesystem_avail_bytes{fstype!=""} / node_filesystem_size_bytes{fstype!=""}`,
	`rate(node_vmstat_pgmajfault[30s])`,
	`irate(node_context_switches_total[30s])`,
	`increase(node_intr_total[30s])`,
	`max_over_time(node_load1[30s])`,
	`deriv(node_memory_MemAvailable_bytes[30s])`,
	`topk(3, rate(node_cpu_seconds_total[30s]))`,
}

// TestPromQLSideBySide runs an agent that sends every series it holds to a real Prometheus
// by its own remote write, so both hold the same points, then asks both node-mixin's kinds of
// expression, as instant and range queries: the agent's /prometheus must give the same series
// set and the same values (to 1e-9 relative).
//
// The Debian Prometheus (2.x) selects ranges [t-r, t], Prometheus 3's engine (the agent's)
// (t-r, t]: the query times are at 0.777 s past a second, so that a scan's point falls on a
// range's boundary only when its milliseconds are exactly those (about one range in 1000).
//
// Interfaces that other tests make and remove meanwhile are left out of the comparison, sums
// over devices included (by a device matcher): both hold the same points of them, but a series
// that starts or ends inside a rate's range is extrapolated differently by the two engines'
// versions (a check with veths made and removed every 2 s: every raw point equal, a sum of
// their rates 1.858 here and 2.025 in Prometheus 2.42). It runs in the first line all the same.
func TestPromQLSideBySide(t *testing.T) {
	serial(t)
	prom := &receiver{t: t, name: "prometheus", prog: need(t, "prometheus"), dir: t.TempDir(), addr: freePort(t)}
	prom.args = []string{"--config.file=" + writeFile(t, prom.dir, "prometheus.yml", "global: {}\n"),
		"--storage.tsdb.path=" + filepath.Join(prom.dir, "data"), "--web.listen-address=" + prom.addr,
		"--web.enable-remote-write-receiver", "--log.level=warn"}
	prom.start()
	t.Cleanup(prom.stop)
	a := startAgent(t, "--interval", "1s", "--node-name", "side", "--remote-write", "http://"+prom.addr+"/api/v1/write")
	start := time.Now()
	// The integration packages run side by side (make test: -p 3), and internal/web's tests make
	// and remove veth interfaces meanwhile: an interface that comes or goes (or is made again
	// under its name) during the comparison is left out of it (its series set and values), the
	// machine's own ones are compared.
	ifaces0 := netDevices(t)
	// A minute of scans, everything sent.
	waitFor(t, 3*time.Minute, func() error {
		var st struct {
			RemoteWrite []rwStatus `json:"remote_write"`
		}
		if err := a.get("/api/v1/status", &st); err != nil {
			return err
		}
		if len(st.RemoteWrite) != 1 {
			return fmt.Errorf("%d remote_write endpoints", len(st.RemoteWrite))
		}
		if s := st.RemoteWrite[0]; time.Since(start) < 70*time.Second || s.LagS < 0 || s.LagS > 3 || s.Retrying {
			return fmt.Errorf("not a minute of sent data yet: %+v", s)
		}
		return nil
	})
	// At most a few seconds ago, all sent; 0.777 s past a second.
	at := time.Now().Add(-8 * time.Second).Truncate(time.Second).Add(777 * time.Millisecond)
	atS := float64(at.UnixMilli()) / 1000
	agentURL := a.URL + "/prometheus"
	promURL := "http://" + prom.addr
	compared := 0
	ifaces1 := netDevices(t)
	churned := map[string]bool{}
	for d, idx := range ifaces0 {
		if ifaces1[d] != idx {
			churned[d] = true
		}
	}
	for d, idx := range ifaces1 {
		if ifaces0[d] != idx {
			churned[d] = true
		}
	}
	if len(churned) > 0 {
		t.Logf("interfaces that came, went or were made again during the test, not compared: %v", churned)
	}
	// Sums over devices can only leave the churned ones out by selecting the others: an
	// interface made and removed between the two listings (CI at 59d874c: a sum of transmit
	// packets 5.2006 here, 5.2048 in Prometheus) is in neither listing but in the data, and its
	// rates differ between the engines (see above).
	var stable []string
	for d, idx := range ifaces1 {
		if ifaces0[d] == idx {
			stable = append(stable, regexp.QuoteMeta(d))
		}
	}
	sort.Strings(stable)
	for _, expr := range nodeMixinExprs {
		expr := onlyDevices(t, expr, stable)
		for _, path := range []string{"query", "query_range"} {
			// A query whose answers differ is asked again at times 1 and 2 s earlier: a scan's
			// point on a range's boundary, where the two engines' versions select differently
			// ([t-r, t] against (t-r, t]), happens about once in a thousand ranges, and a
			// range query has many (CI at e271fcb: a deriv of a fast-moving gauge, 5 % apart
			// once); a difference of the agent's own stays at all three times.
			var diffs []string
			for shift := 0.0; shift < 3; shift++ {
				t0 := atS - shift
				form := url.Values{"query": {expr}, "time": {strconv.FormatFloat(t0, 'f', 3, 64)}}
				if path == "query_range" {
					form = url.Values{"query": {expr}, "start": {strconv.FormatFloat(t0-40, 'f', 3, 64)},
						"end": {strconv.FormatFloat(t0, 'f', 3, 64)}, "step": {"4"}}
				}
				ours := withoutDevices(sideQuery(t, agentURL, path, form), churned)
				theirs := withoutDevices(sideQuery(t, promURL, path, form), churned)
				if len(theirs) == 0 {
					diffs = append(diffs, "Prometheus has no series")
					continue
				}
				same := sameAnswer
				if strings.HasPrefix(expr, "topk(") {
					same = sameTopValues
				}
				diff := same(ours, theirs)
				if diff == "" {
					break
				}
				diffs = append(diffs, diff)
			}
			if len(diffs) == 3 {
				t.Errorf("%s %s: at all three times: %s", path, expr, strings.Join(diffs, "; "))
			} else if len(diffs) > 0 {
				t.Logf("%s %s: differed %d time(s), then the same: %s", path, expr, len(diffs), diffs[0])
			}
			compared++
		}
	}
	t.Logf("%d queries compared, %d expressions", compared, len(nodeMixinExprs))
}

// promResult is one series of a query answer: its labels and its points (time → value).
type promResult struct {
	Metric map[string]string `json:"metric"`
	Value  []any             `json:"value"`
	Values [][]any           `json:"values"`
}

func sideQuery(t *testing.T, base, path string, form url.Values) map[string]map[float64]float64 {
	t.Helper()
	resp, err := http.Get(base + "/api/v1/" + path + "?" + form.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var ans struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string       `json:"resultType"`
			Result     []promResult `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &ans); err != nil || ans.Status != "success" {
		t.Fatalf("%s %s %v: %d %s", base, path, form, resp.StatusCode, body)
	}
	out := map[string]map[float64]float64{}
	for _, r := range ans.Data.Result {
		names := make([]string, 0, len(r.Metric))
		for n, v := range r.Metric {
			names = append(names, n+"="+v)
		}
		slices.Sort(names)
		pts := map[float64]float64{}
		for _, p := range append(r.Values, r.Value) {
			if len(p) == 2 {
				v, _ := strconv.ParseFloat(p[1].(string), 64)
				pts[p[0].(float64)] = v
			}
		}
		out[strings.Join(names, ",")] = pts
	}
	return out
}

// sameAnswer describes how ours differs from theirs, or is "".
// netDevices lists the machine's network interfaces now.
func netDevices(t *testing.T) map[string]string {
	t.Helper()
	ents, err := os.ReadDir("/sys/class/net")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range ents {
		// The index tells an interface made again under the same name (internal/web names its
		// veths cuihN with a random N, and a later test may pick the same one) from the one before.
		idx, _ := os.ReadFile(filepath.Join("/sys/class/net", e.Name(), "ifindex"))
		out[e.Name()] = strings.TrimSpace(string(idx))
	}
	return out
}

// onlyDevices is expr with device=~"<devices>" added to its selectors of node_network_*.
func onlyDevices(t *testing.T, expr string, devices []string) string {
	t.Helper()
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	m := labels.MustNewMatcher(labels.MatchRegexp, "device", strings.Join(devices, "|"))
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok && strings.HasPrefix(vs.Name, "node_network_") {
			vs.LabelMatchers = append(vs.LabelMatchers, m)
		}
		return nil
	})
	return e.String()
}

var deviceLabel = regexp.MustCompile(`(?:^|,)device=([^,]*)`)

// withoutDevices drops the series of ans whose device label names one of skip.
func withoutDevices(ans map[string]map[float64]float64, skip map[string]bool) map[string]map[float64]float64 {
	for k := range ans {
		if m := deviceLabel.FindStringSubmatch(k); m != nil && skip[m[1]] {
			delete(ans, k)
		}
	}
	return ans
}

func sameAnswer(ours, theirs map[string]map[float64]float64) string {
	for k := range theirs {
		if _, ok := ours[k]; !ok {
			return fmt.Sprintf("series %s missing (ours %d series, theirs %d)", k, len(ours), len(theirs))
		}
	}
	for k, pts := range ours {
		tp, ok := theirs[k]
		if !ok {
			return fmt.Sprintf("series %s not in Prometheus's answer", k)
		}
		if len(pts) != len(tp) {
			return fmt.Sprintf("series %s: %d points, Prometheus %d", k, len(pts), len(tp))
		}
		for ts, v := range pts {
			w, ok := tp[ts]
			if !ok {
				return fmt.Sprintf("series %s: point at %v not in Prometheus's", k, ts)
			}
			if !(v == w || math.IsNaN(v) && math.IsNaN(w) || math.Abs(v-w) <= 1e-9*math.Max(math.Abs(v), math.Abs(w))) {
				return fmt.Sprintf("series %s at %v: %v, Prometheus %v", k, ts, v, w)
			}
		}
	}
	return ""
}

// sameTopValues compares a topk answer step by step by its values: where two series tie at the
// k-th place, which of them is kept is each engine's own choice (Prometheus 2's and 3's heaps
// break ties differently; CI at e3579d7 kept cpu 0's system time at one step and Prometheus
// another series of the same rate), so the check is that every step holds the same values (to
// 1e-9 relative), in the same number.
func sameTopValues(ours, theirs map[string]map[float64]float64) string {
	byStep := func(ans map[string]map[float64]float64) map[float64][]float64 {
		out := map[float64][]float64{}
		for _, pts := range ans {
			for ts, v := range pts {
				out[ts] = append(out[ts], v)
			}
		}
		for _, vs := range out {
			sort.Float64s(vs)
		}
		return out
	}
	o, th := byStep(ours), byStep(theirs)
	if len(o) != len(th) {
		return fmt.Sprintf("%d steps, Prometheus %d", len(o), len(th))
	}
	for ts, vs := range o {
		ws := th[ts]
		if len(vs) != len(ws) {
			return fmt.Sprintf("at %v: %d series, Prometheus %d", ts, len(vs), len(ws))
		}
		for i := range vs {
			v, w := vs[i], ws[i]
			if !(v == w || math.Abs(v-w) <= 1e-9*math.Max(math.Abs(v), math.Abs(w))) {
				return fmt.Sprintf("at %v: values %v, Prometheus %v", ts, vs, ws)
			}
		}
	}
	return ""
}
