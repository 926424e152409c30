package flagfile

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/confined"
)

type list struct{ p *[]string }

func (l list) String() string { return "" }
func (l list) Set(s string) error {
	*l.p = append(*l.p, strings.Split(s, ",")...)
	return nil
}
func (l list) Reset() { *l.p = nil }

type settings struct {
	listen   string
	interval time.Duration
	max      int
	pct      float64
	pprof    bool
	peers    []string
}

func newFS(s *settings) *flag.FlagSet {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.StringVar(&s.listen, "listen", "127.0.0.1:1", "")
	fs.DurationVar(&s.interval, "interval", 2*time.Second, "")
	fs.IntVar(&s.max, "max-series", 5, "")
	fs.Float64Var(&s.pct, "alert-cpu", 90, "")
	fs.BoolVar(&s.pprof, "pprof", false, "")
	s.peers = []string{"default:1"}
	fs.Var(list{&s.peers}, "peer", "")
	fs.String("config", "", "")
	fs.String("cluster-name", "", "")
	return fs
}

func skipConfig(n string) bool { return n == "config" }

func TestApply(t *testing.T) {
	var s settings
	fs := newFS(&s)
	doc := "# agent\nlisten: 0.0.0.0:9\ninterval: 5s\nmax-series: 0x10\nalert-cpu: 75.5\npprof: true\npeer: [a:1, b:2]\n"
	if _, err := Apply(fs, "a.yml", []byte(doc), skipConfig); err != nil {
		t.Fatal(err)
	}
	want := settings{"0.0.0.0:9", 5 * time.Second, 16, 75.5, true, []string{"a:1", "b:2"}}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("settings = %+v; want %+v", s, want)
	}
	// A scalar for a list, null for a string, 0 for a duration.
	if _, err := Apply(fs, "a.yml", []byte("peer: c:3\nlisten:\ninterval: 0\n"), skipConfig); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s.peers, []string{"c:3"}) || s.listen != "" || s.interval != 0 {
		t.Errorf("settings = %+v; want peers [c:3] (replaced), empty listen, interval 0", s)
	}
	for _, empty := range []string{"", "# nothing\n", "---\n"} {
		if _, err := Apply(fs, "a.yml", []byte(empty), skipConfig); err != nil {
			t.Errorf("Apply(%q) = %v; want nothing set", empty, err)
		}
	}
}

// TestApplyErrors checks that each mistake is refused with the file and the line it is on,
// without the value.
func TestApplyErrors(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{"listen: a\nbogus: 1\n", `a.yml:2: unknown key "bogus"`},
		{"listen: a\ncluster_name: x\n", `a.yml:2: unknown key "cluster_name"; the setting is "cluster-name"`},
		{"\n\nconfig: other.yml\n", "a.yml:3: config cannot be set in a configuration file"},
		{"interval: 5\n", "a.yml:1: interval: want a duration such as 30s or 5m, not an integer"},
		{"interval: soonish\n", "a.yml:1: interval: invalid a duration"},
		{"max-series: many\n", "a.yml:1: max-series: want an integer, not a string"},
		{"max-series: 1.5\n", "a.yml:1: max-series: invalid an integer"},
		{"pprof: yes\n", "a.yml:1: pprof: want true or false, not a string"},
		{"alert-cpu: [1]\n", "a.yml:1: alert-cpu: want a number, not a list"},
		{"listen:\n  host: a\n", "a.yml:2: listen: want a string, not a mapping"},
		{"peer: {a: 1}\n", "a.yml:1: peer: want a list of strings, not a mapping"},
		{"peer:\n  - a:1\n  - [b]\n", "a.yml:2: peer: want a list of strings, found a list at line 3"},
		{"listen: a\nlisten: b\n", "a.yml:2: listen given twice (first at line 1)"},
		{"- listen\n", "a.yml:1: want a mapping of settings (key: value), not a list"},
		{"listen: a\n---\nlisten: b\n", "a.yml:2: a second YAML document"},
		{"listen: [a\n", "a.yml:1: not valid YAML"},
		{"? [a, b]\n: 1\n", "a.yml:1: a key that is not a setting's name"},
		{"1: x\n", "a.yml:1: a key that is not a setting's name"},
	} {
		var s settings
		_, err := Apply(newFS(&s), "a.yml", []byte(tc.doc), skipConfig)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("Apply(%q) = %v; want %q", tc.doc, err, tc.want)
		}
	}
}

