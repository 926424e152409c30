package sysscan

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/cantal-go/cantal/internal/kfile"
	"github.com/cantal-go/cantal/internal/series"
	"golang.org/x/sys/unix"
)

// sockList is a tcpAdder keeping every socket.
type sockList []tcpSock

func (l *sockList) add(s tcpSock) { *l = append(*l, s) }

// nlMsg builds one netlink message, padded to 4 bytes.
func nlMsg(typ, flags uint16, seq uint32, body []byte) []byte {
	l := nlmsgHdrLen + len(body)
	b := make([]byte, (l+3)&^3)
	binary.NativeEndian.PutUint32(b[0:], uint32(l))
	binary.NativeEndian.PutUint16(b[4:], typ)
	binary.NativeEndian.PutUint16(b[6:], flags)
	binary.NativeEndian.PutUint32(b[8:], seq)
	copy(b[nlmsgHdrLen:], body)
	return b
}

// diagRecord builds a struct inet_diag_msg followed by an INET_DIAG_SHUTDOWN attribute, as the
// kernel sends it.
func diagRecord(family, state uint8, sport, dport uint16, rq, wq, uid, inode uint32) []byte {
	r := make([]byte, diagMsgLen+8)
	r[0], r[1] = family, state
	binary.BigEndian.PutUint16(r[4:], sport)
	binary.BigEndian.PutUint16(r[6:], dport)
	binary.NativeEndian.PutUint32(r[56:], rq)
	binary.NativeEndian.PutUint32(r[60:], wq)
	binary.NativeEndian.PutUint32(r[64:], uid)
	binary.NativeEndian.PutUint32(r[68:], inode)
	binary.NativeEndian.PutUint16(r[72:], 5) // nla_len
	binary.NativeEndian.PutUint16(r[74:], 8) // INET_DIAG_SHUTDOWN
	return r
}

func errnoBody(code int32) []byte {
	b := make([]byte, 4+nlmsgHdrLen)
	binary.NativeEndian.PutUint32(b, uint32(code))
	return b
}

func concat(bs ...[]byte) []byte {
	var out []byte
	for _, b := range bs {
		out = append(out, b...)
	}
	return out
}

func TestParseDiagRecords(t *testing.T) {
	const seq = 7
	d := tcpDiag{seq: seq}
	d.startDump()
	var got sockList
	dgram1 := concat(
		nlMsg(tcpdiagGetSock, unix.NLM_F_MULTI, seq, diagRecord(unix.AF_INET, tcpListen, 8080, 0, 3, 4096, 1000, 11)),
		nlMsg(tcpdiagGetSock, unix.NLM_F_MULTI, seq, diagRecord(unix.AF_INET6, tcpListen, 8080, 0, 0, 4096, 1001, 12)),
		nlMsg(tcpdiagGetSock, unix.NLM_F_MULTI, seq, diagRecord(unix.AF_INET6, 1, 50000, 443, 10, 20, 1002, 13)),
		// A request socket of the 8080 listeners: the first listener's uid.
		nlMsg(tcpdiagGetSock, unix.NLM_F_MULTI, seq, diagRecord(unix.AF_INET, tcpSynRecv, 8080, 40000, 0, 0, 0, 0)),
		// A request socket of no listener seen: uid 0, as the record says.
		nlMsg(tcpdiagGetSock, unix.NLM_F_MULTI, seq, diagRecord(unix.AF_INET, tcpSynRecv, 9090, 40001, 0, 0, 0, 0)),
	)
	dgram2 := concat(
		nlMsg(tcpdiagGetSock, unix.NLM_F_MULTI, seq, diagRecord(unix.AF_INET, 6, 50001, 80, 0, 0, 0, 0)),
		// A full socket in SYN_RECV (Fast Open) keeps its own uid.
		nlMsg(tcpdiagGetSock, unix.NLM_F_MULTI, seq, diagRecord(unix.AF_INET, tcpSynRecv, 8080, 40002, 5, 6, 1003, 0)),
		nlMsg(unix.NLMSG_DONE, unix.NLM_F_MULTI, seq, []byte{0, 0, 0, 0}),
	)
	if err := d.parse(dgram1, &got); err != nil || d.done {
		t.Fatalf("first datagram: %v, done %v; want nil, false", err, d.done)
	}
	if err := d.parse(dgram2, &got); err != nil || !d.done {
		t.Fatalf("second datagram: %v, done %v; want nil, true", err, d.done)
	}
	d.finishDump(&got)
	want := sockList{
		// TxQueue: the backlog limit, 0 as /proc shows it, kept in Backlog.
		{LocalPort: 8080, State: tcpListen, RxQueue: 3, UID: 1000, Backlog: 4096},
		{LocalPort: 8080, State: tcpListen, UID: 1001, Backlog: 4096},
		{LocalPort: 50000, RemotePort: 443, State: 1, RxQueue: 10, TxQueue: 20, UID: 1002},
		{LocalPort: 50001, RemotePort: 80, State: 6},
		{LocalPort: 8080, RemotePort: 40002, State: tcpSynRecv, RxQueue: 5, TxQueue: 6, UID: 1003},
		{LocalPort: 8080, RemotePort: 40000, State: tcpSynRecv, UID: 1000},
		{LocalPort: 9090, RemotePort: 40001, State: tcpSynRecv},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d sockets %+v; want %+v", len(got), got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("socket %d = %+v; want %+v", i, got[i], want[i])
		}
	}
	if d.bad != 0 || d.intr {
		t.Errorf("bad %d (%v), intr %v; want 0, false", d.bad, d.firstBad, d.intr)
	}
}

