package containers

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestSystemdCgroupPath(t *testing.T) {
	for in, want := range map[string]string{
		"kubepods-burstable-pod1_2.slice:cri-containerd:ab": "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1_2.slice/cri-containerd-ab.scope",
		"kubepods-pod9.slice:crio:cd":                       "/kubepods.slice/kubepods-pod9.slice/crio-cd.scope",
		"system.slice:docker:ef":                            "/system.slice/docker-ef.scope",
		"-.slice:x:y":                                       "/x-y.scope",
		"machine.slice::z":                                  "/machine.slice/z.scope",
		"/kubepods/burstable/pod1/ab":                       "/kubepods/burstable/pod1/ab",
		"/default/web-1":                                    "/default/web-1",
	} {
		if got := SystemdCgroupPath(in); got != want {
			t.Errorf("SystemdCgroupPath(%q) = %q; want %q", in, got, want)
		}
	}
}

func TestCgroupName(t *testing.T) {
	for in, want := range map[string]string{
		"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice/cri-containerd-ab.scope": "kubepods.kubepods-burstable.kubepods-burstable-pod1.cri-containerd-ab",
		"/default/web-1":              "default.web-1",
		"/system.slice/nginx.service": "system.nginx",
		"/user.slice/user-0.slice/x":  "user",
		"/":                           "",
		"/a/../b/./c":                 "a.b.c",
		"/docker/" + dockID:           "docker." + dockID,
	} {
		if got := CgroupName(in); got != want {
			t.Errorf("CgroupName(%q) = %q; want %q", in, got, want)
		}
	}
}

func TestParseOCISpec(t *testing.T) {
	cg, id, err := ParseOCISpec([]byte(`{"linux":{"cgroupsPath":"/default/web-1"}}`), "default", "web-1")
	if err != nil || cg != "default.web-1" || id != (Identity{Name: "web-1", ID: "web-1", Namespace: "default"}) {
		t.Errorf("plain containerd container: %q, %+v, %v", cg, id, err)
	}
	ann := `"annotations":{"io.kubernetes.cri.container-type":"container","io.kubernetes.cri.container-name":"nginx",
		"io.kubernetes.cri.sandbox-name":"web-0","io.kubernetes.cri.sandbox-namespace":"shop","io.kubernetes.cri.image-name":"nginx:1"}`
	cg, id, err = ParseOCISpec([]byte(`{`+ann+`,"linux":{"cgroupsPath":"kubepods-burstable-pod1.slice:cri-containerd:`+dockID+`"}}`), "k8s.io", dockID)
	if err != nil || cg != "kubepods.kubepods-burstable.kubepods-burstable-pod1.cri-containerd-"+dockID ||
		id != (Identity{Name: "nginx", Image: "nginx:1", ID: dockID[:12], Pod: "web-0", Namespace: "shop"}) {
		t.Errorf("CRI container: %q, %+v, %v", cg, id, err)
	}
	for _, bad := range []string{`{}`, `{"linux":{"cgroupsPath":"/"}}`, `[`, `{"linux":{"cgroupsPath":7}}`} {
		if _, _, err := ParseOCISpec([]byte(bad), "default", "x"); err == nil {
			t.Errorf("ParseOCISpec(%s) did not fail", bad)
		}
	}
	if _, _, err := ParseOCISpec([]byte(`{"linux":{"cgroupsPath":"/a"}}`), "default", "../x"); err == nil {
		t.Error("an id with a slash was taken")
	}
}

func TestParseRuncState(t *testing.T) {
	b := `{"id":"c1","config":{"labels":["bundle=/run/b","io.kubernetes.pod.name=api-1","io.kubernetes.pod.namespace=prod",
		"io.kubernetes.container.name=app","io.kubernetes.cri-o.ImageName=quay.io/x:2"],"cgroups":{"name":"c1","parent":"kubepods-besteffort-pod3.slice","scope_prefix":"crio"}}}`
	cg, id, err := ParseRuncState([]byte(b), "c1")
	if err != nil || cg != "kubepods.kubepods-besteffort.kubepods-besteffort-pod3.crio-c1" ||
		id != (Identity{Name: "app", Image: "quay.io/x:2", ID: "c1", Pod: "api-1", Namespace: "prod"}) {
		t.Errorf("CRI-O container under runc: %q, %+v, %v", cg, id, err)
	}
	cg, id, err = ParseRuncState([]byte(`{"id":"c2","config":{"cgroups":{"path":"/mine/c2"}}}`), "c2")
	if err != nil || cg != "mine.c2" || id != (Identity{Name: "c2", ID: "c2"}) {
		t.Errorf("plain runc container: %q, %+v, %v", cg, id, err)
	}
	if _, _, err := ParseRuncState([]byte(`{"id":"c3","config":{"cgroups":{"path":"/mine/c2"}}}`), "c2"); err == nil {
		t.Error("a state.json of another id was taken")
	}
	cg, id, err = ParseCrunStatus([]byte(`{"pid":1,"cgroup-path":"/machine.slice/x.scope","bundle":"/b"}`), "x")
	if err != nil || cg != "machine.x" || id.Name != "x" {
		t.Errorf("crun: %q, %+v, %v", cg, id, err)
	}
}

