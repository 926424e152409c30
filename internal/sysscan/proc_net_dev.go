package sysscan

// /proc/net/dev: network interface counters (Machine).

import (
	"bytes"

	"github.com/cantal-go/cantal/internal/kfile"
	"github.com/cantal-go/cantal/internal/scanmark"
	"github.com/cantal-go/cantal/internal/series"
)

type ifaceRefs struct {
	refs          [len(netDevFields)]*series.Ref
	scanmark.Mark // the latest scan that saw it
}

func (m *Machine) collectNetDev(b []byte, sink series.Sink) error {
	var err error
	m.devs, err = parseNetDev(b, m.devs[:0])
	for _, d := range m.devs {
		ir := m.ifs[string(d.Name)]
		if ir == nil {
			ir = &ifaceRefs{}
			name := kfile.ValidString(d.Name)
			for i := range ir.refs {
				ir.refs[i] = sink.Series(series.Labels{"metric": "net.interface." + netDevFields[i], "interface": name}, series.Counter)
			}
			m.ifs[string(d.Name)] = ir
		}
		ir.See(m.gen)
		for i, v := range d.V {
			sink.Put(ir.refs[i], v)
		}
	}
	return err
}

// netDevFields are the columns of /proc/net/dev after the interface name, as series names.
var netDevFields = [...]string{
	"rx.bytes", "rx.packets", "rx.errors", "rx.drop", "rx.fifo", "rx.frame", "rx.compressed", "rx.multicast",
	"tx.bytes", "tx.packets", "tx.errors", "tx.drop", "tx.fifo", "tx.collisions", "tx.carrier", "tx.compressed",
}

// netDev is one interface of /proc/net/dev; Name aliases the parsed buffer.
type netDev struct {
	Name []byte
	V    [len(netDevFields)]uint64
}

// parseNetDev parses /proc/net/dev appending to dst. The two header lines have no colon
// before their first '|' and are skipped.
func parseNetDev(b []byte, dst []netDev) ([]netDev, error) {
	for pos := 0; pos < len(b); {
		var line []byte
		line, pos = kfile.NextLine(b, pos)
		colon := kfile.IndexByte(line, ':')
		if colon < 0 || bytes.IndexByte(line[:colon], '|') >= 0 {
			if len(bytes.TrimSpace(line)) == 0 || kfile.IndexByte(line, '|') >= 0 {
				continue
			}
			return dst, kfile.ParseError("/proc/net/dev", line, kfile.ErrSyntax)
		}
		d := netDev{Name: bytes.TrimSpace(line[:colon])}
		if len(d.Name) == 0 {
			return dst, kfile.ParseError("/proc/net/dev", line, kfile.ErrSyntax)
		}
		p := colon + 1
		for i := range d.V {
			var f []byte
			f, p = kfile.Field(line, p)
			v, err := kfile.ParseUint(f)
			if err != nil {
				return dst, kfile.ParseError("/proc/net/dev", line, err)
			}
			d.V[i] = v
		}
		dst = append(dst, d)
	}
	return dst, nil
}

// netDevState is what Machine keeps of /proc/net/dev.
type netDevState struct {
	ifs  map[string]*ifaceRefs
	devs []netDev
}
