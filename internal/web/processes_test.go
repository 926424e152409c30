package web

// TestBrowserProcessesFollowAfterSort: the Processes page keeps drawing the agent's scans after
// a click on a sort button. A click leaves the focus on the button, in the table's header; the
// page held its live refresh while the focus was anywhere in the table, so after one sort click
// the rows froze until the user clicked elsewhere. A helper process adds a thread every 200 ms;
// its drawn Threads cell must keep reaching what /api/v1/processes says, while the focus stays
// on the sort button. Focus in a row (a keyboard user on a process's link) still holds the rows,
// and moving it out of the table lets them follow again.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/apiwire"
	"github.com/chromedp/chromedp"
)

// threadsEnv makes the test binary a process whose thread count grows (runThreads).
const threadsEnv = "CANTAL_UI_TEST_THREADS"

// runThreads adds an OS thread every 200 ms (a goroutine locked to its thread and parked keeps
// that thread), up to 2000, until stdin closes (the test ended or died).
func runThreads() int {
	done := make(chan struct{})
	go func() {
		io.Copy(io.Discard, os.Stdin)
		close(done)
	}()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(15 * time.Minute)
	for n := 0; ; {
		select {
		case <-done:
			return 0
		case <-deadline:
			return 0
		case <-tick.C:
			if n < 2000 {
				n++
				go func() {
					runtime.LockOSThread()
					<-done
				}()
			}
		}
	}
}

// drawnProc is what the Processes page shows of one row: its pid (its link), its Threads
// cell, and the table's Threads column top to bottom.
type drawnProc struct {
	Found   bool     `json:"found"`
	Threads string   `json:"threads"`
	Column  []string `json:"column"`
	Focus   string   `json:"focus"` // where the focus is: "sort" (a header button), "row", or "" (elsewhere)
}

