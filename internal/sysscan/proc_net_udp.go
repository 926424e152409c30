package sysscan

// /proc/net/udp and udp6: UDP queue sums (System, every udpEvery scans).

import (
	"path/filepath"

	"github.com/cantal-go/cantal/internal/kfile"
	"github.com/cantal-go/cantal/internal/series"
	"golang.org/x/sys/unix"
)

// parseUDPLine returns the send and receive queues of a /proc/net/udp or udp6 line ("sl
// local_address rem_address st tx_queue:rx_queue ..."); ok is false for the header.
func parseUDPLine(line []byte) (tx, rx uint64, ok bool, err error) {
	var f []byte
	p := 0
	for i := 0; i < 5; i++ {
		f, p = kfile.Field(line, p)
		if f == nil {
			if i == 0 {
				return 0, 0, false, nil // blank
			}
			return 0, 0, false, kfile.ParseError("udp", line, kfile.ErrSyntax)
		}
		if i == 0 && string(f) == "sl" {
			return 0, 0, false, nil
		}
	}
	c := kfile.IndexByte(f, ':')
	if c < 0 {
		return 0, 0, false, kfile.ParseError("udp", line, kfile.ErrSyntax)
	}
	if tx, err = kfile.ParseHex(f[:c]); err != nil {
		return 0, 0, false, kfile.ParseError("udp", line, err)
	}
	if rx, err = kfile.ParseHex(f[c+1:]); err != nil {
		return 0, 0, false, kfile.ParseError("udp", line, err)
	}
	return tx, rx, true, nil
}

// udpEvery is how often (in scans) System reads /proc/net/udp{,6}: each read walks the
// kernel's UDP hash table; the scans between write the last values again.
const udpEvery = 5

type udpQueues struct {
	tx, rx   *series.Ref
	txV, rxV uint64
	ok       bool
}

// udpLine adds a line's queues to the sums; the first malformed line's error is kept.
func (s *System) udpLine(line []byte) {
	t, r, ok, err := parseUDPLine(line)
	if err != nil && s.udpErr == nil {
		s.udpErr = err
	}
	if ok {
		s.udpTx += t
		s.udpRx += r
	}
}

var udpFiles = [2]struct{ name, ip string }{{"net/udp", "v4"}, {"net/udp6", "v6"}}

// collectUDP sums the queues of /proc/net/udp and udp6 every udpEvery scans and writes the
// last sums at every scan.
func (s *System) collectUDP(procfd int, sink series.Sink) {
	if (s.gen-1)%udpEvery == 0 {
		for i, f := range udpFiles {
			q := &s.udp[i]
			q.ok = false
			s.path = append(append(s.path[:0], f.name...), 0)
			fd, err := kfile.OpenAt(procfd, s.path)
			if err != nil {
				if i == 0 || !isAbsent(err) {
					sink.Problem(filepath.Join(s.opt.Proc, f.name), err.Error())
				}
				continue
			}
			s.udpTx, s.udpRx, s.udpErr = 0, 0, nil
			err = s.lr.Each(fd, s.udpFn)
			unix.Close(fd)
			if err == nil {
				err = s.udpErr
			}
			if err != nil {
				sink.Problem(filepath.Join(s.opt.Proc, f.name), err.Error())
				continue
			}
			q.txV, q.rxV, q.ok = s.udpTx, s.udpRx, true
		}
	}
	for i := range s.udp {
		q := &s.udp[i]
		if !q.ok {
			continue
		}
		if q.tx == nil {
			q.tx = sink.Series(series.Labels{"metric": "udp.tx_queue", "ip": udpFiles[i].ip}, series.Level)
			q.rx = sink.Series(series.Labels{"metric": "udp.rx_queue", "ip": udpFiles[i].ip}, series.Level)
		}
		sink.Put(q.tx, q.txV)
		sink.Put(q.rx, q.rxV)
	}
}

// udpState is what System keeps of /proc/net/udp{,6}.
type udpState struct {
	lr kfile.LineReader
	// the sums of the UDP file being read, and udpLine bound once (no allocation per read)
	udpTx, udpRx uint64
	udpErr       error
	udpFn        func([]byte)
	udp          [2]udpQueues
}