func TestParseDiagSkips(t *testing.T) {
	const seq = 3
	d := tcpDiag{seq: seq}
	d.startDump()
	var got sockList
	short := diagRecord(unix.AF_INET, 1, 1, 2, 0, 0, 0, 0)[:40]
	b := concat(
		nlMsg(tcpdiagGetSock, 0, seq-1, diagRecord(unix.AF_INET, 1, 1, 2, 0, 0, 0, 0)), // stale
		nlMsg(unix.NLMSG_DONE, 0, seq-1, []byte{0, 0, 0, 0}),                           // stale end
		nlMsg(unix.NLMSG_NOOP, 0, seq, nil),
		nlMsg(unix.NLMSG_ERROR, 0, seq, errnoBody(0)), // an acknowledgement
		nlMsg(tcpdiagGetSock, 0, seq, short),
		nlMsg(tcpdiagGetSock, 0, seq, diagRecord(unix.AF_UNIX, 1, 1, 2, 0, 0, 0, 0)),
		nlMsg(tcpdiagGetSock, 0, seq, diagRecord(unix.AF_INET, 0, 1, 2, 0, 0, 0, 0)),
		nlMsg(tcpdiagGetSock, 0, seq, diagRecord(unix.AF_INET, 13, 1, 2, 0, 0, 0, 0)), // TCP_BOUND_INACTIVE
		nlMsg(99, 0, seq, nil),
		nlMsg(tcpdiagGetSock, unix.NLM_F_DUMP_INTR, seq, diagRecord(unix.AF_INET6, 8, 5, 6, 1, 0, 7, 9)),
		nlMsg(unix.NLMSG_DONE, 0, seq, []byte{0, 0, 0, 0}),
	)
	if err := d.parse(b, &got); err != nil {
		t.Fatalf("parse: %v", err)
	}
	if !d.done || !d.intr {
		t.Errorf("done %v, intr %v; want true, true", d.done, d.intr)
	}
	if len(got) != 1 || got[0] != (tcpSock{LocalPort: 5, RemotePort: 6, State: 8, RxQueue: 1, UID: 7}) {
		t.Errorf("sockets %+v; want the close_wait one only", got)
	}
	if d.bad != 5 || !errors.Is(d.firstBad, errDiagMalformed) || !strings.Contains(d.firstBad.Error(), "record of 40 bytes") {
		t.Errorf("bad %d, first %v; want 5, the short record", d.bad, d.firstBad)
	}
}

func TestParseDiagErrors(t *testing.T) {
	const seq = 1
	rec := nlMsg(tcpdiagGetSock, 0, seq, diagRecord(unix.AF_INET, 1, 1, 2, 0, 0, 0, 0))
	done := nlMsg(unix.NLMSG_DONE, 0, seq, []byte{0, 0, 0, 0})
	long := append([]byte(nil), rec...)
	binary.NativeEndian.PutUint32(long, uint32(len(rec)+1))
	tiny := append([]byte(nil), rec...)
	binary.NativeEndian.PutUint32(tiny, 8)
	for _, tc := range []struct {
		name   string
		b      []byte
		is     []error
		reason string
	}{
		{"kernel error", nlMsg(unix.NLMSG_ERROR, 0, seq, errnoBody(-int32(unix.EINVAL))), []error{errDiagKernel, unix.EINVAL}, "invalid argument"},
		{"short error", nlMsg(unix.NLMSG_ERROR, 0, seq, []byte{1, 2}), []error{errDiagMalformed}, "error message of 2 bytes"},
		{"done with error", nlMsg(unix.NLMSG_DONE, 0, seq, errnoBody(-int32(unix.ENOBUFS))[:4]), []error{errDiagKernel, unix.ENOBUFS}, "dump ended with"},
		{"overrun", nlMsg(unix.NLMSG_OVERRUN, 0, seq, nil), []error{errDiagKernel}, "overrun"},
		{"truncated header", rec[:10], []error{errDiagMalformed}, "shorter than a header"},
		{"truncated record", rec[:len(rec)-8], []error{errDiagMalformed}, "message length"},
		{"length beyond datagram", long, []error{errDiagMalformed}, "message length"},
		{"length below header", tiny, []error{errDiagMalformed}, "message length 8"},
		{"trailing garbage", concat(rec, []byte{1, 2, 3}), []error{errDiagMalformed}, "shorter than a header"},
		{"data after done", concat(done, rec), []error{errDiagMalformed}, "after the end of the dump"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := tcpDiag{seq: seq}
			d.startDump()
			var got sockList
			err := d.parse(tc.b, &got)
			if err == nil {
				t.Fatalf("parse = nil; want an error")
			}
			for _, target := range tc.is {
				if !errors.Is(err, target) {
					t.Errorf("parse = %v; want it to wrap %v", err, target)
				}
			}
			if !strings.Contains(err.Error(), tc.reason) {
				t.Errorf("parse = %q; want it to say %q", err, tc.reason)
			}
		})
	}
	// A datagram after the end of the dump.
	d := tcpDiag{seq: seq}
	d.startDump()
	var got sockList
	if err := d.parse(done, &got); err != nil || !d.done {
		t.Fatalf("parse(done) = %v, done %v", err, d.done)
	}
	if err := d.parse(rec, &got); !errors.Is(err, errDiagMalformed) {
		t.Errorf("datagram after done: %v; want errDiagMalformed", err)
	}
}

