package web

// Charts that tell the truth about missing data (issue 30, items 2 and 6), read from what
// uPlot holds and draws:
//
//   - TestBrowserOutageDrawnAsGap: an agent stopped with SIGSTOP and resumed is drawn with a
//     gap in every overview chart, never a straight line from the last point before to the
//     first after.
//   - TestBrowserNetworkTotalWithInterfaceChurn: the overview's Network chart sums the
//     interfaces present at each scan, so interfaces that exist for only part of the window do
//     not blank it.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// outageLength is how long TestBrowserOutageDrawnAsGap stops the agent:
// $CANTAL_UI_OUTAGE (a Go duration), else 10 s, ten scans of the test's 1 s interval.
func outageLength(t *testing.T) time.Duration {
	t.Helper()
	d := 10 * time.Second
	if v := os.Getenv("CANTAL_UI_OUTAGE"); v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil || d < 4*time.Second {
			t.Fatalf("CANTAL_UI_OUTAGE=%q: want a duration of at least 4s (%v)", v, err)
		}
	}
	return d
}

// chartsJS lists the overview's charts as JS objects {title, u} (u: the uPlot instance).
const chartsJS = `[...document.querySelectorAll("figure.chart")].filter((f) => f.uplot).map((f) => ({title: f.dataset.title, u: f.uplot}))`

// bridgesJS returns, per chart, the lines that join two points farther apart than gapS
// seconds with no null between them (what uPlot draws as one straight segment), and the
// nulls each line has inside (from, to).
const bridgesJS = `((gapS, from, to) => ` + chartsJS + `.map(({title, u}) => {
	const xs = u.data[0];
	const out = {title, bridges: [], nulls: 0};
	for (let s = 1; s < u.data.length; s++) {
		const ys = u.data[s];
		let prev = -1;
		for (let i = 0; i < xs.length; i++) {
			const v = ys[i];
			if (v === undefined) continue;
			if (v === null) { prev = -1; if (xs[i] > from && xs[i] < to) out.nulls++; continue; }
			if (prev >= 0 && xs[i] - xs[prev] > gapS) out.bridges.push(u.series[s].label + ": " + xs[prev] + "→" + xs[i]);
			prev = i;
		}
	}
	return out;
}))`

// gapInkJS counts, in each chart's canvas, the pixels of a line colour in the column at time
// mid (seconds), inside the plot area: a line drawn across the gap paints there.
const gapInkJS = `((mid) => ` + chartsJS + `.map(({title, u}) => {
	const c = u.ctx.canvas, ctx = u.ctx;
	const x = Math.round(u.valToPos(mid, "x", true));
	const probe = document.createElement("canvas").getContext("2d");
	const cols = u.series.slice(1).map((s) => { probe.fillStyle = s._stroke || "#000"; probe.fillRect(0, 0, 1, 1); return probe.getImageData(0, 0, 1, 1).data; });
	const top = Math.round(u.bbox.top), h = Math.round(u.bbox.height);
	const d = ctx.getImageData(x - 1, top, 3, h).data;
	let n = 0;
	for (let p = 0; p < d.length; p += 4) {
		if (d[p + 3] < 128) continue;
		if (cols.some((k) => Math.abs(d[p] - k[0]) + Math.abs(d[p + 1] - k[1]) + Math.abs(d[p + 2] - k[2]) < 40)) n++;
	}
	return {title, n};
}))`

