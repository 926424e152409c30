package e2e

// Hostile containers against the real agent, one at a time (serial), each beside an agent at
// the default 2 s interval: a container that forks 5 000 processes, one that renames itself
// faster than the agent scans, one whose root holds symlinks and FIFOs where metadata would be
// read, and containers that start and stop as fast as runc here allows. Each checks that no
// scan slipped (the agent's own series has a point in every 2 s slot while it ran), that the
// agent's peak memory stayed within its budget, and what the attack aims at.

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/apiwire"
	"github.com/cantal-go/cantal/internal/testsupport/podmantest"
)

// hostileBudgetKB is the agent's peak resident memory allowed during a hostile container's
// run (its steady state on this machine is about 40 MiB; 5 000 more processes' series and
// tables add tens of MiB).
const hostileBudgetKB = 256 << 10

// hostileImage builds the image of e2e/ctrhostile, with extra files in its root.
func hostileImage(t *testing.T, extra func(rootfs string)) string {
	t.Helper()
	return podmantest.Image(t, "..", "./e2e/ctrhostile", "ctrhostile", extra)
}

// startBeatAgent starts an agent at the default 2 s interval (the beat the tests hold it to).
func startBeatAgent(t *testing.T) *agent {
	t.Helper()
	return startAgent(t, "--interval", "2s")
}

// checkBeat fails t when the agent's own series (system.uptime_s, written by every scan) has
// two consecutive points between from and to (unix ms) more than 1.5 intervals apart: a scan
// slipped past its slot.
func checkBeat(t *testing.T, a *agent, from, to int64) {
	t.Helper()
	ss, err := a.series("/api/v1/history?window=15m", `{metric="system.uptime_s"}`)
	if err != nil || len(ss) != 1 {
		t.Fatalf("the agent's uptime series: %v, %v", ss, err)
	}
	var ts []int64
	for _, p := range ss[0].Points {
		if ms := int64(p[0]); ms >= from && ms <= to {
			ts = append(ts, ms)
		}
	}
	if len(ts) < 3 {
		t.Fatalf("%d scans between %d and %d; want the window to span several", len(ts), from, to)
	}
	worst := int64(0)
	for i := 1; i < len(ts); i++ {
		if d := ts[i] - ts[i-1]; d > worst {
			worst = d
		}
		if d := ts[i] - ts[i-1]; d > 3000 {
			t.Errorf("scans at %d and %d: %d ms apart; want every 2 s slot scanned", ts[i-1], ts[i], d)
		}
	}
	t.Logf("%d scans in %.1f s, widest step %d ms", len(ts), float64(to-from)/1000, worst)
}

// checkMemory fails t when the agent's peak resident memory passed the budget.
func checkMemory(t *testing.T, a *agent) {
	t.Helper()
	hwm := statusKB(t, a.cmd.Process.Pid, "VmHWM")
	t.Logf("agent peak RSS %d MiB", hwm>>10)
	if hwm > hostileBudgetKB {
		t.Errorf("agent peak RSS %d KiB; budget %d KiB", hwm, hostileBudgetKB)
	}
}

// scans is the number of scans the agent made so far (0 when its status cannot be read).
func (a *agent) scans() int {
	var st struct {
		LastScan struct{ Scans int } `json:"last_scan"`
	}
	a.get("/api/v1/status", &st)
	return st.LastScan.Scans
}

// moreScans waits until the agent made n more scans.
func moreScans(t *testing.T, a *agent, n int) {
	t.Helper()
	a.waitScans(a.scans() + n)
}

// containerRow is the /api/v1/containers row of the container with the short id, nil if none.
func containerRow(a *agent, id string) (*apiwire.Container, error) {
	var ans apiwire.ContainersAnswer
	if err := a.get("/api/v1/containers", &ans); err != nil {
		return nil, err
	}
	for i := range ans.Containers {
		if ans.Containers[i].ID == id {
			return &ans.Containers[i], nil
		}
	}
	return nil, nil
}

// A container forking 5 000 processes (its pids limit raised to 6 000; nproc stays 4096: the
// kernel does not hold root's processes to it): the agent counts them all in the container's
// row and keeps its beat and its memory budget.
func TestHostileContainerForks(t *testing.T) {
	quiet(t)
	image := hostileImage(t, nil)
	a := startBeatAgent(t)
	from := time.Now().UnixMilli()
	const n = 5000
	id := podmantest.Run(t, "cantal-forks", image, []string{"--pids-limit", "6000"}, "-fork", fmt.Sprint(n))
	waitFor(t, 3*time.Minute, func() error {
		c, err := containerRow(a, id[:12])
		if err != nil || c == nil {
			return fmt.Errorf("no row for the container: %v", err)
		}
		if c.Processes < n+1 {
			return fmt.Errorf("the container's row counts %d processes; want %d", c.Processes, n+1)
		}
		return nil
	})
	moreScans(t, a, 5) // the agent holding 5 000 more processes for a while
	checkBeat(t, a, from, time.Now().UnixMilli())
	checkMemory(t, a)
}