// TestParseDiagFixture parses a real dump (testdata/inet_diag_dump: the messages of a
// TCPDIAG_GETSOCK dump on Linux 6.18, sequence number 1, listeners and connections on IPv4 and
// IPv6 loopback in most states) and checks it against what /proc/net/tcp showed at the same time.
func TestParseDiagFixture(t *testing.T) {
	d := tcpDiag{seq: 1}
	d.startDump()
	var got sockList
	if err := d.parse(readFixture(t, "inet_diag_dump"), &got); err != nil {
		t.Fatalf("parse: %v", err)
	}
	d.finishDump(&got)
	if !d.done || d.bad != 0 {
		t.Fatalf("done %v, bad %d (%v); want true, 0", d.done, d.bad, d.firstBad)
	}
	want := map[tcpSock]int{
		// A listener's accept queue limit is netlink's send queue (Backlog).
		{LocalPort: 38441, State: tcpListen, Backlog: 4096}:               1,
		{LocalPort: 45821, State: tcpListen, RxQueue: 1, Backlog: 4096}:   1,
		{LocalPort: 2024, State: tcpListen, Backlog: 128}:                 1,
		{LocalPort: 22698, State: tcpListen, Backlog: 4096}:               1,
		{LocalPort: 45821, RemotePort: 49444, State: 1, RxQueue: 1000}:    1,
		{LocalPort: 49444, RemotePort: 45821, State: 1}:                   1,
		{LocalPort: 38441, RemotePort: 47144, State: 1, TxQueue: 3791872}: 1,
		{LocalPort: 47144, RemotePort: 38441, State: 1, RxQueue: 128000}:  1,
		{LocalPort: 38441, RemotePort: 47146, State: 8, RxQueue: 1}:       1,
		{LocalPort: 47146, RemotePort: 38441, State: 5}:                   1,
		{LocalPort: 45821, RemotePort: 49448, State: 5}:                   1,
		{LocalPort: 49448, RemotePort: 45821, State: 8, RxQueue: 1}:       1,
		{LocalPort: 49456, RemotePort: 45821, State: 5}:                   1,
		{LocalPort: 45821, RemotePort: 49456, State: 8, RxQueue: 1}:       1,
		{LocalPort: 38442, RemotePort: 37723, State: 6}:                   1,
		{LocalPort: 38390, RemotePort: 22698, State: 6}:                   1,
		{LocalPort: 44197, RemotePort: 33760, State: 6}:                   1,
	}
	for _, s := range got {
		want[s]--
	}
	for s, n := range want {
		if n != 0 {
			t.Errorf("socket %+v: %d more than in the fixture", s, -n)
		}
	}
}

