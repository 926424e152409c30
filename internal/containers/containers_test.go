package containers

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const (
	probeID = "ae12be5e3f80a914197473db58500c6867bfa52ae0ba2bbed86a67dba24e661d"
	dockID  = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
)

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestFromCgroup(t *testing.T) {
	for _, c := range []struct {
		in string
		rt Runtime
	}{
		{"libpod_parent.libpod-" + probeID, Podman},
		{"/libpod_parent/libpod-" + probeID, Podman},
		{"machine.libpod-" + probeID, Podman},
		{"/machine.slice/libpod-" + probeID + ".scope", Podman},
		{"libpod_parent.libpod-conmon-" + probeID, NoRuntime},
		{"docker." + dockID, Docker},
		{"/docker/" + dockID, Docker},
		{"system.docker-" + dockID, Docker},
		{"/system.slice/docker-" + dockID + ".scope", Docker},
		{"other." + dockID, NoRuntime},
		{dockID, NoRuntime},
		{"system.nginx", NoRuntime},
		{"docker." + strings.ToUpper(dockID), NoRuntime},
		{"libpod_parent.libpod-" + probeID[:63], NoRuntime},
		{"", NoRuntime},
		{"x.docker." + dockID + ".scope.y", Docker},
	} {
		rt, id := FromCgroup(c.in)
		if rt != c.rt || (rt != NoRuntime) != (len(id) == 64) {
			t.Errorf("FromCgroup(%q) = %v, %q; want %v", c.in, rt, id, c.rt)
		}
	}
}

// A container cannot pose as another by making a cgroup inside its own named like the other's:
// the outermost container's id is taken.
func TestFromCgroupOutermost(t *testing.T) {
	for _, in := range []string{
		"libpod_parent.libpod-" + probeID + ".libpod-" + dockID,
		"/libpod_parent/libpod-" + probeID + "/docker/" + dockID,
		"libpod_parent.libpod-" + probeID + ".docker-" + dockID,
	} {
		if rt, id := FromCgroup(in); rt != Podman || id != probeID {
			t.Errorf("FromCgroup(%q) = %v, %s; want the outer podman container", in, rt, id)
		}
	}
}

func TestParsePodmanContainers(t *testing.T) {
	m, err := ParsePodmanContainers(readFixture(t, "podman-containers.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := Identity{Name: "probe-1", Image: "localhost/cantal-ctr:probe", ID: "ae12be5e3f80"}
	if got := m[probeID]; got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if len(m) != 1 {
		t.Errorf("%d containers, want 1", len(m))
	}
	if _, err := ParsePodmanContainers([]byte(`{"not":"a list"}`)); err == nil {
		t.Error("an object parsed as a list")
	}
}

func TestNamesAreData(t *testing.T) {
	long := strings.Repeat("é", 200)
	b := []byte(`[{"id":"` + probeID + `","names":["x"],"metadata":"{\"name\":\"web\\n1\\u202e\\u0000\",\"image-name\":\"` + long + `\"}"}]`)
	m, err := ParsePodmanContainers(b)
	if err != nil {
		t.Fatal(err)
	}
	got := m[probeID]
	if got.Name != "web?1??" {
		t.Errorf("name %q: control and format characters kept", got.Name)
	}
	if len(got.Image) > maxImage || !strings.HasPrefix(long, got.Image) {
		t.Errorf("image of %d bytes not cut at a rune to %d", len(got.Image), maxImage)
	}
}

func TestParseDockerConfig(t *testing.T) {
	b := readFixture(t, "docker-config.v2.json")
	got, err := ParseDockerConfig(b, dockID)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Identity{Name: "web-1", Image: "shop:1", ID: "0123456789ab"}); got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	other := strings.Repeat("f", 64)
	if _, err := ParseDockerConfig(b, other); err == nil {
		t.Error("a config whose ID is another container's was taken")
	}
}

// root makes a runtime state tree under a fresh directory and returns it.
func root(t *testing.T) string {
	r := t.TempDir()
	os.Chmod(r, 0o755)
	return r
}

func write(t *testing.T, path string, b []byte, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, mode); err != nil {
		t.Fatal(err)
	}
	os.Chmod(path, mode)
}

func requireRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the state files must be root's: run as root") // the suite runs as root
	}
}

func TestResolverPodman(t *testing.T) {
	requireRoot(t)
	r := root(t)
	file := filepath.Join(r, "var/lib/containers/storage/overlay-containers/containers.json")
	write(t, file, []byte("[]"), 0o600)
	now := time.Unix(1000, 0)
	res := New(Options{Root: r, Now: func() time.Time { return now }})
	cg := "libpod_parent.libpod-" + probeID
	if _, ok := res.Identify(cg); ok {
		t.Fatal("identified from an empty list")
	}
	write(t, file, readFixture(t, "podman-containers.json"), 0o600)
	if _, ok := res.Identify(cg); ok {
		t.Error("re-read within a second")
	}
	now = now.Add(2 * time.Second)
	got, ok := res.Identify(cg)
	if !ok || got.Name != "probe-1" || got.ID != probeID[:12] {
		t.Errorf("after the change: %+v, %v", got, ok)
	}
	if _, ok := res.Identify("system.nginx"); ok {
		t.Error("a service identified as a container")
	}
}

func TestResolverDocker(t *testing.T) {
	requireRoot(t)
	r := root(t)
	write(t, filepath.Join(r, "var/lib/docker/containers", dockID, "config.v2.json"), readFixture(t, "docker-config.v2.json"), 0o600)
	res := New(Options{Root: r})
	got, ok := res.Identify("docker." + dockID)
	if !ok || got.Name != "web-1" || got.Image != "shop:1" {
		t.Errorf("got %+v, %v", got, ok)
	}
}

// The runtime's state is trusted only when root alone may write it and nothing on the way is
// a symlink: a state directory writable by others, a group-writable file, a symlinked file or
// directory, a FIFO, and an oversized file all leave the container unnamed.
func TestResolverDistrustsState(t *testing.T) {
	requireRoot(t)
	fix := readFixture(t, "podman-containers.json")
	cg := "libpod_parent.libpod-" + probeID
	for name, setup := range map[string]func(t *testing.T, r, file string){
		"group-writable file": func(t *testing.T, r, file string) { write(t, file, fix, 0o620) },
		"world-writable dir": func(t *testing.T, r, file string) {
			write(t, file, fix, 0o600)
			os.Chmod(filepath.Dir(file), 0o777)
		},
		"not root's": func(t *testing.T, r, file string) {
			write(t, file, fix, 0o600)
			os.Chown(file, 1000, 1000)
		},
		"symlinked file": func(t *testing.T, r, file string) {
			write(t, filepath.Join(r, "elsewhere.json"), fix, 0o600)
			os.MkdirAll(filepath.Dir(file), 0o700)
			os.Symlink(filepath.Join(r, "elsewhere.json"), file)
		},
		"symlinked dir": func(t *testing.T, r, file string) {
			write(t, filepath.Join(r, "other", "containers.json"), fix, 0o600)
			os.MkdirAll(filepath.Dir(filepath.Dir(file)), 0o700)
			os.Symlink(filepath.Join(r, "other"), filepath.Dir(file))
		},
		"fifo": func(t *testing.T, r, file string) {
			os.MkdirAll(filepath.Dir(file), 0o700)
			if err := mkfifo(file); err != nil {
				t.Fatal(err)
			}
		},
		"oversized": func(t *testing.T, r, file string) {
			big := append([]byte(nil), fix...)
			big = append(big[:len(big)-1], []byte(strings.Repeat(" ", maxPodmanFile)+"]")...)
			write(t, file, big, 0o600)
		},
	} {
		t.Run(name, func(t *testing.T) {
			r := root(t)
			setup(t, r, filepath.Join(r, "var/lib/containers/storage/overlay-containers/containers.json"))
			if got, ok := New(Options{Root: r}).Identify(cg); ok {
				t.Errorf("identified as %+v", got)
			}
		})
	}
	// The same tree, trusted, is read: the cases above fail for their one fault.
	r := root(t)
	write(t, filepath.Join(r, "var/lib/containers/storage/overlay-containers/containers.json"), fix, 0o600)
	if _, ok := New(Options{Root: r}).Identify(cg); !ok {
		t.Error("a trusted tree not read")
	}
}
