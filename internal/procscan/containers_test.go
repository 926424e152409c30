package procscan

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/containers"
	"github.com/cantal-go/cantal/internal/series"
)

// A container's cgroup series and its processes' series carry its name, image and short id
// from the runtime's state; the cgroup label stays the kernel's.
func TestContainerLabels(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the runtime state must be root's: run as root") // the suite runs as root
	}
	const id = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	proc, sys := copyTree(t, "testdata/proc"), copyTree(t, "testdata/sys")
	if err := os.WriteFile(filepath.Join(proc, "4242/cgroup"), []byte("4:memory:/docker/"+id+"\n2:cpu,cpuacct:/\n1:name=systemd:/\n0::/\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mem := filepath.Join(sys, "fs/cgroup/memory/docker")
	if err := os.Rename(filepath.Join(mem, "abc123"), filepath.Join(mem, id)); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	os.Chmod(root, 0o755)
	cfg := filepath.Join(root, "var/lib/docker/containers", id, "config.v2.json")
	os.MkdirAll(filepath.Dir(cfg), 0o700)
	if err := os.WriteFile(cfg, []byte(`{"ID":"`+id+`","Name":"/web-1","Config":{"Image":"shop:1"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	p := NewProcesses(Options{Proc: proc, Sys: sys, PageSize: 4096, Containers: containers.New(containers.Options{Root: root})})
	r := series.NewRecorder()
	for range 2 {
		if err := p.Collect(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	ctr := `"container":"web-1","container_id":"0123456789ab","image":"shop:1"`
	for _, k := range []string{
		`{"cgroup":"docker.` + id + `",` + ctr + `,"metric":"cgroup.memory.usage"}`,
		`{"cgroup":"docker.` + id + `",` + ctr + `,"metric":"cgroup.processes"}`,
		`{"cgroup":"docker.` + id + `",` + ctr + `,"metric":"process.memory.rss","pid":"4242","process":"sleep"}`,
	} {
		if _, ok := r.Values[k]; !ok {
			t.Errorf("no series %s", k)
		}
	}
	for k := range r.Values {
		if k == `{"cgroup":"system.nginx","metric":"cgroup.processes"}` {
			return
		}
	}
	t.Errorf("a service's series changed: %v", r.Values)
}

// A container renamed (podman rename rewrites containers.json) shows under its new name
// within ctrRefresh scans: its series are remade with the new labels.
func TestContainerRenamed(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the runtime state must be root's: run as root") // the suite runs as root
	}
	const id = "ae12be5e3f80a914197473db58500c6867bfa52ae0ba2bbed86a67dba24e661d"
	proc, sys := copyTree(t, "testdata/proc"), copyTree(t, "testdata/sys")
	if err := os.WriteFile(filepath.Join(proc, "4242/cgroup"), []byte("4:memory:/libpod_parent/libpod-"+id+"\n0::/\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mem := filepath.Join(sys, "fs/cgroup/memory")
	os.MkdirAll(filepath.Join(mem, "libpod_parent"), 0o755)
	if err := os.Rename(filepath.Join(mem, "docker/abc123"), filepath.Join(mem, "libpod_parent/libpod-"+id)); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	os.Chmod(root, 0o755)
	state := filepath.Join(root, "var/lib/containers/storage/overlay-containers/containers.json")
	os.MkdirAll(filepath.Dir(state), 0o700)
	name := func(n string) {
		t.Helper()
		b := `[{"id":"` + id + `","names":["` + n + `"],"metadata":"{\"name\":\"` + n + `\",\"image-name\":\"localhost/shop:1\"}"}]`
		if err := os.WriteFile(state, []byte(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	name("web-1")
	p := NewProcesses(Options{Proc: proc, Sys: sys, PageSize: 4096, Containers: containers.New(containers.Options{Root: root})})
	key := func(n string) string {
		return `{"cgroup":"libpod_parent.libpod-` + id + `","container":"` + n + `","container_id":"ae12be5e3f80","image":"localhost/shop:1","metric":"cgroup.memory.usage"}`
	}
	r := series.NewRecorder()
	for range 2 {
		p.Collect(context.Background(), r)
	}
	if _, ok := r.Values[key("web-1")]; !ok {
		t.Fatalf("no %s", key("web-1"))
	}
	name("web-2")
	time.Sleep(1100 * time.Millisecond) // containers.json is looked at no more than once a second
	for i := 0; i < ctrRefresh+1; i++ {
		r = series.NewRecorder()
		p.Collect(context.Background(), r)
		if _, ok := r.Values[key("web-2")]; ok {
			return
		}
	}
	t.Errorf("still not renamed after %d scans: %v", ctrRefresh+1, r.Values)
}
