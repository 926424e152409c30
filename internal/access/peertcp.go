package access

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// A TCP caller on this host is a local user like one on the Unix socket: /proc shows it its
// own processes' io counters and environment, and nobody else's (issue 31, N13). Without a web
// config the agent cannot ask it who it is, but the kernel knows: the other end of the
// connection is a socket of the agent's network namespace, and sock_diag names its owner.
//
// The lookup is netlink's exact one (SOCK_DIAG_BY_FAMILY without NLM_F_DUMP, the kernel's
// inet_diag_find_one_icsk): one hash lookup of the 4-tuple, whatever the number of sockets.
// (vishvananda/netlink's SocketGet asks for a dump, a walk of every TCP socket of the
// namespace, per call; at a connection flood that is the agent's CPU.) It is made once per
// connection, when its first request needs it.

// tcpPeer is the other end of one TCP connection, looked up at most once. Safe for concurrent
// use.
type tcpPeer struct {
	client, server netip.AddrPort
	once           sync.Once
	uid            uint32
	local          bool
	err            error
}

type tcpPeerKey struct{}

// withTCPPeer records c's addresses in ctx for peerUID, when c is a TCP connection.
func withTCPPeer(ctx context.Context, c net.Conn) context.Context {
	remote, ok1 := c.RemoteAddr().(*net.TCPAddr)
	local, ok2 := c.LocalAddr().(*net.TCPAddr)
	if !ok1 || !ok2 {
		return ctx
	}
	return context.WithValue(ctx, tcpPeerKey{}, &tcpPeer{client: remote.AddrPort(), server: local.AddrPort()})
}

// peerUID returns the uid owning the other end of the request's TCP connection, with local
// true when that end is a socket of this host's network namespace (a local user, whatever
// address it connected to), false when it is elsewhere (another host, a container with a
// network of its own). err is set when the kernel could not be asked; known is false for a
// request whose connection was not recorded (not TCP, or outside the agent's server).
func peerUID(ctx context.Context) (uid uint32, local, known bool, err error) {
	p, ok := ctx.Value(tcpPeerKey{}).(*tcpPeer)
	if !ok {
		return 0, false, false, nil
	}
	p.once.Do(func() { p.uid, p.local, p.err = socketOwner(p.client, p.server) })
	return p.uid, p.local, true, p.err
}

// Layout of the netlink messages (linux/netlink.h, linux/inet_diag.h).
const (
	nlHdrLen      = 16 // struct nlmsghdr
	diagReqV2Len  = 56 // struct inet_diag_req_v2
	diagMsgLen    = 72 // struct inet_diag_msg
	diagMsgUIDOff = 64 // idiag_uid in struct inet_diag_msg
	diagNoCookie  = 0xFFFFFFFF
	lookupTimeout = time.Second
)

var errDiagReply = errors.New("malformed sock_diag reply")

var diagSeq atomic.Uint32

// socketOwner asks the kernel for the socket whose local end is client and remote end server
// (the caller's end of a connection the agent accepted) and returns its owner's uid; found is
// false when no such socket is in the agent's network namespace.
func socketOwner(client, server netip.AddrPort) (uid uint32, found bool, err error) {
	client = netip.AddrPortFrom(client.Addr().Unmap(), client.Port())
	server = netip.AddrPortFrom(server.Addr().Unmap(), server.Port())
	if client.Addr().Is4() != server.Addr().Is4() {
		return 0, false, nil // not one connection of this namespace
	}
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return 0, false, fmt.Errorf("sock_diag socket: %w", err)
	}
	defer unix.Close(fd)
	tv := unix.NsecToTimeval(lookupTimeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return 0, false, fmt.Errorf("sock_diag receive timeout: %w", err)
	}
	seq := diagSeq.Add(1)
	if err := unix.Sendto(fd, diagRequest(seq, client, server), 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return 0, false, fmt.Errorf("sock_diag request: %w", err)
	}
	var buf [4096]byte
	for {
		n, _, err := unix.Recvfrom(fd, buf[:], 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, false, fmt.Errorf("sock_diag reply: %w", err)
		}
		uid, found, done, err := parseDiagReply(buf[:n], seq)
		if err != nil || done {
			return uid, found, err
		}
	}
}

// diagRequest is the netlink message asking for the one TCP socket with local end src and
// remote end dst.
func diagRequest(seq uint32, src, dst netip.AddrPort) []byte {
	b := make([]byte, nlHdrLen+diagReqV2Len)
	ne := binary.NativeEndian
	ne.PutUint32(b[0:], uint32(len(b)))
	ne.PutUint16(b[4:], unix.SOCK_DIAG_BY_FAMILY)
	ne.PutUint16(b[6:], unix.NLM_F_REQUEST)
	ne.PutUint32(b[8:], seq)
	r := b[nlHdrLen:]
	r[0] = unix.AF_INET6
	if src.Addr().Is4() {
		r[0] = unix.AF_INET
	}
	r[1] = unix.IPPROTO_TCP
	ne.PutUint32(r[4:], 0xFFFFFFFF) // every state
	id := r[8:]                     // struct inet_diag_sockid
	binary.BigEndian.PutUint16(id[0:], src.Port())
	binary.BigEndian.PutUint16(id[2:], dst.Port())
	putAddr(id[4:20], src.Addr())
	putAddr(id[20:36], dst.Addr())
	ne.PutUint32(id[40:], diagNoCookie)
	ne.PutUint32(id[44:], diagNoCookie)
	return b
}

func putAddr(dst []byte, a netip.Addr) {
	if a.Is4() {
		v := a.As4()
		copy(dst, v[:])
		return
	}
	v := a.As16()
	copy(dst, v[:])
}

// parseDiagReply reads one datagram of the kernel's answer to request seq: the socket's uid
// (found), or that there is none (an ENOENT error message); done is false when the datagram
// held nothing of the answer (another sequence number) and the next must be read.
func parseDiagReply(b []byte, seq uint32) (uid uint32, found, done bool, err error) {
	ne := binary.NativeEndian
	for len(b) >= nlHdrLen {
		l := int(ne.Uint32(b[0:]))
		if l < nlHdrLen || l > len(b) {
			return 0, false, true, fmt.Errorf("%w: message length %d of %d bytes", errDiagReply, l, len(b))
		}
		typ, mseq := ne.Uint16(b[4:]), ne.Uint32(b[8:])
		msg := b[nlHdrLen:l]
		b = b[min(len(b), (l+3)&^3):]
		if mseq != seq {
			continue
		}
		switch typ {
		case unix.NLMSG_ERROR:
			if len(msg) < 4 {
				return 0, false, true, fmt.Errorf("%w: short error message", errDiagReply)
			}
			switch e := -int32(ne.Uint32(msg)); e {
			case 0:
				continue // an acknowledgement
			case int32(unix.ENOENT):
				return 0, false, true, nil
			default:
				return 0, false, true, fmt.Errorf("sock_diag: %w", unix.Errno(e))
			}
		case unix.SOCK_DIAG_BY_FAMILY:
			if len(msg) < diagMsgLen {
				return 0, false, true, fmt.Errorf("%w: socket record of %d bytes", errDiagReply, len(msg))
			}
			return ne.Uint32(msg[diagMsgUIDOff:]), true, true, nil
		case unix.NLMSG_DONE:
			return 0, false, true, nil
		}
	}
	return 0, false, false, nil
}
