package sysscan

// /proc/net/sockstat and sockstat6: socket counts (System).

import (
	"fmt"

	"github.com/cantal-go/cantal/internal/kfile"
	"github.com/cantal-go/cantal/internal/series"
)

// sockstatEntry is one value of /proc/net/sockstat{,6}: "TCP: inuse 5" gives Proto "TCP",
// Name "inuse", Val 5.
type sockstatEntry struct {
	Proto, Name []byte
	Val         int64
}

// parseSockstat parses /proc/net/sockstat or sockstat6:
//
//	sockets: used 290
//	TCP: inuse 9 orphan 0 tw 3 alloc 12 mem 2
func parseSockstat(b []byte, dst []sockstatEntry) ([]sockstatEntry, error) {
	for pos := 0; pos < len(b); {
		var line []byte
		line, pos = kfile.NextLine(b, pos)
		proto, p := kfile.Field(line, 0)
		if proto == nil {
			continue
		}
		if len(proto) < 2 || proto[len(proto)-1] != ':' {
			return dst, kfile.ParseError("sockstat", line, kfile.ErrSyntax)
		}
		proto = proto[:len(proto)-1]
		for {
			var k, v []byte
			k, p = kfile.Field(line, p)
			if k == nil {
				break
			}
			v, p = kfile.Field(line, p)
			if v == nil {
				return dst, kfile.ParseError("sockstat", line, fmt.Errorf("name without a value"))
			}
			n, err := kfile.ParseInt(v)
			if err != nil {
				return dst, kfile.ParseError("sockstat", line, err)
			}
			dst = append(dst, sockstatEntry{Proto: proto, Name: k, Val: n})
		}
	}
	return dst, nil
}

type sockRefs struct {
	val, bytes *series.Ref
}

func (s *System) collectSockstat(b []byte, sink series.Sink) error {
	var err error
	s.socks, err = parseSockstat(b, s.socks[:0])
	for _, e := range s.socks {
		s.key = append(append(append(s.key[:0], e.Proto...), '.'), e.Name...)
		r := s.sock[string(s.key)]
		if r == nil {
			k := kfile.ValidString(s.key)
			r = &sockRefs{val: sink.Series(series.Labels{"metric": "sockstat." + k}, series.Level)}
			if string(e.Name) == "mem" {
				r.bytes = sink.Series(series.Labels{"metric": "sockstat." + k + "_bytes"}, series.Level)
			}
			s.sock[string(s.key)] = r
		}
		sink.Put(r.val, uint64(e.Val))
		if r.bytes != nil {
			sink.Put(r.bytes, uint64(e.Val*int64(s.opt.PageSize)))
		}
	}
	return err
}

// sockstatState is what System keeps of /proc/net/sockstat{,6}.
type sockstatState struct {
	sock  map[string]*sockRefs
	socks []sockstatEntry
}
