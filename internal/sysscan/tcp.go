package sysscan

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"

	"github.com/cantal-go/cantal/internal/series"
	"golang.org/x/sys/unix"
)

// tcpScan counts the sockets of /proc/net/tcp and /proc/net/tcp6 together, streaming them
// through a fixed buffer: a busy machine may have 100k sockets (15 MB of text).
type tcpScan struct {
	lr       lineReader
	files    [2]keptFile // tcp, tcp6
	states   [len(tcpStates)]int64
	txq, rxq uint64
	// Per local port, reset each scan: listening sockets, their accept queues, and established
	// sockets (inbound connections when the port is listening).
	listen      [1 << 16]uint16
	listenQueue [1 << 16]uint32
	estab       [1 << 16]uint32
	ports       []uint16 // listening ports seen this scan
	byUID       map[uint32]int64
	parseErrs   int
	firstErr    error

	stateRefs [len(tcpStates)]*series.Ref
	qRefs     [2]*series.Ref
	portRefs  map[uint16]*portRefs
	uidRefs   map[uint32]*uidRef
}

type portRefs struct {
	sockets, queue, established *series.Ref
	seen                        uint64
}

type uidRef struct {
	ref  *series.Ref
	seen uint64
}

func newTCPScan() tcpScan {
	return tcpScan{
		lr:       lineReader{buf: make([]byte, 64<<10)},
		byUID:    map[uint32]int64{},
		portRefs: map[uint16]*portRefs{},
		uidRefs:  map[uint32]*uidRef{},
	}
}

func (t *tcpScan) close() {
	for i := range t.files {
		t.files[i].close()
	}
}

func (t *tcpScan) reset() {
	t.states = [len(tcpStates)]int64{}
	t.txq, t.rxq = 0, 0
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
	if s.State != 6 && s.State != 12 { // time_wait and new_syn_recv belong to no process
		t.byUID[s.UID]++
	}
}

// collect reads both tables and emits the series.
func (t *tcpScan) collect(ctx context.Context, procfd int, proc string, sink series.Sink, gen uint64) {
	t.reset()
	read := 0
	for i, name := range [2]string{"net/tcp\x00", "net/tcp6\x00"} {
		if ctx.Err() != nil {
			return
		}
		file := filepath.Join(proc, name[:len(name)-1])
		kf := &t.files[i]
		if !kf.open {
			fd, err := openAt(procfd, []byte(name))
			if err != nil {
				if !errors.Is(err, unix.ENOENT) { // no IPv6 is normal
					sink.Problem(file, err.Error())
				}
				continue
			}
			kf.fd, kf.open = fd, true
		}
		if err := t.lr.each(kf.fd, t.line); err != nil {
			kf.close()
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
		pr.seen = gen
		sink.Put(pr.sockets, uint64(t.listen[p]))
		sink.Put(pr.queue, uint64(t.listenQueue[p]))
		sink.Put(pr.established, uint64(t.estab[p]))
	}
	for p, pr := range t.portRefs {
		if pr.seen != gen {
			delete(t.portRefs, p)
		}
	}
	for uid, n := range t.byUID {
		ur := t.uidRefs[uid]
		if ur == nil {
			ur = &uidRef{ref: sink.Series(series.Labels{"metric": "tcp.uid.sockets", "uid": strconv.FormatUint(uint64(uid), 10)}, series.Level)}
			t.uidRefs[uid] = ur
		}
		ur.seen = gen
		sink.Put(ur.ref, uint64(n))
	}
	for uid, ur := range t.uidRefs {
		if ur.seen != gen {
			delete(t.uidRefs, uid)
		}
	}
}
