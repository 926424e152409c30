package e2e

import (
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// carbonCache is a real Graphite carbon-cache (Debian graphite-carbon) on loopback with its
// own configuration and whisper directory.
type carbonCache struct {
	t    *testing.T
	dir  string
	Addr string // plaintext receiver
	cmd  *exec.Cmd
	out  *lockedBuffer
	done chan struct{}
}

// startCarbon configures carbon-cache to keep every metric at 2 s resolution for an hour
// (storage-schemas.conf) and starts it.
func startCarbon(t *testing.T) *carbonCache {
	t.Helper()
	for _, p := range []string{"carbon-cache", "whisper-fetch"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Fatalf("%s not found (%v): run scripts/install-deps.sh", p, err)
		}
	}
	dir := t.TempDir()
	c := &carbonCache{t: t, dir: dir, Addr: freePort(t)}
	port := func(addr string) string { _, p, _ := net.SplitHostPort(addr); return p }
	conf := fmt.Sprintf(`[cache]
STORAGE_DIR = %[1]s/storage
LOCAL_DATA_DIR = %[1]s/whisper
CONF_DIR = %[1]s
LOG_DIR = %[1]s/log
PID_DIR = %[1]s
MAX_CACHE_SIZE = inf
MAX_UPDATES_PER_SECOND = 100000
MAX_CREATES_PER_MINUTE = inf
LINE_RECEIVER_INTERFACE = 127.0.0.1
LINE_RECEIVER_PORT = %[2]s
ENABLE_UDP_LISTENER = False
PICKLE_RECEIVER_INTERFACE = 127.0.0.1
PICKLE_RECEIVER_PORT = %[3]s
CACHE_QUERY_INTERFACE = 127.0.0.1
CACHE_QUERY_PORT = %[4]s
`, dir, port(c.Addr), port(freePort(t)), port(freePort(t)))
	schemas := "[cantal]\npattern = .*\nretentions = 2s:1h\n"
	if err := os.WriteFile(filepath.Join(dir, "carbon.conf"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "storage-schemas.conf"), []byte(schemas), 0o644); err != nil {
		t.Fatal(err)
	}
	c.start()
	t.Cleanup(c.stop)
	return c
}

func (c *carbonCache) start() {
	c.t.Helper()
	c.out = &lockedBuffer{}
	c.cmd = exec.Command("carbon-cache", "--config="+filepath.Join(c.dir, "carbon.conf"), "--nodaemon",
		"--pidfile="+filepath.Join(c.dir, "carbon.pid"), "--logfile=-", "start")
	c.cmd.Stdout, c.cmd.Stderr = c.out, c.out
	if err := c.cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.done = make(chan struct{})
	go func() { c.cmd.Wait(); close(c.done) }()
	waitFor(c.t, 30*time.Second, func() error {
		select {
		case <-c.done:
			return fmt.Errorf("carbon-cache exited: %s", c.out)
		default:
		}
		conn, err := net.DialTimeout("tcp", c.Addr, time.Second)
		if err != nil {
			return err
		}
		conn.Close()
		return nil
	})
}

// stop stops carbon-cache as its init script does (SIGTERM: it closes its connections and
// writes its cache out) and waits for it to exit.
func (c *carbonCache) stop() {
	if c.cmd == nil {
		return
	}
	c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		c.cmd.Process.Kill()
		<-c.done
		c.t.Errorf("carbon-cache did not stop on SIGTERM:\n%s", c.out)
	}
	c.cmd = nil
}

// fetch reads the whisper file of path with whisper-fetch: unix second → value, for the
// slots that hold one.
func (c *carbonCache) fetch(path string, from int64) (map[int64]float64, error) {
	file := filepath.Join(c.dir, "whisper", strings.ReplaceAll(path, ".", "/")+".wsp")
	out, err := exec.Command("whisper-fetch", "--from="+strconv.FormatInt(from, 10), file).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("whisper-fetch %s: %v: %s", file, err, out)
	}
	got := map[int64]float64{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 || f[1] == "None" {
			continue
		}
		ts, err1 := strconv.ParseInt(f[0], 10, 64)
		v, err2 := strconv.ParseFloat(f[1], 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("whisper-fetch line %q", line)
		}
		got[ts] = v
	}
	return got, nil
}

