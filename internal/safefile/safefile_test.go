package safefile

import (
	"errors"
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
