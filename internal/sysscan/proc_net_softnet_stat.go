package sysscan

// /proc/net/softnet_stat: per-CPU packet processing (System).

import (
	"bytes"
	"fmt"
	"strconv"

	"github.com/cantal-go/cantal/internal/kfile"
	"github.com/cantal-go/cantal/internal/scanmark"
	"github.com/cantal-go/cantal/internal/series"
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

type softnetRefs struct {
	refs          [3]*series.Ref // processed, dropped, times_squeezed
	scanmark.Mark                // the latest scan that saw it
}

var softnetMetrics = [3]string{"softnet.processed", "softnet.dropped", "softnet.times_squeezed"}

func (s *System) collectSoftnet(b []byte, sink series.Sink) error {
	var err error
	s.sns, err = parseSoftnet(b, s.sns[:0])
	for _, c := range s.sns {
		r := s.sn[c.CPU]
		if r == nil {
			r = &softnetRefs{}
			cpu := strconv.Itoa(c.CPU)
			for i, m := range softnetMetrics {
				r.refs[i] = sink.Series(series.Labels{"metric": m, "cpu": cpu}, series.Counter)
			}
			s.sn[c.CPU] = r
		}
		r.See(s.gen)
		sink.Put(r.refs[0], c.Processed)
		sink.Put(r.refs[1], c.Dropped)
		sink.Put(r.refs[2], c.TimeSqueeze)
	}
	return err
}

// softnetState is what System keeps of /proc/net/softnet_stat.
type softnetState struct {
	sn  map[int]*softnetRefs
	sns []softnetCPU
}
