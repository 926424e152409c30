package e2e

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestGoApplication: a Go process using package shm shows up with its counter rate, levels,
// float and state.
func TestGoApplication(t *testing.T) {
	serial(t)
	a := startAgent(t)
	base := filepath.Join(t.TempDir(), "app")
	app := startProc(t, []string{"CANTAL_PATH=" + base, "CANTAL_APPNAME=shop"}, nil,
		filepath.Join(bin, "testapp"), "-rate", "200", "-level", "-42", "-float", "2.5", "-state", "serving requests")
	sel := fmt.Sprintf(`{pid=%q}`, app.pid())
	waitFor(t, 5*time.Second, func() error {
		ss, err := a.series("/api/v1/metrics", sel)
		if err != nil {
			return err
		}
		req := find(ss, "requests.number")
		if req == nil || req.Rate == nil {
			return fmt.Errorf("no requests.number rate yet in %v", ss)
		}
		if math.Abs(*req.Rate-200) > 20 {
			return fmt.Errorf("requests.number rate = %v; want 200±20", *req.Rate)
		}
		if req.Kind != "counter" || req.Labels["process"] != "testapp" || req.Labels["appname"] != "shop" {
			return fmt.Errorf("requests.number = %+v; want a counter labelled process=testapp appname=shop", req)
		}
		if q := find(ss, "queue.length"); q == nil || q.Kind != "level" || num(q.Value) != -42 {
			return fmt.Errorf("queue.length = %+v; want level -42", q)
		}
		if f := find(ss, "temperature"); f == nil || f.Kind != "float" || num(f.Value) != 2.5 || f.Labels["unit"] != "degC" {
			return fmt.Errorf("temperature = %+v; want float 2.5 unit=degC", f)
		}
		s := find(ss, "phase")
		if s == nil || s.Kind != "state" || s.Text != "serving requests" {
			return fmt.Errorf("phase = %+v; want state 'serving requests'", s)
		}
		if d := time.Since(time.UnixMilli(s.Since)); d < 0 || d > time.Minute {
			return fmt.Errorf("phase since %d is %s ago; want recent", s.Since, d)
		}
		return nil
	})
	// The processes list says it exports metrics.
	var procs struct {
		Processes []struct {
			PID     int    `json:"pid"`
			Metrics bool   `json:"metrics"`
			AppName string `json:"appname"`
		}
	}
	if err := a.get("/api/v1/processes", &procs); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range procs.Processes {
		if fmt.Sprint(p.PID) == app.pid() {
			found = true
			if !p.Metrics || p.AppName != "shop" {
				t.Errorf("process %d = %+v; want metrics=true appname=shop", p.PID, p)
			}
		}
	}
	if !found {
		t.Errorf("process %s missing from /api/v1/processes", app.pid())
	}
}

// handWriter is a script that writes the files the way the protocol says, with no library:
// .values first, then .meta, each through a temporary file and a rename, then updates the values
// in place (as the mmap-based clients do). It increments the counter by 10 every 100 ms, removes
// both files when told (SIGUSR1) and creates them again on SIGUSR2.
const handWriter = `
import os, struct, sys, time, signal
base = sys.argv[1]
meta = b'counter 8: {"metric": "script.ticks"}\nlevel 8 signed: {"metric": "script.level"}\npad 48\nstate 64: {"metric": "script.state"}\n'
def write(path, data):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.rename(tmp, path)
ticks = 0
removed = False
def rm(*_):
    global removed
    removed = True
    for ext in (".meta", ".values"):
        try: os.unlink(base + ext)
        except FileNotFoundError: pass
def back(*_):
    global removed
    removed = False
signal.signal(signal.SIGUSR1, rm)
signal.signal(signal.SIGUSR2, back)
since = int(time.time() * 1000)
while True:
    if not removed:
        ticks += 10
        text = b"hand written"
        values = struct.pack("=Qq48x", ticks, -7) + struct.pack("=q", since) + text + b"\0" * (56 - len(text))
        if not os.path.exists(base + ".meta"):
            write(base + ".values", values)
            write(base + ".meta", meta)
        else:
            fd = os.open(base + ".values", os.O_WRONLY)
            os.pwrite(fd, values[:8], 0)
            os.close(fd)
    time.sleep(0.1)
`

func python(t *testing.T) string {
	t.Helper()
	// Debian's, which every uid may run (a python3 found first on PATH may be a per-user shim).
	p, err := exec.LookPath("/usr/bin/python3")
	if err != nil {
		t.Fatal("python3 is needed for the hand-written client; `make setup` installs it")
	}
	return p
}

