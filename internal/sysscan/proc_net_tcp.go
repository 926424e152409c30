package sysscan

// /proc/net/tcp and tcp6: TCP sockets by state, listening port and uid (Machine); for the host's
// own /proc they are counted from a netlink dump instead (netlink_inet_diag.go).

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strconv"

	"github.com/cantal-go/cantal/internal/kfile"
	"github.com/cantal-go/cantal/internal/scanmark"
	"github.com/cantal-go/cantal/internal/series"
	"golang.org/x/sys/unix"
)

// tcpScan counts the machine's TCP sockets, IPv4 and IPv6 together: per state, listening ports
// with their accept queues and inbound connections, per uid, and the queue totals.
//
// The sockets come from netlink sock_diag (netlink_inet_diag.go) when the collector reads the host's own
// /proc, and from /proc/net/tcp and /proc/net/tcp6 otherwise. The reason is the kernel's cost:
// every read of a /proc/net/tcp file walks the whole established hash table (262144 buckets on
// a machine with 24 GB of memory, /proc/sys/net/ipv4/tcp_ehash_entries), about 1 ms of kernel
// time per file even with no socket at all, and the two files walk it twice; one inet_diag dump
// walks it once for both families and returns binary records that cost less to parse than text
// lines. Both paths feed the same tcpSock values to add, so the series do not depend on the path
// (netlink_inet_diag.go lists the per-state details that make them agree).
//
// /proc/net/tcp is read instead when Options.Proc is not "/proc" (another proc root: a
// container's view of the host, the test fixtures; netlink would show the agent's own network
// namespace, not that root's), and for a scan whose dump failed. The failure is reported with
// Sink.Problem; after diagMaxFails failed dumps in a row, or at once when the netlink socket
// cannot be opened (a kernel without inet_diag, a seccomp filter), netlink is not tried again.
//
// The /proc files are streamed through a fixed buffer: a busy machine may have 100k sockets
// (15 MB of text).
type tcpScan struct {
	lr       kfile.LineReader
	files    [2]kfile.Kept // tcp, tcp6
	states   [len(tcpStates)]int64
	txq, rxq uint64
	backlog  uint64 // the listeners' accept queue limits (netlink only; see emitStat)
	// Per local port, reset each scan: listening sockets, their accept queues, and established
	// sockets (inbound connections when the port is listening).
	listen      [1 << 16]uint16
	listenQueue [1 << 16]uint32
	estab       [1 << 16]uint32
	ports       []uint16 // listening ports seen this scan
	byUID       map[uint32]int64
	parseErrs   int
	firstErr    error

	diag      tcpDiag
	noDiag    bool // read /proc/net/tcp even from the host's /proc (tests and benchmarks)
	diagOff   bool // netlink failed for good: /proc/net/tcp from now on
	diagFails int  // failed dumps in a row

	stateRefs [len(tcpStates)]*series.Ref
	qRefs     [2]*series.Ref
	// tcp.connection_states (Options.TCPStat): per state, then rx_queued_bytes and
	// tx_queued_bytes.
	stat     bool
	statRefs [len(tcpStates) + 2]*series.Ref
	portRefs map[uint16]*portRefs
	uidRefs  map[uint32]*uidRef
}

// diagMaxFails is how many failed netlink dumps in a row make the collector give up netlink.
const diagMaxFails = 3

// diagSource is the source of the netlink path's problems.
const diagSource = "netlink inet_diag (TCP sockets)"

type portRefs struct {
	sockets, queue, established *series.Ref
	scanmark.Mark               // the latest scan that saw it
}

type uidRef struct {
	ref           *series.Ref
	scanmark.Mark // the latest scan that saw it
}

// tcpEvery is how often (in scans) the TCP sockets are counted by default (Options.TCPEvery);
// the scans between emit the last counts again. Counting walks the kernel's whole connection
// hash table (262144 buckets on a machine with 24 GB: ~2.8 ms of kernel time in the agent's
// scan, with cold caches, whatever the number of sockets, and more per socket on a busy
// machine), the largest single cost of a machine scan, while socket counts move slowly next to
// a scan; a listen queue overflowing between two counts shows in net.TcpExt.ListenOverflows,
// read every scan.
const tcpEvery = 5

