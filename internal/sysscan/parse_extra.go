package sysscan

import (
	"bytes"
	"fmt"

	"github.com/cantal-go/cantal/internal/kfile"
)

// parseConntrackStat parses /proc/net/stat/nf_conntrack: a header of column names, then one
// line of hexadecimal values per CPU. It appends one entry per column but "entries" (the
// table's size, printed on every line) with the sum over the CPUs; names point into b.
func parseConntrackStat(b []byte, dst []nameVal) ([]nameVal, error) {
	head, pos := kfile.NextLine(b, 0)
	start := len(dst)
	var cols [32]int // index into dst of each column, -1 for entries
	n := 0
	for p := 0; ; {
		var f []byte
		f, p = kfile.Field(head, p)
		if f == nil {
			break
		}
		if n == len(cols) {
			return dst, kfile.ParseError("nf_conntrack stat", head, fmt.Errorf("more than %d columns", len(cols)))
		}
		if c := f[0]; c >= '0' && c <= '9' {
			return dst, kfile.ParseError("nf_conntrack stat", head, fmt.Errorf("no header"))
		}
		if string(f) == "entries" {
			cols[n] = -1
		} else {
			cols[n] = len(dst)
			dst = append(dst, nameVal{Name: f})
		}
		n++
	}
	if n == 0 {
		return dst, fmt.Errorf("parse nf_conntrack stat: empty")
	}
	for pos < len(b) {
		var line []byte
		line, pos = kfile.NextLine(b, pos)
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		i := 0
		for p := 0; ; i++ {
			var f []byte
			f, p = kfile.Field(line, p)
			if f == nil {
				break
			}
			if i >= n {
				return dst[:start], kfile.ParseError("nf_conntrack stat", line, fmt.Errorf("more values than names"))
			}
			v, err := kfile.ParseHex(f)
			if err != nil {
				return dst[:start], kfile.ParseError("nf_conntrack stat", line, err)
			}
			if j := cols[i]; j >= 0 {
				dst[j].Val += int64(v & (1<<62 - 1)) // a per-CPU u32; the mask keeps the sum positive
			}
		}
		if i != n {
			return dst[:start], kfile.ParseError("nf_conntrack stat", line, fmt.Errorf("%d values for %d names", i, n))
		}
	}
	return dst, nil
}

// parseUDPLine returns the send and receive queues of a /proc/net/udp or udp6 line ("sl
// local_address rem_address st tx_queue:rx_queue ..."); ok is false for the header.
func parseUDPLine(line []byte) (tx, rx uint64, ok bool, err error) {
	var f []byte
	p := 0
	for i := 0; i < 5; i++ {
		f, p = kfile.Field(line, p)
		if f == nil {
			if i == 0 {
				return 0, 0, false, nil // blank
			}
			return 0, 0, false, kfile.ParseError("udp", line, kfile.ErrSyntax)
		}
		if i == 0 && string(f) == "sl" {
			return 0, 0, false, nil
		}
	}
	c := kfile.IndexByte(f, ':')
	if c < 0 {
		return 0, 0, false, kfile.ParseError("udp", line, kfile.ErrSyntax)
	}
	if tx, err = kfile.ParseHex(f[:c]); err != nil {
		return 0, 0, false, kfile.ParseError("udp", line, err)
	}
	if rx, err = kfile.ParseHex(f[c+1:]); err != nil {
		return 0, 0, false, kfile.ParseError("udp", line, err)
	}
	return tx, rx, true, nil
}

// selinuxMode parses the SELINUX= setting of /etc/selinux/config: 1 enforcing, 0 permissive,
// -1 disabled; ok is false when the file does not set it.
func selinuxMode(b []byte) (mode int64, ok bool) {
	for pos := 0; pos < len(b); {
		var line []byte
		line, pos = kfile.NextLine(b, pos)
		line = bytes.TrimSpace(line)
		v, found := bytes.CutPrefix(line, []byte("SELINUX="))
		if !found {
			continue
		}
		switch string(bytes.Trim(v, `"'`)) {
		case "enforcing":
			mode, ok = 1, true
		case "permissive":
			mode, ok = 0, true
		case "disabled":
			mode, ok = -1, true
		}
	}
	return mode, ok
}

// diskID is the major, minor and name of a /proc/diskstats line.
type diskID struct {
	Major, Minor uint64
	Name         []byte
}

// parseDiskIDs reads the first three columns of every /proc/diskstats line.
func parseDiskIDs(b []byte, dst []diskID) ([]diskID, error) {
	for pos := 0; pos < len(b); {
		var line []byte
		line, pos = kfile.NextLine(b, pos)
		maj, p := kfile.Field(line, 0)
		if maj == nil {
			continue
		}
		min, p := kfile.Field(line, p)
		name, _ := kfile.Field(line, p)
		if name == nil {
			return dst, kfile.ParseError("/proc/diskstats", line, kfile.ErrSyntax)
		}
		a, err1 := kfile.ParseUint(maj)
		b, err2 := kfile.ParseUint(min)
		if err1 != nil || err2 != nil || a > 1<<32 || b > 1<<32 {
			return dst, kfile.ParseError("/proc/diskstats", line, kfile.ErrSyntax)
		}
		dst = append(dst, diskID{Major: a, Minor: b, Name: name})
	}
	return dst, nil
}

// udevDiskKeys are the udev properties node_exporter puts on node_disk_info, in the order of
// udevDiskLabels.
var (
	udevDiskKeys   = [...]string{"ID_PATH", "ID_WWN", "ID_MODEL", "ID_SERIAL_SHORT", "ID_REVISION"}
	udevDiskLabels = [...]string{"path", "wwn", "model", "serial", "revision"}
)

// parseUdevDisk picks udevDiskKeys out of a udev database file (/run/udev/data/b8:0), whose
// property lines read "E:KEY=value"; other lines are ignored.
func parseUdevDisk(b []byte) [len(udevDiskKeys)]string {
	var r [len(udevDiskKeys)]string
	for pos := 0; pos < len(b); {
		var line []byte
		line, pos = kfile.NextLine(b, pos)
		kv, ok := bytes.CutPrefix(line, []byte("E:"))
		if !ok {
			continue
		}
		k, v, ok := bytes.Cut(kv, []byte("="))
		if !ok {
			continue
		}
		for i, key := range udevDiskKeys {
			if string(k) == key {
				r[i] = kfile.ValidString(v)
			}
		}
	}
	return r
}
