package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// ctrRootfs builds the static e2e/ctrapp as the whole root of a container (never pulled) and
// returns the directory and a tar of it.
func ctrRootfs(t *testing.T) (dir, tarball string) {
	t.Helper()
	base := t.TempDir()
	dir = filepath.Join(base, "rootfs")
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "ctrapp"), "./e2e/ctrapp")
	build.Dir, build.Env = "..", append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build ctrapp: %v\n%s", err, out)
	}
	tarball = filepath.Join(base, "rootfs.tar")
	if out, err := exec.Command("tar", "-C", dir, "-cf", tarball, ".").CombinedOutput(); err != nil {
		t.Fatalf("tar: %v\n%s", err, out)
	}
	return dir, tarball
}

// rootDir makes a directory for a daemon's state below parent (/var/lib or /run: root's, not
// writable by others, as the agent requires of the runtime state it trusts; t.TempDir is
// under the world-writable /tmp), removed at the end of the test.
func rootDir(t *testing.T, parent, pattern string) string {
	t.Helper()
	d, err := os.MkdirTemp(parent, pattern)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// daemon starts a daemon, stopped with SIGTERM (SIGKILL after 30 s) at the end of the test;
// ready is polled until it answers.
func daemon(t *testing.T, name string, ready func() error, args ...string) {
	t.Helper()
	var logs lockedBuffer
	d := exec.Command(need(t, name), args...)
	d.Stdout, d.Stderr = &logs, &logs
	d.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
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
	waitFor(t, 90*time.Second, func() error {
		select {
		case err := <-exited:
			t.Fatalf("%s exited: %v\n%s", name, err, logs.String())
		default:
		}
		return ready()
	})
}

// checkHeldAtHalfCPU waits until the container's series (matched by sel) carry want's labels
// and show it held at a CPU quota of 0.5: about 500 ms of CPU a second, a rising throttled
// count, a working set within its usage, as TestPodmanContainerByName checks Podman's.
func checkHeldAtHalfCPU(t *testing.T, a *agent, sel string, want map[string]string) {
	t.Helper()
	waitFor(t, 90*time.Second, func() error {
		ss, err := a.series("/api/v1/metrics", sel)
		if err != nil {
			return err
		}
		cpu, mem, proc := find(ss, "cgroup.cpu.usage_ms"), find(ss, "cgroup.memory.usage"), find(ss, "process.cpu.user_ms")
		thr, ws := find(ss, "cgroup.cpu.throttled_periods"), find(ss, "cgroup.memory.working_set")
		if cpu == nil || mem == nil || proc == nil || thr == nil || ws == nil {
			return fmt.Errorf("want cgroup.cpu.usage_ms, .throttled_periods, cgroup.memory.usage, .working_set and process.cpu.user_ms of %s; have %v", sel, ss)
		}
		for _, s := range []*Series{cpu, mem, proc, thr, ws} {
			for k, v := range want {
				if s.Labels[k] != v {
					return fmt.Errorf("%s: %s=%q; want %q (labels %v)", s.Labels["metric"], k, s.Labels[k], v, s.Labels)
				}
			}
		}
		if proc.Labels["process"] != "ctrapp" {
			return fmt.Errorf("the container's process is %q; want ctrapp", proc.Labels["process"])
		}
		if cpu.Rate == nil || *cpu.Rate < 350 || *cpu.Rate > 650 {
			return fmt.Errorf("the container's CPU = %v ms/s; want 500±150 (quota 0.5)", cpu.Rate)
		}
		if thr.Rate == nil || *thr.Rate < 3 {
			return fmt.Errorf("its throttled periods rise at %v/s; want ≥ 3/s", thr.Rate)
		}
		if num(ws.Value) <= 0 || num(ws.Value) > num(mem.Value) {
			return fmt.Errorf("its working set %v; want in (0, usage %v]", ws.Value, mem.Value)
		}
		return nil
	})
}

// promtoolClean checks /metrics with promtool: it parses, and no lint finding names a
// container family.
func promtoolClean(t *testing.T, body string) {
	t.Helper()
	check := exec.Command(need(t, "promtool"), "check", "metrics")
	check.Stdin = strings.NewReader(body)
	if out, err := check.CombinedOutput(); err != nil {
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 { // 3: lint findings only
			t.Errorf("promtool check metrics: %v\n%s", err, out)
		} else if strings.Contains(string(out), "container_") {
			t.Errorf("promtool lint findings on the container families:\n%s", out)
		}
	}
}

// A real Docker container: dockerd started by the test (its own data root, exec root and
// socket; no iptables, no bridge, the cgroupfs driver), an image imported from a locally built
// root (docker import), a container run as web-d at --cpus 0.5: it appears by name and image
// with its short id, held at ~0.5 CPU and throttled, and under cAdvisor's names on /metrics.
func TestDockerContainerByName(t *testing.T) {
	quiet(t)
	docker := need(t, "docker")
	need(t, "containerd")
	_, tarball := ctrRootfs(t)
	data := rootDir(t, "/var/lib", "cantal-e2e-docker-")
	run := rootDir(t, "/run", "cantal-e2e-docker-")
	host := "unix://" + filepath.Join(run, "docker.sock")
	dk := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(docker, append([]string{"-H", host}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	daemon(t, "dockerd", func() error {
		out, err := exec.Command(docker, "-H", host, "version", "--format", "{{.Server.Version}}").CombinedOutput()
		if err != nil {
			return fmt.Errorf("docker version: %v: %s", err, out)
		}
		return nil
	}, "--data-root", data, "--exec-root", filepath.Join(run, "exec"), "--pidfile", filepath.Join(run, "docker.pid"),
		"-H", host, "--iptables=false", "--ip6tables=false", "--bridge=none", "--exec-opt", "native.cgroupdriver=cgroupfs",
		"--default-ulimit", "nofile=1024:1024", "--default-ulimit", "nproc=4096:4096")
	image := fmt.Sprintf("cantal-e2e-ctr:%d", os.Getpid())
	dk("import", "--change", `ENTRYPOINT ["/ctrapp"]`, tarball, image)
	id := dk("run", "-d", "--name", "web-d", "--network", "none", "--cpus", "0.5", image, "-burn")
	t.Cleanup(func() { exec.Command(docker, "-H", host, "rm", "-f", "web-d").Run() })
	if len(id) != 64 {
		t.Fatalf("docker run printed %q; want a container id", id)
	}
	a := startAgent(t, "--docker-root", data)
	checkHeldAtHalfCPU(t, a, `{container="web-d"}`, map[string]string{"container": "web-d", "image": image,
		"container_id": id[:12], "cgroup": "docker." + id})
	code, body := a.raw("GET", "/metrics", "")
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	lbl := fmt.Sprintf(`{id="/docker/%s",image=%q,name="web-d"}`, id, image)
	for _, name := range []string{"container_cpu_usage_seconds_total", "container_memory_working_set_bytes",
		"container_cpu_cfs_throttled_periods_total", "container_cpu_cfs_periods_total", "container_threads"} {
		if !strings.Contains(body, "\n"+name+lbl+" ") {
			t.Errorf("/metrics lacks %s%s", name, lbl)
		}
	}
	promtoolClean(t, body)
}

// A real containerd container: containerd started by the test (its own root, state and
// socket, CRI off), a container made with ctr from a locally built root (--rootfs, no image)
// in namespace cantal-e2e at --cpus 0.5: it appears named by its containerd id, with its
// namespace, held at ~0.5 CPU and throttled.
func TestContainerdContainerByName(t *testing.T) {
	quiet(t)
	ctr := need(t, "ctr")
	rootfs, _ := ctrRootfs(t)
	root := rootDir(t, "/var/lib", "cantal-e2e-containerd-")
	state := rootDir(t, "/run", "cantal-e2e-containerd-")
	sock := filepath.Join(state, "containerd.sock")
	cfg := filepath.Join(root, "config.toml")
	if err := os.WriteFile(cfg, []byte("version = 2\ndisabled_plugins = [\"io.containerd.grpc.v1.cri\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const ns = "cantal-e2e"
	c := func(args ...string) (string, error) {
		out, err := exec.Command(ctr, append([]string{"--address", sock, "--namespace", ns}, args...)...).CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	daemon(t, "containerd", func() error {
		if out, err := c("version"); err != nil {
			return fmt.Errorf("ctr version: %v: %s", err, out)
		}
		return nil
	}, "--config", cfg, "--root", root, "--state", state, "--address", sock)
	if out, err := c("run", "-d", "--rootfs", "--cpus", "0.5", rootfs, "web-c", "/ctrapp", "-burn"); err != nil {
		t.Fatalf("ctr run: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		c("task", "kill", "-s", "SIGKILL", "web-c")
		for i := 0; i < 100; i++ {
			if _, err := c("task", "delete", "web-c"); err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		c("container", "delete", "web-c")
		rmCgroups(ns)
	})
	a := startAgent(t, "--containerd-state", state)
	checkHeldAtHalfCPU(t, a, `{container="web-c"}`, map[string]string{"container": "web-c", "namespace": ns,
		"container_id": "web-c", "cgroup": ns + ".web-c"})
	code, body := a.raw("GET", "/metrics", "")
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	if lbl := `{id="/cantal-e2e/web-c",image="",name="web-c"}`; !strings.Contains(body, "\ncontainer_cpu_usage_seconds_total"+lbl+" ") {
		t.Errorf("/metrics lacks container_cpu_usage_seconds_total%s", lbl)
	}
	promtoolClean(t, body)
}

// A container run by plain runc (no engine: a bundle made with runc spec, cgroupsPath
// /cantal-e2e-runc/<id>, a CPU quota of 0.5) is named from runc's state.json by its id, held
// at ~0.5 CPU and throttled.
func TestRuncContainerByID(t *testing.T) {
	quiet(t)
	runc := need(t, "runc")
	rootfs, _ := ctrRootfs(t)
	bundle := t.TempDir()
	if out, err := exec.Command(runc, "spec", "--bundle", bundle).CombinedOutput(); err != nil {
		t.Fatalf("runc spec: %v\n%s", err, out)
	}
	id := fmt.Sprintf("cantal-e2e-%d", os.Getpid())
	b, err := os.ReadFile(filepath.Join(bundle, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var spec map[string]any
	if err := json.Unmarshal(b, &spec); err != nil {
		t.Fatal(err)
	}
	spec["root"] = map[string]any{"path": rootfs, "readonly": true}
	proc := spec["process"].(map[string]any)
	proc["terminal"], proc["args"] = false, []string{"/ctrapp", "-burn"}
	linux := spec["linux"].(map[string]any)
	linux["cgroupsPath"] = "/cantal-e2e-runc/" + id
	linux["resources"] = map[string]any{"cpu": map[string]any{"quota": 50000, "period": 100000}}
	if b, err = json.Marshal(spec); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	// The container keeps runc's stdio (no terminal): a file, not a pipe that would stay open.
	out, err := os.Create(filepath.Join(t.TempDir(), "runc.out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	start := exec.Command(runc, "run", "-d", "--bundle", bundle, id)
	start.Stdout, start.Stderr = out, out
	t.Cleanup(func() {
		exec.Command(runc, "delete", "-f", id).Run()
		rmCgroups("cantal-e2e-runc")
	})
	if err := start.Run(); err != nil {
		b, _ := os.ReadFile(out.Name())
		t.Fatalf("runc run: %v\n%s", err, b)
	}
	a := startAgent(t)
	checkHeldAtHalfCPU(t, a, fmt.Sprintf(`{container=%q}`, id), map[string]string{"container": id,
		"container_id": id, "cgroup": "cantal-e2e-runc." + id})
}

// rmCgroups removes the cgroup /name, left empty by a runtime, from every hierarchy.
func rmCgroups(name string) {
	dirs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", name))
	if d := filepath.Join("/sys/fs/cgroup", name); fileExists(d) {
		dirs = append(dirs, d)
	}
	for _, d := range dirs {
		var all []string
		filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				all = append(all, p)
			}
			return nil
		})
		for i := len(all) - 1; i >= 0; i-- {
			os.Remove(all[i])
		}
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
