package web

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestBrowserAlertBadge: a rule whose threshold a pushed value crosses (for 0) shows the
// header's badge with 1 firing alert, as a person sees it (drawn text, visible box); its list
// names the alert and the node; a value back under the threshold clears the badge.
func TestBrowserAlertBadge(t *testing.T) {
	inLine(t)
	chrome := requireBrowser(t)
	shots := uiArtifacts(t)
	tmp := t.TempDir()
	bin, rules := buildAlertAgent(t, tmp)
	ag := startAlertAgent(t, bin, "alert-node", "--alert-rules", rules)
	base := "http://" + ag.addr
	probe := startProber(t, ag, 1)

	ctx, console := alertBrowser(t, chrome, tmp)
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/")); err != nil {
		t.Fatalf("navigate /: %v", err)
	}
	if err := waitJS(ctx, `document.body.dataset.ready === "/"`); err != nil {
		t.Fatalf("overview: %v", err)
	}
	// Nothing fires yet: the badge is not shown.
	if err := waitJS(ctx, `(() => { const b = document.querySelector(".alerts-badge"); return b && b.dataset.firing === "0" })()`); err != nil {
		t.Fatalf("badge before any crossing: %v", err)
	}
	visible, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector(".alerts-badge").getBoundingClientRect().width > 0`))
	if err != nil {
		t.Fatal(err)
	}
	if visible {
		t.Errorf("badge drawn while nothing fires; want it hidden")
	}

	probe.set(11)
	// The badge: drawn (a box of its own, not display:none), its text 1 alert, in the header.
	const badgeShown = `(() => { const b = document.querySelector("header .alerts-badge"); if (!b) return false;
		const r = b.getBoundingClientRect(); return b.dataset.firing === "1" && r.width > 0 && r.height > 0 &&
		getComputedStyle(b).visibility === "visible" && r.top >= 0 && r.bottom <= innerHeight })()`
	if err := waitJS(ctx, badgeShown); err != nil {
		var ans any
		getJSONClient(http.DefaultClient, ag.url("/api/v1/alerts"), &ans)
		t.Fatalf("badge after pushing 11 over a threshold of 10: %v; /api/v1/alerts = %v", err, ans)
	}
	text, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("header .alerts-badge").innerText`))
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(text) != "⚠ 1 alert" {
		t.Errorf("badge text %q; want %q", text, "⚠ 1 alert")
	}
	shot, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile(filepath.Join(shots, "alerts-badge.png"), shot, 0o644); err != nil {
		t.Fatal(err)
	}

	// Its list names what fires where.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`header .alerts-badge`))); err != nil {
		t.Fatalf("click the badge: %v", err)
	}
	if err := waitJS(ctx, `(() => { const p = document.querySelector(".alerts-panel"); return p && !p.hidden && p.getBoundingClientRect().width > 0 })()`); err != nil {
		t.Fatalf("alert list after a click: %v", err)
	}
	row, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => { const r = document.querySelector(".alerts-list tbody tr"); return r ? r.innerText : "" })()`))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"firing", "alert-node", "probe_high", "alertprobe.value", "11 > 10"} {
		if !strings.Contains(row, want) {
			t.Errorf("alert list row %q; want it to contain %q", row, want)
		}
	}
	if shot, err := chromedp.Run(ctx, chromedp.CaptureScreenshot()); err == nil {
		os.WriteFile(filepath.Join(shots, "alerts-list.png"), shot, 0o644)
	}

	// On a phone the badge stays in the header and its list fits the screen: no horizontal
	// scroll. (The list is reopened so that it sits under the header as wrapped at 390 px.)
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 844),
		chromedp.Click(chromedp.CSS(`header .alerts-badge`)), chromedp.Click(chromedp.CSS(`header .alerts-badge`))); err != nil {
		t.Fatalf("phone viewport: %v", err)
	}
	if err := waitJS(ctx, `(() => { const p = document.querySelector(".alerts-panel"), b = document.querySelector("header .alerts-badge");
		if (p.hidden || innerWidth !== 390) return false;
		const r = p.getBoundingClientRect(), rb = b.getBoundingClientRect();
		return r.left >= 0 && r.right <= innerWidth && rb.width > 0 && rb.right <= innerWidth &&
			document.documentElement.scrollWidth <= innerWidth })()`); err != nil {
		geo, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`JSON.stringify({sw: document.documentElement.scrollWidth, w: innerWidth, p: document.querySelector(".alerts-panel").getBoundingClientRect()})`))
		t.Errorf("alert list on a 390 px phone: %v; %s", err, geo)
	}
	if shot, err := chromedp.Run(ctx, chromedp.CaptureScreenshot()); err == nil {
		os.WriteFile(filepath.Join(shots, "alerts-list-phone.png"), shot, 0o644)
	}

	// Back under the threshold: the badge clears (and the open list closes).
	probe.set(5)
	if err := waitJS(ctx, `(() => { const b = document.querySelector("header .alerts-badge");
		return b.dataset.firing === "0" && b.getBoundingClientRect().width === 0 && document.querySelector(".alerts-panel").hidden })()`); err != nil {
		t.Fatalf("badge after pushing 5 under the threshold: %v", err)
	}
	for _, e := range console.take() {
		t.Errorf("console: %s", e)
	}
}

// TestBrowserAlertBadgeCluster: the badge counts the cluster's alerts. An alert firing on n2
// shows on n1's pages with n2 named in the list; when n2 is killed, n1's badge shows node_down
// for n2 and the list names n2 as not answering.
func TestBrowserAlertBadgeCluster(t *testing.T) {
	inLine(t)
	chrome := requireBrowser(t)
	shots := uiArtifacts(t)
	tmp := t.TempDir()
	bin, rules := buildAlertAgent(t, tmp)
	n1 := startAlertAgent(t, bin, "n1", "--alert-rules", rules, "--cluster-name", "alerts-ui")
	n2 := startAlertAgent(t, bin, "n2", "--alert-rules", rules, "--cluster-name", "alerts-ui", "--peer", n1.addr)
	client := &http.Client{Timeout: 2 * time.Second}
	waitUntil(t, 60*time.Second, "n1 and n2 know each other", func() error {
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
	startProber(t, n2, 11)

	ctx, console := alertBrowser(t, chrome, tmp)
	if err := chromedp.Do(ctx, chromedp.Navigate(n1.url("/"))); err != nil {
		t.Fatalf("navigate n1's /: %v", err)
	}
	if err := waitJS(ctx, `document.body.dataset.ready === "/"`); err != nil {
		t.Fatalf("n1's overview: %v", err)
	}
	const badge = `document.querySelector("header .alerts-badge")`
	if err := waitJS(ctx, badge+`.dataset.firing === "1" && `+badge+`.getBoundingClientRect().width > 0`); err != nil {
		t.Fatalf("n1's badge for n2's alert: %v", err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`header .alerts-badge`))); err != nil {
		t.Fatalf("click the badge: %v", err)
	}
	rows := `[...document.querySelectorAll(".alerts-list tbody tr")].map((r) => r.innerText).join("\\n")`
	if err := waitJS(ctx, rows+`.includes("probe_high")`); err != nil {
		t.Fatalf("n1's alert list: %v", err)
	}
	got, err := chromedp.Run(ctx, chromedp.Evaluate[string](rows))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got, "firing\tn2\tprobe_high") {
		t.Errorf("n1's list %q; want n2's probe_high firing, named with its node", got)
	}
	if shot, err := chromedp.Run(ctx, chromedp.CaptureScreenshot()); err == nil {
		os.WriteFile(filepath.Join(shots, "alerts-cluster.png"), shot, 0o644)
	}

	// n2 dies: n1 names it down.
	n2.cmd.Process.Kill()
	n2.cmd.Wait()
	killed := time.Now()
	// Until node_down has held 10 s nothing fires (the badge hides and its list closes); then
	// the one firing alert is n1's own.
	if err := waitJS(ctx, badge+`.dataset.firing === "1" && `+badge+`.title.includes("firing on n1")`); err != nil {
		title, _ := chromedp.Run(ctx, chromedp.Evaluate[string](badge+`.title`))
		t.Fatalf("n1's badge after n2 was killed: %v; title %q", err, title)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`header .alerts-badge`))); err != nil {
		t.Fatalf("click the badge: %v", err)
	}
	if err := waitJS(ctx, rows+`.includes("node_down") && `+rows+`.includes("peer=n2")`); err != nil {
		got, _ := chromedp.Run(ctx, chromedp.Evaluate[string](rows))
		t.Fatalf("n1's list after n2 was killed: %v; rows %q", err, got)
	}
	t.Logf("node_down for n2 firing on n1's page %v after the kill (suspect or dead for 10 s, then the 3 s poll)", time.Since(killed).Round(100*time.Millisecond))
	text, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector(".alerts-panel").innerText`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, "Not answering: n2") {
		t.Errorf("n1's alert list %q; want n2 named as not answering", text)
	}
	if shot, err := chromedp.Run(ctx, chromedp.CaptureScreenshot()); err == nil {
		os.WriteFile(filepath.Join(shots, "alerts-node-down.png"), shot, 0o644)
	}
	for _, e := range console.take() {
		t.Errorf("console: %s", e)
	}
}

