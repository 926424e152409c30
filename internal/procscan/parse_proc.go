package procscan

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/cantal-go/cantal/internal/kfile"
)

// pidStat is what the process collector keeps of /proc/PID/stat; Comm aliases the parsed
// buffer.
type pidStat struct {
	Comm       []byte
	State      byte
	PPID       int
	Flags      uint64 // the kernel's PF_* flags of the task
	UTime      uint64 // ticks
	STime      uint64 // ticks
	Threads    uint64
	StartTicks uint64 // ticks after boot
	VSize      uint64 // bytes
	RSSPages   uint64
}

// parsePIDStat parses /proc/PID/stat. The command name is everything between the first '('
// and the last ')', since it may itself contain parentheses and spaces.
func parsePIDStat(b []byte) (pidStat, error) {
	var s pidStat
	open := kfile.IndexByte(b, '(')
	cl := bytes.LastIndexByte(b, ')')
	if open < 0 || cl < open {
		return s, kfile.ParseError("/proc/PID/stat", b, kfile.ErrSyntax)
	}
	s.Comm = b[open+1 : cl]
	rest := b[cl+1:]
	// Fields after the comm, numbered from 3 (state) as in proc(5).
	p := 0
	for n := 3; n <= 24; n++ {
		var f []byte
		f, p = kfile.Field(rest, p)
		if f == nil {
			return s, kfile.ParseError("/proc/PID/stat", b, fmt.Errorf("%d fields, want at least 24", n-1))
		}
		var dst *uint64
		switch n {
		case 3:
			if len(f) != 1 {
				return s, kfile.ParseError("/proc/PID/stat", b, kfile.ErrSyntax)
			}
			s.State = f[0]
			continue
		case 4:
			v, err := kfile.ParseInt(f)
			if err != nil || v < 0 || v > 1<<31 {
				return s, kfile.ParseError("/proc/PID/stat", b, kfile.ErrSyntax)
			}
			s.PPID = int(v)
			continue
		case 9:
			dst = &s.Flags
		case 14:
			dst = &s.UTime
		case 15:
			dst = &s.STime
		case 20:
			dst = &s.Threads
		case 22:
			dst = &s.StartTicks
		case 23:
			dst = &s.VSize
		case 24:
			dst = &s.RSSPages
		default:
			continue
		}
		v, err := kfile.ParseUint(f)
		if err != nil {
			return s, kfile.ParseError("/proc/PID/stat", b, err)
		}
		*dst = v
	}
	return s, nil
}

// pidStatus is what the process collector keeps of /proc/PID/status.
type pidStatus struct {
	UID  uint32 // real uid
	Swap uint64 // bytes; 0 for kernel threads, which have no VmSwap line
}

// parsePIDStatus parses the Uid and VmSwap lines of /proc/PID/status.
func parsePIDStatus(b []byte) (pidStatus, error) {
	var s pidStatus
	hasUID := false
	for pos := 0; pos < len(b); {
		var line []byte
		line, pos = kfile.NextLine(b, pos)
		switch {
		case bytes.HasPrefix(line, []byte("Uid:")):
			f, _ := kfile.Field(line, 4)
			v, err := kfile.ParseUint(f)
			if err != nil || v > 1<<32-1 {
				return s, kfile.ParseError("/proc/PID/status", line, kfile.ErrSyntax)
			}
			s.UID, hasUID = uint32(v), true
		case bytes.HasPrefix(line, []byte("VmSwap:")):
			f, p := kfile.Field(line, 7)
			v, err := kfile.ParseUint(f)
			if err != nil {
				return s, kfile.ParseError("/proc/PID/status", line, err)
			}
			if unit, _ := kfile.Field(line, p); !bytes.Equal(unit, []byte("kB")) || v > (1<<64-1)/1024 {
				return s, kfile.ParseError("/proc/PID/status", line, kfile.ErrSyntax)
			}
			s.Swap = v * 1024
			return s, nil // VmSwap comes after Uid
		}
	}
	if !hasUID {
		return s, fmt.Errorf("parse /proc/PID/status: no Uid line")
	}
	return s, nil
}

// pidIO is what the process collector keeps of /proc/PID/io.
type pidIO struct {
	ReadBytes, WriteBytes uint64 // bytes the process caused to be fetched from / sent to storage
}

// parsePIDIO parses the read_bytes and write_bytes lines of /proc/PID/io.
func parsePIDIO(b []byte) (pidIO, error) {
	var r pidIO
	found := 0
	for pos := 0; pos < len(b); {
		var line []byte
		line, pos = kfile.NextLine(b, pos)
		var dst *uint64
		var off int
		switch {
		case bytes.HasPrefix(line, []byte("read_bytes:")):
			dst, off = &r.ReadBytes, len("read_bytes:")
		case bytes.HasPrefix(line, []byte("write_bytes:")):
			dst, off = &r.WriteBytes, len("write_bytes:")
		default:
			continue
		}
		f, _ := kfile.Field(line, off)
		v, err := kfile.ParseUint(f)
		if err != nil {
			return r, kfile.ParseError("/proc/PID/io", line, err)
		}
		*dst = v
		found++
	}
	if found != 2 {
		return r, fmt.Errorf("parse /proc/PID/io: read_bytes or write_bytes missing")
	}
	return r, nil
}

