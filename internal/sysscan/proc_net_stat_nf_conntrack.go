package sysscan

// /proc/net/stat/nf_conntrack: connection tracking statistics (System).

import (
	"bytes"
	"fmt"

	"github.com/cantal-go/cantal/internal/kfile"
	"github.com/cantal-go/cantal/internal/series"
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

func (s *System) collectConntrackStat(b []byte, sink series.Sink) error {
	var err error
	s.cts, err = parseConntrackStat(b, s.cts[:0])
	for _, e := range s.cts {
		r := s.ct[string(e.Name)]
		if r == nil {
			r = sink.Series(series.Labels{"metric": "conntrack.stat." + kfile.ValidString(e.Name)}, series.Counter)
			s.ct[string(e.Name)] = r
		}
		sink.Put(r, uint64(e.Val))
	}
	return err
}

// conntrackStatState is what System keeps of /proc/net/stat/nf_conntrack.
type conntrackStatState struct {
	ct  map[string]*series.Ref
	cts []nameVal
}
