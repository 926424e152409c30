package web

// TestBrowserClusterContainers: the Containers page's cluster view against two real agents
// joined in a cluster and real Podman containers (both agents run on this machine, so each
// names the same containers: every container is a row per node). The switch puts
// view=cluster in the URL and adds the Node column; the drawn rows are every row of
// /api/v1/cluster/containers of the same scans (cells and node compared); sorting by memory
// orders the test's own rows across both nodes by the API's working sets; a click on the
// peer's row opens the container's page, whose memory chart holds the points the peer's
// history has (through /api/v1/cluster/history?node=) and moves on live; a killed peer is
// named in the page's line of nodes not answering, and its rows go.

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/apiwire"
	"github.com/cantal-go/cantal/internal/testsupport/podmantest"
	"github.com/chromedp/chromedp"
)

// clusterRow is what the cluster view shows of one row: the container, its node, the scan
// its figures are from and the text of its cells.
type clusterRow struct {
	ID    string   `json:"id"`
	Node  string   `json:"node"`
	TS    int64    `json:"ts"`
	Cells []string `json:"cells"`
}

func clusterRows(t *testing.T, run func(js string, v any) error) []clusterRow {
	t.Helper()
	js := `JSON.stringify([...document.querySelectorAll("table.grid tbody tr")].filter((tr) => tr.querySelector("a.ctr")).map((tr) => {
		const a = tr.querySelector("a.ctr");
		return {id: a.dataset.id, node: a.dataset.node, ts: Number(a.dataset.ts), cells: [...tr.cells].map((c) => c.innerText.trim())};
	}))`
	var rows []clusterRow
	if err := json.Unmarshal([]byte(evalString(t, run, js)), &rows); err != nil {
		t.Fatal(err)
	}
	return rows
}

