package build

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestImageLoadsInDocker: docker load takes the same archive podman loads (its Docker
// manifest.json beside the OCI layout), under the name and tag podman gives it, and the agent in
// it runs under Docker. dockerd is started by the test with its own data root, exec root and
// socket, and this machine's settings (no iptables, no bridge, cgroupfs, bounded ulimits).
func TestImageLoadsInDocker(t *testing.T) {
	dockerd := need(t, "dockerd")
	docker := need(t, "docker")
	need(t, "containerd")
	archive, err := Image(ImageOptions{Version: "1.0.0~test", Date: stamp, Agent: agentBinary(t), Arch: runtime.GOARCH, Out: work})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	host := "unix://" + filepath.Join(dir, "docker.sock")
	var logs bytes.Buffer
	d := exec.Command(dockerd, "--data-root", filepath.Join(dir, "data"), "--exec-root", filepath.Join(dir, "exec"),
		"--pidfile", filepath.Join(dir, "docker.pid"), "-H", host,
		"--iptables=false", "--ip6tables=false", "--bridge=none", "--exec-opt", "native.cgroupdriver=cgroupfs",
		"--default-ulimit", "nofile=1024:1024", "--default-ulimit", "nproc=4096:4096")
	d.Stdout, d.Stderr = &logs, &logs
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- d.Wait() }()
	t.Cleanup(func() {
		d.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			d.Process.Kill()
			<-exited
		}
	})
	until(t, "dockerd answers", 90*time.Second, func() (bool, string) {
		select {
		case err := <-exited:
			t.Fatalf("dockerd exited: %v\n%s", err, logs.String())
		default:
		}
		out, err := exec.Command(docker, "-H", host, "version", "--format", "{{.Server.Version}}").CombinedOutput()
		return err == nil, string(out)
	})

	loaded := run(t, docker, "-H", host, "load", "-i", archive)
	m := regexp.MustCompile(`Loaded image: (\S+)`).FindStringSubmatch(loaded)
	if m == nil {
		t.Fatalf("docker load: %s", loaded)
	}
	if image := m[1]; !strings.Contains(image, "cantal-agent:1.0.0-test") {
		t.Errorf("docker loaded it as %q, want cantal-agent:1.0.0-test", image)
	}
	out := run(t, docker, "-H", host, "run", "--rm", "--network", "none", m[1], "--version")
	if !strings.HasPrefix(out, "cantal-agent version test ") { // the version the test binaries carry
		t.Errorf("cantal-agent --version in docker: %q, want the image's agent (version test)", out)
	}
}
