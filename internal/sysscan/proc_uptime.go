package sysscan

// /proc/uptime (Machine).

import (
	"github.com/cantal-go/cantal/internal/kfile"
	"github.com/cantal-go/cantal/internal/series"
)

func (m *Machine) collectUptime(b []byte, sink series.Sink) error {
	up, idle, err := parseUptime(b)
	if err != nil {
		return err
	}
	m.putSysFloat(sink, sysUptime, up)
	m.putSysFloat(sink, sysIdle, idle)
	return nil
}

// parseUptime parses /proc/uptime, "370.95 616.03": seconds since boot and idle seconds summed
// over all CPUs.
func parseUptime(b []byte) (up, idle float64, err error) {
	f, p := kfile.Field(b, 0)
	if up, err = kfile.ParseDecimal(f); err != nil {
		return 0, 0, kfile.ParseError("/proc/uptime", b, err)
	}
	f, _ = kfile.Field(b, p)
	if idle, err = kfile.ParseDecimal(f); err != nil {
		return 0, 0, kfile.ParseError("/proc/uptime", b, err)
	}
	return up, idle, nil
}
