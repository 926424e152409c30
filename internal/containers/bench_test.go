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
