package web

// What an operator reads off the UI (issue 30, items 11, 13, 14, 15), from what is drawn:
//
//   - TestBrowserReadable: byte axes tick at round values in the unit written, 14 lines get
//     14 distinguishable colours that follow their names, nice CPU is a line of its own, the
//     header names the node (--node-name) and the host's uptime, and live and kept series
//     are told apart.
//   - TestBrowserMetricsNamedSelector: `name{label="v"}` in the Metrics box is a selector.
//   - TestBrowserChartPageFits: the chart page with long labels does not scroll sideways at
//     1280 px nor on a phone, and charts that never got data hold their note in their card.
//   - TestBrowserOverviewTraffic: the overview's steady traffic per tab, counted on the wire by
//     a proxy (CDP's network events give the breakdown), is at most 5 KB/s.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// pushLines writes body (line protocol) to the agent every 500 ms until the test ends.
func pushLines(t *testing.T, n *fleetNode, body func() string) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { stop(); <-done })
	go func() {
		defer close(done)
		c := &http.Client{Timeout: 2 * time.Second}
		for {
			if resp, err := c.Post(n.url("/write"), "text/plain", strings.NewReader(body())); err == nil {
				resp.Body.Close()
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
}

// parseDuration reads fmtDuration's "3d 4h", "2h 5m", "4m 10s", "12s" as seconds.
func parseDuration(s string) (float64, error) {
	var total float64
	for _, f := range strings.Fields(s) {
		if len(f) < 2 {
			return 0, fmt.Errorf("bad duration %q", s)
		}
		n, err := strconv.Atoi(f[:len(f)-1])
		if err != nil {
			return 0, fmt.Errorf("bad duration %q", s)
		}
		mult := map[byte]float64{'d': 86400, 'h': 3600, 'm': 60, 's': 1}[f[len(f)-1]]
		if mult == 0 {
			return 0, fmt.Errorf("bad duration %q", s)
		}
		total += float64(n) * mult
	}
	return total, nil
}

func TestBrowserReadable(t *testing.T) {
	inLine(t)
	chrome := requireBrowser(t)
	tmp := t.TempDir()
	bin := agentBinary(t)
	ag := startAlertAgent(t, bin, "readable-node")
	// 14 series of one metric, for the colours.
	pushLines(t, ag, func() string {
		var b strings.Builder
		for k := 0; k < 14; k++ {
			fmt.Fprintf(&b, "colourprobe,k=%02d value=%d\n", k, 10+5*k)
		}
		return b.String()
	})
	ctx, console := alertBrowser(t, chrome, tmp)
	if err := chromedp.Do(ctx, chromedp.Navigate(ag.url("/"))); err != nil {
		t.Fatal(err)
	}
	if err := waitJS(ctx, `document.body.dataset.ready === "/"`); err != nil {
		t.Fatalf("overview: %v", err)
	}

	// Byte ticks: round numbers in the one unit the axis is written in.
	const memFig = `document.querySelector('figure.chart[data-title="Memory"]')`
	if err := waitJS(ctx, memFig+` && `+memFig+`.uplot && (`+memFig+`.uplot.axes[1]._values || []).length >= 2`); err != nil {
		t.Fatalf("memory chart ticks: %v", err)
	}
	ticks, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](memFig+`.uplot.axes[1]._values.map(String)`))
	if err != nil {
		t.Fatal(err)
	}
	tickRe := regexp.MustCompile(`^([0-9]+) (B|KiB|MiB|GiB|TiB)$`)
	units := map[string]bool{}
	for _, tk := range ticks {
		m := tickRe.FindStringSubmatch(tk)
		if m == nil {
			t.Errorf("memory axis tick %q is not a whole number of one binary unit (ticks %q)", tk, ticks)
			continue
		}
		units[m[2]] = true
	}
	if len(units) > 1 {
		t.Errorf("memory axis ticks %q mix units", ticks)
	}

	// nice CPU on its own line.
	const cpuFig = `document.querySelector('figure.chart[data-title="CPU"]')`
	if err := waitJS(ctx, cpuFig+` && `+cpuFig+`.dataset.legend`); err != nil {
		t.Fatal(err)
	}
	legend, _ := chromedp.Run(ctx, chromedp.Evaluate[string](cpuFig+`.dataset.legend`))
	if !strings.Contains("\n"+legend+"\n", "\nnice\n") || strings.Contains(legend, "other (nice") {
		t.Errorf("CPU legend %q; want nice as a line of its own", legend)
	}

	// Header: the node's name and the host's uptime (not the agent's).
	b, err := os.ReadFile("/proc/uptime")
	if err != nil {
		t.Fatal(err)
	}
	hostUp, _ := strconv.ParseFloat(strings.Fields(string(b))[0], 64)
	if err := waitJS(ctx, `document.querySelector("header .host").dataset.uptime`); err != nil {
		t.Fatalf("header uptime: %v", err)
	}
	type header struct{ Name, Up string }
	hd, err := chromedp.Run(ctx, chromedp.Evaluate[header](`(() => { const e = document.querySelector("header .host"); return {Name: e.textContent, Up: e.dataset.uptime}; })()`))
	if err != nil {
		t.Fatal(err)
	}
	if hd.Name != "readable-node" {
		t.Errorf("header names %q; want the node name readable-node", hd.Name)
	}
	if up, err := parseDuration(hd.Up); err != nil || math.Abs(up-hostUp) > 120 {
		t.Errorf("header uptime %q (%v s, %v); want the host's, %.0f s", hd.Up, up, err, hostUp)
	}

	// Series: live and kept named.
	short, cancelShort := context.WithTimeout(ctx, 15*time.Second)
	defer cancelShort()
	if err := waitJS(short, `/live .* kept/.test(document.querySelector("#ov-series").textContent)`); err != nil {
		got, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("#ov-series").closest(".card").innerText`))
		t.Errorf("series card %q: want live and kept counts named: %v", got, err)
	}

	// Colours: 14 lines, 14 distinguishable colours; a line keeps its colour in another chart.
	colours := func(sel string, n int) map[string]string {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.Navigate(ag.url("/series/chart?window=5m&match="+urlQuery(sel)))); err != nil {
			t.Fatal(err)
		}
		const fig = `document.querySelector("figure.chart")`
		wctx, cancelW := context.WithTimeout(ctx, 30*time.Second)
		defer cancelW()
		if err := waitJS(wctx, fmt.Sprintf(`%s && Number(%s.dataset.lines) === %d && %s.dataset.colors`, fig, fig, n, fig)); err != nil {
			t.Fatalf("chart of %s with %d lines: %v", sel, n, err)
		}
		type line struct{ Name, Colour string }
		ls, err := chromedp.Run(ctx, chromedp.Evaluate[[]line](`(() => { const f = `+fig+`; const cs = f.dataset.colors.split(" "); return f.dataset.legend.split("\n").map((n, i) => ({Name: n, Colour: cs[i]})); })()`))
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, l := range ls {
			out[l.Name] = l.Colour
		}
		return out
	}
	all := colours(`{metric="colourprobe.value"}`, 14)
	rgb := func(s string) [3]int {
		var c [3]int
		fmt.Sscanf(s, "#%02x%02x%02x", &c[0], &c[1], &c[2])
		return c
	}
	names := make([]string, 0, len(all))
	for n := range all {
		names = append(names, n)
	}
	for i := range names {
		for j := i + 1; j < len(names); j++ {
			a, b := rgb(all[names[i]]), rgb(all[names[j]])
			if d := abs(a[0]-b[0]) + abs(a[1]-b[1]) + abs(a[2]-b[2]); d < 40 {
				t.Errorf("lines %s (%s) and %s (%s) are hard to tell apart (distance %d)", names[i], all[names[i]], names[j], all[names[j]], d)
			}
		}
	}
	some := colours(`{metric="colourprobe.value", k=~"0[2-5]"}`, 4)
	for n, c := range some {
		if all[n] != c {
			t.Errorf("line %s is %s among 4 lines but %s among 14; want its colour kept", n, c, all[n])
		}
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(ag.url("/series"))); err != nil {
		t.Fatal(err)
	}
	short2, cancelShort2 := context.WithTimeout(ctx, 30*time.Second)
	defer cancelShort2()
	if err := waitJS(short2, `document.body.dataset.ready === "/series" && /live series/.test(document.querySelector("#series-count").textContent)`); err != nil {
		got, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("#series-count")?.textContent`))
		t.Errorf("Metrics count %q: want it to say live series: %v", got, err)
	}
	for _, e := range console.take() {
		t.Errorf("console: %s", e)
	}
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

