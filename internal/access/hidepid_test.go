package access

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
)

const mountinfo = `22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
23 22 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw
40 22 0:30 / /run/my\040proc rw - proc proc rw,hidepid=invisible
41 22 0:31 / /other rw - proc proc rw,hidepid=2
`

func TestParseHidePID(t *testing.T) {
	for _, c := range []struct {
		info, at string
		want     bool
	}{
		{mountinfo, "/proc", false},
		{mountinfo, "/run/my proc", true},
		{mountinfo, "/other", true},
		{mountinfo, "/nowhere", false},
		// A later mount over the same point is the one in force.
		{mountinfo + "50 22 0:40 / /proc rw - proc proc rw,hidepid=2\n", "/proc", true},
		{mountinfo + "50 22 0:40 / /other rw - proc proc rw,hidepid=0\n", "/other", false},
		{"garbage\n\n- - -\n", "/proc", false},
	} {
		if got := parseHidePID([]byte(c.info), c.at); got != c.want {
			t.Errorf("parseHidePID(.., %q) = %v; want %v", c.at, got, c.want)
		}
	}
}

func FuzzParseHidePID(f *testing.F) {
	f.Add([]byte(mountinfo), "/proc")
	f.Add([]byte(`1 2 3 4 \0 5 6 - proc p hidepid=`), `\0`)
	f.Fuzz(func(t *testing.T, info []byte, at string) {
		parseHidePID(info, at)
		unescapeMount(at)
	})
}

func TestHidePIDReadsMountTable(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "self"), 0o755)
	info := "23 22 0:21 / " + root + " rw - proc proc rw,hidepid=2\n"
	os.WriteFile(filepath.Join(root, "self", "mountinfo"), []byte(info), 0o644)
	if got, err := HidePID(root); err != nil || !got {
		t.Errorf("HidePID = %v, %v; want true", got, err)
	}
	if _, err := HidePID(filepath.Join(root, "missing")); err == nil {
		t.Error("HidePID of a missing proc root: no error")
	}
}

// TestPeerCred: a request over a Unix socket carries its peer's uid (here the test's own).
func TestPeerCred(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan PeerCred, 1)
	srv := &http.Server{ConnContext: ConnContext, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, ok := PeerCredFromContext(r.Context())
		if !ok {
			c.PID = -2
		}
		got <- c
	})}
	go srv.Serve(ln)
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	resp, err := client.Get("http://unix/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	c := <-got
	if c.PID != int32(os.Getpid()) || c.UID != uint32(os.Getuid()) {
		t.Errorf("peer cred = %+v; want pid %d uid %d", c, os.Getpid(), os.Getuid())
	}
}
