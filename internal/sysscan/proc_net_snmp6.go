package sysscan

// /proc/net/snmp6: IPv6 protocol counters (System).

import (
	"fmt"

	"github.com/cantal-go/cantal/internal/kfile"
	"github.com/cantal-go/cantal/internal/series"
)

// parseSNMP6 parses /proc/net/snmp6, one "Ip6InReceives   123" line per counter, splitting each
// name after the first '6' as node_exporter does (Prefix "Ip6", Name "InReceives"). Lines of
// names without a '6' (none on real kernels) are an error.
func parseSNMP6(b []byte, dst []netstatEntry) ([]netstatEntry, error) {
	for pos := 0; pos < len(b); {
		var line []byte
		line, pos = kfile.NextLine(b, pos)
		name, p := kfile.Field(line, 0)
		if name == nil {
			continue
		}
		v, p := kfile.Field(line, p)
		if rest, _ := kfile.Field(line, p); v == nil || rest != nil {
			return dst, kfile.ParseError("/proc/net/snmp6", line, kfile.ErrSyntax)
		}
		six := kfile.IndexByte(name, '6')
		if six <= 0 || six == len(name)-1 {
			return dst, kfile.ParseError("/proc/net/snmp6", line, fmt.Errorf("no protocol prefix"))
		}
		n, err := kfile.ParseInt(v)
		if err != nil {
			return dst, kfile.ParseError("/proc/net/snmp6", line, err)
		}
		dst = append(dst, netstatEntry{Prefix: name[:six+1], Name: name[six+1:], Val: n})
	}
	return dst, nil
}

func (s *System) collectSNMP6(b []byte, sink series.Sink) error {
	var err error
	s.nets, err = parseSNMP6(b, s.nets[:0])
	for _, e := range s.nets {
		s.key = append(append(append(s.key[:0], e.Prefix...), '.'), e.Name...)
		r := s.net6[string(s.key)]
		if r == nil {
			r = sink.Series(series.Labels{"metric": "net." + kfile.ValidString(s.key)}, series.Counter)
			s.net6[string(s.key)] = r
		}
		if e.Val < 0 {
			continue
		}
		sink.Put(r, uint64(e.Val))
	}
	return err
}

// snmp6State is what System keeps of /proc/net/snmp6.
type snmp6State struct {
	net6 map[string]*series.Ref
	nets []netstatEntry
}
