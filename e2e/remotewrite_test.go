package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestRemoteWriteLossless runs one agent sending one counter (every scan has a point) to a
// real Prometheus (--web.enable-remote-write-receiver) and a real VictoriaMetrics at once,
// then:
//
//  1. steady state: every scan the agent holds arrives at both, with its own timestamp and value;
//  2. both receivers stopped for the outage (outageLength: 30 s, $CANTAL_E2E_OUTAGE=5m for the
//     long variant), then started again: the agent sends what they missed, and nothing is
//     missing over the whole window;
//  3. the agent killed with SIGKILL and restarted 10 s later: the only missing points are those
//     of the scans the agent did not make while it was down.
//
// Each receiver is read raw (Prometheus: a range-vector instant query; VictoriaMetrics:
// /api/v1/export), not through a resampling query. Both outages are shared, so the suite pays
// the outage once; the test takes about the outage plus 2 minutes, the other tests running
// meanwhile from the outage on (background).
func TestRemoteWriteLossless(t *testing.T) {
	detach := background(t)
	const (
		node     = "rw-e2e"
		interval = 2 * time.Second
		down     = 10 * time.Second
	)
	outage := outageLength(t)
	prom := &receiver{t: t, name: "prometheus", prog: need(t, "prometheus"), dir: t.TempDir(), addr: freePort(t)}
	prom.args = []string{"--config.file=" + writeFile(t, prom.dir, "prometheus.yml", "global: {}\n"),
		"--storage.tsdb.path=" + filepath.Join(prom.dir, "data"), "--web.listen-address=" + prom.addr,
		"--web.enable-remote-write-receiver", "--log.level=warn"}
	vm := &receiver{t: t, name: "victoria-metrics", prog: need(t, "victoria-metrics"), dir: t.TempDir(), addr: freePort(t)}
	vm.args = []string{"-storageDataPath=" + filepath.Join(vm.dir, "data"), "-httpListenAddr=" + vm.addr,
		"-retentionPeriod=1", "-loggerLevel=WARN"}
	prom.start()
	vm.start()
	t.Cleanup(prom.stop)
	t.Cleanup(vm.stop)

	// One counter with a point in every scan; its other labels are whatever /metrics names it.
	cfgDir := t.TempDir()
	cfg := fmt.Sprintf(`remote_write:
  - url: http://%s/api/v1/write
    name: prometheus
    match: '{metric="cpu.idle_ms", cpu="0"}'
    queue_config: {min_backoff: 100ms, max_backoff: 2s}
  - url: http://%s/api/v1/write
    name: victoria-metrics
    match: '{metric="cpu.idle_ms", cpu="0"}'
    external_labels: {receiver: vm}
    queue_config: {min_backoff: 100ms, max_backoff: 2s}
`, prom.addr, vm.addr)
	t.Cleanup(func() {
		if t.Failed() {
			for _, r := range []*receiver{prom, vm} {
				if r.p != nil {
					t.Logf("%s output:\n%s", r.name, tail(r.p.out.String(), 3000))
				}
			}
		}
	})
	a := startAgent(t, "--interval", interval.String(), "--node-name", node, "--snapshot-interval", "30s",
		"--remote-write-config", writeFile(t, cfgDir, "rw.yml", cfg))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agent output:\n%s", tail(a.out.String(), 20000))
		}
	})

	// seen collects every point the agent's history shows for the counter, polled through the
	// test: the scans the agent made (its history loses, on SIGKILL, what the last snapshot
	// did not hold; those points were delivered before the kill and stay expected).
	seen := &agentPoints{pts: map[int64]float64{}}
	poll := func() {
		t.Helper()
		ss, err := a.series("/api/v1/history?window=1h", `{metric="cpu.idle_ms", cpu="0"}`)
		if err != nil || len(ss) != 1 {
			t.Fatalf("agent history: %v, %d series", err, len(ss))
		}
		seen.add(ss[0].Points)
	}
	status := func() []rwStatus {
		t.Helper()
		var st struct {
			RemoteWrite []rwStatus `json:"remote_write"`
		}
		if err := a.get("/api/v1/status", &st); err != nil {
			t.Fatal(err)
		}
		if len(st.RemoteWrite) != 2 {
			t.Fatalf("status lists %d remote_write endpoints; want 2", len(st.RemoteWrite))
		}
		return st.RemoteWrite
	}
	caughtUp := func(timeout time.Duration) {
		t.Helper()
		waitFor(t, timeout, func() error {
			for _, s := range status() {
				if s.LagS < 0 || s.LagS > 2*interval.Seconds() || s.Retrying {
					return fmt.Errorf("%s not caught up: %+v", s.Name, s)
				}
			}
			return nil
		})
	}
	check := func(phase string, down *downtime) {
		t.Helper()
		poll()
		want := seen.sorted()
		for _, r := range []*receiver{prom, vm} {
			var got []rawPoint
			var err error
			waitFor(t, 30*time.Second, func() error {
				got, err = r.raw(node, want[0].ts)
				if err != nil {
					return err
				}
				if missing := missingPoints(want, got); len(missing) > 0 {
					return fmt.Errorf("%d of %d points missing, first %v", len(missing), len(want), missing[0])
				}
				return nil
			})
			checkSeries(t, phase+": "+r.name, want, got, down)
		}
	}

	// 1. Steady state.
	time.Sleep(10 * time.Second)
	caughtUp(30 * time.Second)
	check("steady state", nil)
	detach() // the rest mostly waits: the other tests run meanwhile

	// 2. Both receivers down for 5 minutes.
	prom.stop()
	vm.stop()
	stopped := time.Now()
	for time.Since(stopped) < outage {
		time.Sleep(min(30*time.Second, outage-time.Since(stopped)))
		poll()
	}
	for _, s := range status() {
		if !s.Retrying || s.LagS < max(outage/2, outage-time.Minute).Seconds() || s.Retries == 0 || s.LastError == "" {
			t.Errorf("%s after %s of outage: %+v; want retrying, lag of the outage", s.Name, outage, s)
		}
	}
	prom.start()
	vm.start()
	caughtUp(90 * time.Second)
	check(fmt.Sprintf("after a %v outage of both receivers", outage), nil)

	// 3. SIGKILL the agent mid-stream and restart it.
	time.Sleep(5 * time.Second)
	poll()
	before := seen.sorted()
	dt := &downtime{lastSeen: before[len(before)-1].ts}
	a.stop(syscall.SIGKILL)
	dt.killed = time.Now().UnixMilli()
	time.Sleep(down)
	dt.restarted = time.Now().UnixMilli()
	restart(a, 2*time.Minute)
	time.Sleep(10 * time.Second)
	caughtUp(60 * time.Second)
	check("after the agent's SIGKILL", dt)

	for _, s := range status() {
		if s.FailedBatches != 0 || s.DroppedSamples != 0 || strings.Contains(s.URL, "@") {
			t.Errorf("%s: %+v; want nothing dropped", s.Name, s)
		}
	}
}

