package procscan

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// listEvery is how often (in scans) Processes lists /proc although the process events
// connector tells it of every new process: a safety net against anything the events miss.
const listEvery = 30

// Process events connector (linux/connector.h, linux/cn_proc.h).
const (
	cnIdxProc         = 1
	cnValProc         = 1
	procCnMcastListen = 1
	procEventNone     = 0x00000000
	procEventFork     = 0x00000001

	nlmsgHdrLen = unix.NLMSG_HDRLEN
	cnMsgLen    = 20 // struct cn_msg: id {idx, val}, seq, ack, len (u16), flags (u16)
	// struct proc_event: what, cpu, timestamp_ns (u64), then the event's data.
	procEventData = nlmsgHdrLen + cnMsgLen + 16
)

// procEvents learns of new processes from the kernel's process events connector (netlink,
// NETLINK_CONNECTOR, CN_IDX_PROC), so that a scan does not need to list /proc: getdents(2) of
// /proc costs ~1.5 ms of kernel time for 1000 processes here, cold, and grows with their number,
// while the events cost a recvfrom(2) per new process. A scan then reads the processes it knew
// plus those forked since; exits show when a process's stat file is gone, as before.
//
// Events are a hint, never trusted to be complete: when the socket's buffer overflowed (ENOBUFS)
// or any error occurred the scan lists /proc, and it does every listEvery scans anyway. The
// connector only works for root in the initial namespaces; opening fails otherwise (no
// acknowledgement of the subscription arrives) and Processes lists /proc at every scan. Owned by
// one Processes; not safe for concurrent use.
type procEvents struct {
	fd         int
	buf        []byte
	lost       bool // events were lost since the last drain: list /proc
	unfiltered bool // forkFilter could not be attached
}

// openProcEvents subscribes to process events and waits (up to wait) for the kernel's
// acknowledgement.
func openProcEvents(wait time.Duration) (*procEvents, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_CONNECTOR)
	if err != nil {
		return nil, fmt.Errorf("process events: socket: %w", err)
	}
	e := &procEvents{fd: fd, buf: make([]byte, 64<<10)}
	if err := e.subscribe(wait); err != nil {
		unix.Close(fd)
		return nil, err
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("process events: %w", err)
	}
	return e, nil
}

func (e *procEvents) subscribe(wait time.Duration) error {
	if err := unix.Bind(e.fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: cnIdxProc}); err != nil {
		return fmt.Errorf("process events: bind: %w", err)
	}
	// Only forks of processes reach this socket (see forkFilter); without the filter (an old
	// kernel) every event does, and drain skips what it does not need.
	if prog := forkFilter(); unix.SetsockoptSockFprog(e.fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}) != nil {
		e.unfiltered = true
	}
	// Room for bursts: a fork storm of a few thousand processes between two scans.
	if err := unix.SetsockoptInt(e.fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20); err != nil {
		unix.SetsockoptInt(e.fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 8<<20)
	}
	// The acknowledgement carries our cn_msg ack + 1, and other subscribers' acknowledgements
	// reach this socket too: an ack number of our own.
	ack := uint32(time.Now().UnixNano())>>1 | 1
	msg := make([]byte, nlmsgHdrLen+cnMsgLen+4)
	binary.NativeEndian.PutUint32(msg[0:], uint32(len(msg)))
	binary.NativeEndian.PutUint16(msg[4:], unix.NLMSG_DONE)
	binary.NativeEndian.PutUint32(msg[8:], ack)
	cn := msg[nlmsgHdrLen:]
	binary.NativeEndian.PutUint32(cn[0:], cnIdxProc)
	binary.NativeEndian.PutUint32(cn[4:], cnValProc)
	binary.NativeEndian.PutUint32(cn[12:], ack)
	binary.NativeEndian.PutUint16(cn[16:], 4)
	binary.NativeEndian.PutUint32(cn[cnMsgLen:], procCnMcastListen)
	if err := unix.Sendto(e.fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("process events: subscribe: %w", err)
	}
	// The kernel acknowledges with a PROC_EVENT_NONE carrying our ack + 1 and an error number;
	// without it (not in the initial namespaces) no event would ever come.
	tv := unix.NsecToTimeval(wait.Nanoseconds())
	if err := unix.SetsockoptTimeval(e.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return fmt.Errorf("process events: %w", err)
	}
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		n, _, err := unix.Recvfrom(e.fd, e.buf, 0)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return fmt.Errorf("process events: no acknowledgement of the subscription: %w", err)
		}
		acked, errno := false, uint32(0)
		err = parseProcEvents(e.buf[:n], func(what uint32, data []byte, cnAck uint32) {
			if what == procEventNone && cnAck == ack+1 && len(data) >= 4 {
				acked, errno = true, binary.NativeEndian.Uint32(data)
			}
		})
		if err != nil {
			return err
		}
		if acked && errno != 0 {
			return fmt.Errorf("process events: subscription refused: %w", unix.Errno(errno))
		}
		if acked {
			return nil
		}
	}
	return errors.New("process events: no acknowledgement of the subscription")
}

