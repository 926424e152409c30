package sysscan

// The netlink sock_diag (inet_diag) dump of TCP sockets, which replaces reading /proc/net/tcp{,6}
// for the host's own /proc (proc_net_tcp.go).

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TCP sockets through netlink sock_diag (NETLINK_INET_DIAG), the interface ss(8) uses.
//
// The request is the old compat type TCPDIAG_GETSOCK with a struct inet_diag_req body: the kernel
// dumps it with sdiag_family AF_UNSPEC (net/ipv4/inet_diag.c, inet_diag_dump_compat), so one walk
// of the listening and established hash tables returns IPv4 and IPv6 sockets together, where
// /proc/net/tcp and tcp6 walk the whole established hash once each, and where two
// SOCK_DIAG_BY_FAMILY requests would walk it twice too.
//
// Each socket is one netlink message: a 16-byte nlmsghdr, a 72-byte struct inet_diag_msg and
// attributes we skip. The records are turned into the tcpSock the /proc/net/tcp parser makes of
// the same socket (see diagSock for the per-state details).
const (
	tcpdiagGetSock = 18 // TCPDIAG_GETSOCK (linux/inet_diag.h)

	nlmsgHdrLen   = 16 // struct nlmsghdr
	diagReqLen    = 60 // struct inet_diag_req
	diagMsgLen    = 72 // struct inet_diag_msg
	diagReqStates = 52 // offset of idiag_states in inet_diag_req

	// diagStates asks for TCP_ESTABLISHED (bit 1) to TCP_NEW_SYN_RECV (bit 12): every state
	// /proc/net/tcp shows. Bit 13, TCP_BOUND_INACTIVE (Linux 6.6), would add the sockets that
	// are bound but neither listening nor connected, which /proc/net/tcp does not list.
	diagStates = 1<<13 - 2

	// diagBufSize is the receive buffer. The kernel caps one dump datagram at 32 KiB (the
	// largest receive buffer it has seen, see netlink_dump), so one datagram always fits.
	diagBufSize = 64 << 10

	// diagRecvTimeout bounds one recvfrom: the kernel answers a dump at once, so a wait this
	// long means something is wrong and the scan must not hang on it.
	diagRecvTimeout = 5 * time.Second
)

// Errors of the netlink path; wrapped with the details.
var (
	errDiagMalformed = errors.New("malformed inet_diag message")
	errDiagKernel    = errors.New("inet_diag request refused")
	errDiagIntr      = errors.New("inet_diag dump interrupted")
	errDiagOpen      = errors.New("cannot open a netlink inet_diag socket")
)

// tcpAdder receives the sockets of a table; *tcpScan is the one the collector uses.
type tcpAdder interface {
	add(s tcpSock)
}

// tcpDiag dumps the TCP sockets of the agent's network namespace (netlink sockets belong to the
// namespace of their creator) through a netlink socket kept open between scans, into a receive
// buffer reused across scans: one sendto and a few recvfrom per scan, no allocation per socket
// in the steady state. The zero value is closed and usable; one scan goroutine at a time.
type tcpDiag struct {
	fd   int // valid when open
	open bool
	seq  uint32
	req  [nlmsgHdrLen + diagReqLen]byte
	buf  []byte

	// Per dump.
	done     bool
	intr     bool
	bad      int   // records that are not TCP sockets of a known state
	firstBad error // the first of them
	// Request sockets (SYN_RECV) are reported with uid 0, /proc/net/tcp gives them the uid of
	// their listener: they are passed at the end of the dump, with the uid of the first
	// listener of their local port. (Listeners of one port on different addresses owned by
	// different uids would differ from /proc; SO_REUSEPORT listeners share a uid.)
	reqs      []tcpSock // request sockets
	listeners []portUID
	lisUID    map[uint16]uint32
}

type portUID struct {
	port uint16
	uid  uint32
}

// close closes the netlink socket; the next dump opens a new one.
func (d *tcpDiag) close() {
	if d.open {
		unix.Close(d.fd)
		d.open = false
	}
}

func (d *tcpDiag) openSocket() error {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_INET_DIAG)
	if err != nil {
		return fmt.Errorf("%w: %w", errDiagOpen, err)
	}
	tv := unix.NsecToTimeval(diagRecvTimeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		return fmt.Errorf("%w: set receive timeout: %w", errDiagOpen, err)
	}
	d.fd, d.open = fd, true
	return nil
}

// dump asks the kernel for every TCP socket and passes each to out, in the kernel's order
// (listeners first) except request sockets, which come last. On an error the sockets already
// passed to out are a partial table: the caller discards them. When the kernel flags the dump
// as inconsistent (NLM_F_DUMP_INTR) every socket has been passed and dump returns errDiagIntr.
// A failed dump closes the socket, so that no stale datagram is read by the next one.
func (d *tcpDiag) dump(ctx context.Context, out tcpAdder) error {
	if !d.open {
		if err := d.openSocket(); err != nil {
			return err
		}
	}
	err := d.dumpOpen(ctx, out)
	if err != nil && !errors.Is(err, errDiagIntr) {
		d.close()
	}
	return err
}