const probeRules = `rules:
  - name: probe_high
    selector: '{metric="alertprobe.value", source="push"}'
    op: ">"
    threshold: 10
    for: 0s
    severity: critical
    summary: the pushed probe is over 10
`

// buildAlertAgent returns the run's agent binary (agentBinary) and writes probeRules into dir.
func buildAlertAgent(t *testing.T, dir string) (bin, rules string) {
	t.Helper()
	bin = agentBinary(t)
	rules = filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(rules, []byte(probeRules), 0o644); err != nil {
		t.Fatal(err)
	}
	return bin, rules
}

// startAlertAgent starts an agent named name (1 s scans, nothing kept) and waits until it
// answers. The built-in machine rules are off: on a loaded test machine the CPU rule could
// fire too. It is stopped when the test ends (its log shown if the test failed).
func startAlertAgent(t *testing.T, bin, name string, args ...string) *fleetNode {
	t.Helper()
	n := &fleetNode{name: name, addr: freeAddr(t), log: new(fleetLog)}
	n.cmd = exec.Command(bin, append([]string{"--listen", n.addr, "--interval", "1s", "--state-dir", "", "--rrdd-dir", "",
		"--node-name", name, "--alert-cpu", "0", "--alert-memory", "0", "--alert-disk", "0", "--log-level", "warn"}, args...)...)
	n.cmd.Stdout, n.cmd.Stderr = n.log, n.log
	if err := n.cmd.Start(); err != nil {
		t.Fatalf("start agent %s: %v", name, err)
	}
	t.Cleanup(func() {
		if n.cmd.ProcessState == nil {
			n.cmd.Process.Signal(syscall.SIGTERM)
			done := make(chan struct{})
			go func() { n.cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				n.cmd.Process.Kill()
				<-done
			}
		}
		if t.Failed() {
			t.Logf("agent %s log:\n%s", name, n.log.String())
		}
	})
	waitUntil(t, 60*time.Second, "agent "+name+" answers", func() error {
		var st any
		return getJSONClient(&http.Client{Timeout: 2 * time.Second}, n.url("/api/v1/status"), &st)
	})
	return n
}

