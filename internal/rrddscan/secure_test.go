package rrddscan

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/confined"
	"github.com/cantal-go/cantal/internal/series"
	"github.com/cantal-go/cantal/rrdd"
)

const nobody = 65534

// shadow is what a root-only file looks like; none of it may ever show.
const shadow = "root:*:20222:0:99999:7:::\ndaemon:*:20222:0:99999:7:::\n"

// world returns a fresh directory anyone may search, and in it a sticky world-writable root
// directory like /dev/shm and a root-only directory with a shadow file and a valid plugin file
// claiming to be the host's.
func world(t *testing.T) (top, shm, private string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("must run as root, like the agent")
	}
	top = t.TempDir()
	os.Chmod(filepath.Dir(top), 0o755)
	os.Chmod(top, 0o755)
	shm = mkdir(t, filepath.Join(top, "shm"), 0, 0o777|os.ModeSticky)
	private = mkdir(t, filepath.Join(top, "private"), 0, 0o700)
	if err := os.WriteFile(filepath.Join(private, "shadow"), []byte(shadow), 0o600); err != nil {
		t.Fatal(err)
	}
	pluginFile(t, filepath.Join(private, "fake"), 0, []rrdd.Datasource{rrdd.NewDatasource("cpu", rrdd.Int64)}, rrdd.IntValue(1))
	return top, shm, private
}

// pluginFile writes a v2 plugin file owned by uid (a Writer would remove it on Close).
func pluginFile(t *testing.T, path string, uid int, dss []rrdd.Datasource, vals ...rrdd.Value) {
	t.Helper()
	enc, err := rrdd.NewEncoder(rrdd.V2, dss)
	if err != nil {
		t.Fatal(err)
	}
	b, err := enc.Encode(time.Unix(1700000000, 0), vals)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, uid, uid); err != nil {
		t.Fatal(err)
	}
}

func mkdir(t *testing.T, path string, uid int, mode os.FileMode) string {
	t.Helper()
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	os.Chown(path, uid, uid)
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	return path
}

func symlinkAs(t *testing.T, target, path string, uid int) {
	t.Helper()
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	os.Lchown(path, uid, uid)
}

// noLeak fails if anything collected or reported shows the shadow file.
func noLeak(t *testing.T, what string, s *scanSink, err error) {
	t.Helper()
	all := fmt.Sprint(s.Problems, err)
	for _, ref := range s.Refs() {
		all += ref.Key
	}
	for _, bit := range []string{"root:", "20222", "99999", "daemon"} {
		if strings.Contains(all, bit) {
			t.Errorf("%s: %q shows in %s", what, bit, all)
		}
	}
}