// parseCmdline splits /proc/PID/cmdline at its NULs. A process that rewrote its command line
// as one string with spaces (setproctitle) gets one element. Invalid UTF-8 is replaced so that
// the strings are safe to put in JSON.
func parseCmdline(b []byte) []string {
	b = bytes.TrimRight(b, "\x00")
	if len(b) == 0 {
		return nil
	}
	n := bytes.Count(b, []byte{0}) + 1
	out := make([]string, 0, n)
	s := kfile.ValidString(b) // one allocation; the elements share it
	for {
		i := strings.IndexByte(s, 0)
		if i < 0 {
			return append(out, s)
		}
		out = append(out, s[:i])
		s = s[i+1:]
	}
}

// cantalEnv is what the process collector keeps of /proc/PID/environ.
type cantalEnv struct {
	Path, AppName string
}

// parseEnviron finds CANTAL_PATH and CANTAL_APPNAME in a NUL-separated environment. When a
// variable is repeated the first one wins, as getenv(3) does.
func parseEnviron(b []byte) cantalEnv {
	var e cantalEnv
	var havePath, haveApp bool
	for len(b) > 0 {
		var kv []byte
		if i := kfile.IndexByte(b, 0); i >= 0 {
			kv, b = b[:i], b[i+1:]
		} else {
			kv, b = b, nil
		}
		if !havePath && bytes.HasPrefix(kv, []byte("CANTAL_PATH=")) {
			e.Path, havePath = kfile.ValidString(kv[len("CANTAL_PATH="):]), true
		} else if !haveApp && bytes.HasPrefix(kv, []byte("CANTAL_APPNAME=")) {
			e.AppName, haveApp = kfile.ValidString(kv[len("CANTAL_APPNAME="):]), true
		}
	}
	return e
}

// cgroupLine is one line of /proc/PID/cgroup, "hierarchy-ID:controller-list:cgroup-path";
// the fields alias the parsed buffer. The cgroup v2 line is "0::/path".
type cgroupLine struct {
	ID          []byte
	Controllers []byte // "cpu,cpuacct", "name=systemd", "" for v2
	Path        []byte
}

// parseCgroupFile parses /proc/PID/cgroup appending to dst.
func parseCgroupFile(b []byte, dst []cgroupLine) ([]cgroupLine, error) {
	for pos := 0; pos < len(b); {
		var line []byte
		line, pos = kfile.NextLine(b, pos)
		if len(line) == 0 {
			continue
		}
		c1 := kfile.IndexByte(line, ':')
		if c1 < 0 {
			return dst, kfile.ParseError("/proc/PID/cgroup", line, kfile.ErrSyntax)
		}
		c2 := kfile.IndexByte(line[c1+1:], ':')
		if c2 < 0 {
			return dst, kfile.ParseError("/proc/PID/cgroup", line, kfile.ErrSyntax)
		}
		c2 += c1 + 1
		l := cgroupLine{ID: line[:c1], Controllers: line[c1+1 : c2], Path: line[c2+1:]}
		if _, err := kfile.ParseUint(l.ID); err != nil || len(l.Path) == 0 || l.Path[0] != '/' {
			return dst, kfile.ParseError("/proc/PID/cgroup", line, kfile.ErrSyntax)
		}
		dst = append(dst, l)
	}
	return dst, nil
}

// pidSchedstat is /proc/PID/schedstat: what the scheduler counts of a process's main thread.
type pidSchedstat struct {
	RunNs  uint64 // time spent on a CPU, ns
	Slices uint64 // times it was given a CPU
}

// parsePIDSchedstat parses /proc/PID/schedstat ("run_ns wait_ns slices\n").
func parsePIDSchedstat(b []byte) (pidSchedstat, error) {
	var s pidSchedstat
	run, pos := kfile.Field(b, 0)
	_, pos = kfile.Field(b, pos)
	slices, pos := kfile.Field(b, pos)
	if extra, _ := kfile.Field(b, pos); extra != nil {
		return s, kfile.ParseError("/proc/PID/schedstat", b, kfile.ErrSyntax)
	}
	var err error
	if s.RunNs, err = kfile.ParseUint(run); err != nil {
		return s, kfile.ParseError("/proc/PID/schedstat", b, err)
	}
	if s.Slices, err = kfile.ParseUint(slices); err != nil {
		return s, kfile.ParseError("/proc/PID/schedstat", b, err)
	}
	return s, nil
}

// parseSwapsUsed returns the swap in use, in kB, summed over the devices of /proc/swaps
// ("Filename Type Size Used Priority", a header line then one line per device; the kernel
// escapes spaces in file names).
func parseSwapsUsed(b []byte) (uint64, error) {
	line, pos := kfile.NextLine(b, 0)
	if !bytes.HasPrefix(line, []byte("Filename")) {
		return 0, kfile.ParseError("/proc/swaps", line, kfile.ErrSyntax)
	}
	var used uint64
	for pos < len(b) {
		line, pos = kfile.NextLine(b, pos)
		name, p := kfile.Field(line, 0)
		if name == nil {
			continue
		}
		_, p = kfile.Field(line, p)
		_, p = kfile.Field(line, p)
		f, _ := kfile.Field(line, p)
		v, err := kfile.ParseUint(f)
		if err != nil {
			return 0, kfile.ParseError("/proc/swaps", line, err)
		}
		if used+v < used {
			return 0, kfile.ParseError("/proc/swaps", line, kfile.ErrRange)
		}
		used += v
	}
	return used, nil
}