func (d *tcpDiag) dumpOpen(ctx context.Context, out tcpAdder) error {
	if d.buf == nil {
		d.buf = make([]byte, diagBufSize)
	}
	d.startDump()
	if _, err := unix.Write(d.fd, d.request()); err != nil {
		return fmt.Errorf("send inet_diag request: %w", err)
	}
	for !d.done {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, err := recvTrunc(d.fd, d.buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("receive inet_diag dump: %w", err)
		}
		if n > len(d.buf) { // MSG_TRUNC: n is the datagram's real length
			return fmt.Errorf("receive inet_diag dump: %w: datagram of %d bytes, buffer of %d", errDiagMalformed, n, len(d.buf))
		}
		if n == 0 {
			return fmt.Errorf("receive inet_diag dump: %w: empty datagram", errDiagMalformed)
		}
		if err := d.parse(d.buf[:n], out); err != nil {
			return err
		}
	}
	d.finishDump(out)
	if d.intr {
		return errDiagIntr
	}
	return nil
}

// request returns the TCPDIAG_GETSOCK dump request with the next sequence number.
func (d *tcpDiag) request() []byte {
	d.seq++
	r := d.req[:]
	binary.NativeEndian.PutUint32(r[0:], uint32(len(r)))
	binary.NativeEndian.PutUint16(r[4:], tcpdiagGetSock)
	binary.NativeEndian.PutUint16(r[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	binary.NativeEndian.PutUint32(r[8:], d.seq)
	binary.NativeEndian.PutUint32(r[12:], 0) // port id: the kernel fills it in
	body := r[nlmsgHdrLen:]
	clear(body)
	body[0] = unix.AF_UNSPEC // ignored by the compat dump, which always uses AF_UNSPEC
	binary.NativeEndian.PutUint32(body[diagReqStates:], diagStates)
	return r
}

func (d *tcpDiag) startDump() {
	d.done, d.intr = false, false
	d.bad, d.firstBad = 0, nil
	d.reqs = d.reqs[:0]
	d.listeners = d.listeners[:0]
}

// finishDump passes the request sockets, with the uid of their listener.
func (d *tcpDiag) finishDump(out tcpAdder) {
	if len(d.reqs) == 0 {
		return
	}
	if d.lisUID == nil {
		d.lisUID = map[uint16]uint32{}
	}
	clear(d.lisUID)
	for i := len(d.listeners) - 1; i >= 0; i-- { // the first listener of a port wins
		d.lisUID[d.listeners[i].port] = d.listeners[i].uid
	}
	for _, s := range d.reqs {
		s.UID = d.lisUID[s.LocalPort]
		out.add(s)
	}
}

// parse reads one datagram of the dump answering d.seq: it passes each socket record to out
// and notes the end of the dump in d.done. A message that breaks the framing, a kernel error
// and a datagram after the end are errors that end the dump; a record that is not a TCP socket
// of a known state is counted in d.bad (the framing still holds) and skipped. Messages of
// another sequence number (left from an earlier request) are skipped.
func (d *tcpDiag) parse(b []byte, out tcpAdder) error {
	if d.done {
		return fmt.Errorf("%w: datagram after the end of the dump", errDiagMalformed)
	}
	for off := 0; off < len(b); {
		rest := b[off:]
		if len(rest) < nlmsgHdrLen {
			return fmt.Errorf("%w: %d bytes left at offset %d, shorter than a header", errDiagMalformed, len(rest), off)
		}
		l := binary.NativeEndian.Uint32(rest[0:])
		typ := binary.NativeEndian.Uint16(rest[4:])
		flags := binary.NativeEndian.Uint16(rest[6:])
		seq := binary.NativeEndian.Uint32(rest[8:])
		if l < nlmsgHdrLen || uint64(l) > uint64(len(rest)) {
			return fmt.Errorf("%w: message length %d at offset %d, %d bytes left", errDiagMalformed, l, off, len(rest))
		}
		msg := rest[nlmsgHdrLen:l]
		off += int(min((uint64(l)+3)&^3, uint64(len(rest)))) // NLMSG_ALIGN; the last may be unpadded
		if seq != d.seq {
			continue
		}
		if flags&unix.NLM_F_DUMP_INTR != 0 {
			d.intr = true
		}
		switch typ {
		case unix.NLMSG_NOOP:
		case unix.NLMSG_ERROR:
			if len(msg) < 4 {
				return fmt.Errorf("%w: error message of %d bytes", errDiagMalformed, len(msg))
			}
			code := int32(binary.NativeEndian.Uint32(msg))
			if code == 0 { // an acknowledgement, not asked for
				continue
			}
			return fmt.Errorf("%w: %w", errDiagKernel, errnoOf(code))
		case unix.NLMSG_DONE:
			if len(msg) >= 4 {
				if code := int32(binary.NativeEndian.Uint32(msg)); code < 0 {
					return fmt.Errorf("%w: dump ended with %w", errDiagKernel, errnoOf(code))
				}
			}
			if off < len(b) {
				return fmt.Errorf("%w: %d bytes after the end of the dump", errDiagMalformed, len(b)-off)
			}
			d.done = true
			return nil
		case unix.NLMSG_OVERRUN:
			return fmt.Errorf("%w: overrun, messages lost", errDiagKernel)
		case tcpdiagGetSock:
			s, err := diagSock(msg)
			if err != nil {
				if d.bad == 0 {
					d.firstBad = err
				}
				d.bad++
				continue
			}
			switch {
			case s.State == tcpListen:
				d.listeners = append(d.listeners, portUID{s.LocalPort, s.UID})
			case isRequestSock(msg, s):
				d.reqs = append(d.reqs, s)
				continue
			}
			out.add(s)
		default:
			if d.bad == 0 {
				d.firstBad = fmt.Errorf("%w: message type %d", errDiagMalformed, typ)
			}
			d.bad++
		}
	}
	return nil
}

// errnoOf turns a netlink error code (a negative errno) into an error.
func errnoOf(code int32) error {
	if code < 0 {
		code = -code
	}
	return unix.Errno(code)
}

const tcpSynRecv = 3

// diagSock converts a struct inet_diag_msg (and its attributes, ignored) into the tcpSock that
// /proc/net/tcp{,6} shows for the same socket (net/ipv4/tcp_ipv4.c get_tcp4_sock,
// get_timewait4_sock, get_openreq4; tcp_diag.c tcp_diag_get_info; inet_diag.c):
//   - the state is the same number: TIME_WAIT sockets show their substate (TIME_WAIT or
//     FIN_WAIT2) in both, request sockets SYN_RECV;
//   - RxQueue is the same: the accept backlog for LISTEN, unread bytes (rcv_nxt - copied_seq)
//     otherwise, 0 for time-wait and request sockets;
//   - TxQueue is write_seq - snd_una except for LISTEN, where netlink gives the backlog limit
//     and /proc write_seq - snd_una, which is 0 for a socket that never connected: 0 here, the
//     limit kept in Backlog (node_exporter's tcpstat adds it to tx_queued_bytes);
//   - the uid is the same except for request sockets (0 here, the listener's in /proc): the
//     dump fixes those (see tcpDiag.reqs).
func diagSock(msg []byte) (tcpSock, error) {
	if len(msg) < diagMsgLen {
		return tcpSock{}, fmt.Errorf("%w: socket record of %d bytes, want %d", errDiagMalformed, len(msg), diagMsgLen)
	}
	family, state := msg[0], msg[1]
	if family != unix.AF_INET && family != unix.AF_INET6 {
		return tcpSock{}, fmt.Errorf("%w: socket of address family %d", errDiagMalformed, family)
	}
	if state == 0 || int(state) >= len(tcpStates) {
		return tcpSock{}, fmt.Errorf("%w: socket in unknown state %d", errDiagMalformed, state)
	}
	s := tcpSock{
		LocalPort:  binary.BigEndian.Uint16(msg[4:]),
		RemotePort: binary.BigEndian.Uint16(msg[6:]),
		State:      state,
		RxQueue:    uint64(binary.NativeEndian.Uint32(msg[56:])),
		TxQueue:    uint64(binary.NativeEndian.Uint32(msg[60:])),
		UID:        binary.NativeEndian.Uint32(msg[64:]),
	}
	if state == tcpListen {
		s.Backlog = uint32(s.TxQueue)
		s.TxQueue = 0
	}
	return s, nil
}

// isRequestSock reports whether a record is a request socket (a connection in its handshake,
// before the kernel made a full socket of it): SYN_RECV with no inode and uid 0. A full socket
// in SYN_RECV (TCP Fast Open) has the listener's uid already; if that is 0 it makes no
// difference.
func isRequestSock(msg []byte, s tcpSock) bool {
	return s.State == tcpSynRecv && s.UID == 0 && binary.NativeEndian.Uint32(msg[68:]) == 0
}

// recvTrunc is recvfrom(2) with MSG_TRUNC and no source address (unix.Recvfrom allocates one
// per call): it returns the datagram's full length even when b was too short.
func recvTrunc(fd int, b []byte) (int, error) {
	n, _, e := unix.Syscall6(unix.SYS_RECVFROM, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)), unix.MSG_TRUNC, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}
