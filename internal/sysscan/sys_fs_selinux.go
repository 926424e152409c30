package sysscan

// /sys/fs/selinux and /etc/selinux/config: SELinux state (System, rare scans); also the local
// time zone offset, written at every scan.

import (
	"bytes"
	"path/filepath"
	"time"

	"github.com/cantal-go/cantal/internal/kfile"
	"github.com/cantal-go/cantal/internal/series"
)

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

// collectTimeAndSELinux writes the time zone's offset and SELinux's state;
// what rarely changes is read again when rare is set.
func (s *System) collectTimeAndSELinux(sink series.Sink, rare bool) {
	if rare {
		s.readSELinux()
	}
	name, off := time.Now().Zone()
	if s.tzR == nil || name != s.tz {
		s.tz = name
		s.tzR = sink.Series(series.Labels{"metric": "system.time_zone_offset_s", "time_zone": name}, series.Level)
	}
	sink.Put(s.tzR, uint64(int64(off)))
	for i, r := range s.se {
		if !s.seOK[i] {
			continue
		}
		if r == nil {
			r = sink.Series(series.Labels{"metric": selinuxMetrics[i]}, series.Level)
			s.se[i] = r
		}
		sink.Put(r, uint64(s.seV[i]))
	}
}

var selinuxMetrics = [3]string{"selinux.enabled", "selinux.current_mode", "selinux.config_mode"}

func (s *System) readSELinux() {
	s.seOK = [3]bool{true, false, false}
	s.seV = [3]int64{}
	b, err := readSmallFile(filepath.Join(s.opt.Sys, "fs/selinux/enforce"), &s.buf, 64)
	if err != nil {
		return // selinuxfs not mounted: SELinux is disabled
	}
	s.seV[0] = 1
	if v, err := kfile.ParseIntValue(b); err == nil {
		s.seV[1], s.seOK[1] = v, true
	}
	if b, err := readSmallFile(filepath.Join(s.root(), "etc/selinux/config"), &s.buf, 64<<10); err == nil {
		s.seV[2], s.seOK[2] = selinuxMode(b)
	}
}

// selinuxState is what System keeps of SELinux and the time zone.
type selinuxState struct {
	tz   string
	tzV  int64
	tzR  *series.Ref
	se   [3]*series.Ref // enabled, current_mode, config_mode
	seV  [3]int64
	seOK [3]bool
}
