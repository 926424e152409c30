package web

// Browser tests: the real agent binary, built from this checkout and started on a free port,
// driven by Debian's headless Chromium through chromedp. They need a built UI (make setup)
// and chromium (installed by scripts/install-deps.sh); without either they fail, never skip.

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/cantal-go/cantal/shm"
)

// helperEnv makes the test binary an instrumented application instead of running tests.
const helperEnv = "CANTAL_UI_TEST_HELPER"

// helperSeries is how many counters the helper application exports.
const helperSeries = 10_000

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "1" {
		os.Exit(runHelper())
	}
	if os.Getenv(threadsEnv) == "1" {
		os.Exit(runThreads())
	}
	// The browser tests gate themselves (browserLine): unless -test.parallel is given, each
	// holds a parallel slot at once, the line alone deciding which runs.
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		flag.Set("test.parallel", "1000")
	}
	code := m.Run()
	removeAgentBinary()
	os.Exit(code)
}

// browserLine is the line of browser tests (see inLine): one at a time, holding it.
var browserLine = make(chan struct{}, 1)

// inLine makes t a browser test of the line: the browser tests run one at a time, in no set
// order, after the other tests of the package. Two headless Chromiums at once (CI at
// 9f97db7, TestBrowserFleet beside the others) lost the focus a click or a key gives: a sort
// button not focused after its click, keys sent to an input never delivered.
func inLine(t *testing.T) {
	t.Helper()
	t.Parallel()
	browserLine <- struct{}{}
	t.Cleanup(func() { <-browserLine }) // registered first, so run last
}

// runHelper publishes helperSeries counters and one state through shm at $CANTAL_PATH, updates
// them until stdin closes (the test ended or died), and removes its files.
func runHelper() int {
	c := shm.NewCollection(shm.Options{})
	counters := make([]*shm.Counter, helperSeries)
	for i := range counters {
		ctr, err := c.Counter(map[string]string{"metric": fmt.Sprintf("ui.load.%05d", i)})
		if err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			return 1
		}
		counters[i] = ctr
	}
	phase, err := c.State(map[string]string{"metric": "ui.phase"}, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 1
	}
	if err := c.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 1
	}
	defer c.Close()
	phase.Enter("serving")
	done := make(chan struct{})
	go func() {
		io.Copy(io.Discard, os.Stdin)
		close(done)
	}()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(15 * time.Minute)
	for n := 0; ; n++ {
		select {
		case <-done:
			return 0
		case <-deadline:
			return 0
		case <-tick.C:
			for i := 0; i < 100; i++ {
				counters[(n*100+i)%helperSeries].Add(uint64(i + 1))
			}
		}
	}
}

// repoRoot is the module root (two levels above this package).
func repoRoot(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Clean(filepath.Join(wd, "..", ".."))
}