func TestBrowserOutageDrawnAsGap(t *testing.T) {
	inLine(t)
	chrome := requireBrowser(t)
	outage := outageLength(t)
	tmp := t.TempDir()
	bin := agentBinary(t)
	begun := time.Now()
	ag := startAlertAgent(t, bin, "outage-node")
	// A pushed series with one point left out: its chart must break there (a missed scan is
	// two steps; the old 2.5-step rule bridged it).
	pushed := make(chan error, 1)
	go func() { pushed <- pushWithHole(ag, 14, 7) }()
	ctx, console := alertBrowser(t, chrome, tmp)
	if err := chromedp.Do(ctx, chromedp.Navigate(ag.url("/"))); err != nil {
		t.Fatalf("navigate /: %v", err)
	}
	if err := waitJS(ctx, `document.body.dataset.ready === "/"`); err != nil {
		t.Fatalf("overview: %v", err)
	}
	const cpuFig = `document.querySelector('figure.chart[data-title="CPU"]')`
	if err := waitJS(ctx, cpuFig+` && Number(`+cpuFig+`.dataset.points) >= 5`); err != nil {
		t.Fatalf("CPU chart with 5 points: %v", err)
	}

	if err := <-pushed; err != nil {
		t.Fatalf("push gapprobe: %v", err)
	}
	stopped := time.Now()
	if err := ag.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// The outage itself: the agent stays stopped this long (what is measured, not a wait for
	// a condition).
	time.Sleep(outage)
	resumed := time.Now()
	if err := ag.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// Three scans after the resume in the CPU chart (a rate needs two).
	after := fmt.Sprintf(`%s.uplot.data[0].filter((x) => x > %d).length >= 3`, cpuFig, resumed.Unix()+1)
	if err := waitJS(ctx, cpuFig+` && `+cpuFig+`.uplot && `+after); err != nil {
		t.Fatalf("CPU chart after the resume: %v", err)
	}

	type chartGaps struct {
		Title   string   `json:"title"`
		Bridges []string `json:"bridges"`
		Nulls   int      `json:"nulls"`
	}
	// Points at most 1 s + scheduling apart are normal; a bridge over more than half the
	// outage can only be the outage.
	// The break (a null just after the last point before the outage) falls after the last scan
	// before the stop: within a few seconds of it on a loaded machine.
	js := fmt.Sprintf(bridgesJS+`(%g, %d, %d)`, outage.Seconds()/2, stopped.Unix()-5, resumed.Unix()+2)
	got, err := chromedp.Run(ctx, chromedp.Evaluate[[]chartGaps](js))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) < 9 {
		t.Errorf("%d overview charts drawn; want 9: %+v", len(got), got)
	}
	for _, c := range got {
		if len(c.Bridges) > 0 {
			t.Errorf("chart %q draws the %v outage as a line: %v", c.Title, outage, c.Bridges)
		}
		if c.Nulls == 0 && !strings.HasPrefix(c.Title, "Disk latency") {
			t.Errorf("chart %q has no gap (null) in its data during the outage", c.Title)
		}
	}

	// The drawn path is broken: no line colour in the column at the middle of the outage.
	mid := float64(stopped.Unix()+resumed.Unix()) / 2
	type ink struct {
		Title string `json:"title"`
		N     int    `json:"n"`
	}
	inks, err := chromedp.Run(ctx, chromedp.Evaluate[[]ink](fmt.Sprintf(gapInkJS+`(%g)`, mid)))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range inks {
		if c.N > 0 {
			t.Errorf("chart %q paints %d line pixels in the middle of the outage; want none", c.Title, c.N)
		}
	}

	// The chart page of the pushed series: a break where the point was left out.
	if err := chromedp.Do(ctx, chromedp.Navigate(ag.url("/series/chart?window=5m&match="+urlQuery(`{metric="gapprobe.value"}`)))); err != nil {
		t.Fatal(err)
	}
	const fig = `document.querySelector("figure.chart")`
	if err := waitJS(ctx, fig+` && `+fig+`.uplot && `+fig+`.uplot.data[1].filter((v) => typeof v === "number").length >= 8`); err != nil {
		t.Fatalf("gapprobe chart with 8 points: %v", err)
	}
	probe, err := chromedp.Run(ctx, chromedp.Evaluate[[]chartGaps](bridgesJS+`(1.7, 0, 1e12)`))
	if err != nil {
		t.Fatal(err)
	}
	if len(probe) != 1 || len(probe[0].Bridges) > 0 || probe[0].Nulls == 0 {
		t.Errorf("pushed series with a point left out: %+v; want a null where it is missing and no line over it", probe)
	}

	// The Metrics page's sparkline, placed by time, is blank over the outage.
	if err := chromedp.Do(ctx, chromedp.Navigate(ag.url("/series?match="+urlQuery(`{metric="system.load_avg_1min"}`)))); err != nil {
		t.Fatal(err)
	}
	var spark struct {
		Width, Blank, First, Last int
	}
	waitUntil(t, 30*time.Second, "the sparkline drawn", func() error {
		var err error
		spark, err = chromedp.Run(ctx, chromedp.Evaluate[struct{ Width, Blank, First, Last int }](sparkGapJS))
		if err != nil {
			return err
		}
		if spark.Width == 0 || spark.First < 0 || spark.Last-spark.First < spark.Width/2 {
			return fmt.Errorf("sparkline %+v", spark)
		}
		return nil
	})
	span := time.Since(begun).Seconds()
	want := int(outage.Seconds() / span * float64(spark.Width) / 2)
	if spark.Blank < max(2, want) {
		t.Errorf("sparkline over %.0f s: the longest blank run of columns inside it is %d px of %d; want at least %d for the %v outage", span, spark.Blank, spark.Width, max(2, want), outage)
	}
	for _, e := range console.take() {
		t.Errorf("console: %s", e)
	}
}

