package sysscan

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/cantal-go/cantal/internal/kfile"
	"github.com/cantal-go/cantal/internal/series"
	"golang.org/x/sys/unix"
)

const nobodyUID = 65534

// tcpFixture is a set of sockets on loopback owned by the test, in most TCP states, with
// queues, on IPv4 and IPv6, one listener owned by another uid.
type tcpFixture struct {
	listenPorts map[uint16]bool
	owned       map[uint16]bool // listening ports and the local ports of the clients
	ln4, ln6    uint16
	lnNobody    uint16
	deferPort   uint16 // client of a TCP_DEFER_ACCEPT listener: its server side is a request socket
}

// keep reports whether a socket is one of the fixture's.
func (f *tcpFixture) keep(s tcpSock) bool {
	return f.owned[s.LocalPort] || f.listenPorts[s.RemotePort]
}

func port(a net.Addr) uint16 { return uint16(a.(*net.TCPAddr).Port) }

// listenAs opens a TCP listener on 127.0.0.1 whose socket belongs to uid: the socket is created
// with that file-system uid (setfsuid(2) applies to the calling thread only, hence the locked
// thread, which the Go runtime never clones).
func listenAs(t *testing.T, uid int, deferAccept bool) net.Listener {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if _, err := unix.SetfsuidRetUid(uid); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if prev, err := unix.SetfsuidRetUid(0); err != nil || prev != uid {
		t.Fatalf("setfsuid back to 0: fsuid was %d (%v); want %d", prev, err, uid)
	}
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), "listener")
	defer f.Close()
	if deferAccept {
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_DEFER_ACCEPT, 60); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 16); err != nil {
		t.Fatal(err)
	}
	ln, err := net.FileListener(f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

func newTCPFixture(t *testing.T) *tcpFixture {
	t.Helper()
	f := &tcpFixture{listenPorts: map[uint16]bool{}, owned: map[uint16]bool{}}
	listen := func(network, addr string) net.Listener {
		ln, err := net.Listen(network, addr)
		if err != nil {
			t.Fatalf("listen %s %s: %v", network, addr, err)
		}
		t.Cleanup(func() { ln.Close() })
		return ln
	}
	ln4 := listen("tcp4", "127.0.0.1:0")
	ln6 := listen("tcp6", "[::1]:0")
	lnNobody := listenAs(t, nobodyUID, false)
	lnDefer := listenAs(t, nobodyUID, true)
	for _, ln := range []net.Listener{ln4, ln6, lnNobody, lnDefer} {
		f.listenPorts[port(ln.Addr())] = true
		f.owned[port(ln.Addr())] = true
	}
	f.ln4, f.ln6, f.lnNobody = port(ln4.Addr()), port(ln6.Addr()), port(lnNobody.Addr())

	dial := func(ln net.Listener) net.Conn {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatalf("dial %s: %v", ln.Addr(), err)
		}
		t.Cleanup(func() { c.Close() })
		f.owned[port(c.LocalAddr())] = true
		return c
	}
	connect := func(ln net.Listener) (client, server net.Conn) {
		c := dial(ln)
		s, err := ln.Accept()
		if err != nil {
			t.Fatalf("accept %s: %v", ln.Addr(), err)
		}
		t.Cleanup(func() { s.Close() })
		return c, s
	}
	// Unread data: rx_queue 1000 on the server side.
	c, _ := connect(ln4)
	if _, err := c.Write(make([]byte, 1000)); err != nil {
		t.Fatal(err)
	}
	// A peer that does not read: the server's send queue fills, tx_queue > 0.
	_, s := connect(ln6)
	s.SetWriteDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := s.Write(make([]byte, 32<<20)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("filling the send queue: %v; want a deadline error", err)
	}
	// A connection to the nobody listener, accepted.
	connect(lnNobody)
	// Closed by the client only: FIN_WAIT2 (a time-wait socket once orphaned) and CLOSE_WAIT.
	c, _ = connect(ln6)
	c.Close()
	c, _ = connect(ln4)
	c.Close()
	// Closed by both: TIME_WAIT.
	c, s = connect(ln4)
	c.Close()
	s.Close()
	// Connections not accepted: the listeners' accept queues (last, since Accept takes the
	// oldest connection of the queue).
	dial(ln4)
	dial(ln4)
	dial(lnNobody)
	// The server side stays a request socket (SYN_RECV) until data comes.
	f.deferPort = port(dial(lnDefer).LocalAddr())
	return f
}

