package sysscan

// /proc/vmstat (System).

import (
	"github.com/cantal-go/cantal/internal/kfile"
	"github.com/cantal-go/cantal/internal/series"
)

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

// vmstatCounterNr are the nr_* fields of /proc/vmstat that count since boot.
var vmstatCounterNr = map[string]bool{
	"nr_dirtied": true, "nr_written": true, "nr_foll_pin_acquired": true, "nr_foll_pin_released": true,
}

// vmstatKind says whether a /proc/vmstat kfile.Field is a level (nr_* now, workingset_nodes) or an
// event counter (everything else).
func vmstatKind(name string) series.Kind {
	if (len(name) > 3 && name[:3] == "nr_" && !vmstatCounterNr[name]) || name == "workingset_nodes" {
		return series.Level
	}
	return series.Counter
}

func (s *System) collectVmstat(b []byte, sink series.Sink) error {
	var err error
	s.vms, err = parseVmstat(b, s.vms[:0])
	for _, e := range s.vms {
		r := s.vm[string(e.Name)]
		if r == nil {
			k := kfile.ValidString(e.Name)
			r = sink.Series(series.Labels{"metric": "vmstat." + k}, vmstatKind(k))
			s.vm[string(e.Name)] = r
		}
		if r.Kind == series.Counter && e.Val < 0 {
			continue // a counter cannot go below zero; leave a gap
		}
		sink.Put(r, uint64(e.Val))
	}
	return err
}

// vmstatState is what System keeps of /proc/vmstat.
type vmstatState struct {
	vm  map[string]*series.Ref
	vms []nameVal
}
