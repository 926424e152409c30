package sysscan

import (
	"bytes"
	"fmt"

	"github.com/cantal-go/cantal/internal/kfile"
)

// Parsers of the files read by System and Filesystems. Each is a pure function of the file's
// bytes that appends to a caller's slice and allocates nothing else; the slices it returns
// point into b.

// nameVal is one "name value" pair of /proc/vmstat.
type nameVal struct {
	Name []byte
	Val  int64
}

// parseVmstat parses /proc/vmstat: one "name value" line per kfile.Field. The values are printed
// unsigned by the kernel but a few node counters can be transiently negative on some kernels,
// so they are parsed signed.
func parseVmstat(b []byte, dst []nameVal) ([]nameVal, error) {
	for pos := 0; pos < len(b); {
		var line []byte
		line, pos = kfile.NextLine(b, pos)
		name, p := kfile.Field(line, 0)
		if name == nil {
			continue
		}
		v, p := kfile.Field(line, p)
		if rest, _ := kfile.Field(line, p); v == nil || rest != nil {
			return dst, kfile.ParseError("/proc/vmstat", line, kfile.ErrSyntax)
		}
		n, err := kfile.ParseInt(v)
		if err != nil {
			return dst, kfile.ParseError("/proc/vmstat", line, err)
		}
		dst = append(dst, nameVal{Name: name, Val: n})
	}
	return dst, nil
}

// psiLine is one line ("some" or "full") of a /proc/pressure file.
type psiLine struct {
	Present bool
	Avg     [3]float64 // avg10, avg60, avg300, in %
	Total   uint64     // µs
}

// psi is a /proc/pressure/{cpu,memory,io} file.
type psi struct {
	Some, Full psiLine
}

var psiAvgKeys = [3]string{"avg10=", "avg60=", "avg300="}

// parsePressure parses a pressure stall file:
//
//	some avg10=0.00 avg60=0.00 avg300=0.00 total=12345
//	full avg10=0.00 avg60=0.00 avg300=0.00 total=6789
func parsePressure(b []byte) (psi, error) {
	var r psi
	for pos := 0; pos < len(b); {
		var line []byte
		line, pos = kfile.NextLine(b, pos)
		kind, p := kfile.Field(line, 0)
		if kind == nil {
			continue
		}
		var l *psiLine
		switch string(kind) {
		case "some":
			l = &r.Some
		case "full":
			l = &r.Full
		default:
			return r, kfile.ParseError("pressure", line, kfile.ErrSyntax)
		}
		var got [4]bool
		for {
			var f []byte
			f, p = kfile.Field(line, p)
			if f == nil {
				break
			}
			matched := false
			for i, k := range psiAvgKeys {
				if bytes.HasPrefix(f, []byte(k)) {
					v, err := kfile.ParseDecimal(f[len(k):])
					if err != nil {
						return r, kfile.ParseError("pressure", line, err)
					}
					l.Avg[i], got[i], matched = v, true, true
				}
			}
			if bytes.HasPrefix(f, []byte("total=")) {
				v, err := kfile.ParseUint(f[len("total="):])
				if err != nil {
					return r, kfile.ParseError("pressure", line, err)
				}
				l.Total, got[3], matched = v, true, true
			}
			if !matched {
				return r, kfile.ParseError("pressure", line, kfile.ErrSyntax)
			}
		}
		if !got[3] {
			return r, kfile.ParseError("pressure", line, fmt.Errorf("no total"))
		}
		l.Present = true
	}
	if !r.Some.Present {
		return r, fmt.Errorf("parse pressure: no some line")
	}
	return r, nil
}

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

// parseHexValue parses a sysfs attribute holding one "0x"-prefixed hexadecimal number (flags,
// dev_id).
func parseHexValue(b []byte) (uint64, error) {
	b = bytes.TrimSpace(b)
	if len(b) < 3 || b[0] != '0' || (b[1] != 'x' && b[1] != 'X') {
		return 0, fmt.Errorf("parse hex value: %w", kfile.ErrSyntax)
	}
	v, err := kfile.ParseHex(b[2:])
	if err != nil {
		return 0, fmt.Errorf("parse hex value: %w", err)
	}
	return v, nil
}

// osReleaseKeys are the /etc/os-release fields node_exporter's os collector exposes, in the
// order of osRelease.Vals; the label of each is its name in lower case.
var osReleaseKeys = [...]string{
	"NAME", "ID", "ID_LIKE", "PRETTY_NAME", "VERSION", "VERSION_ID", "VERSION_CODENAME",
	"BUILD_ID", "VARIANT", "VARIANT_ID", "IMAGE_ID", "IMAGE_VERSION",
}

// osRelease holds the fields of os-release named by osReleaseKeys, unquoted.
type osRelease struct {
	Vals [len(osReleaseKeys)]string
}