// sparkGapJS measures the first Metrics row's sparkline: its width in device pixels, the
// first and last columns with ink, and the longest run of blank columns between them.
const sparkGapJS = `(() => {
	const c = document.querySelector(".vrow canvas.spark");
	if (!c) return {Width: 0, Blank: 0, First: 0, Last: 0};
	const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
	const ink = [];
	for (let x = 0; x < c.width; x++) {
		let n = 0;
		for (let y = 0; y < c.height; y++) if (d[(y * c.width + x) * 4 + 3] > 0) n++;
		ink.push(n > 0);
	}
	const first = ink.indexOf(true), last = ink.lastIndexOf(true);
	let blank = 0, run = 0;
	for (let x = first; x <= last && first >= 0; x++) { run = ink[x] ? 0 : run + 1; blank = Math.max(blank, run); }
	return {Width: c.width, Blank: blank, First: first, Last: last};
})()`

// pushWithHole writes gapprobe value=i at the current time, once a second, n times, leaving
// out the skip-th: the agent keeps each point at its own time, so its history has one step
// of two seconds among steps of one.
func pushWithHole(n *fleetNode, count, skip int) error {
	c := &http.Client{Timeout: 5 * time.Second}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for i := 0; i < count; i++ {
		if i != skip {
			body := fmt.Sprintf("gapprobe value=%d %d\n", i%3, time.Now().UnixNano())
			resp, err := c.Post(n.url("/write"), "text/plain", strings.NewReader(body))
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusNoContent {
				return fmt.Errorf("POST /write: %s", resp.Status)
			}
		}
		<-tick.C
	}
	return nil
}

// netnsAgent is an agent running in a network namespace of its own, reached over a veth
// pair: the test adds and removes interfaces in the namespace without touching the host's.
type netnsAgent struct {
	*fleetNode
	ns string
}

// ipCmd runs ip(8) with args, failing the test on error.
func ipCmd(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// startNetnsAgent makes a network namespace with a veth pair to the host (10.213.N.1 on the
// host, .2 inside) and starts the agent in it, listening on the inner address. Namespace
// and host end are removed when the test ends.
func startNetnsAgent(t *testing.T, bin, name string) *netnsAgent {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("this test makes a network namespace: run it as root (CAP_NET_ADMIN)")
	}
	n := rand.IntN(200) + 20
	ns := fmt.Sprintf("cui%d-%d", os.Getpid(), n)
	host := fmt.Sprintf("cuih%d", n)
	ipCmd(t, "netns", "add", ns)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	ipCmd(t, "link", "add", host, "type", "veth", "peer", "name", "eth0", "netns", ns)
	t.Cleanup(func() { exec.Command("ip", "link", "del", host).Run() })
	ipCmd(t, "addr", "add", fmt.Sprintf("10.213.%d.1/30", n), "dev", host)
	ipCmd(t, "link", "set", host, "up")
	ipCmd(t, "-n", ns, "addr", "add", fmt.Sprintf("10.213.%d.2/30", n), "dev", "eth0")
	ipCmd(t, "-n", ns, "link", "set", "eth0", "up")
	ipCmd(t, "-n", ns, "link", "set", "lo", "up")

	a := &netnsAgent{fleetNode: &fleetNode{name: name, addr: fmt.Sprintf("10.213.%d.2:22682", n), log: new(fleetLog)}, ns: ns}
	// ip netns exec runs the agent in the namespace with /sys remounted for it, so
	// /proc/net/dev and /sys/class/net show the namespace's interfaces.
	a.cmd = exec.Command("ip", "netns", "exec", ns, bin, "--listen", a.addr, "--interval", "1s", "--state-dir", "", "--rrdd-dir", "",
		"--node-name", name, "--alert-cpu", "0", "--alert-memory", "0", "--alert-disk", "0", "--log-level", "warn")
	a.cmd.Stdout, a.cmd.Stderr = a.log, a.log
	if err := a.cmd.Start(); err != nil {
		t.Fatalf("start agent in %s: %v", ns, err)
	}
	t.Cleanup(func() {
		a.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { a.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			a.cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("agent %s log:\n%s", name, a.log.String())
		}
	})
	waitUntil(t, 60*time.Second, "agent "+name+" answers in "+ns, func() error {
		var st any
		return getJSONClient(&http.Client{Timeout: 2 * time.Second}, a.url("/api/v1/status"), &st)
	})
	return a
}

// scanTimes returns the agent's timestamps (unix s) of system.uptime_s over the last minute.
func scanTimes(t *testing.T, n *fleetNode) []float64 {
	t.Helper()
	var ans struct {
		Series []struct {
			Points [][2]float64 `json:"points"`
		} `json:"series"`
	}
	if err := getJSONClient(&http.Client{Timeout: 5 * time.Second}, n.url(`/api/v1/history?window=1m&match=`+urlQuery(`{metric="system.uptime_s"}`)), &ans); err != nil {
		t.Fatal(err)
	}
	var out []float64
	if len(ans.Series) > 0 {
		for _, p := range ans.Series[0].Points {
			out = append(out, p[0]/1000)
		}
	}
	return out
}

