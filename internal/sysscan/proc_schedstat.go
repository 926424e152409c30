package sysscan

// /proc/schedstat: per-CPU scheduler times (System).

import (
	"bytes"
	"fmt"
	"strconv"

	"github.com/cantal-go/cantal/internal/kfile"
	"github.com/cantal-go/cantal/internal/series"
)

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

var schedMetrics = [3]string{"schedstat.running_ns", "schedstat.waiting_ns", "schedstat.timeslices"}

func (s *System) collectSchedstat(b []byte, sink series.Sink) error {
	var err error
	s.scs, err = parseSchedstat(b, s.scs[:0])
	for _, c := range s.scs {
		r := s.sched[c.CPU]
		if r == nil {
			r = &softnetRefs{}
			cpu := strconv.Itoa(c.CPU)
			for i, m := range schedMetrics {
				r.refs[i] = sink.Series(series.Labels{"metric": m, "cpu": cpu}, series.Counter)
			}
			s.sched[c.CPU] = r
		}
		r.See(s.gen)
		sink.Put(r.refs[0], c.Running)
		sink.Put(r.refs[1], c.Waiting)
		sink.Put(r.refs[2], c.Timeslices)
	}
	return err
}

// schedstatState is what System keeps of /proc/schedstat.
type schedstatState struct {
	sched map[int]*softnetRefs // same shape: three counters per CPU
	scs   []schedCPU
}
