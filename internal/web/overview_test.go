package web

// TestBrowserOverview: the overview's machine views against this machine, as a person sees
// them: the per-CPU chart draws one line per CPU (pixels of each line colour in its canvas),
// the filesystem list names / with df's Use% (within 2 points), the disk latency chart has a
// read and a write line per disk the agent reports (and either drew latency or says "no I/O"),
// and the page fits a 390 px phone without horizontal scroll.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// onlineCPUs counts the cpuN lines of /proc/stat: the CPUs the agent reports one by one.
func onlineCPUs(t *testing.T) int {
	t.Helper()
	f, err := os.Open("/proc/stat")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	re := regexp.MustCompile(`^cpu[0-9]+ `)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if re.MatchString(sc.Text()) {
			n++
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

// dfUse runs `df --output=target,pcent /` and returns the mountpoint of / and its Use%.
func dfUse(t *testing.T) (string, int) {
	t.Helper()
	out, err := exec.Command("df", "--output=target,pcent", "/").Output()
	if err != nil {
		t.Fatalf("df --output=target,pcent /: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 {
		t.Fatalf("df --output=target,pcent /: %q", out)
	}
	f := strings.Fields(lines[1])
	if len(f) != 2 {
		t.Fatalf("df --output=target,pcent /: %q", out)
	}
	pct, err := strconv.Atoi(strings.TrimSuffix(f[1], "%"))
	if err != nil {
		t.Fatalf("df Use%% %q: %v", f[1], err)
	}
	return f[0], pct
}

// agentDisks is the whole disks the agent reports disk.read.ops for (partitions dropped when
// their disk is listed, as the page does).
func agentDisks(t *testing.T, n *fleetNode) []string {
	t.Helper()
	var ans struct {
		Series []struct {
			Labels map[string]string `json:"labels"`
		} `json:"series"`
	}
	if err := getJSONClient(&http.Client{Timeout: 5 * time.Second}, n.url(`/api/v1/metrics?match=`+urlQuery(`{metric="disk.read.ops"}`)), &ans); err != nil {
		t.Fatalf("disk series: %v", err)
	}
	var names []string
	for _, s := range ans.Series {
		names = append(names, s.Labels["device"])
	}
	partRe := regexp.MustCompile(`^p?[0-9]+$`)
	var out []string
	for _, d := range names {
		part := false
		for _, o := range names {
			if o != d && strings.HasPrefix(d, o) && partRe.MatchString(d[len(o):]) {
				part = true
			}
		}
		if !part {
			out = append(out, d)
		}
	}
	sort.Strings(out)
	return out
}

func TestBrowserOverview(t *testing.T) {
	inLine(t)
	chrome := requireBrowser(t)
	shots := uiArtifacts(t)
	tmp := t.TempDir()
	bin, _ := buildAlertAgent(t, tmp)
	ag := startAlertAgent(t, bin, "overview-node")
	base := "http://" + ag.addr

	// Some writes reach the disk while the page watches (synced), so latency has requests.
	stopIO := make(chan struct{})
	ioDone := make(chan struct{})
	t.Cleanup(func() { close(stopIO); <-ioDone })
	go func() {
		defer close(ioDone)
		buf := bytes.Repeat([]byte("cantal"), 1<<14)
		for i := 0; ; i++ {
			if f, err := os.Create(filepath.Join(tmp, "io.dat")); err == nil {
				f.Write(buf)
				f.Sync()
				f.Close()
			}
			select {
			case <-stopIO:
				return
			case <-time.After(300 * time.Millisecond):
			}
		}
	}()

	ctx, console := alertBrowser(t, chrome, tmp)
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/")); err != nil {
		t.Fatalf("navigate /: %v", err)
	}
	if err := waitJS(ctx, `document.body.dataset.ready === "/"`); err != nil {
		t.Fatalf("overview: %v", err)
	}

	// Per CPU: one line per CPU, named cpu0, cpu1, ... and each line colour drawn.
	ncpu := onlineCPUs(t)
	const cpusFig = `document.querySelector('figure.chart[data-title^="CPU busy per CPU"]')`
	if err := waitJS(ctx, `(() => { const f = `+cpusFig+`; return f && Number(f.dataset.points) >= 4 })()`); err != nil {
		t.Fatalf("per-CPU chart with 4 points: %v", err)
	}
	legend, err := chromedp.Run(ctx, chromedp.Evaluate[string](cpusFig+`.dataset.legend`))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := 0; i < ncpu; i++ {
		want = append(want, fmt.Sprintf("cpu%d", i))
	}
	if legend != strings.Join(want, "\n") {
		t.Errorf("per-CPU legend %q; want %q (/proc/stat has %d CPUs)", legend, strings.Join(want, "\n"), ncpu)
	}
	ncol := ncpu
	// Lines of CPUs equally busy may cover each other for a while: wait for new scans to part them.
	waitUntil(t, 60*time.Second, "a drawn line per CPU", func() error {
		px := linePixels(t, ctx, cpusFig, ncol)
		for i, n := range px {
			if n < 20 {
				return fmt.Errorf("line cpu%d has %d pixels of its colour; want it drawn (all: %v)", i, n, px)
			}
		}
		return nil
	})

	// Filesystems: / with df's Use% (the disk may change between df and the scan: 2 points).
	mount, dfPct := dfUse(t)
	row := `document.querySelector('.fs-row[data-mountpoint=` + jsString(mount) + `]')`
	if err := waitJS(ctx, row); err != nil {
		rows, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector(".fs-list").innerText`))
		t.Fatalf("filesystem list has no row for %s: %v; list: %q", mount, err, rows)
	}
	useText, err := chromedp.Run(ctx, chromedp.Evaluate[string](row+`.querySelector(".fs-use").innerText`))
	if err != nil {
		t.Fatal(err)
	}
	uiPct, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(useText), "%")))
	if err != nil {
		t.Fatalf("Use%% shown for %s: %q: %v", mount, useText, err)
	}
	if d := uiPct - dfPct; d < -2 || d > 2 {
		t.Errorf("Use%% of %s: page shows %d %%, df %d %%", mount, uiPct, dfPct)
	}
	uses, err := chromedp.Run(ctx, chromedp.Evaluate[[]int](`[...document.querySelectorAll(".fs-row")].map((r) => Number(r.dataset.use))`))
	if err != nil {
		t.Fatal(err)
	}
	if !sort.SliceIsSorted(uses, func(i, j int) bool { return uses[i] > uses[j] }) {
		t.Errorf("filesystem rows not fullest first: %v", uses)
	}

	// Disk latency: a read and a write line per disk; latency drawn, or "no I/O" said.
	disks := agentDisks(t, ag)
	if len(disks) == 0 {
		t.Fatal("the agent reports no disk (disk.read.ops): nothing to check the latency chart against")
	}
	var wantLat []string
	for _, d := range disks {
		wantLat = append(wantLat, d+" read", d+" write")
	}
	const latFig = `document.querySelector('figure.chart[data-title^="Disk latency"]')`
	if err := waitJS(ctx, `(() => { const f = `+latFig+`; return f && Number(f.dataset.points) >= 4 })()`); err != nil {
		t.Fatalf("disk latency chart with 4 points: %v", err)
	}
	if err := waitJS(ctx, latFig+`.dataset.legend === `+jsString(strings.Join(wantLat, "\n"))); err != nil {
		got, _ := chromedp.Run(ctx, chromedp.Evaluate[string](latFig+`.dataset.legend`))
		t.Errorf("disk latency legend %q; want %q", got, strings.Join(wantLat, "\n"))
	}
	io, err := chromedp.Run(ctx, chromedp.Evaluate[string](latFig+`.dataset.io`))
	if err != nil {
		t.Fatal(err)
	}
	caption, err := chromedp.Run(ctx, chromedp.Evaluate[string](latFig+`.querySelector("figcaption").innerText`))
	if err != nil {
		t.Fatal(err)
	}
	switch io {
	case "true":
		if strings.Contains(caption, "no I/O") {
			t.Errorf("latency chart has requests but its caption says %q", caption)
		}
		if n := inkPixels(t, ctx, latFig); n == 0 {
			t.Errorf("latency chart with requests drew nothing")
		}
	case "false":
		if !strings.Contains(caption, "no I/O") {
			t.Errorf("latency chart without requests; caption %q does not say no I/O", caption)
		}
	default:
		t.Errorf("latency chart data-io %q", io)
	}
	// No division by zero shown as a number anywhere in its legend.
	if l, _ := chromedp.Run(ctx, chromedp.Evaluate[string](latFig+`.querySelector(".u-legend").innerText`)); strings.Contains(l, "NaN") || strings.Contains(l, "Infinity") {
		t.Errorf("latency legend shows %q", l)
	}
	if b, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)); err == nil {
		os.WriteFile(filepath.Join(shots, "overview-desktop.png"), b, 0o644)
	}

	// A phone: nothing scrolls sideways; the filesystem rows and charts fit.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 844)); err != nil {
		t.Fatalf("phone viewport: %v", err)
	}
	fits := `(() => innerWidth === 390 && document.documentElement.scrollWidth <= innerWidth &&
		[...document.querySelectorAll(".fs-row, figure.chart")].every((e) => { const r = e.getBoundingClientRect(); return r.left >= 0 && r.right <= innerWidth }))()`
	fitCtx, cancelFit := context.WithTimeout(ctx, 20*time.Second)
	defer cancelFit()
	if err := waitJS(fitCtx, fits); err != nil {
		geo, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`JSON.stringify({sw: document.documentElement.scrollWidth, w: innerWidth,
			wide: [...document.querySelectorAll("body *")].filter((e) => e.getBoundingClientRect().right > innerWidth).slice(0, 5).map((e) => e.tagName + "." + e.className)})`))
		t.Errorf("overview on a 390 px phone: %v; %s", err, geo)
	}
	if b, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)); err == nil {
		os.WriteFile(filepath.Join(shots, "overview-phone.png"), b, 0o644)
	}
	for _, e := range console.take() {
		t.Errorf("console: %s", e)
	}
}