type rwStatus struct {
	Name           string  `json:"name"`
	URL            string  `json:"url"`
	PositionMs     int64   `json:"position_ms"`
	LatePositionMs int64   `json:"late_position_ms"`
	LagS           float64 `json:"lag_s"`
	SamplesSent    uint64  `json:"samples_sent"`
	FailedBatches  uint64  `json:"failed_batches"`
	DroppedSamples uint64  `json:"dropped_samples"`
	Retries        uint64  `json:"retries"`
	Retrying       bool    `json:"retrying"`
	LastError      string  `json:"last_error"`
}

// restart starts a's agent again and waits up to timeout for its first scan: loading the
// history of a busy machine (every process's series of the test's minutes; 370k series on the
// shared test machine) takes longer than the harness's start allows.
func restart(a *agent, timeout time.Duration) {
	a.t.Helper()
	a.out = &lockedBuffer{}
	a.cmd = exec.Command(filepath.Join(bin, "cantal-agent"), a.args...)
	a.cmd.Stdout, a.cmd.Stderr = a.out, a.out
	if err := a.cmd.Start(); err != nil {
		a.t.Fatal(err)
	}
	a.done = make(chan error, 1)
	go func() { a.done <- a.cmd.Wait() }()
	waitFor(a.t, timeout, func() error {
		var st struct {
			LastScan struct{ Scans int } `json:"last_scan"`
		}
		if err := a.get("/api/v1/status", &st); err != nil {
			return err
		}
		if st.LastScan.Scans < 1 {
			return fmt.Errorf("no scan yet")
		}
		return nil
	})
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

type rawPoint struct {
	ts int64
	v  float64
}

type agentPoints struct {
	mu  sync.Mutex
	pts map[int64]float64
}

func (p *agentPoints) add(points [][2]float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pt := range points {
		p.pts[int64(pt[0])] = pt[1]
	}
}

func (p *agentPoints) sorted() []rawPoint {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]rawPoint, 0, len(p.pts))
	for ts, v := range p.pts {
		out = append(out, rawPoint{ts, v})
	}
	slices.SortFunc(out, func(a, b rawPoint) int { return int(a.ts - b.ts) })
	return out
}