// TestSquattedPluginDirRefused: a user who creates the plugin directory first in a sticky
// world-writable directory, as a symlink to a root-only directory (existing or not) or as a
// directory of their own, gets a refusal: nothing in it is read, no content shows, no series
// is published, and the refusal is the same whatever the symlink points to.
//
// Security finding 1.
func TestSquattedPluginDirRefused(t *testing.T) {
	_, shm, private := world(t)
	symlinkAs(t, private, filepath.Join(shm, "metrics"), nobody)
	symlinkAs(t, filepath.Join(private, "none"), filepath.Join(shm, "elsewhere"), nobody)
	own := mkdir(t, filepath.Join(shm, "owndir"), nobody, 0o755)
	symlinkAs(t, filepath.Join(private, "shadow"), filepath.Join(own, "shadow"), nobody)
	pluginFile(t, filepath.Join(own, "fake"), nobody, []rrdd.Datasource{rrdd.NewDatasource("cpu", rrdd.Int64)}, rrdd.IntValue(1))

	reasons := map[string]string{}
	for _, name := range []string{"metrics", "elsewhere", "owndir"} {
		c := New(filepath.Join(shm, name), Options{})
		s := newSink()
		err := c.Collect(context.Background(), s)
		var re *confined.RefusedError
		if !errors.As(err, &re) || !strings.Contains(re.Reason, "squatted") {
			t.Errorf("%s: Collect = %v; want a squatted refusal", name, err)
			continue
		}
		if len(s.Refs()) != 0 || len(s.Problems) != 0 {
			t.Errorf("%s: series %v, problems %v; want none", name, s.Refs(), s.Problems)
		}
		if st := c.Stats(); st.Files != 0 {
			t.Errorf("%s: %d files read", name, st.Files)
		}
		noLeak(t, name, s, err)
		reasons[name] = strings.TrimPrefix(err.Error(), "rrdd plugin directory: "+filepath.Join(shm, name))
	}
	if reasons["metrics"] != reasons["elsewhere"] {
		t.Errorf("the refusal tells where the symlink points: %q vs %q", reasons["metrics"], reasons["elsewhere"])
	}
	// Root's own directory there is read (the agent's default /dev/shm/metrics made by xcp-rrdd).
	mine := mkdir(t, filepath.Join(shm, "rootdir"), 0, 0o755)
	pluginFile(t, filepath.Join(mine, "p"), 0, []rrdd.Datasource{rrdd.NewDatasource("x", rrdd.Int64)}, rrdd.IntValue(3))
	s := newSink()
	collect(t, New(mine, Options{}), s)
	if s.put[key(series.Labels{"metric": "x", "plugin": "p", "owner": "host"})] != 3 {
		t.Errorf("root's directory: put %v, problems %v", s.put, s.Problems)
	}
}

// TestForeignPluginLabelledByOwner: a plugin file that root did not write, or that someone
// other than root may have put where it is, never publishes series as the host's (or a VM's):
// all of them are labelled owner="uid N" with N its owner; root's own files keep their owners.
//
// Security finding 1.
func TestForeignPluginLabelledByOwner(t *testing.T) {
	top, shm, _ := world(t)
	host := rrdd.NewDatasource("cpu", rrdd.Int64)
	vm := rrdd.NewDatasource("vm_cpu", rrdd.Int64)
	vm.Owner = "vm 0d5e-11"
	plugin := func(path string, uid int) {
		pluginFile(t, path, uid, []rrdd.Datasource{host, vm}, rrdd.IntValue(1), rrdd.IntValue(2))
	}
	// An open sticky plugin directory (root made it world-writable on purpose).
	open := mkdir(t, filepath.Join(shm, "open"), 0, 0o777|os.ModeSticky)
	plugin(filepath.Join(open, "theirs"), nobody)
	plugin(filepath.Join(open, "roots"), 0)
	plugin(filepath.Join(top, "elsewhere"), 0)
	os.Link(filepath.Join(top, "elsewhere"), filepath.Join(open, "linked")) // root's, linked in by anyone
	// A closed root directory with a file root gave another user.
	closed := mkdir(t, filepath.Join(top, "closed"), 0, 0o755)
	plugin(filepath.Join(closed, "given"), nobody)
	plugin(filepath.Join(closed, "roots"), 0)
	// A directory root made for a user: the user chooses its entries.
	users := mkdir(t, filepath.Join(closed, "users"), nobody, 0o755)
	plugin(filepath.Join(users, "roots"), 0)

	for _, tt := range []struct {
		dir, file, owner, vmOwner string
	}{
		{open, "theirs", "uid 65534", "uid 65534"},
		{open, "roots", "host", "vm 0d5e-11"},
		{open, "linked", "uid 0", "uid 0"},
		{closed, "given", "uid 65534", "uid 65534"},
		{closed, "roots", "host", "vm 0d5e-11"},
		{users, "roots", "uid 0", "uid 0"},
	} {
		s := newSink()
		collect(t, New(tt.dir, Options{}), s)
		want := map[string]uint64{
			key(series.Labels{"metric": "cpu", "plugin": tt.file, "owner": tt.owner}):      1,
			key(series.Labels{"metric": "vm_cpu", "plugin": tt.file, "owner": tt.vmOwner}): 2,
		}
		for k, v := range want {
			if got, ok := s.put[k]; !ok || got != v {
				t.Errorf("%s/%s: %s = %d, %v; want %d (all: %v)", filepath.Base(tt.dir), tt.file, k, got, ok, v, s.put)
			}
		}
	}
	// A file whose owner changes is read anew under its new label.
	s := newSink()
	c := New(closed, Options{})
	collect(t, c, s)
	os.Chown(filepath.Join(closed, "roots"), nobody, nobody)
	collect(t, c, s)
	if _, ok := s.put[key(series.Labels{"metric": "cpu", "plugin": "roots", "owner": "uid 65534"})]; !ok {
		t.Errorf("after chown: put %v; want roots under uid 65534", s.put)
	}
	if _, ok := s.put[key(series.Labels{"metric": "cpu", "plugin": "roots", "owner": "host"})]; ok {
		t.Errorf("after chown: roots still published as the host's")
	}
}

