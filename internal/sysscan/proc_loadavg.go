package sysscan

// /proc/loadavg (Machine).

import (
	"github.com/cantal-go/cantal/internal/kfile"
	"github.com/cantal-go/cantal/internal/series"
)

func (m *Machine) collectLoadAvg(b []byte, sink series.Sink) error {
	l, err := parseLoadAvg(b)
	if err != nil {
		return err
	}
	m.putSysFloat(sink, sysLoad1, l.Load1)
	m.putSysFloat(sink, sysLoad5, l.Load5)
	m.putSysFloat(sink, sysLoad15, l.Load15)
	m.putSys(sink, sysTasksRunnable, l.Runnable)
	m.putSys(sink, sysTasksTotal, l.Total)
	return nil
}

// loadAvg is /proc/loadavg.
type loadAvg struct {
	Load1, Load5, Load15 float64
	Runnable, Total      uint64 // scheduling entities (tasks)
	LastPID              uint64
}

// parseLoadAvg parses "0.80 0.46 0.18 1/87 8106".
func parseLoadAvg(b []byte) (loadAvg, error) {
	var l loadAvg
	var f []byte
	p := 0
	for _, dst := range []*float64{&l.Load1, &l.Load5, &l.Load15} {
		f, p = kfile.Field(b, p)
		v, err := kfile.ParseDecimal(f)
		if err != nil {
			return l, kfile.ParseError("/proc/loadavg", b, err)
		}
		*dst = v
	}
	f, p = kfile.Field(b, p)
	slash := kfile.IndexByte(f, '/')
	if slash < 0 {
		return l, kfile.ParseError("/proc/loadavg", b, kfile.ErrSyntax)
	}
	var err1, err2, err3 error
	l.Runnable, err1 = kfile.ParseUint(f[:slash])
	l.Total, err2 = kfile.ParseUint(f[slash+1:])
	f, _ = kfile.Field(b, p)
	l.LastPID, err3 = kfile.ParseUint(f)
	for _, err := range []error{err1, err2, err3} {
		if err != nil {
			return l, kfile.ParseError("/proc/loadavg", b, err)
		}
	}
	return l, nil
}
