package web

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"
)

// newBrowser starts headless Chromium at chrome with a fresh profile under tmp and a window of
// w×h, as the browser tests run it (the flags this machine's closed network needs), and returns
// its first tab's context and the tab's console log. The browser ends with the test.
func newBrowser(t *testing.T, chrome, tmp string, w, h int) (context.Context, *consoleLog) {
	t.Helper()
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
		chromedp.WindowSize(w, h),
	)
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