// prober keeps writing alertprobe.value into an agent every 500 ms, as an application pushing
// its value would: a single point can be refused on a loaded machine (no scan within one
// interval after its time), a steady stream cannot be missed. set changes the value.
type prober struct{ v atomic.Uint64 }

func startProber(t *testing.T, n *fleetNode, v float64) *prober {
	t.Helper()
	p := &prober{}
	p.set(v)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { stop(); <-done })
	go func() {
		defer close(done)
		c := &http.Client{Timeout: 2 * time.Second}
		for {
			body := fmt.Sprintf("alertprobe value=%g\n", math.Float64frombits(p.v.Load()))
			if resp, err := c.Post(n.url("/write"), "text/plain", strings.NewReader(body)); err == nil {
				resp.Body.Close()
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
	return p
}

func (p *prober) set(v float64) { p.v.Store(math.Float64bits(v)) }

// alertBrowser starts headless Chromium (1400×900) for the test; its context ends with it.
func alertBrowser(t *testing.T, chrome, tmp string) (context.Context, *consoleLog) {
	t.Helper()
	bctx, console := newBrowser(t, chrome, tmp, 1400, 900)
	ctx, cancel := context.WithTimeout(bctx, 3*time.Minute)
	t.Cleanup(cancel)
	return ctx, console
}