// procSockets reads the fixture's sockets from /proc/net/tcp and tcp6 with the collector's
// parser.
func procSockets(t *testing.T, f *tcpFixture) []tcpSock {
	t.Helper()
	var socks []tcpSock
	lr := kfile.LineReader{Buf: make([]byte, 64<<10)}
	for _, name := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		fd, err := unix.Open(name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		err = lr.Each(fd, func(line []byte) {
			s, ok, err := parseTCPLine(line)
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
			if ok && f.keep(s) {
				socks = append(socks, s)
			}
		})
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
	}
	return socks
}

// keptSockets is a tcpAdder keeping the fixture's sockets.
type keptSockets struct {
	f        *tcpFixture
	socks    []tcpSock
	backlogs []uint32 // Backlog of each in socks, in the order added
}

func (k *keptSockets) add(s tcpSock) {
	if k.f.keep(s) {
		k.backlogs = append(k.backlogs, s.Backlog)
		s.Backlog = 0 // netlink only: /proc/net/tcp does not show a listener's limit
		k.socks = append(k.socks, s)
	}
}

func sortSocks(s []tcpSock) {
	slices.SortFunc(s, func(a, b tcpSock) int {
		return cmp.Or(cmp.Compare(a.LocalPort, b.LocalPort), cmp.Compare(a.RemotePort, b.RemotePort),
			cmp.Compare(a.State, b.State), cmp.Compare(a.TxQueue, b.TxQueue), cmp.Compare(a.RxQueue, b.RxQueue),
			cmp.Compare(a.UID, b.UID))
	})
}