// TestCarbonResendsAfterOutage sends a node's CPU counters to a real carbon-cache, stops carbon
// for a minute (restarting the agent in the middle of it) and starts it again: the agent
// resends what carbon missed from its history, so every point the agent holds is in whisper at
// its own 2 s slot with its own value — no hole — under the node-name prefix.
func TestCarbonResendsAfterOutage(t *testing.T) {
	detach := background(t)
	cb := startCarbon(t)
	const sel = `{metric=~"cpu\\.(idle|user)_ms|late_probe\\.value", cpu=""}`
	a := startAgent(t, "--interval", "2s", "--carbon", cb.Addr, "--carbon-interval", "2s",
		"--node-name", "e2e.node", "--carbon-match", sel)
	paths := map[string]string{"cpu.idle_ms": "e2e_node.cpu.idle_ms", "cpu.user_ms": "e2e_node.cpu.user_ms",
		"late_probe.value": "e2e_node.late_probe.value.source.push"}
	start := time.Now().Unix() - 10

	// Steady state: points arrive.
	waitFor(t, 60*time.Second, func() error {
		for _, p := range []string{paths["cpu.idle_ms"], paths["cpu.user_ms"]} {
			got, err := cb.fetch(p, start)
			if err != nil {
				return err
			}
			if len(got) < 3 {
				return fmt.Errorf("%s: %d points in whisper", p, len(got))
			}
		}
		return nil
	})
	// A pushed point stamped 8 s ago: it is stored at the scan its time falls in, one the
	// carbon output has already sent, and must reach carbon all the same.
	waitFor(t, 60*time.Second, func() error {
		ts := time.Now().Add(-8 * time.Second).UnixMilli()
		code, body := a.raw("POST", "/write?precision=ms", fmt.Sprintf("late_probe value=42 %d\n", ts))
		if code != 204 {
			return fmt.Errorf("POST /write = %d %s", code, body)
		}
		return nil
	})
	detach() // the rest mostly waits: the other tests run meanwhile
	// carbon is down for the outage (outageLength; the long variant, CANTAL_E2E_OUTAGE=5m, is
	// the same test over a longer outage).
	outage := outageLength(t)
	cb.stop()
	down := time.Now()
	// The agent restarts during the outage (SIGTERM, same state directory): it reloads its
	// history and the carbon position, so what carbon missed before the restart is sent too.
	time.Sleep(outage * 5 / 12)
	firstLog := a.out.String()
	a.stop(syscall.SIGTERM)
	restartWaiting(t, a)
	time.Sleep(time.Until(down.Add(outage)))
	cb.start()
	up := time.Now()
	t.Logf("carbon down from %s to %s", down.Format(time.TimeOnly), up.Format(time.TimeOnly))

	// After the restart, the agent's whole history since start must be in whisper.
	var holes []string
	var checked, duringOutage int
	waitFor(t, 90*time.Second, func() error {
		holes, checked, duringOutage = holes[:0], 0, 0
		hist, err := a.series("/api/v1/history?window=10m", sel)
		if err != nil {
			return err
		}
		if len(hist) != len(paths) {
			return fmt.Errorf("history has %d series; want %d", len(hist), len(paths))
		}
		for _, s := range hist {
			path := paths[s.Labels["metric"]]
			got, err := cb.fetch(path, start)
			if err != nil {
				return err
			}
			perSlot := map[int64]int{}
			for _, p := range s.Points {
				sec := int64(p[0]) / 1000
				perSlot[sec-sec%2]++
			}
			for _, p := range s.Points {
				ms := int64(p[0])
				if ms/1000 < start+10 || ms > up.UnixMilli()+10_000 {
					continue
				}
				sec := ms / 1000
				slot := sec - sec%2
				checked++
				if ms > down.UnixMilli() && ms < up.UnixMilli() {
					duringOutage++
				}
				v, ok := got[slot]
				switch {
				case !ok:
					holes = append(holes, fmt.Sprintf("%s at %s", path, time.UnixMilli(ms).Format(time.TimeOnly)))
				case perSlot[slot] == 1 && v != p[1] && math.Abs(v-p[1]) > 1e-9*math.Abs(p[1]):
					t.Errorf("%s at %d: whisper %v; agent %v", path, slot, v, p[1])
				}
			}
		}
		if len(holes) > 0 {
			return fmt.Errorf("%d of %d points missing in whisper: %v", len(holes), checked, holes)
		}
		return nil
	})
	// A third of the scans the outage could hold, per series (the restart takes some of them).
	if want := 2 * int(outage/(3*2*time.Second)); duringOutage < want {
		t.Errorf("only %d points of the two series were taken while carbon was down for %v; want ≥ %d", duringOutage, outage, want)
	}
	t.Logf("%d points checked, %d of them taken while carbon was down: none missing", checked, duringOutage)
	if logs := firstLog; !strings.Contains(logs, "carbon: connection lost") && !strings.Contains(logs, "carbon: write failed") {
		t.Errorf("the agent never noticed the lost connection; log:\n%s", logs)
	}
}

// restartWaiting starts a stopped agent again with its arguments (its state directory),
// waiting up to a minute for its API: a loaded machine may take longer than start's wait to
// scan every process once.
func restartWaiting(t *testing.T, a *agent) {
	t.Helper()
	a.out = &lockedBuffer{}
	a.cmd = exec.Command(filepath.Join(bin, "cantal-agent"), a.args...)
	a.cmd.Stdout, a.cmd.Stderr = a.out, a.out
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	a.done = make(chan error, 1)
	go func() { a.done <- a.cmd.Wait() }()
	waitFor(t, 60*time.Second, func() error {
		var st struct{}
		return a.get("/api/v1/status", &st)
	})
}
