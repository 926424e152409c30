package sysscan

import (
	"bytes"
	"fmt"

	"github.com/cantal-go/cantal/internal/kfile"
)

// softnetCPU is one line of /proc/net/softnet_stat.
type softnetCPU struct {
	CPU                             int
	Processed, Dropped, TimeSqueeze uint64
}

// parseSoftnet parses /proc/net/softnet_stat: one line of hexadecimal columns per online CPU,
// processed, dropped and time_squeeze first. Since Linux 5.10 the 13th column is the CPU's
// number; before, the line's index is taken (the kernel leaves out offline CPUs, so it may
// differ from the number).
func parseSoftnet(b []byte, dst []softnetCPU) ([]softnetCPU, error) {
	idx := 0
	for pos := 0; pos < len(b); {
		var line []byte
		line, pos = kfile.NextLine(b, pos)
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var col [13]uint64
		n, p := 0, 0
		for n < len(col) {
			var f []byte
			f, p = kfile.Field(line, p)
			if f == nil {
				break
			}
			v, err := kfile.ParseHex(f)
			if err != nil {
				return dst, kfile.ParseError("softnet_stat", line, err)
			}
			col[n] = v
			n++
		}
		if n < 3 {
			return dst, kfile.ParseError("softnet_stat", line, fmt.Errorf("%d columns", n))
		}
		cpu := idx
		if n >= 13 {
			if col[12] > 1<<20 {
				return dst, kfile.ParseError("softnet_stat", line, kfile.ErrRange)
			}
			cpu = int(col[12])
		}
		dst = append(dst, softnetCPU{CPU: cpu, Processed: col[0], Dropped: col[1], TimeSqueeze: col[2]})
		idx++
	}
	return dst, nil
}

// arpCount is the number of /proc/net/arp entries of one interface.
type arpCount struct {
	Device []byte
	N      int64
}

// parseARP counts the entries of /proc/net/arp per device (its last column), in the order
// the devices first appear; the header line is skipped.
func parseARP(b []byte, dst []arpCount) ([]arpCount, error) {
	head, pos := kfile.NextLine(b, 0)
	if !bytes.HasPrefix(head, []byte("IP address")) {
		if len(bytes.TrimSpace(b)) == 0 {
			return dst, nil
		}
		return dst, kfile.ParseError("arp", head, fmt.Errorf("no header"))
	}
	for pos < len(b) {
		var line []byte
		line, pos = kfile.NextLine(b, pos)
		var last []byte
		n := 0
		for p := 0; ; {
			var f []byte
			f, p = kfile.Field(line, p)
			if f == nil {
				break
			}
			last = f
			n++
		}
		if n == 0 {
			continue
		}
		if n != 6 {
			return dst, kfile.ParseError("arp", line, fmt.Errorf("%d columns", n))
		}
		found := false
		for i := range dst {
			if bytes.Equal(dst[i].Device, last) {
				dst[i].N++
				found = true
				break
			}
		}
		if !found {
			dst = append(dst, arpCount{Device: last, N: 1})
		}
	}
	return dst, nil
}

// schedCPU is a cpu line of /proc/schedstat.
type schedCPU struct {
	CPU                          int
	Running, Waiting, Timeslices uint64
}

// parseSchedstat parses the cpu lines of /proc/schedstat (version 15 and later):
//
//	cpu0 0 0 1210 540 661 270 2469390768 225588934 8432
//
// the 7th to 9th numbers are rq_cpu_time and run_delay (ns) and pcount. Other lines (version,
// timestamp, domain) are skipped.
func parseSchedstat(b []byte, dst []schedCPU) ([]schedCPU, error) {
	for pos := 0; pos < len(b); {
		var line []byte
		line, pos = kfile.NextLine(b, pos)
		name, p := kfile.Field(line, 0)
		if !bytes.HasPrefix(name, []byte("cpu")) {
			continue
		}
		cpu, ok := atoiCPU(name[3:])
		if !ok {
			return dst, kfile.ParseError("schedstat", line, kfile.ErrSyntax)
		}
		var v [9]uint64
		for i := range v {
			var f []byte
			f, p = kfile.Field(line, p)
			if f == nil {
				return dst, kfile.ParseError("schedstat", line, fmt.Errorf("%d values, want 9", i))
			}
			n, err := kfile.ParseUint(f)
			if err != nil {
				return dst, kfile.ParseError("schedstat", line, err)
			}
			v[i] = n
		}
		dst = append(dst, schedCPU{CPU: cpu, Running: v[6], Waiting: v[7], Timeslices: v[8]})
	}
	return dst, nil
}