// TestTCPDiagMatchesProc checks, on the real machine, that the netlink dump gives the same
// sockets as /proc/net/tcp and tcp6 (state, ports, queues, uid) and that both paths give the
// same series for the fixture's ports. Only the fixture's sockets are compared, so that other
// sockets of the machine do not matter; its own may still change state between the two reads
// (a time-wait socket moving on), hence a few attempts.
func TestTCPDiagMatchesProc(t *testing.T) {
	f := newTCPFixture(t)
	var d tcpDiag
	defer d.close()
	ctx := context.Background()
	var diff string
	for attempt := 0; attempt < 5; attempt++ {
		if attempt > 0 {
			time.Sleep(100 * time.Millisecond)
		}
		kept := keptSockets{f: f}
		if err := d.dump(ctx, &kept); err != nil {
			t.Fatalf("dump: %v", err)
		}
		if d.bad != 0 {
			t.Fatalf("dump: %d bad records, first %v", d.bad, d.firstBad)
		}
		fromProc := procSockets(t, f)
		sortSocks(kept.socks)
		sortSocks(fromProc)
		if diff = socksDiff(kept.socks, fromProc); diff == "" {
			checkFixtureSockets(t, f, kept.socks)
			break
		}
	}
	if diff != "" {
		t.Fatalf("netlink and /proc differ after 5 attempts:\n%s", diff)
	}

	// The same through the collector, both paths, for the fixture's listening ports.
	procfd, err := kfile.OpenDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(procfd)
	viaDiag, viaProc := newTCPScan(false), newTCPScan(false)
	defer viaDiag.close()
	defer viaProc.close()
	viaProc.noDiag = true
	for attempt := 0; ; attempt++ {
		rd, rp := series.NewRecorder(), series.NewRecorder()
		viaDiag.collect(ctx, procfd, "/proc", rd, uint64(attempt+1))
		viaProc.collect(ctx, procfd, "/proc", rp, uint64(attempt+1))
		if len(rd.Problems)+len(rp.Problems) != 0 {
			t.Fatalf("problems: netlink %v, /proc %v", rd.Problems, rp.Problems)
		}
		if !viaDiag.diag.open || viaProc.diag.open {
			t.Fatalf("netlink open: %v and %v; want true for the netlink scan only", viaDiag.diag.open, viaProc.diag.open)
		}
		diff = ""
		for p := range f.listenPorts {
			ps := strconv.Itoa(int(p))
			for _, m := range []string{"tcp.listen.sockets", "tcp.listen.queue", "tcp.listen.established"} {
				key := series.Labels{"metric": m, "port": ps}.Key()
				vd, okd := rd.Values[key]
				vp, okp := rp.Values[key]
				if vd != vp || !okd || !okp {
					diff += fmt.Sprintf("%s: netlink %d (%v), /proc %d (%v)\n", key, vd, okd, vp, okp)
				}
			}
		}
		if diff == "" {
			q := rd.Values[series.Labels{"metric": "tcp.listen.queue", "port": strconv.Itoa(int(f.ln4))}.Key()]
			if q != 2 {
				t.Errorf("tcp.listen.queue of the IPv4 listener = %d; want 2", q)
			}
			break
		}
		if attempt == 4 {
			t.Fatalf("series differ after 5 attempts:\n%s", diff)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func socksDiff(a, b []tcpSock) string {
	if slices.Equal(a, b) {
		return ""
	}
	s := "netlink:\n"
	for _, x := range a {
		s += fmt.Sprintf("  %+v\n", x)
	}
	s += "/proc:\n"
	for _, x := range b {
		s += fmt.Sprintf("  %+v\n", x)
	}
	return s
}

// checkFixtureSockets checks that the sockets seen are the ones the fixture made, so that the
// comparison is not between two equally wrong views.
func checkFixtureSockets(t *testing.T, f *tcpFixture, socks []tcpSock) {
	t.Helper()
	has := func(what string, pred func(s tcpSock) bool) {
		t.Helper()
		if !slices.ContainsFunc(socks, pred) {
			t.Errorf("no %s among %+v", what, socks)
		}
	}
	has("IPv4 listener with 2 connections waiting", func(s tcpSock) bool {
		return s.State == tcpListen && s.LocalPort == f.ln4 && s.RxQueue == 2 && s.TxQueue == 0
	})
	has("IPv6 listener", func(s tcpSock) bool { return s.State == tcpListen && s.LocalPort == f.ln6 })
	has("listener of uid nobody with 1 connection waiting", func(s tcpSock) bool {
		return s.State == tcpListen && s.LocalPort == f.lnNobody && s.UID == nobodyUID && s.RxQueue == 1
	})
	has("connection with 1000 unread bytes", func(s tcpSock) bool {
		return s.State == 1 && s.LocalPort == f.ln4 && s.RxQueue == 1000
	})
	has("connection with a send queue", func(s tcpSock) bool {
		return s.State == 1 && s.LocalPort == f.ln6 && s.TxQueue > 0
	})
	has("request socket of the nobody listener", func(s tcpSock) bool {
		return s.State == tcpSynRecv && s.RemotePort == f.deferPort && s.UID == nobodyUID
	})
	has("close_wait", func(s tcpSock) bool { return s.State == 8 })
	// fin_wait1 until the peer's delayed ACK of the FIN, fin_wait2 afterwards.
	has("fin_wait1 or fin_wait2", func(s tcpSock) bool { return s.State == 4 || s.State == 5 })
	has("time_wait", func(s tcpSock) bool { return s.State == 6 })
}

// TestMachineTCPNetlink checks that a Machine reading the host's /proc counts the TCP sockets
// through netlink, with no problem.
func TestMachineTCPNetlink(t *testing.T) {
	f := newTCPFixture(t)
	m := NewMachine(Options{TCPEvery: 1})
	defer m.Close()
	for gen := range 2 {
		r := series.NewRecorder()
		if err := m.Collect(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		for src, reasons := range r.Problems {
			t.Errorf("scan %d: problem %s: %v", gen, src, reasons)
		}
		if !m.tcp.diag.open || m.tcp.diag.seq != uint32(gen+1) || m.tcp.files[0].Open {
			t.Fatalf("scan %d: netlink open %v, seq %d, /proc/net/tcp open %v; want netlink only", gen, m.tcp.diag.open, m.tcp.diag.seq, m.tcp.files[0].Open)
		}
		if v := mustValue(t, r, series.Labels{"metric": "tcp.listen.sockets", "port": strconv.Itoa(int(f.lnNobody))}); v != 1 {
			t.Errorf("scan %d: tcp.listen.sockets of the nobody listener = %d; want 1", gen, v)
		}
		if v := mustValue(t, r, series.Labels{"metric": "tcp.uid.sockets", "uid": strconv.Itoa(nobodyUID)}); v < 3 {
			t.Errorf("scan %d: tcp.uid.sockets{uid=%d} = %d; want at least 3 (2 listeners, a request socket)", gen, nobodyUID, v)
		}
	}
}