// TestHandWrittenFiles: a plain script writing the files by hand is read; removing its files
// for a while leaves a gap in history (missing timestamps, no invented values), and the series
// stops when the process exits.
func TestHandWrittenFiles(t *testing.T) {
	serial(t)
	a := startAgent(t)
	dir := t.TempDir()
	base := filepath.Join(dir, "script")
	script := filepath.Join(dir, "writer.py")
	os.WriteFile(script, []byte(handWriter), 0o644)
	p := startProc(t, []string{"CANTAL_PATH=" + base}, nil, python(t), script, base)
	sel := fmt.Sprintf(`{pid=%q}`, p.pid())
	waitFor(t, 5*time.Second, func() error {
		ss, err := a.series("/api/v1/metrics", sel)
		if err != nil {
			return err
		}
		c := find(ss, "script.ticks")
		if c == nil || c.Rate == nil || math.Abs(*c.Rate-100) > 25 {
			return fmt.Errorf("script.ticks = %+v; want a rate near 100/s", c)
		}
		if l := find(ss, "script.level"); l == nil || num(l.Value) != -7 {
			return fmt.Errorf("script.level = %+v; want -7", l)
		}
		if s := find(ss, "script.state"); s == nil || s.Text != "hand written" {
			return fmt.Errorf("script.state = %+v; want 'hand written'", s)
		}
		return nil
	})

	// Remove the files for ~2 s (four scans), then bring them back.
	p.cmd.Process.Signal(syscall.SIGUSR1)
	gapStart := time.Now().UnixMilli()
	time.Sleep(2 * time.Second)
	gapEnd := time.Now().UnixMilli()
	p.cmd.Process.Signal(syscall.SIGUSR2)
	waitFor(t, 5*time.Second, func() error {
		ss, err := a.series("/api/v1/history?window=1m", `{metric="script.ticks"}`)
		if err != nil {
			return err
		}
		if len(ss) != 1 {
			return fmt.Errorf("history = %v; want one series", ss)
		}
		var inGap, after int
		for _, pt := range ss[0].Points {
			ts := int64(pt[0])
			if ts > gapStart+700 && ts < gapEnd-200 {
				inGap++
			}
			if ts > gapEnd+200 {
				after++
			}
		}
		if inGap > 0 {
			return fmt.Errorf("%d points inside the gap %d..%d: %v", inGap, gapStart, gapEnd, ss[0].Points)
		}
		if after < 2 {
			return fmt.Errorf("only %d points after the gap", after)
		}
		return nil
	})

	// Exit: the series is no longer live, and history gets no point after the exit.
	p.kill()
	exited := time.Now().UnixMilli()
	waitFor(t, 10*time.Second, func() error {
		ss, err := a.series("/api/v1/metrics", sel)
		if err != nil {
			return err
		}
		if len(ss) != 0 {
			return fmt.Errorf("after exit /api/v1/metrics still lists %v", ss)
		}
		return nil
	})
	ss, err := a.series("/api/v1/history?window=1m", `{metric="script.ticks"}`)
	if err != nil || len(ss) != 1 {
		t.Fatalf("history after exit = %v, %v", ss, err)
	}
	last := ss[0].Points[len(ss[0].Points)-1]
	if int64(last[0]) > exited+600 {
		t.Errorf("history has a point at %d, after the exit at %d", int64(last[0]), exited)
	}
}

// TestMountNamespace: a process in its own mount namespace whose CANTAL_PATH exists only inside
// it is read through /proc/PID/root.
func TestMountNamespace(t *testing.T) {
	serial(t)
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Fatal("unshare (util-linux) is needed")
	}
	a := startAgent(t)
	dir := t.TempDir()
	// Inside the namespace a tmpfs hides dir; the files live only there.
	shell := fmt.Sprintf("mount -t tmpfs none %s && CANTAL_PATH=%s/app exec %s -rate 50",
		dir, dir, filepath.Join(bin, "testapp"))
	p := startProc(t, nil, nil, "unshare", "-m", "--propagation", "private", "sh", "-c", shell)
	waitFor(t, 10*time.Second, func() error {
		ss, err := a.series("/api/v1/metrics", `{metric="requests.number", process="testapp"}`)
		if err != nil {
			return err
		}
		for _, s := range ss {
			if s.Rate != nil && math.Abs(*s.Rate-50) < 10 {
				return nil
			}
		}
		return fmt.Errorf("no testapp series with rate 50 yet: %v (unshare output: %s)", ss, p.out)
	})
	if _, err := os.Stat(filepath.Join(dir, "app.meta")); !os.IsNotExist(err) {
		t.Errorf("app.meta visible on the host (err=%v): the test did not isolate the files", err)
	}
}
