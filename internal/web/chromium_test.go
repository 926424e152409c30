package web

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"
)

// newBrowser starts headless Chromium at chrome with a fresh profile under tmp and a window of
// w×h, as the browser tests run it (the flags this machine's closed network needs), and returns
// its first tab's context and the tab's console log. The browser ends with the test.
func newBrowser(t *testing.T, chrome, tmp string, w, h int) (context.Context, *consoleLog) {
	t.Helper()
	opts := browserOptions(chrome, filepath.Join(tmp, "chromium-profile"), w, h, chromedp.Flag("hide-scrollbars", true))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelA)
	console := &consoleLog{}
	bctx, cancelB := chromedp.NewContext(actx, chromedp.WithListener(console.listen))
	t.Cleanup(cancelB)
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("start chromium %s: %v", chrome, err)
	}
	return bctx, console
}

// requireBrowser fails the test unless the UI is built and Chromium is installed (make setup
// does both), and returns Chromium's path.
func requireBrowser(t *testing.T) string {
	t.Helper()
	if !Built(Dist()) {
		t.Fatal("the web UI is not built (internal/web/dist has no index.html): run `make setup` (scripts/build-ui.sh) first")
	}
	chrome, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium not found (%v): run `make setup` (scripts/install-deps.sh installs Debian's chromium)", err)
	}
	return chrome
}

// browserOptions are the allocator options of headless Chromium at chrome as the browser tests
// run it (the flags this machine's closed network needs), with its profile in dir, a window of
// w×h and extra options.
func browserOptions(chrome, dir string, w, h int, extra ...chromedp.ExecAllocatorOption) []chromedp.ExecAllocatorOption {
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
		chromedp.UserDataDir(dir),
		chromedp.WindowSize(w, h),
	)
	return append(opts, extra...)
}
