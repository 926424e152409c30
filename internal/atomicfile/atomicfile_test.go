package atomicfile

import (
	"bufio"
	"bytes"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// dirNames lists dir's entries.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestWriteFile: a new file and a replaced one hold exactly the content, with exactly the mode
// asked for whatever the umask, and nothing else is left in the directory.
func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	for i, c := range []struct {
		data string
		perm fs.FileMode
	}{{"first\n", 0o644}, {"second, longer than the first\n", 0o640}, {"", 0}} {
		if err := WriteFile(path, []byte(c.data), c.perm); err != nil {
			t.Fatalf("WriteFile #%d: %v", i, err)
		}
		if got := mustRead(t, path); got != c.data {
			t.Errorf("WriteFile #%d: file holds %q; want %q", i, got, c.data)
		}
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		want := c.perm
		if want == 0 {
			want = 0o600
		}
		if fi.Mode().Perm() != want {
			t.Errorf("WriteFile #%d: mode %v; want %v", i, fi.Mode().Perm(), want)
		}
		if names := dirNames(t, dir); !slices.Equal(names, []string{"state.json"}) {
			t.Errorf("WriteFile #%d: directory holds %q; want only the file", i, names)
		}
	}
}

// TestWriteParts: the parts are written in order, the size returned is their sum, and
// NoDirSync still leaves a complete file (SyncDir makes it durable).
func TestWriteParts(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "seg")
	n, err := Write(path, Options{Perm: 0o640, NoDirSync: true}, []byte("ab"), nil, []byte("cde"))
	if err != nil {
		t.Fatal(err)
	}
	if n != 5 || mustRead(t, path) != "abcde" {
		t.Errorf("Write = %d, file %q; want 5, %q", n, mustRead(t, path), "abcde")
	}
	if err := SyncDir(dir); err != nil {
		t.Fatal(err)
	}
	if err := SyncDir(filepath.Join(dir, "missing")); err == nil || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("SyncDir(missing) = %v; want a not-exist error", err)
	}
}

// TestWriteFailsMidFile is the crash-like case: the write fails after part of the new content
// reached the temporary file (the file-size limit, as a full disk would). The old file is
// intact, no temporary file is left, and the error names the path without quoting content.
func TestWriteFailsMidFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "pos")
	if err := WriteFile(path, []byte("old content\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_FSIZE, &lim); err != nil {
		t.Fatal(err)
	}
	small := lim
	small.Cur = 4096
	if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &small); err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("secret-"), 10_000) // 70 kB: beyond the limit
	_, err := Write(path, Options{}, big[:1000], big[1000:])
	if rerr := unix.Setrlimit(unix.RLIMIT_FSIZE, &lim); rerr != nil {
		t.Fatal(rerr)
	}
	if err == nil {
		t.Fatal("Write beyond the file-size limit succeeded")
	}
	if !strings.Contains(err.Error(), path) || strings.Contains(err.Error(), "secret") {
		t.Errorf("error %q: want the path named and no content quoted", err)
	}
	if got := mustRead(t, path); got != "old content\n" {
		t.Errorf("after a failed write the file holds %q; want the old content", got)
	}
	if names := dirNames(t, dir); !slices.Equal(names, []string{"pos"}) {
		t.Errorf("after a failed write the directory holds %q; want only the old file", names)
	}
}

// TestWriteRenameFails: a target that cannot be replaced (a directory) fails, leaves it as it
// was and removes the temporary file.
func TestWriteRenameFails(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "HEAD")
	if err := os.MkdirAll(filepath.Join(path, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(path, []byte("new"), 0o600); err == nil {
		t.Fatal("WriteFile over a directory succeeded")
	}
	if names := dirNames(t, dir); !slices.Equal(names, []string{"HEAD"}) {
		t.Errorf("directory holds %q; want only HEAD", names)
	}
	if names := dirNames(t, path); !slices.Equal(names, []string{"x"}) {
		t.Errorf("HEAD/ holds %q; want it untouched", names)
	}
}

// TestWriteStaleTemp: a temporary file a crash left behind is truncated and reused; a
// symlink planted at the temporary name is refused, and what it points to is untouched.
func TestWriteStaleTemp(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "node-id")
	if err := os.WriteFile(path+TempSuffix, bytes.Repeat([]byte("junk"), 100), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(path, []byte("abc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := mustRead(t, path); got != "abc\n" {
		t.Errorf("file holds %q; want %q", got, "abc\n")
	}

	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, path+TempSuffix); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(path, []byte("evil"), 0o600); err == nil {
		t.Fatal("WriteFile through a symlink at the temporary name succeeded")
	}
	if got := mustRead(t, victim); got != "keep" {
		t.Errorf("symlink target holds %q; want it untouched", got)
	}
	if got := mustRead(t, path); got != "abc\n" {
		t.Errorf("file holds %q after a refused write; want the old content", got)
	}
}

// helperEnv makes the test binary a writer that replaces one file in a loop until killed.
const helperEnv = "ATOMICFILE_TEST_WRITER"

func TestMain(m *testing.M) {
	if path := os.Getenv(helperEnv); path != "" {
		a := bytes.Repeat([]byte{'a'}, 1<<20)
		b := bytes.Repeat([]byte{'b'}, 3<<19)
		w := bufio.NewWriter(os.Stdout)
		for i := 0; ; i++ {
			data := a
			if i%2 == 1 {
				data = b
			}
			if _, err := Write(path, Options{NoDirSync: i%3 == 0}, data[:4096], data[4096:]); err != nil {
				os.Exit(3)
			}
			w.WriteString("w\n")
			w.Flush()
		}
	}
	os.Exit(m.Run())
}

// TestWriteKilled kills (SIGKILL) a process replacing a file in a loop, at whatever point of a
// write it is, several times: the file is always one whole version, never a torn mix.
func TestWriteKilled(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state")
	for round := range 5 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), helperEnv+"="+path)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		r := bufio.NewReader(out)
		for range 2 + round { // a few whole writes, then kill during a later one
			if _, err := r.ReadString('\n'); err != nil {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("round %d: writer stopped: %v", round, err)
			}
		}
		cmd.Process.Kill()
		cmd.Wait()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case len(b) == 1<<20 && bytes.Count(b, []byte{'a'}) == len(b):
		case len(b) == 3<<19 && bytes.Count(b, []byte{'b'}) == len(b):
		default:
			t.Fatalf("round %d: after a kill the file is torn: %d bytes, %d a, %d b", round,
				len(b), bytes.Count(b, []byte{'a'}), bytes.Count(b, []byte{'b'}))
		}
	}
}
