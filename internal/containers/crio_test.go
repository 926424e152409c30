package containers

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// crioCase is one container of the CRI-O fixture (testdata/kube-crio/cases.json): where its
// processes are, and the labels it must get.
type crioCase struct {
	Driver, QOS, Pod, Namespace, Container, Image string
	CgroupDir                                     string `json:"cgroup_dir"`
	ContainerID                                   string `json:"container_id"`
}

func crioCases(t testing.TB) []crioCase {
	t.Helper()
	var cases []crioCase
	if err := json.Unmarshal(readFixture(t, "kube-crio/cases.json"), &cases); err != nil {
		t.Fatal(err)
	}
	return cases
}

// crioRoot copies the CRI-O fixture of driver (CRI-O's containers/storage under
// var/lib/containers/storage, as CRI-O writes it) into a fresh root.
func crioRoot(t *testing.T, driver string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the runtime state must be root's: run as root") // the suite runs as root
	}
	root := t.TempDir()
	os.Chmod(root, 0o755)
	if err := os.CopyFS(root, os.DirFS(filepath.Join("testdata/kube-crio", driver))); err != nil {
		t.Fatal(err)
	}
	return root
}

// Kubernetes pods run by CRI-O (Guaranteed, Burstable and BestEffort; the cgroupfs and the
// systemd driver): each pod's sandbox and container, and a cgroup inside a container, are
// named from CRI-O's own copy of the container's spec in containers/storage, with pod,
// namespace, Kubernetes container name and image; a Podman container's spec in the same storage
// (annotated like CRI-O's, but made by libpod) names nothing.
func TestCRIOLayouts(t *testing.T) {
	cases := crioCases(t)
	if len(cases) != 12 {
		t.Fatalf("%d cases; want 2 drivers × 3 QoS classes × sandbox and container", len(cases))
	}
	roots := map[string]string{}
	for _, c := range cases {
		if roots[c.Driver] == "" {
			roots[c.Driver] = crioRoot(t, c.Driver)
		}
		r := New(Options{Root: roots[c.Driver]})
		want := Identity{Name: c.Container, Image: c.Image, ID: c.ContainerID, Pod: c.Pod, Namespace: c.Namespace}
		for _, cg := range []string{c.CgroupDir, CgroupName(c.CgroupDir), CgroupName(c.CgroupDir) + ".inner"} {
			if id, ok := r.Identify(cg); !ok || id != want {
				t.Errorf("%s/%s: Identify(%q) = %+v, %v; want %+v", c.Driver, c.QOS, cg, id, ok, want)
			}
		}
		if !strings.Contains(c.CgroupDir, "crio-") {
			t.Errorf("%s: not CRI-O's cgroup name", c.CgroupDir)
		}
	}
	podman := strings.Repeat("0c", 32)
	for driver, root := range roots {
		r := New(Options{Root: root})
		for _, cg := range []string{"libpod_parent.libpod-" + podman, "machine.libpod-" + podman} {
			if id, ok := r.Identify(cg); ok {
				t.Errorf("%s: Podman's container %s named from its spec: %+v", driver, cg, id)
			}
		}
	}
}

// CRI-O's state wins over runc's for the same container (runc's labels hold the spec's
// annotations, but a crun-run container has none), and --crio-storage moves where it is read.
func TestCRIOBeforeRunc(t *testing.T) {
	c := crioCases(t)[3] // cgroupfs, burstable, the container
	root := crioRoot(t, c.Driver)
	moved := filepath.Join(root, "srv/crio-storage")
	os.MkdirAll(filepath.Dir(moved), 0o755)
	if err := os.Rename(filepath.Join(root, "var/lib/containers/storage"), moved); err != nil {
		t.Fatal(err)
	}
	full := strings.TrimPrefix(filepath.Base(c.CgroupDir), "crio-")
	dir := filepath.Join(root, "run/runc", full)
	os.MkdirAll(dir, 0o700)
	os.WriteFile(filepath.Join(dir, "state.json"), []byte(`{"id":"`+full+`","config":{"cgroups":{"path":"`+c.CgroupDir+`"}}}`), 0o600)
	if id, ok := New(Options{Root: root}).Identify(c.CgroupDir); !ok || id.Name != full || id.Pod != "" {
		t.Errorf("without CRI-O's storage: %+v, %v; want runc's id only", id, ok)
	}
	if id, ok := New(Options{Root: root, CRIOStorage: "/srv/crio-storage"}).Identify(c.CgroupDir); !ok || id.Name != c.Container || id.Pod != c.Pod {
		t.Errorf("with --crio-storage: %+v, %v; want %s in pod %s", id, ok, c.Container, c.Pod)
	}
}

// A container started after the index was built is named once its config.json is written
// (its userdata directory changed), not left unnamed by a first look before CRI-O wrote it.
func TestCRIONewContainer(t *testing.T) {
	c := crioCases(t)[1] // cgroupfs, guaranteed, the container
	root := crioRoot(t, c.Driver)
	full := strings.TrimPrefix(filepath.Base(c.CgroupDir), "crio-")
	cfg := filepath.Join(root, "var/lib/containers/storage/overlay-containers", full, "userdata/config.json")
	spec, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(cfg)
	now := time.Unix(1000, 0)
	r := New(Options{Root: root, Now: func() time.Time { return now }})
	if _, ok := r.Identify(c.CgroupDir); ok {
		t.Fatal("named before its config.json exists")
	}
	time.Sleep(10 * time.Millisecond) // a later ctime for the directory
	if err := os.WriteFile(cfg, spec, 0o600); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Second)
	if id, ok := r.Identify(c.CgroupDir); !ok || id.Name != c.Container {
		t.Errorf("once CRI-O wrote its config.json: %+v, %v", id, ok)
	}
}

