package confined

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func write(t *testing.T, path, data string, uid int, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(path, uid, uid); err != nil {
		t.Fatal(err)
	}
}

func readAll(t *testing.T, p Policy, path string) (string, error) {
	t.Helper()
	f, err := p.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	return string(b), err
}

func TestPolicy(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("these tests check ownership rules and must run as root (the agent does)")
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "mine"), "hello", 1000, 0o600)
	write(t, filepath.Join(dir, "roots"), "secret", 0, 0o600)
	write(t, filepath.Join(dir, "unreadable"), "x", 1000, 0o200)
	write(t, filepath.Join(dir, "big"), strings.Repeat("x", 100), 1000, 0o644)
	if err := os.Symlink(filepath.Join(dir, "roots"), filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o666); err != nil {
		t.Fatal(err)
	}
	os.Lchown(filepath.Join(dir, "fifo"), 1000, 1000)
	if err := os.Link(filepath.Join(dir, "roots"), filepath.Join(dir, "hardlink")); err != nil {
		t.Fatal(err)
	}

	user := Policy{UID: 1000, MaxSize: 50}
	tests := []struct {
		name    string
		p       Policy
		want    string
		refused string // substring of the refusal reason, "" for success
	}{
		{"mine", user, "hello", ""},
		{"roots", user, "", "owned by uid 0"},
		{"hardlink", user, "", "owned by uid 0"},
		{"unreadable", user, "", "not readable"},
		{"big", user, "", "exceeds the limit"},
		{"link", user, "", "symbolic link"},
		{"fifo", user, "", "not a regular file"},
		{"roots", Policy{UID: 0}, "secret", ""},
		{"big", Policy{UID: 1000}, strings.Repeat("x", 100), ""},
	}
	for _, tt := range tests {
		got, err := readAll(t, tt.p, filepath.Join(dir, tt.name))
		if tt.refused == "" {
			if err != nil || got != tt.want {
				t.Errorf("%s under %+v = %q, %v; want %q", tt.name, tt.p, got, err, tt.want)
			}
			continue
		}
		var re *RefusedError
		if !errors.As(err, &re) || !errors.Is(err, ErrRefused) || !strings.Contains(re.Reason, tt.refused) {
			t.Errorf("%s under %+v: err = %v; want refusal containing %q", tt.name, tt.p, err, tt.refused)
		}
		if got != "" {
			t.Errorf("%s: leaked content %q", tt.name, got)
		}
	}
	if _, err := user.Open("/dev/zero"); !errors.Is(err, ErrRefused) {
		t.Errorf("/dev/zero: err = %v; want refused", err)
	}
	if _, err := user.Open(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing: err = %v; want not exist", err)
	}
}

// TestRootConfinement checks that a path is resolved inside Root: an absolute symlink in a
// directory of the "container" points inside the container, never to the host's file.
func TestRootConfinement(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "run"), 0o755)
	host := t.TempDir()
	write(t, filepath.Join(host, "app.meta"), "host secret", 1000, 0o644)
	if err := os.MkdirAll(filepath.Join(root, host), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(root, host, "app.meta"), "container file", 1000, 0o644)
	// /run/dir -> <host> (absolute): inside the root it must resolve to root/<host>.
	if err := os.Symlink(host, filepath.Join(root, "run", "dir")); err != nil {
		t.Fatal(err)
	}
	got, err := readAll(t, Policy{Root: root, UID: 1000}, "/run/dir/app.meta")
	if err != nil || got != "container file" {
		t.Fatalf("read through root = %q, %v; want the container's file", got, err)
	}
	got, err = readAll(t, Policy{Root: root, UID: 1000}, "/../../../../"+host+"/app.meta")
	if err != nil || got != "container file" {
		t.Fatalf("dot-dot escape = %q, %v; want the container's file", got, err)
	}
}

var nobody = &Cred{UID: 65534, GID: 65534, Groups: []int{65534}}

// openDir makes a directory with the given owner and mode.
func openDir(t *testing.T, path string, uid int, mode os.FileMode) string {
	t.Helper()
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, uid, uid); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	return path
}

// reachable returns a fresh directory that everyone may search (t.TempDir's parent is 0700).
func reachable(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	os.Chmod(filepath.Dir(dir), 0o755)
	os.Chmod(dir, 0o755)
	return dir
}