func newTCPScan(stat bool) tcpScan {
	return tcpScan{
		stat:     stat,
		lr:       kfile.LineReader{Buf: make([]byte, 64<<10)},
		byUID:    map[uint32]int64{},
		portRefs: map[uint16]*portRefs{},
		uidRefs:  map[uint32]*uidRef{},
	}
}

func (t *tcpScan) close() {
	for i := range t.files {
		t.files[i].Close()
	}
	t.diag.close()
}

func (t *tcpScan) reset() {
	t.states = [len(tcpStates)]int64{}
	t.txq, t.rxq, t.backlog = 0, 0, 0
	for _, p := range t.ports {
		t.listen[p], t.listenQueue[p] = 0, 0
	}
	t.ports = t.ports[:0]
	clear(t.estab[:])
	clear(t.byUID)
	t.parseErrs, t.firstErr = 0, nil
}

// line accounts one line of a tcp table.
func (t *tcpScan) line(line []byte) {
	s, ok, err := parseTCPLine(line)
	if err != nil {
		if t.parseErrs == 0 {
			t.firstErr = err
		}
		t.parseErrs++
		return
	}
	if !ok {
		return
	}
	t.add(s)
}

func (t *tcpScan) add(s tcpSock) {
	t.states[s.State]++
	t.txq += s.TxQueue
	t.rxq += s.RxQueue
	t.backlog += uint64(s.Backlog)
	switch s.State {
	case tcpListen:
		if t.listen[s.LocalPort] == 0 {
			t.ports = append(t.ports, s.LocalPort)
		}
		if t.listen[s.LocalPort] < 1<<16-1 {
			t.listen[s.LocalPort]++
		}
		t.listenQueue[s.LocalPort] += uint32(min(s.RxQueue, 1<<31))
	case 1: // established
		t.estab[s.LocalPort]++
	}
	// Time-wait sockets belong to no process (uid 0). new_syn_recv never comes: both paths show
	// request sockets as syn_recv, with their listener's uid.
	if s.State != 6 && s.State != 12 {
		t.byUID[s.UID]++
	}
}

// collect counts the sockets, through netlink when proc is the host's /proc, and emits the
// series.
func (t *tcpScan) collect(ctx context.Context, procfd int, proc string, sink series.Sink, gen uint64) {
	t.reset()
	if proc == "/proc" && !t.noDiag && !t.diagOff {
		if t.collectDiag(ctx, sink) {
			t.emit(sink, gen)
			return
		}
		if ctx.Err() != nil {
			return
		}
		t.reset() // the failed dump's partial counts
	}
	t.collectProc(ctx, procfd, proc, sink, gen)
}

// collectDiag counts the sockets of one netlink dump and reports whether it succeeded; when it
// did not, the counts are partial and the failure has been reported. A dump the kernel flags as
// inconsistent (NLM_F_DUMP_INTR: the tables changed while it walked them) is done again once;
// a second inconsistent dump is accepted as it is, like the /proc files, which are never
// consistent snapshots either. (inet_diag does not set the flag as of Linux 6.18.)
func (t *tcpScan) collectDiag(ctx context.Context, sink series.Sink) bool {
	err := t.diag.dump(ctx, t)
	if errors.Is(err, errDiagIntr) {
		t.reset()
		if err = t.diag.dump(ctx, t); errors.Is(err, errDiagIntr) {
			err = nil
		}
	}
	if t.diag.bad > 0 {
		sink.Problem(diagSource, strconv.Itoa(t.diag.bad)+" records skipped, first: "+t.diag.firstBad.Error())
	}
	if err == nil {
		t.diagFails = 0
		return true
	}
	if ctx.Err() != nil {
		return false
	}
	t.diagFails++
	if t.diagFails >= diagMaxFails || errors.Is(err, errDiagOpen) {
		t.diagOff = true
		t.diag.close()
		sink.Problem(diagSource, err.Error()+"; reading /proc/net/tcp from now on")
		return false
	}
	sink.Problem(diagSource, err.Error()+"; read /proc/net/tcp for this scan")
	return false
}