// missingPoints returns the points of want whose time got lacks.
func missingPoints(want, got []rawPoint) []rawPoint {
	have := map[int64]bool{}
	for _, p := range got {
		have[p.ts] = true
	}
	var out []rawPoint
	for _, p := range want {
		if !have[p.ts] {
			out = append(out, p)
		}
	}
	return out
}

// downtime is when the agent was killed and restarted, and the newest of its points the test
// saw before the kill.
type downtime struct{ lastSeen, killed, restarted int64 }

// checkSeries compares a receiver's raw points of the counter with the agent's: every agent
// point there at its own time, with its value times one factor (a unit the name gives, e.g. ms
// as seconds); nothing the agent did not scan (the scans are the agent's, irregular on a busy
// machine, so the receiver's times are compared with the agent's, not with a fixed grid); and
// when gap is set, nothing during the agent's own downtime.
func checkSeries(t *testing.T, what string, want, got []rawPoint, down *downtime) {
	t.Helper()
	byTS := map[int64]float64{}
	dups := 0
	for _, p := range got {
		if p.ts > want[len(want)-1].ts {
			continue // a scan after the agent's history was read
		}
		if _, ok := byTS[p.ts]; ok {
			dups++
		}
		byTS[p.ts] = p.v
	}
	scale := 0.0
	for _, p := range want {
		if p.v != 0 {
			scale = byTS[p.ts] / p.v
			break
		}
	}
	if scale <= 0 {
		t.Fatalf("%s: no value to compare", what)
	}
	for _, p := range want {
		v, ok := byTS[p.ts]
		if !ok {
			t.Errorf("%s: point at %d missing", what, p.ts)
			continue
		}
		if math.Abs(v-p.v*scale) > 1e-9*math.Abs(v)+1e-12 {
			t.Errorf("%s: point at %d = %v; want %v (×%v)", what, p.ts, v, p.v*scale, scale)
		}
	}
	// Points the receiver has that the agent's polls did not see: only the scans between the
	// last poll and the SIGKILL, which the agent sent but lost with its unsaved history.
	extra := 0
	inWant := byTSof(want)
	for ts := range byTS {
		if !inWant[ts] {
			if down == nil || ts <= down.lastSeen || ts >= down.killed {
				t.Errorf("%s: point at %d that the agent never showed", what, ts)
			}
			extra++
		}
	}
	var times []int64
	for ts := range byTS {
		if ts >= want[0].ts {
			times = append(times, ts)
		}
	}
	slices.Sort(times)
	if down != nil {
		// Nothing while the agent was down, and points again after it came back.
		after := 0
		for _, ts := range times {
			if ts > down.killed && ts < down.restarted {
				t.Errorf("%s: point at %d while the agent was down (%d to %d)", what, ts, down.killed, down.restarted)
			}
			if ts >= down.restarted {
				after++
			}
		}
		if after == 0 {
			t.Errorf("%s: no point after the agent's restart at %d", what, down.restarted)
		}
	}
	t.Logf("%s: %d points from %d to %d, all %d the agent showed present; %d repeated, %d seen only by the receiver",
		what, len(times), times[0], times[len(times)-1], len(want), dups, extra)
}

func byTSof(ps []rawPoint) map[int64]bool {
	m := make(map[int64]bool, len(ps))
	for _, p := range ps {
		m[p.ts] = true
	}
	return m
}

// receiver is a Prometheus or VictoriaMetrics process the test stops and starts on the same
// address and data directory.
type receiver struct {
	t          *testing.T
	name, prog string
	dir, addr  string
	args       []string
	p          *proc
}

func (r *receiver) start() {
	r.t.Helper()
	r.p = startProc(r.t, nil, nil, r.prog, r.args...)
	waitFor(r.t, 60*time.Second, func() error {
		path := "/-/ready"
		if r.name == "victoria-metrics" {
			path = "/health"
		}
		resp, err := http.Get("http://" + r.addr + path)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("%s: %s", r.name, resp.Status)
		}
		return nil
	})
}

func (r *receiver) stop() {
	if r.p != nil {
		r.p.kill() // SIGTERM, then SIGKILL after 5 s
		r.p = nil
	}
}