// TestUnreachablePathSameReason: a path that the process's owner (uid 65534) could not
// resolve is refused with the same reason whether or not anything exists there, for files and
// directories; what it can reach keeps its precise answer.
//
// Security finding 13.
func TestUnreachablePathSameReason(t *testing.T) {
	dir := reachable(t)
	private := openDir(t, filepath.Join(dir, "private"), 0, 0o700) // root-only
	write(t, filepath.Join(private, "exists"), "secret", 65534, 0o644)
	openDir(t, filepath.Join(private, "sub"), 65534, 0o755)
	write(t, filepath.Join(private, "sub", "app"), "secret", 65534, 0o644)
	os.Symlink("/etc", filepath.Join(private, "link"))
	write(t, filepath.Join(dir, "mine"), "hello", 65534, 0o644)

	p := Policy{UID: 65534, Cred: nobody}
	var reasons []string
	for _, name := range []string{"exists", "missing", "sub/app", "nosub/app", "link", "link/passwd", "sub", "../private/exists"} {
		path := filepath.Join(private, name)
		f, err := p.Open(path)
		var re *RefusedError
		if !errors.As(err, &re) || re.Reason != ReasonUnreachable || re.Path != path {
			t.Errorf("Open(%s) = %v, %v; want a refusal %q", name, f, err, ReasonUnreachable)
			continue
		}
		reasons = append(reasons, strings.TrimPrefix(err.Error(), path))
		d, err := p.OpenDir(path)
		if !errors.As(err, &re) || re.Reason != ReasonUnreachable {
			t.Errorf("OpenDir(%s) = %v, %v; want a refusal %q", name, d, err, ReasonUnreachable)
		}
	}
	for _, r := range reasons[1:] {
		if r != reasons[0] {
			t.Errorf("refusals differ: %q and %q", r, reasons[0])
		}
	}
	// The directory itself is found (its parent is searchable) but cannot be searched: no name
	// is ever looked up in it on nobody's behalf.
	if d, err := p.OpenDir(private); !errors.Is(err, ErrRefused) {
		t.Errorf("OpenDir(private) = %v, %v; want refused", d, err)
	}
	// What nobody can reach is answered as before.
	if got, err := readAll(t, p, filepath.Join(dir, "mine")); err != nil || got != "hello" {
		t.Errorf("reachable file = %q, %v", got, err)
	}
	if _, err := p.Open(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("reachable missing file: %v; want not exist", err)
	}
	// Root's view of the same paths is not uniform: the identity is what makes it so.
	if _, err := (Policy{UID: 65534}).Open(filepath.Join(private, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("as root: %v; want not exist", err)
	}
	noThreadKeeps(t, 65534)
}

// noThreadKeeps fails if a thread of the test process still has uid as its fsuid.
func noThreadKeeps(t *testing.T, uid int) {
	t.Helper()
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + task.Name() + "/status")
		if err != nil {
			continue // exited meanwhile
		}
		c, err := ParseCred(b)
		if err != nil {
			t.Fatal(err)
		}
		if c.UID == uid || c.GID == uid {
			t.Errorf("thread %s kept fsuid %d fsgid %d", task.Name(), c.UID, c.GID)
		}
	}
}

// TestOpenAt: names are looked up in a Dir one component at a time, as the Cred, and the
// policy's rules apply to what they name.
func TestOpenAt(t *testing.T) {
	dir := reachable(t)
	write(t, filepath.Join(dir, "mine"), "hello", 65534, 0o644)
	write(t, filepath.Join(dir, "roots"), "secret", 0, 0o644)
	os.Symlink(filepath.Join(dir, "mine"), filepath.Join(dir, "link"))
	syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o666)
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	write(t, filepath.Join(dir, "sub", "f"), "x", 65534, 0o644)
	p := Policy{UID: 65534, Cred: nobody, MaxSize: 10}
	d, err := p.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	names, err := d.Names()
	if err != nil || strings.Join(names, " ") != "fifo link mine roots sub" {
		t.Errorf("Names = %q, %v", names, err)
	}
	for name, want := range map[string]string{
		"roots": "owned by uid 0", "link": "symbolic link", "fifo": "not a regular file",
		"sub/f": "single file name", "..": "single file name", "": "single file name",
	} {
		if _, _, err := p.OpenAt(d, name); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), want) {
			t.Errorf("OpenAt(%q) = %v; want a refusal %q", name, err, want)
		}
	}
	f, st, err := p.OpenAt(d, "mine")
	if err != nil || st.Uid != 65534 || f.Name() != filepath.Join(dir, "mine") {
		t.Fatalf("OpenAt(mine) = %v, %v", st, err)
	}
	f.Close()
	// The Dir stays the directory it was opened as, whatever happens to its path.
	if err := os.Rename(dir, dir+".old"); err != nil {
		t.Fatal(err)
	}
	defer os.Rename(dir+".old", dir)
	os.Mkdir(dir, 0o755)
	if f, _, err := p.OpenAt(d, "mine"); err != nil {
		t.Errorf("OpenAt after the path moved: %v", err)
	} else {
		f.Close()
	}
	if _, err := os.Lstat(filepath.Join(d.FDPath(), "mine")); err != nil {
		t.Errorf("FDPath does not name the directory: %v", err)
	}
	os.Remove(dir)
}