func TestBrowserMetricsNamedSelector(t *testing.T) {
	inLine(t)
	chrome := requireBrowser(t)
	tmp := t.TempDir()
	bin := agentBinary(t)
	ag := startAlertAgent(t, bin, "selector-node")
	ctx, console := alertBrowser(t, chrome, tmp)
	if err := chromedp.Do(ctx, chromedp.Navigate(ag.url("/series"))); err != nil {
		t.Fatal(err)
	}
	if err := waitJS(ctx, `document.body.dataset.ready === "/series"`); err != nil {
		t.Fatal(err)
	}
	const sel = `cpu.user_ms{cpu="0"}`
	if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`document.querySelector("#sel").value = `+jsString(sel)), chromedp.SendKeys(chromedp.CSS("#sel"), kb.Enter)); err != nil {
		t.Fatal(err)
	}
	if err := waitJS(ctx, `new URLSearchParams(location.search).has("match") || new URLSearchParams(location.search).has("q")`); err != nil {
		t.Fatal(err)
	}
	if err := waitJS(ctx, `document.body.dataset.ready === "/series" && document.querySelector("#series-count")?.dataset.count !== undefined`); err != nil {
		t.Fatal(err)
	}
	type res struct {
		Match, Q string
		Count    int
		Names    []string
	}
	r, err := chromedp.Run(ctx, chromedp.Evaluate[res](`(() => { const p = new URLSearchParams(location.search); return {Match: p.get("match") || "", Q: p.get("q") || "",
		Count: Number(document.querySelector("#series-count").dataset.count), Names: [...document.querySelectorAll(".vrow .name")].map((a) => a.textContent)}; })()`))
	if err != nil {
		t.Fatal(err)
	}
	if r.Match != sel || r.Q != "" || r.Count != 1 || len(r.Names) != 1 || r.Names[0] != `cpu.user_ms{cpu="0"}` {
		t.Errorf("%s in the Metrics box: %+v; want it applied as a selector listing cpu.user_ms{cpu=\"0\"} alone", sel, r)
	}
	for _, e := range console.take() {
		t.Errorf("console: %s", e)
	}
}

