package hub

import (
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// userTimeout returns a net.Dialer Control that sets the connection's TCP_USER_TIMEOUT to d
// (none for d <= 0): data the peer does not acknowledge within d aborts the connection, so a
// kept-alive connection to a peer whose cable was cut fails a request after d.
func userTimeout(d time.Duration) func(network, address string, c syscall.RawConn) error {
	if d <= 0 {
		return nil
	}
	ms := int(min(d.Milliseconds(), 1<<31-1))
	return func(network, address string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, ms)
		})
		if err != nil {
			return err
		}
		return serr
	}
}
