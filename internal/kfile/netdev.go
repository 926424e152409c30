package kfile

import "bytes"

// NetDev is one interface of /proc/net/dev; Name aliases the parsed buffer.
type NetDev struct {
	Name []byte
	V    [16]uint64 // the 16 columns after the name: rx bytes, packets, errs, drop, fifo, frame, compressed, multicast; tx bytes, packets, errs, drop, fifo, colls, carrier, compressed
}

// ParseNetDev parses /proc/net/dev appending to dst. The two header lines have no colon
// before their first '|' and are skipped.
func ParseNetDev(b []byte, dst []NetDev) ([]NetDev, error) {
	for pos := 0; pos < len(b); {
		var line []byte
		line, pos = NextLine(b, pos)
		colon := IndexByte(line, ':')
		if colon < 0 || bytes.IndexByte(line[:colon], '|') >= 0 {
			if len(bytes.TrimSpace(line)) == 0 || IndexByte(line, '|') >= 0 {
				continue
			}
			return dst, ParseError("/proc/net/dev", line, ErrSyntax)
		}
		d := NetDev{Name: bytes.TrimSpace(line[:colon])}
		if len(d.Name) == 0 {
			return dst, ParseError("/proc/net/dev", line, ErrSyntax)
		}
		p := colon + 1
		for i := range d.V {
			var f []byte
			f, p = Field(line, p)
			v, err := ParseUint(f)
			if err != nil {
				return dst, ParseError("/proc/net/dev", line, err)
			}
			d.V[i] = v
		}
		dst = append(dst, d)
	}
	return dst, nil
}
