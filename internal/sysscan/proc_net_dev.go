package sysscan

// /proc/net/dev: network interface counters (Machine).

import (
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

// netDev is one interface of /proc/net/dev (package kfile parses it: the process scan reads a
// container's too).
type netDev = kfile.NetDev

func parseNetDev(b []byte, dst []netDev) ([]netDev, error) { return kfile.ParseNetDev(b, dst) }

// netDevState is what Machine keeps of /proc/net/dev.
type netDevState struct {
	ifs  map[string]*ifaceRefs
	devs []netDev
}