// FuzzApply feeds Apply any document: it must not panic, and an error must be an *Error that
// names the file and never quotes a value.
func FuzzApply(f *testing.F) {
	for _, seed := range []string{"listen: a\n", "peer: [a, b]\ninterval: 5s\n", "pprof: true\nmax-series: 7\n",
		"bogus: 1\n", "listen: &x a\nmax-series: *x\n", "listen: !!binary aGVsbG8=\n", "- 1\n", "{", "listen: a\n---\n", ""} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		var s settings
		_, err := Apply(newFS(&s), "a.yml", []byte(doc), skipConfig)
		if err == nil {
			return
		}
		var fe *Error
		if !errors.As(err, &fe) || fe.File != "a.yml" {
			t.Fatalf("error %v is not an *Error naming the file", err)
		}
	})
}

// TestReadRefuses checks the hostile-file rules on real files: another user's file, or a
// symlink another user owns, a file everyone (or an untrusted group) may write, a directory
// others may write to; root's and the agent's own files (and links) are read.
func TestReadRefuses(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to make files of another user")
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	write := func(name string, mode os.FileMode, uid, gid int) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("listen: a\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		os.Chown(p, uid, gid)
		os.Chmod(p, mode)
		return p
	}
	good := write("good.yml", 0o640, 0, 0)
	if b, err := Read(good); err != nil || string(b) != "listen: a\n" {
		t.Fatalf("Read(root's 0640 file) = %q, %v", b, err)
	}
	link := filepath.Join(dir, "link.yml")
	os.Symlink("good.yml", link)
	if _, err := Read(link); err != nil {
		t.Errorf("Read(root's symlink to root's file) = %v; want it read", err)
	}
	other := write("other.yml", 0o644, 65534, 65534)
	otherLink := filepath.Join(dir, "to-other.yml")
	os.Symlink(other, otherLink)
	plantedLink := filepath.Join(dir, "planted.yml")
	os.Symlink(good, plantedLink)
	os.Lchown(plantedLink, 65534, 65534)
	sub := filepath.Join(dir, "open")
	os.Mkdir(sub, 0o777)
	os.Chmod(sub, 0o777)
	inOpen := filepath.Join(sub, "agent.yml")
	os.WriteFile(inOpen, []byte("x: 1\n"), 0o644)
	sticky := filepath.Join(dir, "sticky")
	os.Mkdir(sticky, 0o777)
	os.Chmod(sticky, os.ModeSticky|0o777)
	inSticky := filepath.Join(sticky, "agent.yml")
	os.WriteFile(inSticky, []byte("x: 1\n"), 0o644)
	if _, err := Read(inSticky); err != nil {
		t.Errorf("Read(root's file in a sticky directory) = %v; want it read", err)
	}
	otherDir := filepath.Join(dir, "users")
	os.Mkdir(otherDir, 0o755)
	os.WriteFile(filepath.Join(otherDir, "agent.yml"), []byte("x: 1\n"), 0o644)
	os.Chown(otherDir, 65534, 65534)
	dirLink := filepath.Join(dir, "etc-link")
	os.Symlink(dir, dirLink)
	os.Lchown(dirLink, 65534, 65534)
	big := write("big.yml", 0o644, 0, 0)
	os.Truncate(big, MaxSize+1)
	for _, tc := range []struct{ path, want string }{
		{other, "owned by uid 65534"},
		{otherLink, "owned by uid 65534"},
		{plantedLink, "symbolic link " + plantedLink + " is owned by uid 65534"},
		{write("world.yml", 0o646, 0, 0), "writable by every user"},
		{write("group.yml", 0o664, 0, 65534), "writable by group 65534"},
		{inOpen, "directory " + sub + " is writable by every user"},
		{filepath.Join(otherDir, "agent.yml"), "directory " + otherDir + " is owned by uid 65534"},
		{filepath.Join(dirLink, "good.yml"), "symbolic link " + dirLink + " is owned by uid 65534"},
		{dir, "not a regular file"},
		{big, "larger than"},
	} {
		_, err := Read(tc.path)
		if !errors.Is(err, confined.ErrRefused) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Read(%s) = %v; want a refusal saying %q", tc.path, err, tc.want)
		}
	}
	if _, err := Read(write("rootgroup.yml", 0o664, 0, 0)); err != nil {
		t.Errorf("Read(root's file writable by group root) = %v; want it read", err)
	}
	if _, err := Read(filepath.Join(dir, "missing.yml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Read(missing) = %v; want not exist", err)
	}
}
