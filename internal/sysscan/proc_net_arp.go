package sysscan

// /proc/net/arp: ARP entries per device (System, every arpEvery scans).

import (
	"bytes"
	"fmt"

	"github.com/cantal-go/cantal/internal/kfile"
	"github.com/cantal-go/cantal/internal/scanmark"
	"github.com/cantal-go/cantal/internal/series"
)

// arpCount is the number of /proc/net/arp entries of one interface.
type arpCount struct {
	Device []byte
	N      int64
}

// parseARP counts the entries of /proc/net/arp per device (its last column), in the order
// the devices first appear; the header line is skipped.
func parseARP(b []byte, dst []arpCount) ([]arpCount, error) {
	head, pos := kfile.NextLine(b, 0)
	if !bytes.HasPrefix(head, []byte("IP address")) {
		if len(bytes.TrimSpace(b)) == 0 {
			return dst, nil
		}
		return dst, kfile.ParseError("arp", head, fmt.Errorf("no header"))
	}
	for pos < len(b) {
		var line []byte
		line, pos = kfile.NextLine(b, pos)
		var last []byte
		n := 0
		for p := 0; ; {
			var f []byte
			f, p = kfile.Field(line, p)
			if f == nil {
				break
			}
			last = f
			n++
		}
		if n == 0 {
			continue
		}
		if n != 6 {
			return dst, kfile.ParseError("arp", line, fmt.Errorf("%d columns", n))
		}
		found := false
		for i := range dst {
			if bytes.Equal(dst[i].Device, last) {
				dst[i].N++
				found = true
				break
			}
		}
		if !found {
			dst = append(dst, arpCount{Device: last, N: 1})
		}
	}
	return dst, nil
}

// arpEvery is how often (in scans) /proc/net/arp is read: the kernel takes ~40 µs of CPU to
// print it, a third of the rest of System's scan; the scans between write the last counts again.
const arpEvery = 5

type arpRef struct {
	ref           *series.Ref
	n             int64
	scanmark.Mark // the latest scan that saw it
}

func (s *System) putARP(sink series.Sink) {
	for _, r := range s.arp {
		sink.Put(r.ref, uint64(r.n))
	}
}

func (s *System) collectARP(b []byte, sink series.Sink) error {
	var err error
	s.arps, err = parseARP(b, s.arps[:0])
	for _, a := range s.arps {
		r := s.arp[string(a.Device)]
		if r == nil {
			r = &arpRef{ref: sink.Series(series.Labels{"metric": "net.arp.entries", "interface": kfile.ValidString(a.Device)}, series.Level)}
			s.arp[string(a.Device)] = r
		}
		r.See(s.gen)
		r.n = a.N
		sink.Put(r.ref, uint64(a.N))
	}
	return err
}

// arpState is what System keeps of /proc/net/arp.
type arpState struct {
	arp  map[string]*arpRef
	arps []arpCount
}