// A symlink where userdata or config.json belongs, a FIFO, and a file others may write name
// nothing and block nothing.
func TestCRIOUntrusted(t *testing.T) {
	root := crioRoot(t, "cgroupfs")
	store := filepath.Join(root, "var/lib/containers/storage/overlay-containers")
	good, err := os.ReadFile(filepath.Join(store, strings.Repeat("d4", 32), "userdata/config.json"))
	if err != nil {
		t.Fatal(err)
	}
	mk := func(id string) string {
		d := filepath.Join(store, id, "userdata")
		os.MkdirAll(d, 0o700)
		return filepath.Join(d, "config.json")
	}
	spec := func(id string) []byte {
		return []byte(strings.ReplaceAll(string(good), strings.Repeat("d4", 32), id))
	}
	ids := map[string]string{"link": strings.Repeat("1f", 32), "fifo": strings.Repeat("2f", 32), "open": strings.Repeat("3f", 32), "dirlink": strings.Repeat("4f", 32)}
	elsewhere := filepath.Join(root, "elsewhere.json")
	os.WriteFile(elsewhere, spec(ids["link"]), 0o600)
	os.Symlink(elsewhere, mk(ids["link"]))
	unix.Mkfifo(mk(ids["fifo"]), 0o600)
	os.WriteFile(mk(ids["open"]), spec(ids["open"]), 0o666)
	os.Chmod(mk(ids["open"]), 0o666)
	victim := filepath.Join(root, "victim")
	os.MkdirAll(victim, 0o700)
	os.WriteFile(filepath.Join(victim, "config.json"), spec(ids["dirlink"]), 0o600)
	os.MkdirAll(filepath.Join(store, ids["dirlink"]), 0o700)
	os.Symlink(victim, filepath.Join(store, ids["dirlink"], "userdata"))
	r := New(Options{Root: root})
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, ok := r.Identify("kubepods.burstable.pod9e8d7c6b-5a49-4382-a1b0-c9d8e7f6a5b4.crio-" + strings.Repeat("d4", 32)); !ok {
			t.Error("the trusted container is not named")
		}
		for what, id := range ids {
			if got, ok := r.Identify("kubepods.burstable.pod9e8d7c6b-5a49-4382-a1b0-c9d8e7f6a5b4.crio-" + id); ok {
				t.Errorf("%s: named %+v from untrusted state", what, got)
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Identify blocked on a FIFO")
	}
}

func TestParseCRIOConfig(t *testing.T) {
	c := crioCases(t)[9] // systemd, besteffort, the container
	full := strings.TrimPrefix(strings.TrimSuffix(filepath.Base(c.CgroupDir), ".scope"), "crio-")
	b := readFixture(t, filepath.Join("kube-crio", c.Driver, "var/lib/containers/storage/overlay-containers", full, "userdata/config.json"))
	cg, id, err := ParseCRIOConfig(b, full)
	if err != nil || cg != CgroupName(c.CgroupDir) || id != (Identity{Name: c.Container, Image: c.Image, ID: c.ContainerID, Pod: c.Pod, Namespace: c.Namespace}) {
		t.Errorf("CRI-O's spec: %q, %+v, %v", cg, id, err)
	}
	if _, _, err := ParseCRIOConfig(b, strings.Repeat("ab", 32)); err == nil {
		t.Error("a spec whose io.kubernetes.cri-o.ContainerID is another container's was taken")
	}
	ok := `"io.kubernetes.cri-o.ContainerType":"container","io.kubernetes.pod.name":"p"`
	for _, bad := range []string{
		`{"annotations":{` + ok + `,"io.container.manager":"libpod"},"linux":{"cgroupsPath":"/a/b"}}`, // Podman's
		`{"annotations":{"io.kubernetes.pod.name":"p"},"linux":{"cgroupsPath":"/a/b"}}`,               // not CRI-O's
		`{"annotations":{` + ok + `},"linux":{"cgroupsPath":"/"}}`,
		`{"annotations":{` + ok + `},"linux":{"cgroupsPath":7}}`,
		`[`,
	} {
		if _, _, err := ParseCRIOConfig([]byte(bad), "x"); err == nil {
			t.Errorf("ParseCRIOConfig(%s) did not fail", bad)
		}
	}
	if _, _, err := ParseCRIOConfig([]byte(`{"annotations":{`+ok+`},"linux":{"cgroupsPath":"/a"}}`), "../x"); err == nil {
		t.Error("an id with a slash was taken")
	}
	// An older CRI-O without io.container.manager: taken, a sandbox named POD.
	cg, id, err = ParseCRIOConfig([]byte(`{"annotations":{"io.kubernetes.cri-o.ContainerType":"sandbox","io.kubernetes.pod.name":"p","io.kubernetes.pod.namespace":"n"},"linux":{"cgroupsPath":"/kubepods/podu/crio-x"}}`), "x")
	if err != nil || cg != "kubepods.podu.crio-x" || id != (Identity{Name: "POD", ID: "x", Pod: "p", Namespace: "n"}) {
		t.Errorf("an older CRI-O's sandbox: %q, %+v, %v", cg, id, err)
	}
}