// collectProc reads /proc/net/tcp and tcp6 under proc and emits the series.
func (t *tcpScan) collectProc(ctx context.Context, procfd int, proc string, sink series.Sink, gen uint64) {
	read := 0
	for i, name := range [2]string{"net/tcp\x00", "net/tcp6\x00"} {
		if ctx.Err() != nil {
			return
		}
		file := filepath.Join(proc, name[:len(name)-1])
		kf := &t.files[i]
		if !kf.Open {
			fd, err := kfile.OpenAt(procfd, []byte(name))
			if err != nil {
				if !errors.Is(err, unix.ENOENT) { // no IPv6 is normal
					sink.Problem(file, err.Error())
				}
				continue
			}
			kf.FD, kf.Open = fd, true
		}
		if err := t.lr.Each(kf.FD, t.line); err != nil {
			kf.Close()
			sink.Problem(file, err.Error())
			continue
		}
		read++
	}
	if t.parseErrs > 0 {
		sink.Problem(filepath.Join(proc, "net/tcp"), strconv.Itoa(t.parseErrs)+" bad lines, first: "+t.firstErr.Error())
	}
	if read == 0 {
		sink.Problem(filepath.Join(proc, "net/tcp"), errTCPMissing.Error())
		return
	}
	t.emit(sink, gen)
}

func (t *tcpScan) emit(sink series.Sink, gen uint64) {
	for st := 1; st < len(tcpStates); st++ {
		r := t.stateRefs[st]
		if r == nil {
			r = sink.Series(series.Labels{"metric": "tcp.sockets", "state": tcpStates[st]}, series.Level)
			t.stateRefs[st] = r
		}
		sink.Put(r, uint64(t.states[st]))
	}
	for i, v := range [2]uint64{t.txq, t.rxq} {
		r := t.qRefs[i]
		if r == nil {
			r = sink.Series(series.Labels{"metric": [2]string{"tcp.tx_queue", "tcp.rx_queue"}[i]}, series.Level)
			t.qRefs[i] = r
		}
		sink.Put(r, v)
	}
	for _, p := range t.ports {
		pr := t.portRefs[p]
		if pr == nil {
			ps := strconv.Itoa(int(p))
			pr = &portRefs{
				sockets:     sink.Series(series.Labels{"metric": "tcp.listen.sockets", "port": ps}, series.Level),
				queue:       sink.Series(series.Labels{"metric": "tcp.listen.queue", "port": ps}, series.Level),
				established: sink.Series(series.Labels{"metric": "tcp.listen.established", "port": ps}, series.Level),
			}
			t.portRefs[p] = pr
		}
		pr.See(gen)
		sink.Put(pr.sockets, uint64(t.listen[p]))
		sink.Put(pr.queue, uint64(t.listenQueue[p]))
		sink.Put(pr.established, uint64(t.estab[p]))
	}
	scanmark.Sweep(t.portRefs, gen, nil)
	for uid, n := range t.byUID {
		ur := t.uidRefs[uid]
		if ur == nil {
			ur = &uidRef{ref: sink.Series(series.Labels{"metric": "tcp.uid.sockets", "uid": strconv.FormatUint(uint64(uid), 10)}, series.Level)}
			t.uidRefs[uid] = ur
		}
		ur.See(gen)
		sink.Put(ur.ref, uint64(n))
	}
	scanmark.Sweep(t.uidRefs, gen, nil)
	if t.stat {
		t.emitStat(sink)
	}
}

// tcpStatStates are the state labels of tcp.connection_states past the kernel's states, as
// node_exporter's tcpstat collector names them.
var tcpStatStates = [2]string{"rx_queued_bytes", "tx_queued_bytes"}

// emitStat puts tcp.connection_states{state}, as node_exporter 1.5's tcpstat collector counts
// them from its inet_diag dumps (one per address family, states 1 to 11, so request sockets
// come as syn_recv as here): one series per state with at least one socket, and, when there is
// any socket, rx_queued_bytes, the sum of the receive queues (a listener's: its accept queue),
// and tx_queued_bytes, the sum of the send queues, a listener's being the limit of its accept
// queue in netlink (sk_max_ack_backlog). /proc/net/tcp does not show that limit: read from
// there (another proc root, or netlink failed), tx_queued_bytes has the send queues only.
// A state that has no socket left has no series, as on node_exporter.
func (t *tcpScan) emitStat(sink series.Sink) {
	var n int64
	for st := 1; st < len(tcpStates); st++ {
		if t.states[st] == 0 {
			continue
		}
		n += t.states[st]
		sink.Put(t.statRef(sink, st, tcpStates[st]), uint64(t.states[st]))
	}
	if n == 0 {
		return
	}
	sink.Put(t.statRef(sink, len(tcpStates), tcpStatStates[0]), t.rxq)
	sink.Put(t.statRef(sink, len(tcpStates)+1, tcpStatStates[1]), t.txq+t.backlog)
}