func TestBrowserChartPageFits(t *testing.T) {
	inLine(t)
	chrome := requireBrowser(t)
	tmp := t.TempDir()
	bin := agentBinary(t)
	ag := startAlertAgent(t, bin, "fits-node")
	long := strings.Repeat("a-rather-long-label-value-", 5)
	pushLines(t, ag, func() string {
		return fmt.Sprintf("fitprobe,service=%s1,instance=%s2,zone=%s3 value=12345678\nfitprobe,service=%s4,instance=%s5,zone=%s6 value=2345678\n", long, long, long, long, long, long)
	})
	bctx, console := newBrowser(t, chrome, tmp, 1280, 800)
	ctx, cancel := context.WithTimeout(bctx, 3*time.Minute)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(ag.url("/series/chart?window=5m&match="+urlQuery(`{metric="fitprobe.value"}`)))); err != nil {
		t.Fatal(err)
	}
	if err := waitJS(ctx, `document.querySelectorAll("table.grid tbody tr td.num").length >= 8 && document.querySelector("figure.chart")`); err != nil {
		t.Fatalf("chart page with statistics: %v", err)
	}
	// within polls cond for up to d and returns its last error (nil once it held).
	within := func(d time.Duration, cond func() error) error {
		deadline := time.Now().Add(d)
		for {
			err := cond()
			if err == nil || time.Now().After(deadline) {
				return err
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	type geo struct{ SW, CW, Right, W int }
	const geoJS = `(() => { const s = document.scrollingElement; const th = [...document.querySelectorAll("table.grid th")].pop();
		return {SW: s.scrollWidth, CW: s.clientWidth, Right: Math.ceil(th.getBoundingClientRect().right), W: innerWidth}; })()`
	err := within(20*time.Second, func() error {
		g, err := chromedp.Run(ctx, chromedp.Evaluate[geo](geoJS))
		if err != nil {
			return err
		}
		if g.W != 1280 || g.SW > g.CW || g.Right > g.CW {
			return fmt.Errorf("window %d px: scrollWidth %d, clientWidth %d, last statistics column ends at %d", g.W, g.SW, g.CW, g.Right)
		}
		return nil
	})
	if err != nil {
		t.Errorf("the chart page at 1280 px scrolls sideways: %v", err)
	}
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 844)); err != nil {
		t.Fatal(err)
	}
	// On a phone the statistics table scrolls inside itself; the page does not.
	err = within(20*time.Second, func() error {
		g, err := chromedp.Run(ctx, chromedp.Evaluate[geo](geoJS))
		if err != nil {
			return err
		}
		if g.W != 390 || g.SW > g.CW {
			return fmt.Errorf("window %d px: scrollWidth %d > clientWidth %d", g.W, g.SW, g.CW)
		}
		return nil
	})
	if err != nil {
		t.Errorf("the chart page on a 390 px phone scrolls sideways: %v", err)
	}
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 800)); err != nil {
		t.Fatal(err)
	}

	// Charts that never get data (a WebSocket that never opens): each card holds its note.
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{
		Source: `window.WebSocket = class { constructor() { this.readyState = 0; } send() {} close() {} };`}); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(ag.url("/"))); err != nil {
		t.Fatal(err)
	}
	if err := waitJS(ctx, `document.body.dataset.ready === "/"`); err != nil {
		t.Fatal(err)
	}
	type spill struct {
		Title         string
		Bottom, Inner int
	}
	sp, err := chromedp.Run(ctx, chromedp.Evaluate[[]spill](`[...document.querySelectorAll("figure.chart")].map((f) => { const e = f.querySelector(".chart-empty");
		return {Title: f.dataset.title, Bottom: Math.ceil(f.getBoundingClientRect().bottom), Inner: e.hidden ? 0 : Math.ceil(e.getBoundingClientRect().bottom)}; })`))
	if err != nil {
		t.Fatal(err)
	}
	if len(sp) < 9 {
		t.Errorf("%d charts on the overview; want 9", len(sp))
	}
	for _, s := range sp {
		if s.Inner == 0 {
			t.Errorf("chart %q without data shows no note", s.Title)
		} else if s.Inner > s.Bottom {
			t.Errorf("chart %q: its \"waiting for data…\" note ends at %d px, below its card (%d px)", s.Title, s.Inner, s.Bottom)
		}
	}
	for _, e := range console.take() {
		if !strings.Contains(e, "ERR_BLOCKED_BY_CLIENT") && !strings.Contains(e, "WebSocket") {
			t.Errorf("console: %s", e)
		}
	}
}