func TestBrowserProcessesFollowAfterSort(t *testing.T) {
	inLine(t)
	chrome := requireBrowser(t)
	tmp := t.TempDir()

	grower := exec.Command(os.Args[0], "-test.run=^$")
	grower.Env = append(os.Environ(), threadsEnv+"=1")
	growerIn, err := grower.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	grower.Stderr = os.Stderr
	if err := grower.Start(); err != nil {
		t.Fatalf("start the thread-growing process: %v", err)
	}
	t.Cleanup(func() { growerIn.Close(); grower.Wait() })
	pid := grower.Process.Pid

	ag := startAlertAgent(t, agentBinary(t), "proc-node")
	base := "http://" + ag.addr
	client := &http.Client{Timeout: 5 * time.Second}
	// apiThreads is the grower's thread count in the agent's latest scan.
	apiThreads := func() (int, error) {
		var a apiwire.ProcessesAnswer
		if err := getJSONClient(client, base+"/api/v1/processes?fields=pid,threads", &a); err != nil {
			return 0, err
		}
		for _, p := range a.Processes {
			if p.PID == pid {
				return p.Threads, nil
			}
		}
		return 0, fmt.Errorf("pid %d not in /api/v1/processes (%d rows)", pid, len(a.Processes))
	}
	waitUntil(t, 60*time.Second, "the grower listed with its threads", func() error {
		_, err := apiThreads()
		return err
	})

	ctx, console := alertBrowser(t, chrome, tmp)
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/processes")); err != nil {
		t.Fatal(err)
	}
	link := fmt.Sprintf(`a[href="/process/%d"]`, pid)
	if err := waitJS(ctx, `document.body.dataset.ready === "/processes" && document.querySelector('table.grid tbody `+link+`')`); err != nil {
		t.Fatalf("processes page with the grower's row: %v", err)
	}
	drawn := func() drawnProc {
		t.Helper()
		js := `(() => {
			const table = document.querySelector("table.grid");
			const col = table.querySelector('th[data-key="threads"]').cellIndex;
			const rows = [...table.tBodies[0].rows];
			const tr = rows.find((tr) => tr.querySelector('` + link + `'));
			const a = document.activeElement;
			const focus = a && a.closest("thead") === table.tHead && a.matches("button.sort") ? "sort" : a && table.tBodies[0].contains(a) ? "row" : "";
			return JSON.stringify({found: !!tr, threads: tr ? tr.cells[col].innerText.trim() : "", column: rows.map((r) => r.cells[col]?.innerText.trim() ?? ""), focus});
		})()`
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
		if err != nil {
			t.Fatal(err)
		}
		var d drawnProc
		if err := json.Unmarshal([]byte(s), &d); err != nil {
			t.Fatalf("drawn %q: %v", s, err)
		}
		return d
	}
	drawnThreads := func(d drawnProc) (int, error) {
		if !d.Found {
			return 0, fmt.Errorf("no row of pid %d drawn", pid)
		}
		return strconv.Atoi(d.Threads)
	}

	// One click on Threads: sorted by it, largest first, and the focus left on the button.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`th[data-key="threads"] button`))); err != nil {
		t.Fatal(err)
	}
	// The click leaves the focus on the button in a browser with the window's focus; headless
	// Chromium, beside another one (TestBrowserFleet's), sometimes gives it none (CI at
	// e76ccd4: focus ""): the button is then focused as a keyboard user's Tab would.
	if d := drawn(); d.Focus != "sort" {
		if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`document.querySelector('th[data-key="threads"] button').focus()`)); err != nil {
			t.Fatal(err)
		}
	}
	if d := drawn(); d.Focus != "sort" {
		t.Fatalf("after the sort click the focus is %q; want on the sort button (the case this test is about)", d.Focus)
	}
	if href, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href`)); err != nil {
		t.Fatal(err)
	} else if u, _ := url.Parse(href); u.Query().Get("sort") != "-threads" {
		t.Fatalf("URL %s; want sort=-threads", href)
	}

	// follow: the drawn count reaches the API's of a scan read now, and is one the API had
	// (not above the API's next answer), in rows ordered by threads, focus as wanted.
	follow := func(what, focus string) int {
		t.Helper()
		want, err := apiThreads()
		if err != nil {
			t.Fatal(err)
		}
		var got int
		waitUntil(t, 30*time.Second, what, func() error {
			d := drawn()
			if d.Focus != focus {
				t.Fatalf("focus %q; want %q", d.Focus, focus)
			}
			n, err := drawnThreads(d)
			if err != nil {
				return err
			}
			if n < want {
				return fmt.Errorf("drawn %d threads; the API said %d before this wait", n, want)
			}
			after, err := apiThreads()
			if err != nil {
				return err
			}
			if n > after {
				t.Fatalf("drawn %d threads, more than the API's %d", n, after)
			}
			for i := 1; i < len(d.Column); i++ {
				a, _ := strconv.Atoi(d.Column[i-1])
				b, _ := strconv.Atoi(d.Column[i])
				if b > a {
					t.Fatalf("Threads column not largest first: %q above %q (row %d)", d.Column[i-1], d.Column[i], i)
				}
			}
			got = n
			return nil
		})
		return got
	}
	// Several scans in a row, the focus staying on the sort button.
	prev := -1
	for i := 0; i < 3; i++ {
		// Wait until the API is past what was drawn, so each round needs a newer scan drawn.
		waitUntil(t, 30*time.Second, "the agent scanning more threads", func() error {
			n, err := apiThreads()
			if err == nil && n <= prev {
				err = fmt.Errorf("API %d threads; drawn %d", n, prev)
			}
			return err
		})
		prev = follow(fmt.Sprintf("the drawn row following the API after the sort click (round %d)", i+1), "sort")
	}

	// Focus in a row (a keyboard user on the grower's link) holds the rows: the API moves on two
	// scans' worth of threads, the drawn cell does not.
	if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`document.querySelector('table.grid tbody `+link+`').focus()`)); err != nil {
		t.Fatal(err)
	}
	held := drawn()
	heldN, err := drawnThreads(held)
	if err != nil || held.Focus != "row" {
		t.Fatalf("focused row: focus %q, threads %q (%v)", held.Focus, held.Threads, err)
	}
	waitUntil(t, 30*time.Second, "the agent scanning more threads than are drawn", func() error {
		n, err := apiThreads()
		if err == nil && n < heldN+10 {
			err = fmt.Errorf("API %d threads; drawn %d", n, heldN)
		}
		return err
	})
	if d := drawn(); d.Threads != held.Threads || d.Focus != "row" {
		t.Fatalf("with the focus in a row the drawn cell went from %q to %q (focus %q); want it held", held.Threads, d.Threads, d.Focus)
	}

	// Focus out of the table (the page's heading): the rows follow again.
	if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`document.querySelector("h1").focus()`)); err != nil {
		t.Fatal(err)
	}
	follow("the drawn row following the API once the focus left the rows", "")

	if errs := console.take(); len(errs) > 0 {
		t.Errorf("console errors: %q", errs)
	}
}