// raw returns the receiver's raw samples of the series of node from fromMs on.
func (r *receiver) raw(node string, fromMs int64) ([]rawPoint, error) {
	sel := fmt.Sprintf(`{node=%q}`, node)
	now := time.Now()
	if r.name == "victoria-metrics" {
		q := url.Values{"match[]": {sel}, "start": {strconv.FormatInt(fromMs/1000-1, 10)}, "end": {strconv.FormatInt(now.Unix()+1, 10)}}
		resp, err := http.Get("http://" + r.addr + "/api/v1/export?" + q.Encode())
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			return nil, fmt.Errorf("export: %s", resp.Status)
		}
		var out []rawPoint
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 64<<20)
		n := 0
		for sc.Scan() {
			var line struct {
				Metric     map[string]string
				Values     []float64
				Timestamps []int64
			}
			if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
				return nil, err
			}
			if line.Metric["receiver"] != "vm" {
				return nil, fmt.Errorf("series %v lacks the external label", line.Metric)
			}
			n++
			for i := range line.Values {
				out = append(out, rawPoint{line.Timestamps[i], line.Values[i]})
			}
		}
		if n != 1 {
			return nil, fmt.Errorf("export: %d series; want 1", n)
		}
		return out, sc.Err()
	}
	rng := fmt.Sprintf("%s[%ds]", sel, (now.UnixMilli()-fromMs)/1000+5)
	q := url.Values{"query": {rng}, "time": {strconv.FormatFloat(float64(now.UnixMilli())/1000, 'f', 3, 64)}}
	var ans struct {
		Data struct {
			Result []struct {
				Metric map[string]string
				Values [][2]any
			}
		}
	}
	if err := httpJSON("http://"+r.addr+"/api/v1/query?"+q.Encode(), &ans); err != nil {
		return nil, err
	}
	if len(ans.Data.Result) != 1 {
		return nil, fmt.Errorf("query %s: %d series; want 1", rng, len(ans.Data.Result))
	}
	var out []rawPoint
	for _, v := range ans.Data.Result[0].Values {
		ts, _ := v[0].(float64)
		s, _ := v[1].(string)
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, err
		}
		out = append(out, rawPoint{int64(math.Round(ts * 1000)), f})
	}
	return out, nil
}