// A container that renames itself (comm and command line) every 300 ms, to the names of the
// host's programs and names holding control characters: its process keeps the container's
// labels whatever it calls itself (it cannot pose as the host or as the agent), it has one live
// series per metric, and the agent keeps its beat.
func TestHostileContainerRenames(t *testing.T) {
	quiet(t)
	image := hostileImage(t, nil)
	a := startBeatAgent(t)
	from := time.Now().UnixMilli()
	const name = "cantal-renames"
	id := podmantest.Run(t, name, image, nil, "-rename", "300ms")
	pid := podman(t, "inspect", "-f", "{{.State.Pid}}", name)
	// Poll the agent while the container renames itself: every answer has one live series of
	// its pid, labelled as the container's, whatever name it has (the agent may keep the name
	// it first read); /proc shows the renames happen.
	seen, labelled := map[string]bool{}, map[string]bool{}
	scans0 := a.scans()
	waitFor(t, 2*time.Minute, func() error {
		if comm, err := os.ReadFile("/proc/" + pid + "/comm"); err == nil {
			seen[strings.TrimSpace(string(comm))] = true
		}
		ss, err := a.series("/api/v1/metrics", fmt.Sprintf(`{metric="process.cpu.user_ms",pid=%q}`, pid))
		if err != nil {
			return err
		}
		if len(ss) != 1 {
			return fmt.Errorf("%d live process.cpu.user_ms series of pid %s; want 1: %v", len(ss), pid, ss)
		}
		l := ss[0].Labels
		if l["container"] != name || l["container_id"] != id[:12] || l["cgroup"] != "libpod_parent.libpod-"+id {
			t.Fatalf("the renamed process's labels %v; want the container's", l)
		}
		labelled[l["process"]] = true
		if n := a.scans() - scans0; len(seen) < 3 || n < 10 {
			return fmt.Errorf("%d scans, names in /proc so far %q; want 10 scans and 3 names", n, keys(seen))
		}
		return nil
	})
	// The agent's own process series is not the container's.
	ss, err := a.series("/api/v1/metrics", fmt.Sprintf(`{metric="process.cpu.user_ms",pid="%d"}`, a.cmd.Process.Pid))
	if err != nil || len(ss) != 1 || ss[0].Labels["container"] != "" {
		t.Errorf("the agent's own series %v, %v; want one, of no container", ss, err)
	}
	checkBeat(t, a, from, time.Now().UnixMilli())
	checkMemory(t, a)
	t.Logf("names in /proc: %q; process labels the agent gave it: %q", keys(seen), keys(labelled))
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// A container whose root holds symlinks out of it (absolute, and through /proc/1/root, which
// from the host is the host's root) and FIFOs where the agent reads metadata: its
// CANTAL_PATH's .meta and .values and the usual /etc files. A root-only host file they point
// at never appears in any answer or in the log, and no FIFO stalls a scan.
func TestHostileContainerRootLinks(t *testing.T) {
	quiet(t)
	secretDir := t.TempDir()
	token := fmt.Sprintf("cantal-secret-%016x", rand.Uint64())
	secret := filepath.Join(secretDir, "secret")
	if err := os.WriteFile(secret, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Metadata the way a reader of the agent's formats would take it from the file.
	if err := os.WriteFile(secret+".meta", []byte("counter 8: "+token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	image := hostileImage(t, func(root string) {
		for _, d := range []string{"app", "etc", "run"} {
			if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		links := map[string]string{
			"app/m.meta":     "/proc/1/root" + secret + ".meta",
			"app/l.meta":     secret + ".meta",
			"app/l.values":   secret,
			"etc/hostname":   "/proc/1/root" + secret,
			"etc/os-release": secret,
		}
		for at, to := range links {
			if err := os.Symlink(to, filepath.Join(root, at)); err != nil {
				t.Fatal(err)
			}
		}
		// (No FIFO in /etc: podman itself reads the image's /etc/passwd when it creates the
		// container, and would wait on one forever.)
		for _, at := range []string{"app/m.values", "app/f.meta", "app/f.values", "run/cantal.sock"} {
			if err := syscall.Mkfifo(filepath.Join(root, at), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	})
	a := startBeatAgent(t)
	from := time.Now().UnixMilli()
	for i, base := range []string{"/app/m", "/app/l", "/app/f"} {
		name := fmt.Sprintf("cantal-links-%d", i)
		podmantest.Run(t, name, image, []string{"--env", "CANTAL_PATH=" + base})
	}
	// Several scans with all three running: each was seen, its CANTAL_PATH tried.
	waitFor(t, 2*time.Minute, func() error {
		for i := range 3 {
			ss, err := a.series("/api/v1/metrics", fmt.Sprintf(`{metric="cgroup.processes",container="cantal-links-%d"}`, i))
			if err != nil || len(ss) != 1 {
				return fmt.Errorf("cantal-links-%d: %v, %v", i, ss, err)
			}
		}
		return nil
	})
	moreScans(t, a, 5)
	to := time.Now().UnixMilli()
	for _, path := range []string{"/api/v1/metrics", "/metrics", "/api/v1/processes", "/api/v1/status", "/api/v1/containers",
		"/api/v1/history?window=5m", "/api/v1/labels?q=cantal-secret", "/api/v1/labels?q=counter"} {
		code, body := a.raw("GET", path, "")
		if code != 200 {
			t.Errorf("%s: %d", path, code)
		}
		if strings.Contains(body, token) {
			t.Errorf("%s holds the content of a root-only file the container's links point at", path)
		}
	}
	if strings.Contains(a.out.String(), token) {
		t.Errorf("the agent's log holds the content of a root-only file the container's links point at")
	}
	// The agent did look where the links are, and refused them: each container's
	// CANTAL_PATH is a problem (a symlink, a FIFO: refused without blocking).
	var st struct {
		Problems []struct{ Source, Reason string } `json:"problems"`
	}
	if err := a.get("/api/v1/status", &st); err != nil {
		t.Fatal(err)
	}
	for _, base := range []string{"/app/m", "/app/l", "/app/f"} {
		found := false
		for _, p := range st.Problems {
			found = found || strings.HasPrefix(p.Source, base+" (pid ") && strings.Contains(p.Reason, "refused")
		}
		if !found {
			t.Errorf("no problem reported for the CANTAL_PATH %s: %+v", base, st.Problems)
		}
	}
	checkBeat(t, a, from, to)
	checkMemory(t, a)
}

// cgroupChurn makes a container start and stop the way the agent sees one: a cgroup in
// Podman's layout (libpod_parent/libpod-<id>) in every hierarchy that has libpod_parent, a
// process moved into it for 100 ms, then the cgroup removed. It returns the cycles done, one
// every 200 ms per worker until the deadline.
func cgroupChurn(t *testing.T, prefix string, workers int, deadline time.Time) (done, failed int64) {
	t.Helper()
	parents, _ := filepath.Glob("/sys/fs/cgroup/*/libpod_parent")
	if len(parents) == 0 {
		if _, err := os.Stat("/sys/fs/cgroup/libpod_parent"); err == nil {
			parents = []string{"/sys/fs/cgroup/libpod_parent"}
		}
	}
	if len(parents) == 0 {
		t.Fatal("no libpod_parent cgroup: run a podman container once (cgroupfs manager)")
	}
	var ok, bad atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(deadline); i++ {
				next := time.Now().Add(200 * time.Millisecond)
				cid := fmt.Sprintf("%s%02x%044x", prefix, 0x80+w, i)
				var dirs []string
				for _, p := range parents {
					d := filepath.Join(p, "libpod-"+cid)
					if os.Mkdir(d, 0o755) == nil {
						dirs = append(dirs, d)
					}
				}
				cmd := exec.Command("sleep", "0.1")
				err := cmd.Start()
				if err == nil {
					for _, d := range dirs {
						os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(fmt.Sprint(cmd.Process.Pid)), 0o644)
					}
					err = cmd.Wait()
				}
				for _, d := range dirs {
					for k := 0; os.Remove(d) != nil && k < 50; k++ {
						time.Sleep(10 * time.Millisecond) // the process's exit is still being accounted
					}
				}
				if err != nil || len(dirs) != len(parents) {
					bad.Add(1)
				} else {
					ok.Add(1)
				}
				time.Sleep(time.Until(next))
			}
		}()
	}
	wg.Wait()
	return ok.Load(), bad.Load()
}

// Containers that start and stop about 20 times a second for 30 s. Podman takes seconds per
// container on this machine and runc, in parallel here, about one a second per worker, so two
// kinds run side by side: real containers, runc running the ctrhostile image container after
// container in Podman's cgroup layout (libpod_parent/libpod-<64 hex>), each exiting at once,
// from 2 workers; and 6 workers making the same cgroups come and go every 200 ms each (at
// most: each cycle takes longer under load), a process in each (cgroupChurn): about 27 a
// second here. The agent keeps its beat and its budget, and once they are gone none of their
// cgroups stays among its live series.
func TestHostileContainerChurn(t *testing.T) {
	quiet(t)
	runc := need(t, "runc")
	dir := t.TempDir()
	rootfs := filepath.Join(dir, "rootfs")
	build := exec.Command("go", "build", "-o", filepath.Join(rootfs, "ctrhostile"), "./e2e/ctrhostile")
	build.Dir, build.Env = "..", append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	prefix := fmt.Sprintf("c0ffee%06x", rand.Uint32()&0xffffff)
	spec := func(n int) string {
		b := filepath.Join(dir, fmt.Sprintf("b%d", n))
		os.MkdirAll(b, 0o755)
		cfg := map[string]any{
			"ociVersion": "1.0.2",
			"process": map[string]any{"args": []string{"/ctrhostile", "-exit"}, "cwd": "/", "user": map[string]int{"uid": 0, "gid": 0},
				"rlimits": []map[string]any{{"type": "RLIMIT_NOFILE", "hard": 1024, "soft": 1024}}},
			"root":   map[string]any{"path": rootfs, "readonly": true},
			"mounts": []map[string]any{{"destination": "/proc", "type": "proc", "source": "proc"}},
			"linux": map[string]any{
				"cgroupsPath": "", // set per run
				"namespaces":  []map[string]string{{"type": "pid"}, {"type": "mount"}, {"type": "ipc"}, {"type": "uts"}},
			},
		}
		b2, _ := json.Marshal(cfg)
		os.WriteFile(filepath.Join(b, "config.json"), b2, 0o644)
		return b
	}
	a := startBeatAgent(t)
	from := time.Now().UnixMilli()
	var runs, fails atomic.Int64
	var firstErr sync.Once
	deadline := time.Now().Add(15 * time.Second) // seven scans; the counts below say the churn happened
	var wg sync.WaitGroup
	var churned, churnFailed int64
	churnDone := make(chan struct{})
	go func() {
		defer close(churnDone)
		churned, churnFailed = cgroupChurn(t, prefix, 6, deadline)
	}()
	for w := range 2 {
		bundle := spec(w)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(deadline); i++ {
				cid := fmt.Sprintf("%s%02x%044x", prefix, w, i)
				cfgPath := filepath.Join(bundle, "config.json")
				var cfg map[string]any
				b, _ := os.ReadFile(cfgPath)
				json.Unmarshal(b, &cfg)
				cfg["linux"].(map[string]any)["cgroupsPath"] = "/libpod_parent/libpod-" + cid
				b, _ = json.Marshal(cfg)
				os.WriteFile(cfgPath, b, 0o644)
				out, err := exec.Command(runc, "run", "--bundle", bundle, "cantal-churn-"+cid[:20]).CombinedOutput()
				if err != nil {
					fails.Add(1)
					firstErr.Do(func() { t.Logf("runc run: %v: %s", err, out) })
					continue
				}
				runs.Add(1)
			}
		}()
	}
	wg.Wait()
	<-churnDone
	to := time.Now().UnixMilli()
	secs := float64(to-from) / 1000
	t.Logf("%d runc containers started and stopped in %.1f s (%.1f a second), %d runs failed; %d cgroup containers (%.1f a second), %d failed",
		runs.Load(), secs, float64(runs.Load())/secs, fails.Load(), churned, float64(churned)/secs, churnFailed)
	if runs.Load() < 10 || churned < 300 {
		t.Fatalf("%d runc containers and %d cgroup containers; the churn did not happen", runs.Load(), churned)
	}
	checkBeat(t, a, from, to)
	checkMemory(t, a)
	// Their cgroups are gone, and so are their live series.
	waitFor(t, 30*time.Second, func() error {
		ss, err := a.series("/api/v1/metrics", `{metric=~"cgroup\\..*",cgroup=~"libpod_parent\\.libpod-`+prefix+`.*"}`)
		if err != nil {
			return err
		}
		if len(ss) > 0 {
			return fmt.Errorf("%d live series of the churn's cgroups remain, e.g. %v", len(ss), ss[0].Labels)
		}
		return nil
	})
}
