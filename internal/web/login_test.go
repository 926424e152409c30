package web

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/chromedp"
	"golang.org/x/crypto/bcrypt"

	"github.com/cantal-go/cantal/internal/testsupport/certs"
)

// TestBrowserLogin: the UI behind --web-config in headless Chromium. The browser trusts exactly
// the agent's certificate (its key pinned with --ignore-certificate-errors-spki-list, so a
// wrong certificate would still fail), answers the basic-auth challenge with the reader's
// credentials, and the overview draws its CPU chart from the history and keeps it moving over
// the WebSocket; refusing the challenge leaves a page without data.
func TestBrowserLogin(t *testing.T) {
	inLine(t)
	chrome := requireBrowser(t)
	tmp := t.TempDir()
	bin := agentBinary(t)
	ca, err := certs.NewCA("ui test CA")
	if err != nil {
		t.Fatal(err)
	}
	pair, err := ca.Issue("node", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	files, err := ca.WriteFiles(tmp, "node", pair)
	if err != nil {
		t.Fatal(err)
	}
	hash, _ := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	cfg := filepath.Join(tmp, "web.yml")
	os.WriteFile(cfg, fmt.Appendf(nil, "tls_server_config:\n  cert_file: %s\n  key_file: %s\nbasic_auth_users:\n  ops: %s\n",
		files.Cert, files.Key, hash), 0o600)

	addr := freeAddr(t)
	var log strings.Builder
	cmd := exec.Command(bin, "--listen", addr, "--interval", "500ms", "--state-dir", "", "--rrdd-dir", "",
		"--web-config", cfg, "--log-level", "warn")
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsTrusting(ca)}, Timeout: 5 * time.Second}
	base := "https://" + addr
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, _ := http.NewRequest("GET", base+"/api/v1/status", nil)
		req.SetBasicAuth("ops", "s3cret")
		resp, err := client.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("agent not answering: %v\n%s", err, log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}

	block, _ := pem.Decode(pair.CertPEM)
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	spki := sha256.Sum256(leaf.RawSubjectPublicKeyInfo)
	opts := browserOptions(chrome, filepath.Join(tmp, "profile"), 1400, 1000,
		chromedp.Flag("ignore-certificate-errors-spki-list", base64.StdEncoding.EncodeToString(spki[:])))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelA()

	// browse opens the overview in a new tab that answers the basic-auth challenge with user
	// and password, or refuses it when user is empty; it returns the tab and how many
	// challenges were answered.
	browse := func(user, pass string) (context.Context, *atomic.Int32, context.CancelFunc) {
		ctx, cancel := chromedp.NewContext(actx)
		var challenges atomic.Int32
		if err := chromedp.Do(ctx); err != nil {
			t.Fatalf("start chromium: %v", err)
		}
		err := chromedp.Listen(ctx, func(ev any) {
			// Commands may not be sent from the listener itself.
			switch e := ev.(type) {
			case *fetch.EventRequestPaused:
				go chromedp.Call(ctx, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: e.RequestID})
			case *fetch.EventAuthRequired:
				challenges.Add(1)
				resp := &fetch.AuthChallengeResponse{Response: fetch.AuthChallengeResponseResponseCancelAuth}
				if user != "" {
					resp = &fetch.AuthChallengeResponse{Response: fetch.AuthChallengeResponseResponseProvideCredentials, Username: user, Password: pass}
				}
				go chromedp.Call(ctx, fetch.ContinueWithAuth, fetch.ContinueWithAuthParams{RequestID: e.RequestID, AuthChallengeResponse: resp})
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		handle := true
		if _, err := chromedp.Call(ctx, fetch.Enable, fetch.EnableParams{HandleAuthRequests: &handle}); err != nil {
			t.Fatalf("fetch.Enable: %v", err)
		}
		tctx, tcancel := context.WithTimeout(ctx, 60*time.Second)
		if err := chromedp.Do(tctx, chromedp.Navigate(base+"/")); err != nil {
			t.Fatalf("navigate: %v", err)
		}
		return tctx, &challenges, func() { tcancel(); cancel() }
	}

	t.Run("logged in", func(t *testing.T) {
		ctx, challenges, done := browse("ops", "s3cret")
		defer done()
		cpu := `document.querySelector('figure[data-title="CPU"]')`
		if err := waitJS(ctx, cpu+`?.dataset.points > 1`); err != nil {
			t.Fatalf("the overview's CPU chart never had points after logging in: %v\n%s", err, log.String())
		}
		first, err := chromedp.Run(ctx, chromedp.Evaluate[int](`+`+cpu+`.dataset.points`))
		if err != nil {
			t.Fatal(err)
		}
		// Live: the WebSocket (which carries the browser's credentials) keeps adding points.
		if err := waitJS(ctx, fmt.Sprintf(`+%s.dataset.points > %d`, cpu, first+2)); err != nil {
			t.Errorf("the CPU chart stopped at %d points: the WebSocket did not deliver updates: %v", first, err)
		}
		// What was drawn: the chart's canvas has line pixels, not only a blank area.
		js := cpu + `.querySelector("canvas")`
		js = `(() => { const c = ` + js + `; const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
			let n = 0; for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n++; return n; })()`
		inked, err := chromedp.Run(ctx, chromedp.Evaluate[int](js))
		if err != nil {
			t.Fatal(err)
		}
		if inked < 100 {
			t.Errorf("the CPU chart's canvas has %d painted pixels; want a drawn line", inked)
		}
		if challenges.Load() == 0 {
			t.Error("the browser was never asked to log in")
		}
	})

	t.Run("refused", func(t *testing.T) {
		ctx, challenges, done := browse("", "")
		defer done()
		if err := waitJS(ctx, `document.readyState === "complete"`); err != nil {
			t.Fatal(err)
		}
		text, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
		if err != nil {
			t.Fatal(err)
		}
		if challenges.Load() == 0 || !strings.Contains(text, "authentication required") || strings.Contains(text, "CPU") {
			t.Errorf("without logging in (%d challenges) the page shows %q; want the refusal and no data", challenges.Load(), text)
		}
	})
}

func tlsTrusting(ca *certs.CA) *tls.Config { return &tls.Config{RootCAs: ca.Pool()} }
