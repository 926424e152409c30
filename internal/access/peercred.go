package access

import (
	"context"
	"net"

	"golang.org/x/sys/unix"
)

// PeerCred is the identity the kernel gives for the process at the other end of a Unix socket
// (SO_PEERCRED): it cannot be forged by the caller.
type PeerCred struct {
	PID      int32
	UID, GID uint32
}

type credKey struct{}

// ConnContext is an http.Server ConnContext: for a connection on a Unix socket it records the
// peer's credentials, which the Guard then reads; for a TCP connection, its addresses, for the
// Guard to ask the kernel who owns its other end when that is a socket of this host (peertcp.go). A Unix
// connection whose credentials cannot be read is marked with the uid and gid of nobody, so it is
// never taken for root.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	uc, ok := unwrapUnix(c)
	if !ok {
		return withTCPPeer(ctx, c)
	}
	cred := PeerCred{PID: -1, UID: nobody, GID: nobody}
	if raw, err := uc.SyscallConn(); err == nil {
		raw.Control(func(fd uintptr) {
			if u, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED); err == nil {
				cred = PeerCred{PID: u.Pid, UID: u.Uid, GID: u.Gid}
			}
		})
	}
	return context.WithValue(ctx, credKey{}, cred)
}

const nobody = 65534

// PeerCredFromContext returns the credentials ConnContext recorded, and whether the request
// came over a Unix socket.
func PeerCredFromContext(ctx context.Context) (PeerCred, bool) {
	c, ok := ctx.Value(credKey{}).(PeerCred)
	return c, ok
}

// unwrapUnix finds the *net.UnixConn under listener wrappers that expose NetConn (as the
// connection limiter's connections do).
func unwrapUnix(c net.Conn) (*net.UnixConn, bool) {
	for range 8 {
		switch x := c.(type) {
		case *net.UnixConn:
			return x, true
		case interface{ NetConn() net.Conn }:
			c = x.NetConn()
		default:
			return nil, false
		}
	}
	return nil, false
}