// TestTrustedDirNeedsRootPath: a directory the agent is configured with is opened only if root put
// every component of its path there; a squatted one is refused with the same reason whatever it
// points to.
//
// Security finding 1.
func TestTrustedDirNeedsRootPath(t *testing.T) {
	dir := reachable(t)
	shm := openDir(t, filepath.Join(dir, "shm"), 0, 0o1777|os.ModeSticky) // like /dev/shm
	os.Chmod(shm, 0o777|os.ModeSticky)
	private := openDir(t, filepath.Join(dir, "private"), 0, 0o700)
	write(t, filepath.Join(private, "shadow"), "root:*:2022", 0, 0o600)
	openDir(t, filepath.Join(shm, "squat"), 65534, 0o755)
	openDir(t, filepath.Join(shm, "rootdir"), 0, 0o755)
	closed := openDir(t, filepath.Join(dir, "closed"), 0, 0o755)
	openDir(t, filepath.Join(closed, "users"), 65534, 0o755) // put there by root
	openDir(t, filepath.Join(closed, "users", "sub"), 65534, 0o755)
	symlink := func(target, path string, uid int) {
		if err := os.Symlink(target, path); err != nil {
			t.Fatal(err)
		}
		os.Lchown(path, uid, uid)
	}
	symlink(private, filepath.Join(shm, "linkA"), 65534)
	symlink(filepath.Join(dir, "nowhere"), filepath.Join(shm, "linkB"), 65534)
	symlink(filepath.Join(shm, "rootdir"), filepath.Join(shm, "rootlink"), 0)
	symlink("../shm/rootdir", filepath.Join(closed, "rel"), 0)
	symlink(filepath.Join(closed, "loop"), filepath.Join(closed, "loop"), 0)
	write(t, filepath.Join(closed, "file"), "x", 0, 0o644)

	for _, tt := range []struct{ path, refused string }{
		{"shm/squat", "squatted: a directory of uid 65534"},
		{"shm/linkA", "squatted: a symbolic link of uid 65534"},
		{"shm/linkB", "squatted: a symbolic link of uid 65534"},
		{"closed/users/sub", "squatted: a directory of uid 65534"},
		{"closed/loop", "too many symbolic links"},
		{"shm/rootdir", ""},
		{"shm/rootlink", ""},
		{"closed/rel", ""},
		{"closed/users", ""},
		{"closed/users/../rel/./", ""},
	} {
		d, err := OpenTrustedDir(filepath.Join(dir, tt.path))
		if tt.refused == "" {
			if err != nil {
				t.Errorf("OpenTrustedDir(%s) = %v; want it opened", tt.path, err)
			} else {
				d.Close()
			}
			continue
		}
		var re *RefusedError
		if !errors.As(err, &re) || !strings.Contains(re.Reason, tt.refused) {
			t.Errorf("OpenTrustedDir(%s) = %v; want refused %q", tt.path, err, tt.refused)
		}
		if strings.Contains(fmt.Sprint(err), "private") || strings.Contains(fmt.Sprint(err), "nowhere") {
			t.Errorf("OpenTrustedDir(%s) = %v: tells where the symlink points", tt.path, err)
		}
	}
	// The same answer whether the squatter's symlink points at something or at nothing.
	_, e1 := OpenTrustedDir(filepath.Join(shm, "linkA"))
	_, e2 := OpenTrustedDir(filepath.Join(shm, "linkB"))
	if r1, r2 := e1.(*RefusedError).Reason, e2.(*RefusedError).Reason; r1 != r2 {
		t.Errorf("reasons differ: %q and %q", r1, r2)
	}
	if _, err := OpenTrustedDir(filepath.Join(dir, "missing", "x")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing: %v; want not exist", err)
	}
	if _, err := OpenTrustedDir(filepath.Join(closed, "file")); !errors.Is(err, syscall.ENOTDIR) {
		t.Errorf("file: %v; want ENOTDIR", err)
	}

	// RootPlaced: who can have put a file where it is.
	write(t, filepath.Join(shm, "rootdir", "a"), "", 0, 0o644)
	write(t, filepath.Join(shm, "root1"), "", 0, 0o644)
	write(t, filepath.Join(shm, "theirs"), "", 65534, 0o644)
	os.Link(filepath.Join(shm, "root1"), filepath.Join(shm, "root2"))
	write(t, filepath.Join(closed, "users", "rootfile"), "", 0, 0o644)
	for _, tt := range []struct {
		dir, name string
		want      bool
	}{
		{"shm/rootdir", "a", true},
		{"shm", "theirs", false},
		{"shm", "root1", false}, // two links now
		{"closed/users", "rootfile", false},
	} {
		d, err := OpenTrustedDir(filepath.Join(dir, tt.dir))
		if err != nil {
			t.Fatal(err)
		}
		_, st, err := Policy{}.OpenAt(d, tt.name)
		if err != nil {
			t.Fatal(err)
		}
		if got := d.RootPlaced(st); got != tt.want {
			t.Errorf("RootPlaced(%s/%s) = %v; want %v", tt.dir, tt.name, got, tt.want)
		}
		d.Close()
	}
}