// ociRoot makes a root holding containerd's state with one task bundle per spec, and runc's
// state, as containerd and runc write them (root's, mode 0700/0600).
func ociRoot(t *testing.T, specs map[string]string, runc map[string]string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the runtime state must be root's: run as root") // the suite runs as root
	}
	root := t.TempDir()
	os.Chmod(root, 0o755)
	for nsid, spec := range specs {
		dir := filepath.Join(root, "run/containerd/io.containerd.runtime.v2.task", nsid)
		os.MkdirAll(dir, 0o700)
		if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(spec), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for id, state := range runc {
		dir := filepath.Join(root, "run/runc", id)
		os.MkdirAll(dir, 0o700)
		if err := os.WriteFile(filepath.Join(dir, "state.json"), []byte(state), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// A containerd container is named by its id and namespace, from its task bundle, whichever
// form of its cgroup is asked, and so is a cgroup inside it; one only runc knows, by its id.
func TestResolverContainerd(t *testing.T) {
	root := ociRoot(t, map[string]string{"default/web-1": `{"linux":{"cgroupsPath":"/default/web-1"}}`},
		map[string]string{"solo": `{"id":"solo","config":{"cgroups":{"path":"/runc/solo"}}}`})
	r := New(Options{Root: root})
	want := Identity{Name: "web-1", ID: "web-1", Namespace: "default"}
	for _, cg := range []string{"default.web-1", "/default/web-1", "default.web-1.inner"} {
		if id, ok := r.Identify(cg); !ok || id != want {
			t.Errorf("Identify(%q) = %+v, %v; want %+v", cg, id, ok, want)
		}
	}
	if id, ok := r.Identify("runc.solo"); !ok || id != (Identity{Name: "solo", ID: "solo"}) {
		t.Errorf("runc's container: %+v, %v", id, ok)
	}
	for _, cg := range []string{"default", "default.web-10", "system.nginx", "user"} {
		if id, ok := r.Identify(cg); ok {
			t.Errorf("Identify(%q) = %+v; want none", cg, id)
		}
	}
}

// A container started after the index was built is named a second later (the index is
// rebuilt on a miss at most once a second), and a removed one is forgotten.
func TestResolverContainerdNewContainer(t *testing.T) {
	root := ociRoot(t, nil, nil)
	now := time.Unix(1000, 0)
	r := New(Options{Root: root, Now: func() time.Time { return now }})
	if _, ok := r.Identify("default.late"); ok {
		t.Fatal("named before it exists")
	}
	dir := filepath.Join(root, "run/containerd/io.containerd.runtime.v2.task/default/late")
	os.MkdirAll(dir, 0o700)
	os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"linux":{"cgroupsPath":"/default/late"}}`), 0o600)
	if _, ok := r.Identify("default.late"); ok {
		t.Error("the index was rebuilt within a second of the last rebuild")
	}
	now = now.Add(time.Second)
	if id, ok := r.Identify("default.late"); !ok || id.Name != "late" {
		t.Errorf("a new container: %+v, %v", id, ok)
	}
	os.RemoveAll(dir)
	now = now.Add(ociStale)
	if id, ok := r.Identify("default.late"); ok {
		t.Errorf("a removed container is still named: %+v", id)
	}
}

// A containerd container cannot pose as a Podman or Docker container by making a cgroup in its
// own named like theirs: the outermost container (containerd's) names it.
func TestResolverOuterOCIWins(t *testing.T) {
	root := ociRoot(t, map[string]string{"default/evil": `{"linux":{"cgroupsPath":"/default/evil"}}`}, nil)
	cfg := filepath.Join(root, "var/lib/docker/containers", dockID, "config.v2.json")
	os.MkdirAll(filepath.Dir(cfg), 0o700)
	os.WriteFile(cfg, []byte(`{"ID":"`+dockID+`","Name":"/db","Config":{"Image":"pg"}}`), 0o600)
	r := New(Options{Root: root})
	if id, ok := r.Identify("docker." + dockID); !ok || id.Name != "db" {
		t.Fatalf("the Docker container itself: %+v, %v", id, ok)
	}
	if id, ok := r.Identify("default.evil.docker." + dockID); !ok || id.Name != "evil" {
		t.Errorf("a cgroup in containerd's evil named like Docker's db: %+v, %v; want evil", id, ok)
	}
}

// State that is not root's alone, a symlink or a FIFO where a bundle's config.json belongs,
// and a namespace that is a symlink name nothing, and block nothing.
func TestResolverOCIUntrusted(t *testing.T) {
	root := ociRoot(t, map[string]string{"default/ok": `{"linux":{"cgroupsPath":"/default/ok"}}`}, nil)
	tasks := filepath.Join(root, "run/containerd/io.containerd.runtime.v2.task")
	mk := func(ns, id string) string {
		d := filepath.Join(tasks, ns, id)
		os.MkdirAll(d, 0o700)
		return filepath.Join(d, "config.json")
	}
	os.WriteFile(mk("default", "open"), []byte(`{"linux":{"cgroupsPath":"/default/open"}}`), 0o666)
	os.Chmod(mk("default", "open"), 0o666)
	other := filepath.Join(root, "elsewhere.json")
	os.WriteFile(other, []byte(`{"linux":{"cgroupsPath":"/default/link"}}`), 0o600)
	os.Symlink(other, mk("default", "link"))
	unix.Mkfifo(mk("default", "fifo"), 0o600)
	os.MkdirAll(filepath.Join(root, "victim/x"), 0o700)
	os.WriteFile(filepath.Join(root, "victim/x/config.json"), []byte(`{"linux":{"cgroupsPath":"/ns/x"}}`), 0o600)
	os.Symlink(filepath.Join(root, "victim"), filepath.Join(tasks, "ns"))
	r := New(Options{Root: root})
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, ok := r.Identify("default.ok"); !ok {
			t.Error("the trusted container is not named")
		}
		for _, cg := range []string{"default.open", "default.link", "default.fifo", "ns.x"} {
			if id, ok := r.Identify(cg); ok {
				t.Errorf("%s named %+v from untrusted state", cg, id)
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Identify blocked on a FIFO")
	}
}
