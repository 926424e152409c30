//go:build !linux

package hub

import (
	"syscall"
	"time"
)

// userTimeout is a no-op where TCP_USER_TIMEOUT is not Linux's: a cut peer's kept-alive
// connection then fails at the request's deadline.
func userTimeout(time.Duration) func(network, address string, c syscall.RawConn) error {
	return nil
}