func TestParseCred(t *testing.T) {
	status := "Name:\tsleep\nUid:\t1000\t1001\t1002\t1003\nGid:\t2000\t2001\t2002\t2003\nFDSize:\t64\nGroups:\t4 24 2000 \n"
	c, err := ParseCred([]byte(status))
	if err != nil || c.UID != 1003 || c.GID != 2003 || fmt.Sprint(c.Groups) != "[4 24 2000]" {
		t.Errorf("ParseCred = %+v, %v; want fs ids 1003/2003 and groups [4 24 2000]", c, err)
	}
	c, err = ParseCred([]byte("Uid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nGroups:\n"))
	if err != nil || c.UID != 0 || len(c.Groups) != 0 {
		t.Errorf("ParseCred(no groups) = %+v, %v", c, err)
	}
	for _, bad := range []string{
		"", "Uid:\t1\t1\t1\t1\nGid:\t1\t1\t1\t1\n", "Uid:\t1\t1\t1\nGid:\t1\t1\t1\t1\nGroups:\n",
		"Uid:\t1\t1\t1\tx\nGid:\t1\t1\t1\t1\nGroups:\n", "Uid:\t1\t1\t1\t4294967295\nGid:\t1\t1\t1\t1\nGroups:\n",
		"Uid:\t1\t1\t1\t1\nGid:\t1\t1\t1\t1\nGroups:\t-1\n",
	} {
		if c, err := ParseCred([]byte(bad)); err == nil {
			t.Errorf("ParseCred(%q) = %+v; want an error", bad, c)
		}
	}
	self, err := ProcessCred("", os.Getpid())
	if err != nil || self.UID != os.Geteuid() {
		t.Errorf("ProcessCred(self) = %+v, %v", self, err)
	}
	if _, err := ProcessCred("/proc", 1<<30); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ProcessCred(no such pid) = %v; want not exist", err)
	}
}

func FuzzParseCred(f *testing.F) {
	f.Add([]byte("Uid:\t1000\t1001\t1002\t1003\nGid:\t2000\t2001\t2002\t2003\nGroups:\t4 24 2000 \n"))
	f.Add([]byte("Uid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nGroups:\n"))
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseCred(b)
		if err != nil {
			if strings.ContainsAny(err.Error(), "\"\\") {
				t.Fatalf("error %q quotes its input", err)
			}
			return
		}
		for _, id := range append([]int{c.UID, c.GID}, c.Groups...) {
			if id < 0 || id >= 1<<32-1 {
				t.Fatalf("id %d out of range", id)
			}
		}
		if len(c.Groups) > maxGroups {
			t.Fatalf("%d groups", len(c.Groups))
		}
	})
}