// trafficMeter adds up, from CDP network events, the bytes a tab receives: each HTTP
// answer's encodedDataLength (headers and body as sent, compressed when gzipped) and each
// WebSocket message's payload (as decoded: an upper bound of its compressed frame).
type trafficMeter struct {
	mu       sync.Mutex
	on       bool
	http, ws int64
	reqs     map[network.RequestID]string
	byURL    map[string]int64
}

func (m *trafficMeter) listen(ev any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch ev := ev.(type) {
	case *network.EventRequestWillBeSent:
		m.reqs[ev.RequestID] = ev.Request.URL
	case *network.EventLoadingFinished:
		if m.on {
			m.http += int64(ev.EncodedDataLength)
			u := m.reqs[ev.RequestID]
			if i := strings.Index(u, "/api/"); i >= 0 {
				u = u[i:]
			}
			m.byURL[u] += int64(ev.EncodedDataLength)
		}
	case *network.EventWebSocketFrameReceived:
		if m.on {
			m.ws += int64(len(ev.Response.PayloadData))
		}
	}
}

func (m *trafficMeter) set(on bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.on = on
}

// countingProxy forwards loopback TCP connections to addr and counts the bytes sent back to
// the browser while on: what crosses the wire, WebSocket frames compressed as sent.
type countingProxy struct {
	addr string
	on   atomic.Bool
	down atomic.Int64
}

