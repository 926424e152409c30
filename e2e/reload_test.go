package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// reloadStatus is what the test reads of /api/v1/status.
type reloadStatus struct {
	LastScan struct {
		TS    int64 `json:"ts"`
		Scans int64 `json:"scans"`
		Late  int64 `json:"late"`
	} `json:"last_scan"`
	Config struct {
		Reloads              int64    `json:"reloads"`
		LastReloadSuccessful bool     `json:"last_reload_successful"`
		LastReloadError      string   `json:"last_reload_error"`
		LastSuccessMs        int64    `json:"last_reload_success_ms"`
		NeedsRestart         []string `json:"needs_restart"`
	} `json:"config"`
}

// TestReloadAppliesSettingsWithoutLosingScans runs the real agent from a --config file, changes
// every reloadable setting it can reach on loopback (log level, alert rules, remote-write
// endpoints, carbon, statsd, the web config's users) and reloads by SIGHUP, then by POST
// /-/reload: each new setting acts, the alert from the first scan after the reload; a restart-only
// setting is listed as such; a broken file is refused and changes nothing; an unauthenticated or
// read-only POST /-/reload is refused; and through it all no scan slips and the history has a
// point per scan (issue 33).
func TestReloadAppliesSettingsWithoutLosingScans(t *testing.T) {
	quiet(t)
	dir := t.TempDir()
	write := func(name, s string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	hash := func(p string) string {
		h, err := bcrypt.GenerateFromPassword([]byte(p), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		return string(h)
	}
	// Remote-write receiver: counts the requests to each path.
	var rwMu sync.Mutex
	rwHits := map[string]int{}
	rw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rwMu.Lock()
		rwHits[r.URL.Path]++
		rwMu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer rw.Close()
	hits := func(path string) int {
		rwMu.Lock()
		defer rwMu.Unlock()
		return rwHits[path]
	}
	// Carbon: a line receiver.
	cl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var carbonLines lockedBuffer
	go func() {
		for {
			c, err := cl.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				s := bufio.NewScanner(c)
				for s.Scan() {
					carbonLines.Write([]byte(s.Text() + "\n"))
				}
			}()
		}
	}()

	users := "basic_auth_users:\n  ops: " + hash("opspass") + "\n  viewer: " + hash("viewpass") + "\n"
	web := write("web.yml", users)
	rules := write("rules.yml", "rules:\n  - name: reload_mem\n    selector: '{metric=\"memory.MemTotal\"}'\n    op: '>'\n    threshold: 0\n")
	statsd1, statsd2 := freePort(t), freePort(t)
	base := "web-config: " + web + "\nwrite-users: [ops]\nalert-cpu: 0\nalert-memory: 0\nalert-disk: 0\n"
	v1 := base + "log-level: info\nremote-write: [" + rw.URL + "/a]\n"
	file := write("agent.yml", v1)

	addr := freePort(t)
	a := &agent{t: t, StateDir: t.TempDir(), URL: "http://" + addr, user: "ops", pass: "opspass"}
	a.args = []string{"--config", file, "--listen", addr, "--interval", "500ms", "--state-dir", a.StateDir, "--rrdd-dir", t.TempDir()}
	a.start()
	t.Cleanup(func() { a.stop(syscall.SIGKILL) })
	waitFor(t, 20*time.Second, func() error {
		if hits("/a") == 0 {
			return fmt.Errorf("remote write /a has had no request")
		}
		return nil
	})
	status := func() reloadStatus {
		t.Helper()
		var st reloadStatus
		if err := a.get("/api/v1/status", &st); err != nil {
			t.Fatal(err)
		}
		return st
	}
	waitScans(t, a, 3) // past the first scans, which read every process for the first time
	st0 := status()
	if !st0.Config.LastReloadSuccessful || st0.Config.Reloads != 0 {
		t.Errorf("config status at the start: %+v", st0.Config)
	}
	gauge := func(name string) string {
		t.Helper()
		code, body := a.raw("GET", "/metrics", "")
		if code != 200 {
			t.Fatalf("/metrics: %d", code)
		}
		for _, l := range strings.Split(body, "\n") {
			if v, ok := strings.CutPrefix(l, name+" "); ok {
				return v
			}
		}
		t.Fatalf("/metrics has no %s", name)
		return ""
	}
	if g := gauge("cantal_config_last_reload_successful"); g != "1" {
		t.Errorf("cantal_config_last_reload_successful = %s at the start; want 1", g)
	}

	// Refused: no credentials (401), a user without the write role (403). Nothing reloads.
	for _, who := range []struct {
		user, pass string
		want       int
	}{{"", "", 401}, {"viewer", "viewpass", 403}} {
		req, _ := http.NewRequest("POST", a.URL+"/-/reload", nil)
		if who.user != "" {
			req.SetBasicAuth(who.user, who.pass)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != who.want {
			t.Errorf("POST /-/reload as %q: %d; want %d", who.user, resp.StatusCode, who.want)
		}
	}
	if st := status(); st.Config.Reloads != 0 {
		t.Errorf("a refused POST /-/reload reloaded: %+v", st.Config)
	}

	// SIGHUP: every reloadable setting changed, and --max-series, which needs a restart.
	write("web.yml", users+"  ops2: "+hash("ops2pass")+"\n")
	v2 := base + "log-level: debug\nremote-write: [" + rw.URL + "/b]\nalert-rules: " + rules +
		"\ncarbon: " + cl.Addr().String() + "\ncarbon-interval: 500ms\ncarbon-prefix: reloaded\nstatsd: " + statsd1 + "\nmax-series: 400000\n"
	write("agent.yml", v2)
	// windows are the reloads' times (unix ms), from the signal or request to the reload seen
	// done.
	var windows [][2]int64
	now := func() int64 { return time.Now().UnixMilli() }
	outBefore := len(a.out.String())
	w0 := now()
	a.cmd.Process.Signal(syscall.SIGHUP)
	var st1 reloadStatus
	waitFor(t, 20*time.Second, func() error {
		st1 = status()
		if st1.Config.Reloads != 1 {
			return fmt.Errorf("no reload yet")
		}
		return nil
	})
	reloadedAt := now()
	windows = append(windows, [2]int64{w0, reloadedAt})
	if !st1.Config.LastReloadSuccessful || !slices.Equal(st1.Config.NeedsRestart, []string{"max-series"}) {
		t.Fatalf("after SIGHUP: %+v; want a success, max-series needing a restart\n%s", st1.Config, tail(a.out.String(), 2000))
	}
	rwB := 0
	waitFor(t, 20*time.Second, func() error {
		var al struct {
			Alerts []struct {
				Name    string `json:"name"`
				SinceMs int64  `json:"since_ms"`
			} `json:"alerts"`
		}
		if err := a.get("/api/v1/alerts", &al); err != nil {
			return err
		}
		if len(al.Alerts) == 0 || al.Alerts[0].Name != "reload_mem" {
			return fmt.Errorf("alerts %+v; want reload_mem", al.Alerts)
		}
		// Raised by the first scan after the reload: at most one interval (and the time the
		// status request took) after the reload was seen done.
		if al.Alerts[0].SinceMs > reloadedAt+500+200 {
			t.Errorf("reload_mem since %d, the reload done by %d: not the first scan after it", al.Alerts[0].SinceMs, reloadedAt)
		}
		if !strings.Contains(a.out.String()[outBefore:], "level=DEBUG") {
			return fmt.Errorf("no debug line logged since the reload")
		}
		if rwB = hits("/b"); rwB == 0 {
			return fmt.Errorf("remote write /b has had no request")
		}
		if !strings.Contains(carbonLines.String(), "reloaded.") {
			return fmt.Errorf("carbon has no line with the new prefix")
		}
		return nil
	})
	statsdLands(t, a, statsd1, "reload_one")
	a.user, a.pass = "ops2", "ops2pass" // the user the web config gained
	if st := status(); st.LastScan.Scans == 0 {
		t.Error("ops2 reads no status")
	}
	a.user, a.pass = "ops", "opspass"
	// /a was removed: it gets no more requests (it may finish the one under way).
	rwA := hits("/a")
	waitScans(t, a, 4)
	if n := hits("/a"); n > rwA+1 {
		t.Errorf("remote write /a, removed, got %d requests after the reload", n-rwA)
	}

	// POST /-/reload: statsd moves, /a comes back beside /b, the log level returns to info.
	v3 := strings.NewReplacer("log-level: debug", "log-level: info", "remote-write: ["+rw.URL+"/b]", "remote-write: ["+rw.URL+"/a, "+rw.URL+"/b]",
		"statsd: "+statsd1, "statsd: "+statsd2).Replace(v2)
	write("agent.yml", v3)
	w0 = now()
	code, body := a.raw("POST", "/-/reload", "")
	windows = append(windows, [2]int64{w0, now()})
	var ans struct {
		Status       string   `json:"status"`
		Changed      []string `json:"changed"`
		NeedsRestart []string `json:"needs_restart"`
	}
	json.Unmarshal([]byte(body), &ans)
	if code != 200 || ans.Status != "success" || !slices.Equal(ans.Changed, []string{"log-level", "remote-write", "statsd"}) || !slices.Equal(ans.NeedsRestart, []string{"max-series"}) {
		t.Fatalf("POST /-/reload = %d %s; want success, log-level, remote-write and statsd changed, max-series needing a restart", code, body)
	}
	statsdLands(t, a, statsd2, "reload_two")
	if c, err := net.Dial("tcp", statsd1); err == nil {
		c.Close()
		t.Errorf("statsd still listens on %s after moving to %s", statsd1, statsd2)
	}
	rwA = hits("/a")
	waitFor(t, 20*time.Second, func() error {
		if hits("/a") == rwA {
			return fmt.Errorf("remote write /a, back, has had no request")
		}
		return nil
	})

	// A broken file: refused with its line; nothing changes.
	goodSuccess := status().Config.LastSuccessMs
	write("agent.yml", v3+"alert-disk: lots\n")
	w0 = now()
	code, body = a.raw("POST", "/-/reload", "")
	windows = append(windows, [2]int64{w0, now()})
	if code != 500 || !strings.Contains(body, file+":") || !strings.Contains(body, `"status":"error"`) {
		t.Errorf("POST /-/reload of a broken file = %d %s; want 500 naming %s:LINE", code, body, file)
	}
	w0 = now()
	a.cmd.Process.Signal(syscall.SIGHUP) // the same, by signal
	waitFor(t, 20*time.Second, func() error {
		if st := status(); st.Config.Reloads != 4 {
			return fmt.Errorf("%d reloads", st.Config.Reloads)
		}
		return nil
	})
	windows = append(windows, [2]int64{w0, now()})
	st := status()
	if st.Config.LastReloadSuccessful || !strings.Contains(st.Config.LastReloadError, file+":") || st.Config.LastSuccessMs != goodSuccess {
		t.Errorf("status after a broken file: %+v", st.Config)
	}
	if g := gauge("cantal_config_last_reload_successful"); g != "0" {
		t.Errorf("cantal_config_last_reload_successful = %s after a broken file; want 0", g)
	}
	if g := gauge("cantal_config_last_reload_success_timestamp_seconds"); g != fmt.Sprint(float64(goodSuccess)/1000) {
		t.Errorf("cantal_config_last_reload_success_timestamp_seconds = %s; want %v", g, float64(goodSuccess)/1000)
	}
	if !strings.Contains(a.out.String(), "configuration reload failed") {
		t.Error("the refused reload is not logged")
	}
	statsdLands(t, a, statsd2, "reload_three") // still the last good configuration
	rwA = hits("/a")
	waitFor(t, 20*time.Second, func() error {
		if hits("/a") == rwA {
			return fmt.Errorf("remote write /a stopped after a refused reload")
		}
		return nil
	})

	// No scan slipped during a reload: every tick made its scan (a gap under two intervals:
	// time.Ticker drops a tick only when a scan is still running at the next one), and the
	// history has a point per scan. A gap away from every reload is the loaded machine's
	// scheduler (other tests, other builds), not the reload's doing: it is logged.
	st2 := status()
	if late := st2.LastScan.Late - st0.LastScan.Late; late > 0 {
		t.Logf("%d scans started more than 1.5 intervals after the one before (load average: %s)", late, loadavg())
	}
	ss, err := a.series("/api/v1/history?window=10m", `{metric="memory.MemTotal"}`)
	if err != nil || len(ss) != 1 {
		t.Fatalf("history of memory.MemTotal: %v, %v", ss, err)
	}
	pts := ss[0].Points
	var inside int64
	for i := 1; i < len(pts); i++ {
		if pts[i][0] <= float64(st0.LastScan.TS) || pts[i][0] > float64(st2.LastScan.TS) {
			continue
		}
		inside++
		from, to := int64(pts[i-1][0]), int64(pts[i][0])
		if to-from < 1000 {
			continue
		}
		overlaps := slices.ContainsFunc(windows, func(w [2]int64) bool { return from < w[1] && to > w[0] })
		if overlaps {
			t.Errorf("history gap of %d ms at %d (interval 500 ms) during a reload (%v): a scan slipped", to-from, to, windows)
		} else {
			t.Logf("history gap of %d ms at %d, away from the reloads (%v); load average %s", to-from, to, windows, loadavg())
		}
	}
	// The status may be read between a scan's commit (its time) and its count: one either way.
	if want := st2.LastScan.Scans - st0.LastScan.Scans; inside < want-1 || inside > want+1 {
		t.Errorf("%d points in the history between scans %d and %d; want one per scan", inside, st0.LastScan.Scans, st2.LastScan.Scans)
	}
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	return strings.TrimSpace(string(b))
}

// waitScans waits until the agent has made n more scans.
func waitScans(t *testing.T, a *agent, n int64) {
	t.Helper()
	var st reloadStatus
	if err := a.get("/api/v1/status", &st); err != nil {
		t.Fatal(err)
	}
	from := st.LastScan.Scans
	waitFor(t, 30*time.Second, func() error {
		if err := a.get("/api/v1/status", &st); err != nil {
			return err
		}
		if st.LastScan.Scans < from+n {
			return fmt.Errorf("%d scans of %d", st.LastScan.Scans-from, n)
		}
		return nil
	})
}

// statsdLands sends a counter to statsd over UDP at addr until the agent shows it.
func statsdLands(t *testing.T, a *agent, addr, metric string) {
	t.Helper()
	waitFor(t, 20*time.Second, func() error {
		c, err := net.Dial("udp", addr)
		if err != nil {
			return err
		}
		fmt.Fprintf(c, "%s:1|c\n", metric)
		c.Close()
		ss, err := a.series("/api/v1/metrics", metric)
		if err != nil {
			return err
		}
		if find(ss, metric) == nil {
			return fmt.Errorf("no %s yet", metric)
		}
		return nil
	})
}

// TestReloadJoinsNewPeers: a --peer added to the file of a running cluster node is joined at
// the reload, without a restart (issue 33).
func TestReloadJoinsNewPeers(t *testing.T) {
	serial(t)
	const clusterName = "reload-peers"
	b := startAgent(t, "--cluster-name", clusterName, "--node-name", "rp-b")
	dir := t.TempDir()
	file := filepath.Join(dir, "agent.yml")
	if err := os.WriteFile(file, []byte("cluster-name: "+clusterName+"\nnode-name: rp-a\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a := startAgent(t, "--config", file)
	peers := func() []string {
		var ans struct {
			Peers []struct{ Name, Status string }
		}
		if err := a.get("/api/v1/peers", &ans); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, p := range ans.Peers {
			out = append(out, p.Name+"="+p.Status)
		}
		return out
	}
	if p := peers(); len(p) != 0 {
		t.Fatalf("peers before the reload: %v", p)
	}
	if err := os.WriteFile(file, []byte("cluster-name: "+clusterName+"\nnode-name: rp-a\npeer: ["+strings.TrimPrefix(b.URL, "http://")+"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, body := a.raw("POST", "/-/reload", "")
	if code != 200 || !strings.Contains(body, `"changed":["peer"]`) {
		t.Fatalf("POST /-/reload = %d %s; want peer changed", code, body)
	}
	waitFor(t, 30*time.Second, func() error {
		if p := peers(); !slices.Contains(p, "rp-b=alive") {
			return fmt.Errorf("peers %v; want rp-b alive", p)
		}
		return nil
	})
}
