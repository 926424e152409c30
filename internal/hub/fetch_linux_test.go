package hub

import (
	"context"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestDialSetsUserTimeout: a connection the Fetcher dials has TCP_USER_TIMEOUT set to its
// Timeout, so that a kept-alive connection to a peer whose cable was cut fails a request once
// the peer has not acknowledged it for Timeout.
func TestDialSetsUserTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	f := &Fetcher{Timeout: 1500 * time.Millisecond, KeepAlive: true}
	c, err := f.httpClient().Transport.(*http.Transport).DialContext(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	raw, err := c.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var got int
	var serr error
	raw.Control(func(fd uintptr) { got, serr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT) })
	if serr != nil || got != 1500 {
		t.Fatalf("TCP_USER_TIMEOUT = %d ms (%v); want 1500", got, serr)
	}
}