// parseOSRelease parses os-release(5): KEY=value lines, values optionally in single or double
// quotes with backslash escapes in double quotes; comments and blank lines ignored. Only the
// keys of osReleaseKeys are kept; a malformed line is an error (the keys before it are kept).
func parseOSRelease(b []byte) (osRelease, error) {
	var r osRelease
	for pos, n := 0, 1; pos < len(b); n++ {
		var line []byte
		line, pos = kfile.NextLine(b, pos)
		line = bytes.TrimSpace(line)
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		eq := kfile.IndexByte(line, '=')
		if eq <= 0 {
			return r, fmt.Errorf("parse os-release: line %d has no '='", n)
		}
		key, val := line[:eq], line[eq+1:]
		v, err := unquoteShell(val)
		if err != nil {
			return r, fmt.Errorf("parse os-release: line %d: %w", n, err)
		}
		for i, k := range osReleaseKeys {
			if string(key) == k {
				r.Vals[i] = v
			}
		}
	}
	return r, nil
}

// unquoteShell undoes the quoting os-release allows: 'single', "double" with \" \\ \$ \` escapes,
// or a bare word.
func unquoteShell(v []byte) (string, error) {
	if len(v) == 0 {
		return "", nil
	}
	switch v[0] {
	case '\'':
		if len(v) < 2 || v[len(v)-1] != '\'' {
			return "", fmt.Errorf("unterminated single quote")
		}
		return kfile.ValidString(v[1 : len(v)-1]), nil
	case '"':
		if len(v) < 2 || v[len(v)-1] != '"' {
			return "", fmt.Errorf("unterminated double quote")
		}
		in := v[1 : len(v)-1]
		out := make([]byte, 0, len(in))
		for i := 0; i < len(in); i++ {
			c := in[i]
			if c == '\\' && i+1 < len(in) {
				i++
				c = in[i]
			} else if c == '"' {
				return "", fmt.Errorf("unescaped double quote")
			}
			out = append(out, c)
		}
		return kfile.ValidString(out), nil
	}
	return kfile.ValidString(v), nil
}

// mountEntry is one line of /proc/PID/mountinfo, its fields pointing into the file's bytes;
// MountPoint is unescaped into the buffer given to parseMountinfo.
type mountEntry struct {
	Device, MountPoint, FSType, Options []byte
}

// parseMountinfo parses /proc/PID/mountinfo (proc(5)):
//
//	36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
//
// MountPoint and Device are unescaped (the kernel writes space, tab, newline and backslash as
// \040, \011, \012, \134) into *esc, which is reused between calls; the returned entries point
// into b and *esc.
func parseMountinfo(b []byte, dst []mountEntry, esc *[]byte) ([]mountEntry, error) {
	// The unescaped strings are never longer than the file, so esc never grows while entries
	// point into it.
	if cap(*esc) < len(b) {
		*esc = make([]byte, 0, len(b))
	}
	e := (*esc)[:0]
	for pos := 0; pos < len(b); {
		var line []byte
		line, pos = kfile.NextLine(b, pos)
		f, p := kfile.Field(line, 0)
		if f == nil {
			continue
		}
		var fields [6][]byte
		fields[0] = f
		for i := 1; i < 6; i++ {
			fields[i], p = kfile.Field(line, p)
			if fields[i] == nil {
				return dst, kfile.ParseError("mountinfo", line, kfile.ErrSyntax)
			}
		}
		// optional fields up to the "-" separator
		for {
			f, p = kfile.Field(line, p)
			if f == nil {
				return dst, kfile.ParseError("mountinfo", line, fmt.Errorf("no separator"))
			}
			if len(f) == 1 && f[0] == '-' {
				break
			}
		}
		fstype, p := kfile.Field(line, p)
		source, _ := kfile.Field(line, p)
		if fstype == nil || source == nil {
			return dst, kfile.ParseError("mountinfo", line, kfile.ErrSyntax)
		}
		start := len(e)
		e = unescapeMount(e, fields[4])
		mp := e[start:len(e):len(e)]
		start = len(e)
		e = unescapeMount(e, source)
		dev := e[start:len(e):len(e)]
		dst = append(dst, mountEntry{Device: dev, MountPoint: mp, FSType: fstype, Options: fields[5]})
	}
	*esc = e
	return dst, nil
}

// unescapeMount appends s to dst with the kernel's octal escapes (\ooo) decoded.
func unescapeMount(dst, s []byte) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			v := (int(s[i+1]-'0')<<6 | int(s[i+2]-'0')<<3 | int(s[i+3]-'0'))
			if v < 256 {
				dst = append(dst, byte(v))
				i += 3
				continue
			}
		}
		dst = append(dst, c)
	}
	return dst
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

// hasOption reports whether the comma-separated mount options include opt.
func hasOption(opts []byte, opt string) bool {
	for len(opts) > 0 {
		i := kfile.IndexByte(opts, ',')
		if i < 0 {
			return string(opts) == opt
		}
		if string(opts[:i]) == opt {
			return true
		}
		opts = opts[i+1:]
	}
	return false
}