// TestRemoteWriteLatePush: /write points that arrive after remote write already sent the scan
// their own time falls in reach a real Prometheus (in-order ingestion, no out-of-order window)
// all the same: one pushed 2 s before a point of the same series that is already stored, one
// after. The agent holds pushed series back until their scans are final (docs/remote-write.md);
// short segments (--snapshot-interval 16s at --interval 1s: 16 scans) keep the wait under 30 s.
// It mostly waits for its segments, with its own agent and Prometheus: it runs in the
// background (see scheduler).
func TestRemoteWriteLatePush(t *testing.T) {
	detach := background(t)
	const node = "rw-late"
	prom := &receiver{t: t, name: "prometheus", prog: need(t, "prometheus"), dir: t.TempDir(), addr: freePort(t)}
	prom.args = []string{"--config.file=" + writeFile(t, prom.dir, "prometheus.yml", "global: {}\n"),
		"--storage.tsdb.path=" + filepath.Join(prom.dir, "data"), "--web.listen-address=" + prom.addr,
		"--web.enable-remote-write-receiver", "--log.level=warn"}
	prom.start()
	t.Cleanup(prom.stop)
	cfg := fmt.Sprintf(`remote_write:
  - url: http://%s/api/v1/write
    name: prometheus
    match: '{metric="late_probe.value"}'
    queue_config: {min_backoff: 100ms, max_backoff: 1s}
`, prom.addr)
	a := startAgent(t, "--interval", "1s", "--snapshot-interval", "16s", "--node-name", node,
		"--remote-write-config", writeFile(t, t.TempDir(), "rw.yml", cfg))
	detach()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agent output:\n%s", tail(a.out.String(), 8000))
			if prom.p != nil {
				t.Logf("prometheus output:\n%s", tail(prom.p.out.String(), 3000))
			}
		}
	})
	status := func() rwStatus {
		t.Helper()
		var st struct {
			RemoteWrite []rwStatus `json:"remote_write"`
		}
		if err := a.get("/api/v1/status", &st); err != nil {
			t.Fatal(err)
		}
		if len(st.RemoteWrite) != 1 {
			t.Fatalf("status lists %d remote_write endpoints; want 1", len(st.RemoteWrite))
		}
		return st.RemoteWrite[0]
	}
	push := func(v int, ts int64) {
		t.Helper()
		if code, body := a.raw("POST", "/write?precision=ms", fmt.Sprintf("late_probe value=%d %d\n", v, ts)); code != 204 {
			t.Fatalf("POST /write value=%d at %d = %d %s", v, ts, code, body)
		}
	}
	waitFor(t, 30*time.Second, func() error {
		if st := status(); st.PositionMs == 0 {
			return fmt.Errorf("nothing sent yet: %+v", st)
		}
		return nil
	})

	// 1 at t1; once remote write has sent t1's scan, 2 stamped at the scan before (read from
	// a series with a point every scan, so that 2 lands in its own scan however the scans
	// were spaced); then 3, current.
	t1 := time.Now().UnixMilli()
	push(1, t1)
	waitFor(t, 10*time.Second, func() error {
		if st := status(); st.PositionMs < t1 {
			return fmt.Errorf("scan of %d not sent yet: %+v", t1, st)
		}
		return nil
	})
	ss, err := a.series("/api/v1/history?window=1m", `{metric="cpu.idle_ms", cpu="0"}`)
	if err != nil || len(ss) != 1 {
		t.Fatalf("agent history of cpu.idle_ms: %v, %d series", err, len(ss))
	}
	var t0 int64 // the last scan before t1's
	for _, p := range ss[0].Points {
		if ts := int64(p[0]); ts < t1 {
			t0 = ts
		}
	}
	if t0 < t1-4000 {
		t.Fatalf("no scan in the 4 s before %d (last %d): the machine is too slow for this test", t1, t0)
	}
	push(2, t0)
	time.Sleep(1500 * time.Millisecond)
	push(3, time.Now().UnixMilli())

	// The agent stored each once at its own scan; Prometheus must get exactly those.
	var want []rawPoint
	waitFor(t, 10*time.Second, func() error {
		ss, err := a.series("/api/v1/history?window=5m", `{metric="late_probe.value"}`)
		if err != nil || len(ss) != 1 {
			return fmt.Errorf("agent history: %v, %d series", err, len(ss))
		}
		p := &agentPoints{pts: map[int64]float64{}}
		p.add(ss[0].Points)
		want = p.sorted()
		if len(want) != 3 || want[0].v != 2 || want[1].v != 1 || want[2].v != 3 {
			return fmt.Errorf("agent history holds %v; want 2, 1, 3 in time order", want)
		}
		return nil
	})
	start := time.Now()
	var got []rawPoint
	waitFor(t, 60*time.Second, func() error {
		var err error
		if got, err = prom.raw(node, want[0].ts-60_000); err != nil {
			return err
		}
		if !slices.Equal(got, want) {
			return fmt.Errorf("prometheus holds %v; want %v (status %+v)", got, want, status())
		}
		return nil
	})
	st := status()
	if st.FailedBatches != 0 || st.DroppedSamples != 0 {
		t.Fatalf("remote write refused requests: %+v", st)
	}
	t.Logf("prometheus holds %v, %.1f s after the last push; pushed series sent up to %d ms behind the position",
		got, time.Since(start).Seconds(), st.PositionMs-st.LatePositionMs)

	// A point stamped at a scan already sent, then at once (once the agent holds it) a restart
	// (SIGTERM, same state directory): the pushed series' position and the history carry it.
	st = status()
	ss, err = a.series("/api/v1/history?window=1m", `{metric="cpu.idle_ms", cpu="0"}`)
	if err != nil || len(ss) != 1 {
		t.Fatalf("agent history of cpu.idle_ms: %v, %d series", err, len(ss))
	}
	var t4 int64
	for _, p := range ss[0].Points {
		if ts := int64(p[0]); ts <= st.PositionMs {
			t4 = ts
		}
	}
	push(4, t4)
	want = append(want, rawPoint{t4, 4})
	waitFor(t, 10*time.Second, func() error {
		ss, err := a.series("/api/v1/history?window=5m", `{metric="late_probe.value"}`)
		if err != nil || len(ss) != 1 || len(ss[0].Points) != 4 {
			return fmt.Errorf("agent history: %v, %v", err, ss)
		}
		return nil
	})
	held := status().LatePositionMs < t4
	a.stop(syscall.SIGTERM)
	restart(a, 30*time.Second)
	start = time.Now()
	waitFor(t, 60*time.Second, func() error {
		var err error
		if got, err = prom.raw(node, want[0].ts-60_000); err != nil {
			return err
		}
		if !slices.Equal(got, want) {
			return fmt.Errorf("after the restart prometheus holds %v; want %v (status %+v)", got, want, status())
		}
		return nil
	})
	if st := status(); st.FailedBatches != 0 || st.DroppedSamples != 0 {
		t.Fatalf("remote write refused requests after the restart: %+v", st)
	}
	t.Logf("after the restart: the late point (held back at the stop: %v) arrived %.1f s after the restart", held, time.Since(start).Seconds())
}
