package web

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestBrowserAlertBadge: a rule whose threshold a pushed value crosses (for 0) shows the
// header's badge with 1 firing alert, as a person sees it (drawn text, visible box); its list
// names the alert and the node; a value back under the threshold clears the badge.
func TestBrowserAlertBadge(t *testing.T) {
	if !Built(Dist()) {
		t.Fatal("the web UI is not built (internal/web/dist has no index.html): run `make setup` (scripts/build-ui.sh) first")
	}
	chrome, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium not found (%v): run `make setup` (scripts/install-deps-ui.sh installs Debian's chromium)", err)
	}
	root := repoRoot(t)
	shots := filepath.Join(root, "artifacts", "ui")
	if a := os.Getenv("ARTIFACTS"); a != "" {
		shots = filepath.Join(a, "ui")
	}
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "cantal-agent")
	build := exec.Command("go", "build", "-o", bin, "./cmd/cantal-agent")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/cantal-agent: %v\n%s", err, out)
	}
	rules := filepath.Join(tmp, "rules.yaml")
	if err := os.WriteFile(rules, []byte(`rules:
  - name: probe_high
    selector: '{metric="alertprobe.value", source="push"}'
    op: ">"
    threshold: 10
    for: 0s
    severity: critical
    summary: the pushed probe is over 10
`), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	// The built-in machine rules are off: on a loaded test machine the CPU rule could fire too.
	var log bytes.Buffer
	cmd := exec.Command(bin, "--listen", addr, "--interval", "500ms", "--state-dir", "", "--rrdd-dir", "",
		"--node-name", "alert-node", "--alert-rules", rules, "--alert-cpu", "0", "--alert-memory", "0", "--alert-disk", "0",
		"--log-level", "warn")
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start agent: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("agent log:\n%s", log.String())
		}
	})
	base := "http://" + addr
	ag := &agentProc{t: t, addr: addr}
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(base + "/api/v1/status")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("agent did not answer on %s within 60s: %v\n%s", addr, err, log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	push := func(v float64) {
		t.Helper()
		resp, err := http.Post(base+"/write", "text/plain", strings.NewReader(fmt.Sprintf("alertprobe value=%g\n", v)))
		if err != nil {
			t.Fatalf("POST /write: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			t.Fatalf("POST /write = %s; want 204", resp.Status)
		}
	}

	opts := append(chromedp.DefaultExecAllocatorOptions[:0:0],
		chromedp.ExecPath(chrome),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.NoFirstRun,
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.UserDataDir(filepath.Join(tmp, "chromium-profile")),
		chromedp.WindowSize(1400, 900),
	)
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelA()
	console := &consoleLog{}
	bctx, cancelB := chromedp.NewContext(actx, chromedp.WithListener(console.listen))
	defer cancelB()
	ctx, cancel := context.WithTimeout(bctx, 3*time.Minute)
	defer cancel()
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

	push(11)
	// The badge: drawn (a box of its own, not display:none), its text 1 alert, in the header.
	const badgeShown = `(() => { const b = document.querySelector("header .alerts-badge"); if (!b) return false;
		const r = b.getBoundingClientRect(); return b.dataset.firing === "1" && r.width > 0 && r.height > 0 &&
		getComputedStyle(b).visibility === "visible" && r.top >= 0 && r.bottom <= innerHeight })()`
	if err := waitJS(ctx, badgeShown); err != nil {
		var ans any
		ag.getJSON(t, "/api/v1/alerts", &ans)
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

	// Back under the threshold: the badge clears (and the open list closes).
	push(5)
	if err := waitJS(ctx, `(() => { const b = document.querySelector("header .alerts-badge");
		return b.dataset.firing === "0" && b.getBoundingClientRect().width === 0 && document.querySelector(".alerts-panel").hidden })()`); err != nil {
		t.Fatalf("badge after pushing 5 under the threshold: %v", err)
	}
	for _, e := range console.take() {
		t.Errorf("console: %s", e)
	}
}
