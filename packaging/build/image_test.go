package build

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// podmanArgs are how this machine runs podman (runc, cgroupfs, bounded ulimits).
var podmanArgs = []string{"--runtime", "runc", "--cgroup-manager", "cgroupfs"}

// hostView is what an agent reports of the host.
type hostView struct {
	processes int
	memTotal  string
	cpus      int
	mounts    []string
}

var (
	memTotalRe = regexp.MustCompile(`(?m)^node_memory_MemTotal_bytes(?:\{[^}]*\})? (\S+)`)
	cpuIdleRe  = regexp.MustCompile(`(?m)^node_cpu_seconds_total\{[^}]*mode="idle"[^}]*\}`)
	fsSizeRe   = regexp.MustCompile(`(?m)^node_filesystem_size_bytes\{[^}]*mountpoint="([^"]*)"`)
)

func view(t *testing.T, addr string, exited <-chan error, logs *bytes.Buffer) hostView {
	t.Helper()
	st := waitStatus(t, addr, 3, exited, logs)
	metrics := get(t, "http://"+addr+"/metrics")
	v := hostView{processes: st.Counts.Processes, cpus: len(cpuIdleRe.FindAllString(metrics, -1))}
	if m := memTotalRe.FindStringSubmatch(metrics); m != nil {
		v.memTotal = m[1]
	}
	for _, m := range fsSizeRe.FindAllStringSubmatch(metrics, -1) {
		v.mounts = append(v.mounts, m[1])
	}
	slices.Sort(v.mounts)
	v.mounts = slices.Compact(v.mounts)
	return v
}

// TestImageUnderPodmanReportsTheHost builds the image, loads it with podman load, runs it as
// README documents (host PID and network namespaces, the host's / at /host, its /proc and /sys, read-only,
// two capabilities) and compares its view with an agent run directly on the host: the same
// MemTotal, CPUs and file systems, and process counts within the churn of two scans.
func TestImageUnderPodmanReportsTheHost(t *testing.T) {
	podman := need(t, "podman")
	need(t, "runc")
	start := time.Now()
	archive, err := Image(ImageOptions{Version: "1.0.0~test", Date: stamp, Agent: agentBinary(t), Arch: runtime.GOARCH, Out: work})
	if err != nil {
		t.Fatal(err)
	}
	loaded := run(t, podman, "load", "-i", archive)
	m := regexp.MustCompile(`Loaded image(?:\(s\))?: (\S+)`).FindStringSubmatch(loaded)
	if m == nil {
		t.Fatalf("podman load: %s", loaded)
	}
	image := m[1]
	if !strings.Contains(image, "cantal-agent:1.0.0-test") {
		t.Errorf("loaded as %q, want cantal-agent:1.0.0-test", image)
	}
	t.Cleanup(func() { exec.Command(podman, "rmi", "-f", image).Run() })
	t.Logf("image built and loaded in %v", time.Since(start).Round(time.Millisecond))

	// The agent in the container.
	name := fmt.Sprintf("cantal-test-%d", os.Getpid())
	caddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	args := append(slices.Clone(podmanArgs), "run", "--rm", "--name", name,
		"--ulimit", "nofile=1024:1024", "--ulimit", "nproc=4096:4096",
		"--pid", "host", "--network", "host",
		"--cap-drop", "all", "--cap-add", "SYS_PTRACE,DAC_READ_SEARCH",
		"-v", "/:/host:ro,rslave", "-v", "/proc:/host/proc:ro", "-v", "/sys:/host/sys:ro",
		image, "--proc", "/host/proc", "--sys", "/host/sys",
		"--listen", caddr, "--state-dir", "", "--no-bpf", "--interval", "1s")
	ccmd := exec.Command(podman, args...)
	var clog bytes.Buffer
	ccmd.Stdout, ccmd.Stderr = &clog, &clog
	if err := ccmd.Start(); err != nil {
		t.Fatal(err)
	}
	cexit := make(chan error, 1)
	go func() { cexit <- ccmd.Wait() }()
	t.Cleanup(func() {
		exec.Command(podman, append(slices.Clone(podmanArgs), "stop", "-t", "10", name)...).Run()
		select {
		case <-cexit:
		case <-time.After(30 * time.Second):
			ccmd.Process.Kill()
		}
	})

	// The same binary on the host.
	haddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	hcmd := exec.Command(agentBinary(t), "--listen", haddr, "--state-dir", "", "--no-bpf", "--interval", "1s")
	var hlog bytes.Buffer
	hcmd.Stdout, hcmd.Stderr = &hlog, &hlog
	if err := hcmd.Start(); err != nil {
		t.Fatal(err)
	}
	hexit := make(chan error, 1)
	go func() { hexit <- hcmd.Wait() }()
	t.Cleanup(func() { hcmd.Process.Signal(syscall.SIGTERM); <-hexit })

	c := view(t, caddr, cexit, &clog)
	h := view(t, haddr, hexit, &hlog)
	t.Logf("container: %d processes, MemTotal %s, %d CPUs, mounts %v", c.processes, c.memTotal, c.cpus, c.mounts)
	t.Logf("host:      %d processes, MemTotal %s, %d CPUs, mounts %v", h.processes, h.memTotal, h.cpus, h.mounts)
	if c.memTotal == "" || c.memTotal != h.memTotal {
		t.Errorf("MemTotal: container %q, host %q", c.memTotal, h.memTotal)
	}
	if c.cpus == 0 || c.cpus != h.cpus {
		t.Errorf("CPUs: container %d, host %d", c.cpus, h.cpus)
	}
	// File systems: the same mount table (pid 1's). A mount the container could not statfs
	// through /host/proc/1/root must be named in its problems: on this machine pid 1 is the
	// sandbox's init, whose root even the host's root may not enter.
	if !slices.Contains(c.mounts, "/") {
		t.Errorf("the container reports no / file system: %v", c.mounts)
	}
	problems := get(t, "http://"+caddr+"/api/v1/status")
	for _, m := range c.mounts {
		if !slices.Contains(h.mounts, m) {
			t.Errorf("the container reports %s, the host does not (its own file system?)", m)
		}
	}
	for _, m := range h.mounts {
		if !slices.Contains(c.mounts, m) && !strings.Contains(problems, `"source":"`+m+`"`) {
			t.Errorf("the container neither reports %s nor says why", m)
		}
	}
	// Processes: this machine runs other tests; counts taken a second apart differ by the
	// churn. Sample both agents together until they agree within two scans' churn.
	var samples []string
	agree := false
	for i := 0; i < 10 && !agree; i++ {
		cs, err1 := getStatus(context.Background(), caddr)
		hs, err2 := getStatus(context.Background(), haddr)
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		cp, hp := cs.Counts.Processes, hs.Counts.Processes
		samples = append(samples, fmt.Sprintf("%d/%d", cp, hp))
		// A quiet machine has a dozen or two user processes (kernel threads are not counted):
		// agreement is within the churn, and more than the one or two the container would
		// see in a PID namespace of its own.
		agree = cp > 3 && abs(cp-hp) <= max(3, hp/10)
		time.Sleep(time.Second)
	}
	t.Logf("processes, container/host: %v", samples)
	if !agree {
		t.Errorf("process counts never agreed: %v", samples)
	}
	if t.Failed() {
		t.Logf("container log:\n%s", clog.String())
	}
	t.Logf("podman test took %v", time.Since(start).Round(time.Millisecond))
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
