package sysscan

// /sys/devices/system/clocksource: available and current clock sources (System, rare scans).

import (
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cantal-go/cantal/internal/kfile"
	"github.com/cantal-go/cantal/internal/scanmark"
	"github.com/cantal-go/cantal/internal/series"
)

type clocksourceState struct {
	st            stateSeries
	scanmark.Mark // the latest scan that saw it
}

func (s *System) readClocksources(sink series.Sink) {
	dir := filepath.Join(s.opt.Sys, "devices/system/clocksource")
	ents, err := os.ReadDir(dir)
	if err != nil {
		if !os.IsNotExist(err) {
			sink.Problem(dir, err.Error())
		}
		return
	}
	since := time.Now().UnixMilli()
	for _, e := range ents {
		dev, ok := strings.CutPrefix(e.Name(), "clocksource")
		if !ok || dev == "" {
			continue
		}
		for _, kind := range [2]string{"available", "current"} {
			b, err := readSmallFile(filepath.Join(dir, e.Name(), kind+"_clocksource"), &s.buf, 4096)
			if err != nil {
				sink.Problem(filepath.Join(dir, e.Name()), err.Error())
				continue
			}
			for _, src := range strings.Fields(kfile.ValidString(b)) {
				key := kind + "\x00" + dev + "\x00" + src
				c := s.cs[key]
				if c == nil {
					c = &clocksourceState{}
					c.st.set(sink, series.Labels{"metric": "system.clocksource." + kind, "device": dev, "clocksource": src}, src, since)
					s.cs[key] = c
				}
				c.See(s.gen)
			}
		}
	}
}

// clocksourcesState is what System keeps of /sys/devices/system/clocksource.
type clocksourcesState struct {
	cs map[string]*clocksourceState
}

// collectClocksources reads the clock sources on rare scans and writes them at every scan;
// those gone at the last read stop.
func (s *System) collectClocksources(sink series.Sink, rare bool) {
	if rare {
		s.readClocksources(sink)
	}
	scanmark.Sweep(s.cs, s.lastRare, nil)
	for _, c := range s.cs {
		c.st.put(sink)
	}
}
