package sysscan

// /proc/meminfo (Machine).

import (
	"bytes"
	"fmt"
	"math"

	"github.com/cantal-go/cantal/internal/kfile"
	"github.com/cantal-go/cantal/internal/series"
)

func (m *Machine) collectMeminfo(b []byte, sink series.Sink) error {
	var err error
	m.kvs, err = parseMeminfo(b, m.kvs[:0])
	for _, e := range m.kvs {
		r := m.mem[string(e.Key)]
		if r == nil {
			k := string(e.Key)
			r = sink.Series(series.Labels{"metric": "memory." + k}, series.Level)
			m.mem[k] = r
		}
		sink.Put(r, min(e.Val, math.MaxInt64))
	}
	return err
}

// kv is a named value; Key aliases the parsed buffer.
type kv struct {
	Key []byte
	Val uint64
}

// parseMeminfo parses /proc/meminfo ("MemTotal:       24683620 kB") appending to dst. Values
// with a kB unit are converted to bytes; the others (HugePages_Total) are counts.
func parseMeminfo(b []byte, dst []kv) ([]kv, error) {
	for pos := 0; pos < len(b); {
		var line []byte
		line, pos = kfile.NextLine(b, pos)
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		colon := kfile.IndexByte(line, ':')
		if colon < 0 || len(bytes.TrimSpace(line[:colon])) == 0 {
			return dst, kfile.ParseError("/proc/meminfo", line, kfile.ErrSyntax)
		}
		f, p := kfile.Field(line, colon+1)
		v, err := kfile.ParseUint(f)
		if err != nil {
			return dst, kfile.ParseError("/proc/meminfo", line, err)
		}
		unit, _ := kfile.Field(line, p)
		switch string(unit) {
		case "":
		case "kB":
			if v > (1<<64-1)/1024 {
				return dst, kfile.ParseError("/proc/meminfo", line, kfile.ErrRange)
			}
			v *= 1024
		default:
			return dst, kfile.ParseError("/proc/meminfo", line, fmt.Errorf("unknown unit %q", unit))
		}
		dst = append(dst, kv{Key: bytes.TrimSpace(line[:colon]), Val: v})
	}
	return dst, nil
}

// meminfoState is what Machine keeps of /proc/meminfo.
type meminfoState struct {
	mem map[string]*series.Ref
	kvs []kv
}