func TestBrowserClusterContainers(t *testing.T) {
	inLine(t)
	chrome := requireBrowser(t)
	if os.Geteuid() != 0 {
		t.Fatal("the agent names containers from the runtimes' root-only state: run as root")
	}
	tmp := t.TempDir()
	image := podmantest.Image(t, repoRoot(t), "./e2e/ctrapp", "ctrapp", nil)
	name := fmt.Sprintf("ui-cl-%d", os.Getpid())
	idA := podmantest.Run(t, name, image, []string{"--cpus", "0.5", "--memory", "64m"}, "-burn")[:12]
	idB := podmantest.Run(t, name+"-b", image, []string{"--memory", "64m"}, "-alloc", "24")[:12]
	own := func(id string) bool { return id == idA || id == idB }

	bin := agentBinary(t)
	n1 := startAlertAgent(t, bin, "cn1", "--cluster-name", "ctr-ui")
	n2 := startAlertAgent(t, bin, "cn2", "--cluster-name", "ctr-ui", "--peer", n1.addr)
	client := &http.Client{Timeout: 5 * time.Second}
	waitUntil(t, 60*time.Second, "cn1 and cn2 know each other", func() error {
		for _, n := range []*fleetNode{n1, n2} {
			var ans struct {
				Peers []struct{ Name, Status string } `json:"peers"`
			}
			if err := getJSONClient(client, n.url("/api/v1/peers"), &ans); err != nil {
				return err
			}
			if len(ans.Peers) != 1 || ans.Peers[0].Status != "alive" {
				return fmt.Errorf("%s's peers: %+v", n.name, ans.Peers)
			}
		}
		return nil
	})
	clusterAPI := func() (apiwire.ContainersAnswer, error) {
		var a apiwire.ContainersAnswer
		return a, getJSONClient(client, n1.url("/api/v1/cluster/containers"), &a)
	}
	// Both containers on both nodes, every node answering, the burner's CPU with a rate.
	waitUntil(t, 90*time.Second, "the test's containers on cn1 and cn2 in cn1's cluster answer", func() error {
		a, err := clusterAPI()
		if err != nil {
			return err
		}
		if len(a.Nodes) != 2 || a.Nodes[0].Status != "ok" || a.Nodes[1].Status != "ok" {
			return fmt.Errorf("nodes %+v; want cn1 and cn2 ok", a.Nodes)
		}
		seen := map[string]bool{}
		for _, c := range a.Containers {
			if own(c.ID) && (c.ID != idA || c.CPUPercent > 20) {
				seen[c.ID+"@"+c.Node] = true
			}
		}
		if len(seen) != 4 {
			return fmt.Errorf("own rows %v; want %s and %s on cn1 and cn2 (the burner at its quota)", seen, idA, idB)
		}
		return nil
	})

	ctx, console := alertBrowser(t, chrome, tmp)
	run := func(js string, v any) error {
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
		*(v.(*string)) = s
		return err
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(n1.url("/containers"))); err != nil {
		t.Fatal(err)
	}
	if err := waitJS(ctx, `document.body.dataset.ready === "/containers" && !document.querySelector('th[data-key="node"]')`); err != nil {
		t.Fatalf("the node view: %v", err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`button[data-view="cluster"]`))); err != nil {
		t.Fatal(err)
	}
	if err := waitJS(ctx, `document.body.dataset.ready === "/containers" && document.querySelector('th[data-key="node"]') && document.querySelector('button[data-view="cluster"]').getAttribute("aria-pressed") === "true"`); err != nil {
		t.Fatalf("the cluster view: %v", err)
	}
	if u, _ := url.Parse(evalString(t, run, `location.href`)); u.Query().Get("view") != "cluster" {
		t.Fatalf("URL %s after the switch; want view=cluster", u)
	}

	// Every row of the cluster answer drawn, each as the API has it for the same scan (the
	// page refreshes after every scan of cn1, cn2 scans at its own phase: read both until
	// every row is of one scan). Other tests' containers come and go: the whole set must agree.
	cols := []string{"name", "node", "image", "pod", "cpu", "mem", "oom", "procs", "io", "net"}
	waitUntil(t, 60*time.Second, "the drawn rows equal to the cluster answer's", func() error {
		drawn := clusterRows(t, run)
		a, err := clusterAPI()
		if err != nil {
			return err
		}
		api := map[string]apiwire.Container{}
		for _, c := range a.Containers {
			api[c.ID+"@"+c.Node] = c
		}
		if len(drawn) != len(api) || len(drawn) != a.Total {
			return fmt.Errorf("%d rows drawn; the API has %d (total %d)", len(drawn), len(api), a.Total)
		}
		var bad []string
		nodes := map[string]int{}
		for _, r := range drawn {
			c, ok := api[r.ID+"@"+r.Node]
			if !ok {
				return fmt.Errorf("row %s on %q drawn, not in the API's answer", r.ID, r.Node)
			}
			if c.TS != r.TS {
				return fmt.Errorf("row %s on %s drawn of scan %d, the API's of %d", r.ID, r.Node, r.TS, c.TS)
			}
			if len(r.Cells) != len(cols) {
				return fmt.Errorf("cells %q; want %d", r.Cells, len(cols))
			}
			nodes[r.Node]++
			cell := map[string]string{}
			for i, k := range cols {
				cell[k] = r.Cells[i]
			}
			pod := "–"
			if c.Pod != "" {
				pod = c.Pod
				if c.Namespace != "" {
					pod = c.Namespace + "/" + c.Pod
				}
			}
			name := c.Name
			if name == "" {
				name = c.ID
			}
			cpu := fmt.Sprintf("%.1f %%", float64(c.CPUPercent))
			if c.CPUPeriods > 0 {
				cpu += fmt.Sprintf(" throttled %.1f %%", float64(c.ThrottledPercent))
			}
			mem := strings.Fields(cell["mem"])
			if cell["name"] != name || cell["node"] != c.Node || cell["image"] != c.Image || cell["pod"] != pod || cell["cpu"] != cpu ||
				cell["oom"] != strconv.FormatUint(c.OOMKills, 10) || cell["procs"] != strconv.Itoa(c.Processes) || len(mem) < 2 {
				bad = append(bad, fmt.Sprintf("drawn %q; API %+v", r.Cells, c))
				continue
			}
			if err := nearSize(mem[0]+" "+mem[1], c.MemoryWorkingSet); err != nil {
				bad = append(bad, fmt.Sprintf("%s on %s: working set %v", r.ID, r.Node, err))
			}
		}
		if len(bad) > 0 {
			t.Fatalf("rows of the same scan drawn unlike the API's:\n%s", strings.Join(bad, "\n"))
		}
		for _, id := range []string{idA, idB} {
			for _, n := range []string{"cn1", "cn2"} {
				if _, ok := api[id+"@"+n]; !ok {
					return fmt.Errorf("own row %s on %s not in the answer", id, n)
				}
			}
		}
		if nodes["cn1"] == 0 || nodes["cn2"] == 0 {
			return fmt.Errorf("rows per node %v; want both nodes' rows", nodes)
		}
		return nil
	})

	// Sorted by memory (one click: largest first), across both nodes: the test's own four rows
	// in the order of the API's working sets of the same scans.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`th[data-key="mem"] button`))); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 60*time.Second, "own rows ordered by working set across nodes", func() error {
		var rows []clusterRow
		for _, r := range clusterRows(t, run) {
			if own(r.ID) {
				rows = append(rows, r)
			}
		}
		if len(rows) != 4 {
			return fmt.Errorf("%d of the test's four rows drawn", len(rows))
		}
		a, err := clusterAPI()
		if err != nil {
			return err
		}
		api := map[string]apiwire.Container{}
		for _, c := range a.Containers {
			api[c.ID+"@"+c.Node] = c
		}
		for _, r := range rows {
			if c := api[r.ID+"@"+r.Node]; c.TS != r.TS {
				return fmt.Errorf("API row %s on %s of scan %d, drawn of %d", r.ID, r.Node, c.TS, r.TS)
			}
		}
		for i := 1; i < len(rows); i++ {
			p, c := api[rows[i-1].ID+"@"+rows[i-1].Node], api[rows[i].ID+"@"+rows[i].Node]
			if c.MemoryWorkingSet > p.MemoryWorkingSet {
				return fmt.Errorf("row %d (%s on %s, %d) below row %d (%s on %s, %d)", i, c.ID, c.Node, c.MemoryWorkingSet, i-1, p.ID, p.Node, p.MemoryWorkingSet)
			}
		}
		if slices.IndexFunc(rows, func(r clusterRow) bool { return r.Node == "cn2" }) < 0 {
			return fmt.Errorf("no row of cn2 among %v", rows)
		}
		if u, _ := url.Parse(evalString(t, run, `location.href`)); u.Query().Get("view") != "cluster" || u.Query().Get("sort") != "-mem" {
			return fmt.Errorf("URL %s; want view=cluster and sort=-mem", u)
		}
		return nil
	})

	// The peer's row opens the container's page on cn1, its charts from cn2's history.
	a, err := clusterAPI()
	if err != nil {
		t.Fatal(err)
	}
	var remote apiwire.Container
	for _, c := range a.Containers {
		if c.ID == idB && c.Node == "cn2" {
			remote = c
		}
	}
	if remote.Cgroup == "" {
		t.Fatalf("no row of %s on cn2 in %+v", idB, a)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`a.ctr[data-id="`+idB+`"][data-node="cn2"]`))); err != nil {
		t.Fatal(err)
	}
	if err := waitJS(ctx, `document.body.dataset.ready === "/container/`+idB+`" && new URLSearchParams(location.search).get("node") === "cn2"`); err != nil {
		t.Fatalf("cn2's container page: %v", err)
	}
	if got := evalString(t, run, `document.querySelector("dl.facts dd.node")?.innerText ?? ""`); got != "cn2" {
		t.Errorf("the page's node %q; want cn2", got)
	}
	const memFig = `document.querySelector('figure.chart[data-title="Container memory"]')`
	chartData := func() ([][]float64, string, error) {
		var d struct {
			Legend string      `json:"legend"`
			Data   [][]float64 `json:"data"`
		}
		js := `JSON.stringify({legend: ` + memFig + `.dataset.legend, data: ` + memFig + `.uplot.data.map((l) => l.map((v) => v ?? -1))})`
		err := json.Unmarshal([]byte(evalString(t, run, `(() => { try { return `+js+` } catch (e) { return "{}" } })()`)), &d)
		return d.Data, d.Legend, err
	}
	sel := fmt.Sprintf(`{metric="cgroup.memory.working_set",container_id=%q,cgroup=%q}`, idB, remote.Cgroup)
	// points reads one series' points (ts → value) of a history answer: cluster (cn2's) or local.
	points := func(u string, cluster bool) (map[int64]float64, error) {
		var series []apiwire.HistorySeries
		if cluster {
			var h apiwire.ClusterHistoryAnswer
			if err := getJSONClient(client, u, &h); err != nil {
				return nil, err
			}
			for _, n := range h.Nodes {
				if n.Node == "cn2" {
					series = n.Series
				}
			}
		} else {
			var h apiwire.HistoryAnswer
			if err := getJSONClient(client, u, &h); err != nil {
				return nil, err
			}
			series = h.Series
		}
		if len(series) != 1 {
			return nil, fmt.Errorf("%s: %d series", u, len(series))
		}
		out := map[int64]float64{}
		for _, p := range series[0].Points {
			out[p.TS] = p.Value.F
		}
		return out, nil
	}
	var firstX float64
	waitUntil(t, 60*time.Second, "the memory chart holding cn2's history of the working set", func() error {
		data, legend, err := chartData()
		if err != nil {
			return err
		}
		if len(data) < 2 || !strings.HasPrefix(legend, "working set\n") {
			return fmt.Errorf("chart legend %q, %d lines", legend, len(data))
		}
		peer, err := points(n1.url("/api/v1/cluster/history?window=15m&node=cn2&match="+url.QueryEscape(sel)), true)
		if err != nil {
			return err
		}
		local, err := points(n1.url("/api/v1/history?window=15m&match="+url.QueryEscape(sel)), false)
		if err != nil {
			return err
		}
		matched, ofLocal := 0, 0
		for i, x := range data[0] {
			ts := int64(math.Round(x * 1000))
			if _, ok := local[ts]; ok {
				ofLocal++
			}
			want, ok := peer[ts]
			if !ok || data[1][i] == -1 {
				continue
			}
			if data[1][i] != want {
				return fmt.Errorf("chart at %v: %v; cn2's history %v", x, data[1][i], want)
			}
			matched++
		}
		if matched < 3 || ofLocal*2 > matched {
			return fmt.Errorf("%d of the chart's %d points are cn2's history (%d points), %d cn1's; want ≥ 3, mostly cn2's", matched, len(data[0]), len(peer), ofLocal)
		}
		firstX = slices.Max(data[0])
		return nil
	})
	waitUntil(t, 30*time.Second, "the chart moving on with cn2's scans", func() error {
		data, _, err := chartData()
		if err != nil || len(data) < 2 {
			return fmt.Errorf("chart: %v", err)
		}
		if last := slices.Max(data[0]); last < firstX+2 {
			return fmt.Errorf("last point at %v; the first read ended at %v", last, firstX)
		}
		return nil
	})

	// cn2 dies: the cluster view names it and shows none of its rows.
	if err := chromedp.Do(ctx, chromedp.Navigate(n1.url("/containers?view=cluster"))); err != nil {
		t.Fatal(err)
	}
	if err := waitJS(ctx, `document.body.dataset.ready === "/containers" && document.querySelector('a.ctr[data-node="cn2"]')`); err != nil {
		t.Fatalf("the cluster view with cn2's rows: %v", err)
	}
	n2.cmd.Process.Kill()
	n2.cmd.Wait()
	killed := time.Now()
	// The hub's connection to cn2 closes with the process (its ping timeout is 1 s): well
	// within 20 s even on a loaded machine.
	waitUntil(t, 20*time.Second, "cn2 named unreachable on the page", func() error {
		line := evalString(t, run, `(() => { const d = document.querySelector(".nodes-down"); return d ? d.dataset.nodes + "|" + d.innerText : "" })()`)
		if !strings.HasPrefix(line, "cn2|") || !strings.Contains(line, "cn2 (unreachable)") {
			return fmt.Errorf("line %q; want cn2 (unreachable)", line)
		}
		for _, r := range clusterRows(t, run) {
			if r.Node == "cn2" {
				return fmt.Errorf("cn2's row %s still drawn", r.ID)
			}
		}
		return nil
	})
	t.Logf("cn2 named unreachable on cn1's page %v after the kill", time.Since(killed).Round(100*time.Millisecond))
	n := 0
	for _, r := range clusterRows(t, run) {
		if own(r.ID) && r.Node == "cn1" {
			n++
		}
	}
	if n != 2 {
		t.Errorf("%d of the test's rows on cn1 drawn after cn2 died; want 2", n)
	}
	if shot, err := chromedp.Run(ctx, chromedp.CaptureScreenshot()); err == nil {
		os.WriteFile(uiArtifacts(t)+"/containers-cluster-down.png", shot, 0o644)
	}
	if errs := console.take(); len(errs) > 0 {
		t.Errorf("console errors: %q", errs)
	}
}
