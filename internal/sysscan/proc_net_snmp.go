package sysscan

// /proc/net/snmp and /proc/net/netstat, which share a format: protocol counters (Machine).

import (
	"bytes"
	"fmt"

	"github.com/cantal-go/cantal/internal/kfile"
	"github.com/cantal-go/cantal/internal/series"
)

// netstatLevels are the /proc/net/snmp values that are levels or settings, not counters.
var netstatLevels = map[string]bool{
	"Ip.Forwarding": true, "Ip.DefaultTTL": true,
	"Tcp.RtoAlgorithm": true, "Tcp.RtoMin": true, "Tcp.RtoMax": true, "Tcp.MaxConn": true,
	"Tcp.CurrEstab": true,
}

func (m *Machine) collectNetstat(b []byte, sink series.Sink) error {
	var err error
	m.nets, err = parseNetstat(b, m.nets[:0])
	for _, e := range m.nets {
		m.key = append(append(append(m.key[:0], e.Prefix...), '.'), e.Name...)
		r := m.net[string(m.key)]
		if r == nil {
			k := kfile.ValidString(m.key)
			kind := series.Counter
			if netstatLevels[k] {
				kind = series.Level
			}
			r = sink.Series(series.Labels{"metric": "net." + k}, kind)
			m.net[string(m.key)] = r
		}
		if r.Kind == series.Counter && e.Val < 0 {
			continue // not a counter after all; never seen on real kernels
		}
		sink.Put(r, uint64(e.Val))
	}
	return err
}

// netstatEntry is one value of /proc/net/snmp or /proc/net/netstat; Prefix ("Tcp", "TcpExt")
// and Name alias the parsed buffer.
type netstatEntry struct {
	Prefix, Name []byte
	Val          int64
}

// parseNetstat parses the paired header/value lines of /proc/net/snmp and /proc/net/netstat
// ("Tcp: RtoAlgorithm RtoMin ..." then "Tcp: 1 200 ...") appending to dst. Values are signed
// (Tcp MaxConn is -1).
func parseNetstat(b []byte, dst []netstatEntry) ([]netstatEntry, error) {
	for pos := 0; pos < len(b); {
		var head, vals []byte
		head, pos = kfile.NextLine(b, pos)
		if len(bytes.TrimSpace(head)) == 0 {
			continue
		}
		vals, pos = kfile.NextLine(b, pos)
		hp, hv := kfile.Field(head, 0)
		vp, vv := kfile.Field(vals, 0)
		if len(hp) < 2 || hp[len(hp)-1] != ':' || !bytes.Equal(hp, vp) {
			return dst, kfile.ParseError("netstat", head, fmt.Errorf("header and values do not pair"))
		}
		prefix := hp[:len(hp)-1]
		for {
			var k, v []byte
			k, hv = kfile.Field(head, hv)
			v, vv = kfile.Field(vals, vv)
			if k == nil && v == nil {
				break
			}
			if k == nil || v == nil {
				return dst, kfile.ParseError("netstat", head, fmt.Errorf("%d names and values differ in number", len(dst)))
			}
			n, err := kfile.ParseInt(v)
			if err != nil {
				return dst, kfile.ParseError("netstat", vals, err)
			}
			dst = append(dst, netstatEntry{Prefix: prefix, Name: k, Val: n})
		}
	}
	return dst, nil
}

// netstatState is what Machine keeps of /proc/net/snmp and netstat.
type netstatState struct {
	net  map[string]*series.Ref
	nets []netstatEntry
	key  []byte
}