func TestBrowserNetworkTotalWithInterfaceChurn(t *testing.T) {
	inLine(t)
	chrome := requireBrowser(t)
	tmp := t.TempDir()
	bin := agentBinary(t)
	ag := startNetnsAgent(t, bin, "churn-node")
	// Interface pair a exists only at the start of the window, pair b only at its end.
	ipCmd(t, "-n", ag.ns, "link", "add", "churna0", "type", "veth", "peer", "name", "churna1")
	waitScans := func(k int) {
		t.Helper()
		n0 := len(scanTimes(t, ag.fleetNode))
		waitUntil(t, 60*time.Second, fmt.Sprintf("%d more scans", k), func() error {
			if n := len(scanTimes(t, ag.fleetNode)); n < n0+k {
				return fmt.Errorf("%d scans, want %d", n, n0+k)
			}
			return nil
		})
	}
	waitScans(4)
	ipCmd(t, "-n", ag.ns, "link", "del", "churna0")
	waitScans(4)
	ipCmd(t, "-n", ag.ns, "link", "add", "churnb0", "type", "veth", "peer", "name", "churnb1")

	ctx, console := alertBrowser(t, chrome, tmp)
	if err := chromedp.Do(ctx, chromedp.Navigate(ag.url("/"))); err != nil {
		t.Fatalf("navigate /: %v", err)
	}
	if err := waitJS(ctx, `document.body.dataset.ready === "/"`); err != nil {
		t.Fatalf("overview: %v", err)
	}
	const netFig = `document.querySelector('figure.chart[data-title^="Network"]')`
	// Scans after pair b came: its first rate, and a few more.
	if err := waitJS(ctx, netFig+` && Number(`+netFig+`.dataset.points) >= 14`); err != nil {
		pts, _ := chromedp.Run(ctx, chromedp.Evaluate[string](netFig+`.dataset.points`))
		t.Fatalf("network chart with 14 points: %v (has %s)", err, pts)
	}
	type line struct {
		Label  string `json:"label"`
		Values int    `json:"values"`
	}
	lines, err := chromedp.Run(ctx, chromedp.Evaluate[[]line](netFig+`.uplot.series.slice(1).map((s, i) => ({label: s.label, values: `+netFig+`.uplot.data[i + 1].filter((v) => typeof v === "number").length}))`))
	if err != nil {
		t.Fatal(err)
	}
	// Scan times: the x positions where either line has a value (a break's null is not one).
	scans, err := chromedp.Run(ctx, chromedp.Evaluate[int](`(() => { const d = `+netFig+`.uplot.data; return d[0].filter((_, i) => d.slice(1).some((l) => typeof l[i] === "number")).length; })()`))
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 2 {
		t.Fatalf("network chart lines %+v; want received and sent", lines)
	}
	// Every scan has a total, whichever interfaces it saw (a line may lack the very first: no
	// rate yet).
	for _, l := range lines {
		if l.Values < 10 || l.Values < scans-1 {
			t.Errorf("network line %q has %d values at %d scan times; want one at every scan", l.Label, l.Values, scans)
		}
	}
	for i, n := range seriesInk(t, ctx, netFig) {
		if n < 50 {
			t.Errorf("network line %q painted %d pixels of its colour; want it drawn", lines[i].Label, n)
		}
	}
	for _, e := range console.take() {
		t.Errorf("console: %s", e)
	}
}

// seriesInk counts, per line of the chart's uPlot, the canvas pixels of the line's colour.
func seriesInk(t *testing.T, ctx context.Context, fig string) []int {
	t.Helper()
	js := `(() => { const u = ` + fig + `.uplot, c = u.ctx.canvas;
		const d = u.ctx.getImageData(0, 0, c.width, c.height).data;
		const probe = document.createElement("canvas").getContext("2d");
		const cols = u.series.slice(1).map((s) => { probe.fillStyle = s._stroke || "#000"; probe.fillRect(0, 0, 1, 1); return probe.getImageData(0, 0, 1, 1).data; });
		const counts = cols.map(() => 0);
		for (let p = 0; p < d.length; p += 4) {
			if (d[p + 3] < 128) continue;
			for (let j = 0; j < cols.length; j++) {
				const k = cols[j];
				if (Math.abs(d[p] - k[0]) + Math.abs(d[p + 1] - k[1]) + Math.abs(d[p + 2] - k[2]) < 40) { counts[j]++; break; }
			}
		}
		return counts; })()`
	n, err := chromedp.Run(ctx, chromedp.Evaluate[[]int](js))
	if err != nil {
		t.Fatal(err)
	}
	return n
}