// TestProblemsDoNotQuoteContents: whatever is in the plugin directory — a file that is not a
// plugin file (a hard link to a shadow file), broken plugin files, symlinks and FIFOs — the
// problems say what is wrong with it, never what it holds.
//
// Security finding 1.
func TestProblemsDoNotQuoteContents(t *testing.T) {
	_, _, private := world(t)
	dir := t.TempDir()
	if err := os.Link(filepath.Join(private, "shadow"), filepath.Join(dir, "shadow")); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{
		"short":   "root:",
		"v1":      "DATASOURCES\nroot:*:2\n0123456789abcdef0123456789abcdef\n{}",
		"v1 md5":  "DATASOURCES\n00000002\nroot:*:20222:0:99999:7:::aaaaaaa\n{}",
		"garbage": "DATASOURCES" + shadow,
	} {
		os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600)
	}
	symlinkAs(t, filepath.Join(private, "shadow"), filepath.Join(dir, "link"), 0)
	syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600)
	c := New(dir, Options{})
	s := newSink()
	for range 3 { // torn reads are reported from the second in a row
		collect(t, c, s)
	}
	noLeak(t, "plugin directory", s, nil)
	if len(s.Refs()) != 0 {
		t.Errorf("series %v", s.Refs())
	}
	if p := s.Problems[filepath.Join(dir, "shadow")]; len(p) != 1 || !strings.Contains(p[0], "invalid header") {
		t.Errorf("shadow: problems %q; want a bad header", p)
	}
	if len(s.Problems) != 7 {
		t.Errorf("problems %v; want one per file", s.Problems)
	}
}

// TestSymlinkRefusalSameWhateverTarget: a symlink in the plugin directory is refused for being one,
// with the same reason whether its target exists, and is never followed.
//
// Security finding 13.
func TestSymlinkRefusalSameWhateverTarget(t *testing.T) {
	_, _, private := world(t)
	dir := t.TempDir()
	symlinkAs(t, filepath.Join(private, "fake"), filepath.Join(dir, "a"), 0)
	symlinkAs(t, filepath.Join(private, "nothing"), filepath.Join(dir, "b"), 0)
	s := newSink()
	collect(t, New(dir, Options{}), s)
	pa, pb := s.Problems[filepath.Join(dir, "a")], s.Problems[filepath.Join(dir, "b")]
	if len(pa) != 1 || len(pb) != 1 || !strings.Contains(pa[0], "symbolic link") {
		t.Fatalf("problems %v; want one symbolic link refusal each", s.Problems)
	}
	if ra, rb := strings.TrimPrefix(pa[0], filepath.Join(dir, "a")), strings.TrimPrefix(pb[0], filepath.Join(dir, "b")); ra != rb {
		t.Errorf("refusals differ: %q vs %q", ra, rb)
	}
	if len(s.Refs()) != 0 {
		t.Errorf("read through a symlink: %v", s.Refs())
	}
}
