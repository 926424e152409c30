// Package podmantest runs real Podman containers for tests, as this machine needs them: runc
// (crun refuses a cgroup-v1 hybrid host), the cgroupfs manager (no systemd), and images built
// locally from a static Go program (never pulled). The e2e and web UI tests share it.
//
// Functions take a *testing.T and fail it on error; they are safe to call from one test's
// goroutine. Containers and images a test makes are removed when it ends.
package podmantest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// Base are the arguments every podman command gets here.
var Base = []string{"--runtime", "runc", "--cgroup-manager", "cgroupfs"}

// Ulimits are the limits every container gets (this machine's podman needs them explicit).
var Ulimits = []string{"--ulimit", "nofile=1024:1024", "--ulimit", "nproc=4096:4096"}

// Podman runs podman with Base and returns its trimmed output.
func Podman(t testing.TB, args ...string) string {
	t.Helper()
	out, err := Try(args...)
	if err != nil {
		t.Fatalf("podman %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// Try runs podman with Base and returns its trimmed output and error.
func Try(args ...string) (string, error) {
	out, err := exec.Command("podman", append(append([]string{}, Base...), args...)...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

var seq atomic.Int64

// Image builds an image from the Go package pkg (a path such as "./e2e/ctrapp", relative to
// the module root repo) as the static binary /name, the image's entrypoint, with the files
// extra adds to the root file system (it may make symlinks and FIFOs: tar keeps them). The
// image is imported with podman and removed when t ends; its name is returned.
func Image(t testing.TB, repo, pkg, name string, extra func(rootfs string)) string {
	t.Helper()
	if _, err := exec.LookPath("podman"); err != nil {
		t.Fatal("podman is not installed: run scripts/install-deps.sh")
	}
	dir := t.TempDir()
	rootfs := filepath.Join(dir, "rootfs")
	build := exec.Command("go", "build", "-o", filepath.Join(rootfs, name), pkg)
	build.Dir, build.Env = repo, append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", pkg, err, out)
	}
	if extra != nil {
		extra(rootfs)
	}
	tarball := filepath.Join(dir, "rootfs.tar")
	if out, err := exec.Command("tar", "-C", rootfs, "-cf", tarball, ".").CombinedOutput(); err != nil {
		t.Fatalf("tar: %v\n%s", err, out)
	}
	image := fmt.Sprintf("localhost/cantal-test-%s:%d-%d", strings.ToLower(name), os.Getpid(), seq.Add(1))
	Podman(t, "import", "--change", fmt.Sprintf(`ENTRYPOINT ["/%s"]`, name), tarball, image)
	t.Cleanup(func() { exec.Command("podman", "rmi", "-f", image).Run() })
	return image
}

// Run starts a detached container named name from image with Ulimits (those flags does not
// set itself with --ulimit KEY=...) and the extra podman run flags, the program's arguments
// after the image; it returns the full id and removes the container (and a leftover of an
// interrupted run by that name) when t ends.
func Run(t testing.TB, name, image string, flags []string, args ...string) string {
	t.Helper()
	Try("rm", "-f", "-t", "0", name)
	a := []string{"run", "-d", "--name", name}
	for i := 0; i+1 < len(Ulimits); i += 2 {
		key, _, _ := strings.Cut(Ulimits[i+1], "=")
		set := false
		for j := 0; j+1 < len(flags); j++ {
			set = set || flags[j] == "--ulimit" && strings.HasPrefix(flags[j+1], key+"=")
		}
		if !set {
			a = append(a, Ulimits[i], Ulimits[i+1])
		}
	}
	a = append(append(append(a, flags...), image), args...)
	id := Podman(t, a...)
	t.Cleanup(func() { Try("rm", "-f", "-t", "0", name) })
	if len(id) != 64 {
		t.Fatalf("podman run printed %q; want a container id", id)
	}
	return id
}
