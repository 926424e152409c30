package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/testsupport/podmantest"
)

// The containers of a real Podman pod (its infra container and two more) share one network
// namespace; the agent puts that namespace's interfaces on one of their cgroups only, as
// cAdvisor does, so that a sum over the pod's containers is the namespace's own counter (the
// kernel's /proc/PID/net/dev of the infra container's process), not three times it. Its pod
// and agent are its own and it measures only its pod's traffic: a test of the second line.
func TestPodNetworkCountedOnce(t *testing.T) {
	aside(t)
	image := ctrImage(t)
	const pod = "cantal-pod-1"
	exec.Command("podman", "pod", "rm", "-f", pod).Run() // a leftover of an interrupted run
	// A pod's infra container takes no --ulimit and runc here cannot raise the limits it
	// inherits: the pod's podman calls read a containers.conf (the packaged one) that gives
	// every container the limits the other tests pass with --ulimit.
	conf, err := os.ReadFile("/usr/share/containers/containers.conf")
	if err != nil {
		t.Fatal(err)
	}
	confFile := filepath.Join(t.TempDir(), "containers.conf")
	ulimits := "[containers]\ndefault_ulimits = [\"nofile=1024:1024\", \"nproc=4096:4096\"]\n"
	if err := os.WriteFile(confFile, []byte(strings.Replace(string(conf), "[containers]\n", ulimits, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	pm := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("podman", append(append([]string{}, podmantest.Base...), args...)...)
		cmd.Env = append(os.Environ(), "CONTAINERS_CONF="+confFile)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("podman %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	// No pause image here (no catatonit, nothing pulled): the pod's infra container is the
	// test's own image, doing nothing.
	pm("pod", "create", "--name", pod, "--infra-image", image, "--infra-command", "/ctrapp")
	t.Cleanup(func() { exec.Command("podman", "pod", "rm", "-f", "-t", "0", pod).Run() })
	for _, name := range []string{pod + "-a", pod + "-b"} {
		pm("run", "-d", "--pod", pod, "--name", name, "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=4096:4096",
			image, "-udp", "10.88.0.1:9")
	}
	infra := strings.TrimSpace(podman(t, "pod", "inspect", "--format", "{{.InfraContainerID}}", pod))
	pid := strings.TrimSpace(podman(t, "inspect", "--format", "{{.State.Pid}}", infra))
	members := map[string]bool{pod + "-a": true, pod + "-b": true}
	infraName := strings.TrimSpace(podman(t, "inspect", "--format", "{{.Name}}", infra))
	members[infraName] = true
	a := startAgent(t)
	waitFor(t, 120*time.Second, func() error {
		ss, err := a.series("/api/v1/metrics", `{metric="cgroup.net.tx.bytes",interface="eth0"}`)
		if err != nil {
			return err
		}
		// The kernel's counter, read after the agent's: the agent's sum is at most it, and
		// behind by at most what 2 senders send in a few scans (2 × 100 kB/s).
		kernel, err := netDevTx(pid, "eth0")
		if err != nil {
			return err
		}
		var sum float64
		var on []string
		for _, s := range ss {
			if members[s.Labels["container"]] {
				sum += num(s.Value)
				on = append(on, s.Labels["container"])
			}
		}
		if len(on) == 0 {
			return fmt.Errorf("no eth0 series on the pod's containers %v yet", members)
		}
		if kernel < 2e6 {
			return fmt.Errorf("the pod has sent %d bytes; waiting for 2 MB", kernel)
		}
		if len(on) != 1 || sum > float64(kernel) || sum < float64(kernel)-2e6 {
			return fmt.Errorf("eth0 tx bytes summed over the pod's containers %v = %.0f; the namespace's own counter is %d", on, sum, kernel)
		}
		return nil
	})
}

// netDevTx is the transmitted bytes of iface in /proc/PID/net/dev.
func netDevTx(pid, iface string) (uint64, error) {
	b, err := os.ReadFile("/proc/" + pid + "/net/dev")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		name, rest, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(name) != iface {
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 9 {
			return 0, fmt.Errorf("short net/dev line %q", line)
		}
		return strconv.ParseUint(f[8], 10, 64)
	}
	return 0, fmt.Errorf("no %s in /proc/%s/net/dev", iface, pid)
}