func startCountingProxy(t *testing.T, target string) *countingProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &countingProxy{addr: l.Addr().String()}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, up)
			mu.Unlock()
			wg.Add(2)
			go func() { defer wg.Done(); io.Copy(up, c); up.Close() }()
			go func() {
				defer wg.Done()
				buf := make([]byte, 32<<10)
				for {
					n, err := up.Read(buf)
					if n > 0 {
						if p.on.Load() {
							p.down.Add(int64(n))
						}
						if _, werr := c.Write(buf[:n]); werr != nil {
							break
						}
					}
					if err != nil {
						break
					}
				}
				c.Close()
			}()
		}
	}()
	return p
}

func TestBrowserOverviewTraffic(t *testing.T) {
	inLine(t)
	chrome := requireBrowser(t)
	tmp := t.TempDir()
	bin := agentBinary(t)
	// The default 2 s interval, as an operator runs it.
	ag := startAlertAgent(t, bin, "traffic-node", "--interval", "2s")
	bctx, console := newBrowser(t, chrome, tmp, 1400, 900)
	ctx, cancel := context.WithTimeout(bctx, 3*time.Minute)
	defer cancel()
	m := &trafficMeter{reqs: map[network.RequestID]string{}, byURL: map[string]int64{}}
	if err := chromedp.Listen(ctx, m.listen); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	px := startCountingProxy(t, ag.addr)
	// A node that has been running: its series have a few scans of history (a rate needs two),
	// so the time measured is the page's, not the fresh agent's first scans.
	deadline := time.Now().Add(time.Minute)
	for {
		var st struct {
			LastScan struct{ Scans int64 } `json:"last_scan"`
		}
		if resp, err := http.Get(ag.url("/api/v1/status")); err == nil {
			json.NewDecoder(resp.Body).Decode(&st)
			resp.Body.Close()
		}
		if st.LastScan.Scans >= 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent made %d scans in a minute", st.LastScan.Scans)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate("http://"+px.addr+"/")); err != nil {
		t.Fatal(err)
	}
	if err := waitJS(ctx, `document.body.dataset.ready === "/" && [...document.querySelectorAll("figure.chart")].filter((f) => Number(f.dataset.points) >= 2).length >= 8`); err != nil {
		t.Fatalf("overview drawn: %v", err)
	}
	// Every chart drawn: navigation start to each chart's first drawn line (reported, not
	// asserted: timing depends on the machine).
	if err := waitJS(ctx, `[...document.querySelectorAll("figure.chart")].every((f) => f.dataset.firstDrawMs !== undefined || f.dataset.title.startsWith("Disk latency"))`); err != nil {
		t.Fatalf("every chart drawn: %v", err)
	}
	draws, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]int](`Object.fromEntries([...document.querySelectorAll("figure.chart")].map((f) => [f.dataset.title, Number(f.dataset.firstDrawMs ?? -1)]))`))
	if err != nil {
		t.Fatal(err)
	}
	last := 0
	for _, ms := range draws {
		last = max(last, ms)
	}
	dcl, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`Math.round(performance.getEntriesByType("navigation")[0].domContentLoadedEventEnd)`))
	t.Logf("overview: every chart drawn %d ms after navigation start (the page's script ran at %d ms; per chart: %v)", last, dcl, draws)
	appendTiming(t, uiArtifacts(t), fmt.Sprintf("overview all charts drawn: %d ms", last))

	// Steady state: what the open tab keeps receiving, over 30 s.
	const window = 30 * time.Second
	m.set(true)
	px.on.Store(true)
	start := time.Now()
	time.Sleep(window) // the measured interval itself
	px.on.Store(false)
	m.set(false)
	secs := time.Since(start).Seconds()
	m.mu.Lock()
	httpRate, wsRate := float64(m.http)/secs, float64(m.ws)/secs
	wire := float64(px.down.Load()) / secs
	t.Logf("overview steady traffic per tab over %.0f s: %.2f KB/s on the wire (HTTP and WebSocket as sent); CDP: HTTP %.0f B/s as sent, WebSocket %.0f B/s decoded (before its compression); HTTP bytes by route: %v",
		secs, wire/1000, httpRate, wsRate, m.byURL)
	m.mu.Unlock()
	if wire > 5000 {
		t.Errorf("overview receives %.0f B/s per tab on the wire; want at most 5 KB/s", wire)
	}
	for _, e := range console.take() {
		t.Errorf("console: %s", e)
	}
}
