package containers

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// BenchmarkIdentify is the cost of naming one container cgroup from a cached containers.json of
// 500 containers (the scan asks once per new cgroup, and every 5 scans while one is unnamed),
// and of a service's cgroup, which is no container's.
func BenchmarkIdentify(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("the state files must be root's")
	}
	var list []string
	for i := range 500 {
		id := fmt.Sprintf("%064x", i+1)
		list = append(list, fmt.Sprintf(`{"id":%q,"names":["web-%d"],"metadata":"{\"name\":\"web-%d\",\"image-name\":\"localhost/shop:1\"}"}`, id, i, i))
	}
	r := b.TempDir()
	os.Chmod(r, 0o755)
	file := filepath.Join(r, "var/lib/containers/storage/overlay-containers/containers.json")
	os.MkdirAll(filepath.Dir(file), 0o700)
	os.WriteFile(file, []byte("["+strings.Join(list, ",")+"]"), 0o600)
	res := New(Options{Root: r})
	cg := "libpod_parent.libpod-" + fmt.Sprintf("%064x", 250)
	if _, ok := res.Identify(cg); !ok {
		b.Fatal("not identified")
	}
	b.Run("container", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			res.Identify(cg)
		}
	})
	b.Run("service", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			res.Identify("system.nginx")
		}
	})
}

// BenchmarkIdentifyContainerd is the cost of naming a containerd container's cgroup (a
// Kubernetes pod's, under the systemd driver) among 500 task bundles, from the index; the index
// is rebuilt at most once a second on a miss and every 10 s (BenchmarkRebuildOCI).
func BenchmarkIdentifyContainerd(b *testing.B) {
	res, cg := containerdTree(b, 500)
	res.Identify(cg)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, ok := res.Identify(cg); !ok {
			b.Fatal("not identified")
		}
	}
}

// BenchmarkRebuildOCI is one rebuild of the index of 500 containerd task bundles that did not
// change (listings and a stat per container; no file read again).
func BenchmarkRebuildOCI(b *testing.B) {
	res, _ := containerdTree(b, 500)
	res.Identify("none")
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		res.mu.Lock()
		res.rebuildOCI()
		res.mu.Unlock()
	}
}

func containerdTree(b *testing.B, n int) (*Resolver, string) {
	if os.Geteuid() != 0 {
		b.Skip("the state files must be root's")
	}
	r := b.TempDir()
	os.Chmod(r, 0o755)
	var cg string
	for i := range n {
		id := fmt.Sprintf("%064x", i+1)
		dir := filepath.Join(r, "run/containerd/io.containerd.runtime.v2.task/k8s.io", id)
		os.MkdirAll(dir, 0o700)
		spec := fmt.Sprintf(`{"annotations":{"io.kubernetes.cri.container-type":"container","io.kubernetes.cri.container-name":"app",
			"io.kubernetes.cri.sandbox-name":"web-%d","io.kubernetes.cri.sandbox-namespace":"shop"},
			"linux":{"cgroupsPath":"kubepods-burstable-pod%d.slice:cri-containerd:%s"}}`, i, i, id)
		os.WriteFile(filepath.Join(dir, "config.json"), []byte(spec), 0o600)
		if i == n/2 {
			cg = fmt.Sprintf("kubepods.kubepods-burstable.kubepods-burstable-pod%d.cri-containerd-%s", i, id)
		}
	}
	return New(Options{Root: r}), cg
}

// BenchmarkRebuildCRIO is one rebuild of the index of 500 CRI-O containers in containers/storage
// that did not change (a listing, and a stat of each container's directory and of its
// userdata directory; no file read again).
func BenchmarkRebuildCRIO(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("the state files must be root's")
	}
	r := b.TempDir()
	os.Chmod(r, 0o755)
	for i := range 500 {
		id := fmt.Sprintf("%064x", i+1)
		dir := filepath.Join(r, "var/lib/containers/storage/overlay-containers", id, "userdata")
		os.MkdirAll(dir, 0o700)
		spec := fmt.Sprintf(`{"annotations":{"io.container.manager":"cri-o","io.kubernetes.cri-o.ContainerType":"container",
			"io.kubernetes.container.name":"app","io.kubernetes.pod.name":"web-%d","io.kubernetes.pod.namespace":"shop"},
			"linux":{"cgroupsPath":"kubepods-burstable-pod%d.slice:crio:%s"}}`, i, i, id)
		os.WriteFile(filepath.Join(dir, "config.json"), []byte(spec), 0o600)
	}
	res := New(Options{Root: r})
	if _, ok := res.Identify(fmt.Sprintf("kubepods.kubepods-burstable.kubepods-burstable-pod7.crio-%064x", 8)); !ok {
		b.Fatal("the fixture's container is not named")
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		res.mu.Lock()
		res.rebuildOCI()
		res.mu.Unlock()
	}
}