// artifactDir is where screenshots go: $ARTIFACTS/screenshots, else artifacts/screenshots.
func artifactDir(t *testing.T) string {
	dir := filepath.Join(repoRoot(t), "artifacts", "screenshots")
	if a := os.Getenv("ARTIFACTS"); a != "" {
		dir = filepath.Join(a, "screenshots")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// agentProc is a running cantal-agent.
type agentProc struct {
	t           *testing.T
	bin, addr   string
	state, rrdd string
	cmd         *exec.Cmd
	log         *bytes.Buffer
}

func (a *agentProc) start() {
	a.t.Helper()
	a.log = new(bytes.Buffer)
	a.cmd = exec.Command(a.bin, "--listen", a.addr, "--interval", "500ms", "--state-dir", a.state,
		"--rrdd-dir", a.rrdd, "--snapshot-interval", "5s", "--log-level", "warn")
	a.cmd.Stdout, a.cmd.Stderr = a.log, a.log
	if err := a.cmd.Start(); err != nil {
		a.t.Fatalf("start agent: %v", err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get("http://" + a.addr + "/api/v1/status")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			a.t.Fatalf("agent did not answer on %s within 60s: %v\n%s", a.addr, err, a.log)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (a *agentProc) stop() {
	if a.cmd == nil || a.cmd.Process == nil {
		return
	}
	a.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { a.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		a.cmd.Process.Kill()
		<-done
	}
	a.cmd = nil
}

func (a *agentProc) getJSON(t *testing.T, path string, v any) {
	t.Helper()
	resp, err := http.Get("http://" + a.addr + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %s: %s", path, resp.Status, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: decode: %v", path, err)
	}
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// consoleLog collects the page's console errors and uncaught exceptions.
type consoleLog struct {
	mu   sync.Mutex
	errs []string
}

func (c *consoleLog) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.errs
	c.errs = nil
	return e
}

func (c *consoleLog) listen(ev any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch ev := ev.(type) {
	case *cdpruntime.EventConsoleAPICalled:
		if ev.Type == cdpruntime.ConsoleAPICalledTypeError || ev.Type == cdpruntime.ConsoleAPICalledTypeAssert {
			var parts []string
			for _, a := range ev.Args {
				if a.Value != nil {
					parts = append(parts, string(a.Value))
				} else {
					parts = append(parts, a.Description)
				}
			}
			c.errs = append(c.errs, "console."+string(ev.Type)+": "+strings.Join(parts, " "))
		}
	case *cdpruntime.EventExceptionThrown:
		d := ev.ExceptionDetails
		msg := d.Text
		if d.Exception != nil {
			msg += " " + d.Exception.Description
		}
		c.errs = append(c.errs, fmt.Sprintf("exception at %s:%d: %s", d.URL, d.LineNumber, msg))
	}
}

// waitJS evaluates the boolean expression js until it is true.
func waitJS(ctx context.Context, js string) error {
	for {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool]("!!("+js+")"))
		if err != nil {
			return fmt.Errorf("evaluate %s: %w", js, err)
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", js, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func TestBrowser(t *testing.T) {
	inLine(t)
	chrome := requireBrowser(t)
	shots := artifactDir(t)
	tmp := t.TempDir()
	// The agent refuses files of processes in directories it cannot traverse; TempDir is 0700
	// but owned by us, and the agent runs as the same user.

	bin := agentBinary(t)

	// An instrumented application with 10k series.
	helper := exec.Command(os.Args[0], "-test.run=^$")
	helper.Env = append(os.Environ(), helperEnv+"=1", "CANTAL_PATH="+filepath.Join(tmp, "ui-app"), "CANTAL_APPNAME=ui-test")
	helperIn, err := helper.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	helper.Stderr = os.Stderr
	if err := helper.Start(); err != nil {
		t.Fatalf("start helper application: %v", err)
	}
	t.Cleanup(func() { helperIn.Close(); helper.Wait() })

	rrdd := filepath.Join(tmp, "rrdd")
	os.Mkdir(rrdd, 0o755)
	ag := &agentProc{t: t, bin: bin, addr: freeAddr(t), state: filepath.Join(tmp, "state"), rrdd: rrdd}
	ag.start()
	t.Cleanup(ag.stop)
	base := "http://" + ag.addr
	var st struct {
		PID int `json:"pid"`
	}
	ag.getJSON(t, "/api/v1/status", &st)

	bctx, console := newBrowser(t, chrome, tmp, 1400, 1000)

	step := func(t *testing.T, d time.Duration) context.Context {
		ctx, cancel := context.WithTimeout(bctx, d)
		t.Cleanup(cancel)
		return ctx
	}
	// shot saves a picture of the page; it has its own deadline so a failed wait still leaves
	// the picture of what the page showed.
	shot := func(t *testing.T, _ context.Context, name string) {
		t.Helper()
		sctx, cancel := context.WithTimeout(bctx, 30*time.Second)
		defer cancel()
		// The whole page, unless it is very tall (a table of every process): then the viewport.
		tall, err := chromedp.Run(sctx, chromedp.Evaluate[bool](`document.documentElement.scrollHeight > 4000`))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		capture := chromedp.FullScreenshot(100)
		if tall {
			capture = chromedp.CaptureScreenshot()
		}
		png, err := chromedp.Run(sctx, capture)
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		path := filepath.Join(shots, name+".png")
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot %s", path)
	}
	noErrors := func(t *testing.T, what string) {
		t.Helper()
		for _, e := range console.take() {
			t.Errorf("%s: %s", what, e)
		}
	}
	// open loads url and waits until the page marks itself ready for path.
	open := func(t *testing.T, ctx context.Context, url, path string) {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.Navigate(base+url)); err != nil {
			t.Fatalf("navigate %s: %v", url, err)
		}
		if err := waitJS(ctx, fmt.Sprintf(`document.body.dataset.ready === %s`, jsString(path))); err != nil {
			t.Fatalf("%s: %v", url, err)
		}
	}

	// Wait for the helper's series to be scanned, so every page has data.
	waitSeries := func(sel string, want int) {
		deadline := time.Now().Add(60 * time.Second)
		for {
			var ans struct {
				Series []json.RawMessage `json:"series"`
			}
			ag.getJSON(t, "/api/v1/metrics?match="+urlQuery(sel), &ans)
			if len(ans.Series) >= want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("agent has %d series matching %s after 60s; want %d\n%s", len(ans.Series), sel, want, ag.log)
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	waitSeries(`{metric=~"ui\\.load\\..*"}`, helperSeries)

	t.Run("pages", func(t *testing.T) {
		pages := []struct{ name, url, path, wait string }{
			{"overview", "/", "/", `document.querySelector('figure[data-title="CPU"]')?.dataset.points > 1`},
			{"processes", "/processes", "/processes", `document.querySelectorAll("table.grid tbody tr").length > 3`},
			{"processes-tree", "/processes?view=tree", "/processes", `document.querySelectorAll(".indent[style*='--d:1']").length > 0`},
			{"process", fmt.Sprintf("/process/%d", st.PID), fmt.Sprintf("/process/%d", st.PID), `document.querySelector('figure[data-title^="CPU"]')?.dataset.points > 0`},
			{"metrics", "/series", "/series", `document.querySelectorAll(".vrow").length > 10`},
			{"chart", "/series/chart?match=" + urlQuery(`{metric=~"cpu\\..*_ms", cpu=~"total|"}`) + "&window=15m", "/series/chart", `document.querySelector("figure.chart")?.dataset.points > 1 && document.querySelectorAll("table.grid tbody tr").length > 3`},
			{"chart-state", "/series/chart?match=ui.phase", "/series/chart", `[...document.querySelectorAll("td")].some(td => td.textContent === "serving")`},
			{"containers", "/containers", "/containers", `document.querySelector("table.grid tbody tr") !== null`},
			{"cgroups", "/cgroups", "/cgroups", `document.querySelectorAll("table.grid tbody tr").length > 0`},
			{"network", "/network", "/network", `document.querySelector('figure[data-title^="Traffic"]')?.dataset.points > 0`},
			{"peers", "/peers", "/peers", `document.querySelector(".msg") !== null`},
			{"cluster", "/cluster", "/cluster", `document.querySelector(".msg") !== null`},
		}
		for _, p := range pages {
			t.Run(p.name, func(t *testing.T) {
				ctx := step(t, 60*time.Second)
				console.take()
				open(t, ctx, p.url, p.path)
				if err := waitJS(ctx, p.wait); err != nil {
					t.Errorf("%s: %v", p.url, err)
				}
				time.Sleep(300 * time.Millisecond) // let charts lay out before the picture
				noErrors(t, p.url)
				shot(t, ctx, p.name)
			})
		}
		// A path that is no page of the UI is the server's 404 (issue 30 item 12), not the UI
		// drawing a page of its own: a browser shows the error, and the UI does not start.
		t.Run("not-found", func(t *testing.T) {
			ctx := step(t, 60*time.Second)
			if err := chromedp.Do(ctx, chromedp.Navigate(base+"/no/such/page")); err != nil {
				t.Fatal(err)
			}
			body, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
			if err != nil {
				t.Fatal(err)
			}
			ready, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.body.dataset.ready !== undefined`))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(body, "404 page not found") || ready {
				t.Errorf("/no/such/page shows %q (UI started: %v); want the server's 404 and no UI", body, ready)
			}
		})
		t.Run("overview-dark", func(t *testing.T) {
			ctx := step(t, 60*time.Second)
			open(t, ctx, "/", "/")
			if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("button.theme")), chromedp.Click(chromedp.CSS("button.theme"))); err != nil {
				t.Fatal(err)
			}
			if err := waitJS(ctx, `document.documentElement.dataset.theme === "dark" && document.querySelector('figure[data-title="CPU"]')?.dataset.points > 1`); err != nil {
				t.Fatal(err)
			}
			time.Sleep(300 * time.Millisecond)
			shot(t, ctx, "overview-dark")
			// Back to automatic for the other tests.
			if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`localStorage.removeItem("cantal-theme")`)); err != nil {
				t.Fatal(err)
			}
			noErrors(t, "theme toggle")
		})
	})

	t.Run("chart moves after a scan", func(t *testing.T) {
		ctx := step(t, 60*time.Second)
		open(t, ctx, "/", "/")
		const last = `Number(document.querySelector('figure[data-title="CPU"]')?.dataset.lastTs || 0)`
		if err := waitJS(ctx, last+` > 0`); err != nil {
			t.Fatal(err)
		}
		before, err := chromedp.Run(ctx, chromedp.Evaluate[float64](last))
		if err != nil {
			t.Fatal(err)
		}
		if err := waitJS(ctx, fmt.Sprintf(`%s > %f`, last, before)); err != nil {
			t.Fatalf("the CPU chart's last point stayed at %f: %v", before, err)
		}
		noErrors(t, "overview")
	})

	t.Run("selector filters", func(t *testing.T) {
		ctx := step(t, 120*time.Second)
		open(t, ctx, "/series", "/series")
		if err := waitJS(ctx, `Number(document.querySelector("#series-count")?.dataset.count) > 0`); err != nil {
			t.Fatal(err)
		}
		all, err := chromedp.Run(ctx, chromedp.Evaluate[int](`Number(document.querySelector("#series-count").dataset.count)`))
		if err != nil {
			t.Fatal(err)
		}
		sel := `{metric=~"memory\\..*"}`
		var want struct {
			Series []json.RawMessage `json:"series"`
		}
		ag.getJSON(t, "/api/v1/metrics?match="+urlQuery(sel), &want)
		if len(want.Series) == 0 || len(want.Series) >= all {
			t.Fatalf("API: %d memory series of %d; the test needs a proper subset", len(want.Series), all)
		}
		if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`document.querySelector("#sel").value = `+jsString(sel)), chromedp.SendKeys(chromedp.CSS("#sel"), kb.Enter)); err != nil {
			t.Fatal(err)
		}
		if err := waitJS(ctx, fmt.Sprintf(`location.search.includes("match=") && document.body.dataset.ready === "/series" && Number(document.querySelector("#series-count")?.dataset.count) === %d`, len(want.Series))); err != nil {
			got, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("#series-count")?.textContent`))
			t.Fatalf("after typing %s: %v (count shows %q, API has %d)", sel, err, got, len(want.Series))
		}
		names, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll(".vrow .name")].map(a => a.textContent)`))
		if err != nil {
			t.Fatal(err)
		}
		if len(names) == 0 {
			t.Fatal("no rows after filtering")
		}
		for _, n := range names {
			if !strings.HasPrefix(n, "memory.") {
				t.Errorf("row %q shown for selector %s", n, sel)
			}
		}
		// A bad selector shows the agent's error.
		if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`document.querySelector("#sel").value = `+jsString(`{metric=~"("}`)), chromedp.SendKeys(chromedp.CSS("#sel"), kb.Enter)); err != nil {
			t.Fatal(err)
		}
		if err := waitJS(ctx, `document.querySelector(".msg.error")?.textContent.includes("bad match")`); err != nil {
			t.Errorf("bad selector: %v", err)
		}
		shot(t, ctx, "metrics-bad-selector")
		noErrors(t, "selector")
	})

	t.Run("clicking a process opens its page", func(t *testing.T) {
		ctx := step(t, 120*time.Second)
		pid := helper.Process.Pid
		open(t, ctx, fmt.Sprintf("/processes?q=%d", pid), "/processes")
		link := fmt.Sprintf(`a[href="/process/%d"]`, pid)
		if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(link)), chromedp.Click(chromedp.CSS(link))); err != nil {
			t.Fatal(err)
		}
		path := fmt.Sprintf("/process/%d", pid)
		if err := waitJS(ctx, fmt.Sprintf(`location.pathname === %q && document.body.dataset.ready === %q && document.querySelector("h1")?.textContent.includes("pid %d")`, path, path, pid)); err != nil {
			// What the page showed, for the failure message (a screenshot has its own deadline).
			sctx, cancel := context.WithTimeout(bctx, 10*time.Second)
			text, _ := chromedp.Run(sctx, chromedp.Evaluate[string](`location.pathname + " ready=" + document.body.dataset.ready + ": " + document.body.innerText.slice(0, 600)`))
			cancel()
			shot(t, ctx, "process-click-failed")
			t.Fatalf("%v\npage: %s", err, text)
		}
		if err := waitJS(ctx, `[...document.querySelectorAll("td a")].some(a => a.textContent.startsWith("ui.load.")) && document.querySelector('figure[data-title^="Memory"]')?.dataset.points > 0`); err != nil {
			t.Errorf("the process page shows no application metrics or memory chart: %v", err)
		}
		time.Sleep(300 * time.Millisecond)
		shot(t, ctx, "process-app")
		noErrors(t, path)
	})

	t.Run("10k series first render", func(t *testing.T) {
		ctx := step(t, 180*time.Second)
		measure := func(name, url string, want int) {
			open(t, ctx, url, "/series")
			if err := waitJS(ctx, `document.querySelector("#series-list")?.dataset.firstRenderMs !== undefined`); err != nil {
				t.Fatal(err)
			}
			type result struct {
				Nav, Mount  float64
				Count, Rows int
			}
			r, err := chromedp.Run(ctx, chromedp.Evaluate[result](`(() => { const l = document.querySelector("#series-list"); return {Nav: Number(l.dataset.firstRenderMs), Mount: Number(l.dataset.firstRenderSinceMountMs), Count: Number(document.querySelector("#series-count").dataset.count), Rows: document.querySelectorAll(".vrow").length}; })()`))
			if err != nil {
				t.Fatal(err)
			}
			if r.Count < want {
				t.Errorf("%s: %d series listed; want at least %d", name, r.Count, want)
			}
			if r.Rows > 200 {
				t.Errorf("%s: %d rows in the DOM for %d series: the list is not virtualised", name, r.Rows, r.Count)
			}
			t.Logf("%s: %d series; first rows rendered %.0f ms after navigation start (%.0f ms after the page mounted); %d rows in the DOM", name, r.Count, r.Nav, r.Mount, r.Rows)
			appendTiming(t, shots, fmt.Sprintf("%s series=%d first_render_ms=%.0f since_mount_ms=%.0f dom_rows=%d", name, r.Count, r.Nav, r.Mount, r.Rows))
			// Scrolling to the end renders the last rows.
			if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`(() => { const l = document.querySelector("#series-list"); l.scrollTop = l.scrollHeight; })()`)); err != nil {
				t.Fatal(err)
			}
			// (The count of every series changes as processes come and go: read it again.)
			if err := waitJS(ctx, `document.querySelector('.vrow[data-index="' + (Number(document.querySelector("#series-count").dataset.count) - 1) + '"]') !== null`); err != nil {
				t.Errorf("%s: the last row did not render after scrolling: %v", name, err)
			}
		}
		measure("helper-10k", "/series?match="+urlQuery(`{metric=~"ui\\.load\\..*"}`), helperSeries)
		shot(t, ctx, "metrics-10k-scrolled")
		measure("all-series", "/series", helperSeries)
		noErrors(t, "10k series")
	})

	t.Run("reconnects after an agent restart", func(t *testing.T) {
		ctx := step(t, 120*time.Second)
		open(t, ctx, "/", "/")
		if err := waitJS(ctx, `document.querySelector(".conn").classList.contains("live")`); err != nil {
			t.Fatal(err)
		}
		ag.stop()
		if err := waitJS(ctx, `document.querySelector(".conn").classList.contains("reconnecting")`); err != nil {
			t.Fatal(err)
		}
		const last = `Number(document.querySelector('figure[data-title="CPU"]')?.dataset.lastTs || 0)`
		before, _ := chromedp.Run(ctx, chromedp.Evaluate[float64](last))
		ag.start()
		if err := waitJS(ctx, `document.querySelector(".conn").classList.contains("live")`); err != nil {
			t.Fatalf("no reconnect: %v", err)
		}
		if err := waitJS(ctx, fmt.Sprintf(`%s > %f`, last, before)); err != nil {
			t.Fatalf("the chart did not move after the reconnect: %v", err)
		}
		// The browser logs the refused WebSocket connections as network errors, not console
		// errors; the page itself must not throw.
		noErrors(t, "reconnect")
	})

	if runtime.GOOS != "linux" {
		t.Log("not on Linux: process data may be missing")
	}
}

func urlQuery(s string) string {
	r := strings.NewReplacer("%", "%25", "&", "%26", "+", "%2B", "#", "%23", " ", "%20", `"`, "%22", "{", "%7B", "}", "%7D", `\`, "%5C", "=", "%3D", "~", "%7E")
	return r.Replace(s)
}

// appendTiming records a measurement beside the screenshots (timings.txt).
func appendTiming(t *testing.T, dir, line string) {
	f, err := os.OpenFile(filepath.Join(dir, "timings.txt"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Error(err)
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%s %s\n", time.Now().UTC().Format(time.RFC3339), line)
}