// drain reads the pending events and calls fork with the pid of each new process (not thread).
// It reports whether events were lost (the caller must list /proc).
func (e *procEvents) drain(fork func(pid int)) (lost bool) {
	lost, e.lost = e.lost, false
	for {
		n, _, err := unix.Recvfrom(e.fd, e.buf, 0)
		if err != nil {
			switch {
			case errors.Is(err, unix.EAGAIN):
				return lost
			case errors.Is(err, unix.EINTR):
				continue
			}
			lost = true // ENOBUFS: the buffer overflowed; anything else: distrust it too
			if !errors.Is(err, unix.ENOBUFS) {
				return lost
			}
			continue
		}
		if err := parseProcEvents(e.buf[:n], func(what uint32, data []byte, _ uint32) {
			if what != procEventFork || len(data) < 16 {
				return
			}
			childPID := binary.NativeEndian.Uint32(data[8:])
			childTGID := binary.NativeEndian.Uint32(data[12:])
			if childPID == childTGID && childPID > 0 && childPID < 1<<31 {
				fork(int(childPID))
			}
		}); err != nil {
			lost = true
		}
	}
}

// forkFilter is a classic BPF socket filter that passes only the events drain uses: the fork
// of a process (not of a thread: child pid = child tgid) and the subscription's acknowledgement
// (PROC_EVENT_NONE). Every process that starts and exits also sends an exec and an exit event,
// and a thread its fork and exit: dropped in the kernel, they cost no recvfrom(2) here (about
// 1000 a scan under heavy churn). The kernel sends one event per datagram.
func forkFilter() []unix.SockFilter {
	// Absolute loads read big-endian; the event's fields are in the host's order.
	host := func(v uint32) uint32 {
		var b [4]byte
		binary.NativeEndian.PutUint32(b[:], v)
		return binary.BigEndian.Uint32(b[:])
	}
	const (
		what      = nlmsgHdrLen + cnMsgLen // proc_event.what
		childPID  = procEventData + 8      // fork: child_pid
		childTGID = procEventData + 12     // fork: child_tgid
		ldW       = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeqK      = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	)
	return []unix.SockFilter{
		{Code: ldW, K: what},
		{Code: jeqK, K: host(procEventNone), Jt: 5}, // → accept
		{Code: jeqK, K: host(procEventFork), Jf: 5}, // → drop
		{Code: ldW, K: childTGID},
		{Code: unix.BPF_MISC | unix.BPF_TAX},
		{Code: ldW, K: childPID},
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_X, Jf: 1}, // → drop
		{Code: unix.BPF_RET | unix.BPF_K, K: 0xffffffff},        // accept
		{Code: unix.BPF_RET | unix.BPF_K, K: 0},                 // drop
	}
}

func (e *procEvents) close() {
	if e != nil && e.fd >= 0 {
		unix.Close(e.fd)
		e.fd = -1
	}
}

// parseProcEvents calls fn for each proc_event in a datagram from the connector: its type, its
// data (the union after what, cpu and timestamp) and the cn_msg's ack. It returns an
// error for a malformed datagram (fn has been called for the messages before the fault).
func parseProcEvents(b []byte, fn func(what uint32, data []byte, ack uint32)) error {
	for len(b) > 0 {
		if len(b) < nlmsgHdrLen {
			return fmt.Errorf("process events: %d bytes left, short of a netlink header", len(b))
		}
		l := int(binary.NativeEndian.Uint32(b[0:]))
		typ := binary.NativeEndian.Uint16(b[4:])
		if l < nlmsgHdrLen || l > len(b) {
			return fmt.Errorf("process events: netlink message of %d bytes in %d", l, len(b))
		}
		msg := b[:l]
		if next := (l + 3) &^ 3; next < len(b) {
			b = b[next:]
		} else {
			b = nil
		}
		if typ == unix.NLMSG_ERROR || typ == unix.NLMSG_NOOP || typ == unix.NLMSG_OVERRUN {
			if typ == unix.NLMSG_OVERRUN {
				return errors.New("process events: overrun")
			}
			continue
		}
		if len(msg) < procEventData {
			return fmt.Errorf("process events: message of %d bytes, short of an event", len(msg))
		}
		cn := msg[nlmsgHdrLen:]
		if binary.NativeEndian.Uint32(cn[0:]) != cnIdxProc || binary.NativeEndian.Uint32(cn[4:]) != cnValProc {
			continue // another connector's message
		}
		dataLen := int(binary.NativeEndian.Uint16(cn[16:]))
		if cnMsgLen+dataLen > len(cn) || dataLen < 16 {
			return fmt.Errorf("process events: event of %d bytes in a message of %d", dataLen, len(msg))
		}
		ev := cn[cnMsgLen : cnMsgLen+dataLen]
		fn(binary.NativeEndian.Uint32(ev[0:]), ev[16:], binary.NativeEndian.Uint32(cn[12:]))
	}
	return nil
}
