package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A real Podman container writing and syncing a file (10 MiB/s) and sending datagrams out of
// its network namespace's eth0 (~100 kB/s) shows its block I/O per device, its interface's
// counters and its tasks, as the kernel counts them (its cgroup's pids.current), and under
// cAdvisor's names on /metrics.
func TestContainerIONetworkTasks(t *testing.T) {
	quiet(t)
	image := ctrImage(t)
	exec.Command("podman", "rm", "-f", "res-1").Run() // a leftover of an interrupted run
	// On cgroup v1 (this machine is hybrid) blkio.throttle counts a device's I/O once a
	// throttle rule exists on it (Linux 6.10 on): the container gets a rule far above its rate.
	disk := storageDisk(t, "/var/lib/containers")
	id := podman(t, "run", "-d", "--name", "res-1", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=4096:4096",
		"--device-write-bps", "/dev/"+disk+":1000mb", image, "-write", "/data", "-udp", "10.88.0.1:9")
	t.Cleanup(func() { exec.Command("podman", "rm", "-f", "-t", "0", "res-1").Run() })
	a := startAgent(t)
	var dev string
	waitFor(t, 90*time.Second, func() error {
		ss, err := a.series("/api/v1/metrics", `{container="res-1"}`)
		if err != nil {
			return err
		}
		var tx, wr, pids *Series
		for i := range ss {
			s := &ss[i]
			switch s.Labels["metric"] {
			case "cgroup.net.tx.bytes":
				if s.Labels["interface"] == "eth0" {
					tx = s
				}
			case "cgroup.io.write_bytes":
				if s.Rate != nil && (wr == nil || wr.Rate == nil || *s.Rate > *wr.Rate) {
					wr = s
				}
			case "cgroup.pids":
				pids = s
			}
		}
		if tx == nil || wr == nil || pids == nil {
			return fmt.Errorf("want cgroup.net.tx.bytes{interface=eth0}, cgroup.io.write_bytes and cgroup.pids of res-1; have %v", ss)
		}
		if tx.Rate == nil || *tx.Rate < 20000 {
			return fmt.Errorf("res-1 sends %v B/s on eth0; want ≥ 20 kB/s (100 datagrams of 1000 bytes a second)", tx.Rate)
		}
		if *wr.Rate < 1<<20 {
			return fmt.Errorf("res-1 writes %v B/s to %s; want ≥ 1 MiB/s (1 MiB synced every 100 ms)", *wr.Rate, wr.Labels["device"])
		}
		b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/pids/libpod_parent", "libpod-"+id, "pids.current"))
		if err != nil {
			b, err = os.ReadFile(filepath.Join("/sys/fs/cgroup/libpod_parent", "libpod-"+id, "pids.current"))
		}
		if err != nil {
			return err
		}
		kernel, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		if got := int(num(pids.Value)); got < 2 || got > kernel+2 || got < kernel-2 {
			return fmt.Errorf("res-1's tasks = %d; the kernel says %d", got, kernel)
		}
		if dev = wr.Labels["device"]; dev != disk {
			return fmt.Errorf("res-1 writes to %s; want %s, where its storage is", dev, disk)
		}
		return nil
	})
	code, body := a.raw("GET", "/metrics", "")
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	for _, want := range []string{
		fmt.Sprintf(`container_network_transmit_bytes_total{id="/libpod_parent/libpod-%s",image=%q,interface="eth0",name="res-1"} `, id, image),
		fmt.Sprintf(`container_fs_writes_bytes_total{device=%q,id="/libpod_parent/libpod-%s",image=%q,name="res-1"} `, "/dev/"+dev, id, image),
		fmt.Sprintf(`container_threads{id="/libpod_parent/libpod-%s",image=%q,name="res-1"} `, id, image),
	} {
		if !strings.Contains(body, "\n"+want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	promtoolClean(t, body)
}

// storageDisk is the name of the whole disk the file system of path is on ("vda").
func storageDisk(t *testing.T, path string) string {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	link := fmt.Sprintf("/sys/dev/block/%d:%d", unix.Major(st.Dev), unix.Minor(st.Dev))
	target, err := filepath.EvalSymlinks(link)
	if err != nil {
		t.Fatalf("%s is on no block device: %v", path, err)
	}
	if _, err := os.Stat(filepath.Join(target, "partition")); err == nil {
		target = filepath.Dir(target)
	}
	return filepath.Base(target)
}

// A real Podman container OOM-killed under a 32 MiB limit after a scan saw it, and removed
// (podman rm) before a scan could read its cgroup again, is still counted: its oom_kill goes
// from 0 to 1, written by a scan that no longer saw the container (the kernel's log named its
// cgroup). Its exit status (137, SIGKILL) is the kernel's word that it was killed.
func TestOOMKilledContainerRemovedIsCounted(t *testing.T) {
	quiet(t)
	image := ctrImage(t)
	exec.Command("podman", "rm", "-f", "oom-1").Run() // a leftover of an interrupted run
	id := podman(t, "run", "-d", "--name", "oom-1", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=4096:4096",
		"--memory", "32m", image, "-alloc", "256", "-alloc-on-usr1")
	t.Cleanup(func() { exec.Command("podman", "rm", "-f", "-t", "0", "oom-1").Run() })
	a := startAgent(t, "--interval", "3s")
	sel := `{container="oom-1",metric=~"cgroup.memory.oom_kill|cgroup.processes"}`
	var lastSeen int64 // the latest scan that saw oom-1's process
	waitFor(t, 60*time.Second, func() error {
		ss, err := a.series("/api/v1/metrics", sel)
		if err != nil {
			return err
		}
		if p := find(ss, "cgroup.processes"); p != nil {
			lastSeen = max(lastSeen, p.TS)
		}
		if s := find(ss, "cgroup.memory.oom_kill"); s == nil || num(s.Value) != 0 {
			return fmt.Errorf("want oom-1's cgroup.memory.oom_kill at 0; have %v", ss)
		}
		return nil
	})
	podman(t, "kill", "--signal", "USR1", "oom-1")
	if code := podman(t, "wait", "oom-1"); code != "137" {
		t.Fatalf("oom-1 exited with %s; want 137 (SIGKILL, the OOM killer)", code)
	}
	podman(t, "rm", "oom-1")
	if _, err := os.Stat(filepath.Join("/sys/fs/cgroup/memory/libpod_parent", "libpod-"+id)); err == nil {
		t.Fatal("oom-1's cgroup outlived podman rm")
	}
	waitFor(t, 60*time.Second, func() error {
		ss, err := a.series("/api/v1/metrics", sel)
		if err != nil {
			return err
		}
		oom, procs := find(ss, "cgroup.memory.oom_kill"), find(ss, "cgroup.processes")
		if procs != nil {
			lastSeen = max(lastSeen, procs.TS)
		}
		if oom == nil || num(oom.Value) != 1 {
			return fmt.Errorf("want oom-1's cgroup.memory.oom_kill at 1; have %v", ss)
		}
		if oom.TS <= lastSeen {
			return fmt.Errorf("the kill was counted at %d by a scan that saw oom-1 (last at %d): not the gone container's path", oom.TS, lastSeen)
		}
		return nil
	})
}