// FuzzParseInetDiag feeds arbitrary datagrams to the dump parser: it must never panic, and
// what it accepts must be a TCP socket of a known state.
func FuzzParseInetDiag(f *testing.F) {
	dump := readFixture(f, "inet_diag_dump")
	f.Add(dump)
	for b := dump; len(b) >= nlmsgHdrLen; {
		l := (int(binary.NativeEndian.Uint32(b)) + 3) &^ 3
		if l < nlmsgHdrLen || l > len(b) {
			f.Fatalf("fixture: bad message length %d", l)
		}
		f.Add(b[:l])
		b = b[l:]
	}
	f.Add(nlMsg(unix.NLMSG_ERROR, 0, 1, errnoBody(-int32(unix.EINVAL))))
	f.Add(nlMsg(tcpdiagGetSock, unix.NLM_F_DUMP_INTR, 1, diagRecord(unix.AF_INET, tcpSynRecv, 1, 2, 0, 0, 0, 0)))
	ts := newTCPScan(false)
	f.Fuzz(func(t *testing.T, b []byte) {
		d := tcpDiag{seq: 1}
		d.startDump()
		var got sockList
		err := d.parse(b, &got)
		if err == nil {
			d.finishDump(&got)
		}
		if len(got)+d.bad > len(b)/nlmsgHdrLen {
			t.Errorf("%d sockets and %d bad records from %d bytes", len(got), d.bad, len(b))
		}
		for _, s := range got {
			if s.State == 0 || int(s.State) >= len(tcpStates) {
				t.Errorf("state %d accepted", s.State)
			}
			if s.State == tcpListen && s.TxQueue != 0 {
				t.Errorf("listener with tx queue %d", s.TxQueue)
			}
		}
		if d.bad > 0 && d.firstBad == nil {
			t.Errorf("%d bad records and no first error", d.bad)
		}
		// The collector path must take whatever the parser accepted.
		ts.reset()
		for _, s := range got {
			ts.add(s)
		}
		ts.emit(&series.Discard{}, 1)
	})
}

// injectBrokenDiag makes the next dump of t fail: its netlink socket is replaced by a pipe, to
// which the request can be written but from which recvfrom fails with ENOTSOCK.
func injectBrokenDiag(t *testing.T, ts *tcpScan) {
	t.Helper()
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(p[0]) })
	ts.diag.close()
	ts.diag.fd, ts.diag.open = p[1], true // closed by the failed dump
}

// TestTCPDiagFallback checks that a failed dump is reported, that the scan then reads
// /proc/net/tcp, that netlink is tried again on the next scan, and given up after diagMaxFails
// failures in a row.
func TestTCPDiagFallback(t *testing.T) {
	procfd, err := kfile.OpenDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(procfd)
	ts := newTCPScan(false)
	defer ts.close()
	ctx := context.Background()
	scan := func(gen uint64) *series.Recorder {
		r := series.NewRecorder()
		ts.collect(ctx, procfd, "/proc", r, gen)
		if _, ok := r.Values[`{"metric":"tcp.sockets","state":"listen"}`]; !ok {
			t.Fatalf("scan %d: no tcp.sockets series; problems %v", gen, r.Problems)
		}
		return r
	}

	injectBrokenDiag(t, &ts)
	r := scan(1)
	if p := r.Problems[diagSource]; len(p) != 1 || !strings.Contains(p[0], "socket operation on non-socket; read /proc/net/tcp for this scan") {
		t.Errorf("problems after a failed dump: %q", p)
	}
	if ts.diagFails != 1 || ts.diagOff || !ts.files[0].Open {
		t.Errorf("after a failed dump: fails %d, off %v, /proc/net/tcp open %v; want 1, false, true", ts.diagFails, ts.diagOff, ts.files[0].Open)
	}

	r = scan(2)
	if len(r.Problems) != 0 || ts.diagFails != 0 || !ts.diag.open {
		t.Errorf("next scan: problems %v, fails %d, netlink open %v; want none, 0, true", r.Problems, ts.diagFails, ts.diag.open)
	}

	for i := range diagMaxFails {
		injectBrokenDiag(t, &ts)
		r = scan(uint64(3 + i))
	}
	if p := r.Problems[diagSource]; len(p) != 1 || !strings.HasSuffix(p[0], "; reading /proc/net/tcp from now on") {
		t.Errorf("problems after %d failed dumps: %q", diagMaxFails, p)
	}
	if !ts.diagOff {
		t.Fatalf("netlink still on after %d failed dumps", diagMaxFails)
	}
	r = scan(10)
	if len(r.Problems) != 0 || ts.diag.open {
		t.Errorf("scan after giving up: problems %v, netlink open %v; want none, false", r.Problems, ts.diag.open)
	}
}

// TestTCPDiagOtherProc checks that a proc root other than /proc is read from its files, never
// through netlink (which would show the agent's own namespace).
func TestTCPDiagOtherProc(t *testing.T) {
	m := NewMachine(Options{Proc: "testdata/proc"})
	defer m.Close()
	r := series.NewRecorder()
	if err := m.Collect(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if m.tcp.diag.open || m.tcp.diag.seq != 0 {
		t.Errorf("netlink used for testdata/proc")
	}
	if _, err := os.Stat("testdata/proc/net/tcp"); err != nil {
		t.Fatal(err)
	}
	if v := r.Values[`{"metric":"tcp.listen.queue","port":"22"}`]; v != 3 {
		t.Errorf("tcp.listen.queue{port=22} = %d; want 3 (from the fixture)", v)
	}
}
