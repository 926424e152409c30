package sdnotify

import (
	"net"
	"path/filepath"
	"testing"
	"time"
)

func listen(t *testing.T, name string) *net.UnixConn {
	t.Helper()
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func receive(t *testing.T, c *net.UnixConn) string {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 256)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	return string(buf[:n])
}

func TestNotifySendsStateToSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notify")
	c := listen(t, path)
	sent, err := Notify(path, Ready)
	if err != nil || !sent {
		t.Fatalf("Notify = %v, %v", sent, err)
	}
	if got := receive(t, c); got != "READY=1" {
		t.Fatalf("got %q", got)
	}
}

func TestNotifyAbstractSocket(t *testing.T) {
	name := "cantal-sdnotify-test-" + time.Now().Format("150405.000000000")
	c := listen(t, "\x00"+name)
	if _, err := Notify("@"+name, Stopping); err != nil {
		t.Fatal(err)
	}
	if got := receive(t, c); got != "STOPPING=1" {
		t.Fatalf("got %q", got)
	}
}

func TestNotifyWithoutSocketSendsNothing(t *testing.T) {
	if sent, err := Notify("", Ready); sent || err != nil {
		t.Fatalf("Notify(\"\") = %v, %v", sent, err)
	}
	if _, err := Notify(filepath.Join(t.TempDir(), "absent"), Ready); err == nil {
		t.Fatal("no error for a socket nobody listens on")
	}
}
