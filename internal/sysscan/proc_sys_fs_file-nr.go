package sysscan

// /proc/sys/fs/file-nr: open file handles (Machine).

import (
	"math"

	"github.com/cantal-go/cantal/internal/kfile"
	"github.com/cantal-go/cantal/internal/series"
)

func (m *Machine) collectFileNr(b []byte, sink series.Sink) error {
	f, err := parseFileNr(b)
	if err != nil {
		return err
	}
	m.putSys(sink, sysFilesAllocated, f.Allocated)
	m.putSys(sink, sysFilesFree, f.Free)
	m.putSys(sink, sysFilesMax, min(f.Max, math.MaxInt64))
	return nil
}

// fileNr is /proc/sys/fs/file-nr.
type fileNr struct {
	Allocated, Free, Max uint64
}

// parseFileNr parses "486	0	2466167".
func parseFileNr(b []byte) (fileNr, error) {
	var r fileNr
	p := 0
	for _, dst := range []*uint64{&r.Allocated, &r.Free, &r.Max} {
		var f []byte
		f, p = kfile.Field(b, p)
		v, err := kfile.ParseUint(f)
		if err != nil {
			return r, kfile.ParseError("/proc/sys/fs/file-nr", b, err)
		}
		*dst = v
	}
	return r, nil
}
