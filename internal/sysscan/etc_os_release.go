package sysscan

// uname(2) and /etc/os-release: the host's identity (System, rare scans).

import (
	"bytes"
	"fmt"
	"path/filepath"
	"time"

	"github.com/cantal-go/cantal/internal/kfile"
	"github.com/cantal-go/cantal/internal/series"
	"golang.org/x/sys/unix"
)

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

// readIdentity reads uname(2) and os-release into their state series.
func (s *System) readIdentity(sink series.Sink) {
	since := time.Now().UnixMilli()
	if s.btimeOK {
		since = s.btime * 1000
	}
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		sink.Problem("uname", err.Error())
	} else {
		l := series.Labels{
			"metric":     "system.uname",
			"sysname":    utsString(u.Sysname[:]),
			"release":    utsString(u.Release[:]),
			"version":    utsString(u.Version[:]),
			"machine":    utsString(u.Machine[:]),
			"nodename":   utsString(u.Nodename[:]),
			"domainname": utsString(u.Domainname[:]),
		}
		s.uname.set(sink, l, l["release"], since)
	}
	var lastErr error
	for _, p := range s.osReleasePaths() {
		b, err := readSmallFile(p, &s.buf, 64<<10)
		if err != nil {
			lastErr = err
			continue
		}
		lastErr = nil
		r, err := parseOSRelease(b)
		if err != nil {
			sink.Problem(p, err.Error())
		}
		l := series.Labels{"metric": "system.os"}
		for i, k := range osReleaseKeys {
			l[toLower(k)] = r.Vals[i]
		}
		s.osRel.set(sink, l, l["pretty_name"], since)
		break
	}
	if lastErr != nil {
		sink.Problem("os-release", lastErr.Error())
	}
}

// osReleasePaths are where os-release(5) is looked for: /etc, then /usr/lib; next to a proc
// root other than /proc (a host's root mounted in a container) when one is set.
func (s *System) osReleasePaths() []string {
	root := s.root()
	return []string{filepath.Join(root, "etc/os-release"), filepath.Join(root, "usr/lib/os-release")}
}

// root is where the host's /etc is looked for: /, or the parent of a proc root other than
// /proc (a host's root mounted in a container).
func (s *System) root() string {
	if s.opt.Proc != "/proc" {
		return filepath.Dir(s.opt.Proc)
	}
	return "/"
}

// readSmallFile reads path whole into *buf, up to limit bytes.
func readSmallFile(path string, buf *[]byte, limit int) ([]byte, error) {
	p := append([]byte(path), 0)
	b, err := kfile.ReadFileAt(unix.AT_FDCWD, p, buf, limit)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return b, nil
}

func utsString(b []byte) string {
	if i := kfile.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return kfile.ValidString(b)
}

func toLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// identityState is what System keeps of uname(2) and /etc/os-release.
type identityState struct {
	uname stateSeries
	osRel stateSeries
}