func (t *tcpScan) statRef(sink series.Sink, i int, state string) *series.Ref {
	r := t.statRefs[i]
	if r == nil {
		r = sink.Series(series.Labels{"metric": "tcp.connection_states", "state": state}, series.Level)
		t.statRefs[i] = r
	}
	return r
}

// errTCPMissing marks that neither tcp nor tcp6 could be read.
var errTCPMissing = errors.New("no tcp table readable")

// tcpStates are the names of the kernel's TCP states, indexed by their number in
// /proc/net/tcp's st column.
var tcpStates = [...]string{
	1: "established", 2: "syn_sent", 3: "syn_recv", 4: "fin_wait1", 5: "fin_wait2",
	6: "time_wait", 7: "close", 8: "close_wait", 9: "last_ack", 10: "listen", 11: "closing",
	12: "new_syn_recv",
}

const tcpListen = 10

// tcpSock is what the machine collector keeps of one /proc/net/tcp{,6} line.
type tcpSock struct {
	LocalPort, RemotePort uint16
	State                 uint8
	TxQueue, RxQueue      uint64
	UID                   uint32
	Backlog               uint32 // a listener's accept queue limit, from netlink only (0 from /proc)
}

// parseTCPLine parses one socket line of /proc/net/tcp or /proc/net/tcp6:
//
//	0: 0100007F:0CEA 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000  0 115 ...
//
// ok is false for the header line.
func parseTCPLine(line []byte) (s tcpSock, ok bool, err error) {
	sl, p := kfile.Field(line, 0)
	if len(sl) < 2 || sl[len(sl)-1] != ':' {
		if bytes.Equal(sl, []byte("sl")) {
			return s, false, nil
		}
		return s, false, kfile.ParseError("/proc/net/tcp", line, kfile.ErrSyntax)
	}
	var local, remote, st, queues, uid []byte
	local, p = kfile.Field(line, p)
	remote, p = kfile.Field(line, p)
	st, p = kfile.Field(line, p)
	queues, p = kfile.Field(line, p)
	_, p = kfile.Field(line, p) // tr:tm->when
	_, p = kfile.Field(line, p) // retrnsmt
	uid, _ = kfile.Field(line, p)
	lp, err1 := addrPort(local)
	rp, err2 := addrPort(remote)
	state, err3 := kfile.ParseHex(st)
	colon := kfile.IndexByte(queues, ':')
	if colon < 0 {
		return s, false, kfile.ParseError("/proc/net/tcp", line, kfile.ErrSyntax)
	}
	tx, err4 := kfile.ParseHex(queues[:colon])
	rx, err5 := kfile.ParseHex(queues[colon+1:])
	u, err6 := kfile.ParseUint(uid)
	for _, err := range [...]error{err1, err2, err3, err4, err5, err6} {
		if err != nil {
			return s, false, kfile.ParseError("/proc/net/tcp", line, err)
		}
	}
	if state == 0 || state >= uint64(len(tcpStates)) || u > 1<<32-1 {
		return s, false, kfile.ParseError("/proc/net/tcp", line, kfile.ErrRange)
	}
	return tcpSock{LocalPort: lp, RemotePort: rp, State: uint8(state), TxQueue: tx, RxQueue: rx, UID: uint32(u)}, true, nil
}

// addrPort returns the port of "0100007F:0CEA" (IPv4) or a 32-hex-digit IPv6 address.
func addrPort(b []byte) (uint16, error) {
	colon := kfile.IndexByte(b, ':')
	if (colon != 8 && colon != 32) || len(b) != colon+5 {
		return 0, kfile.ErrSyntax
	}
	v, err := kfile.ParseHex(b[colon+1:])
	return uint16(v), err
}
