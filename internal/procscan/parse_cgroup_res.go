package procscan

import (
	"bytes"

	"github.com/cantal-go/cantal/internal/kfile"
)

// ioDev is one block device's I/O of a cgroup; Dev ("major:minor") aliases the parsed buffer.
type ioDev struct {
	Dev                        []byte
	RBytes, WBytes, RIOs, WIOs uint64
}

// maxIODevs caps the devices kept of one cgroup's I/O file.
const maxIODevs = 64

// parseIOStat parses a v2 io.stat ("8:0 rbytes=1 wbytes=2 rios=3 wios=4 dbytes=0 dios=0" a
// line), appending to dst. Keys it does not know are skipped.
func parseIOStat(b []byte, dst []ioDev) ([]ioDev, error) {
	for pos := 0; pos < len(b); {
		var line []byte
		line, pos = kfile.NextLine(b, pos)
		dev, p := kfile.Field(line, 0)
		if dev == nil {
			continue
		}
		if !isMajMin(dev) {
			return dst, kfile.ParseError("io.stat", line, kfile.ErrSyntax)
		}
		d := ioDev{Dev: dev}
		for {
			var f []byte
			if f, p = kfile.Field(line, p); f == nil {
				break
			}
			k, v, ok := bytes.Cut(f, []byte("="))
			if !ok {
				return dst, kfile.ParseError("io.stat", line, kfile.ErrSyntax)
			}
			n, err := kfile.ParseUint(v)
			if err != nil {
				return dst, kfile.ParseError("io.stat", line, err)
			}
			switch string(k) {
			case "rbytes":
				d.RBytes = n
			case "wbytes":
				d.WBytes = n
			case "rios":
				d.RIOs = n
			case "wios":
				d.WIOs = n
			}
		}
		if len(dst) < maxIODevs {
			dst = append(dst, d)
		}
	}
	return dst, nil
}

// parseBlkio parses a v1 blkio.throttle.io_service_bytes or io_serviced file ("8:0 Read 1"
// lines, per operation, and a last "Total 3") into dst, by device: bytes into RBytes/WBytes,
// or operations into RIOs/WIOs when ops.
func parseBlkio(b []byte, dst []ioDev, ops bool) ([]ioDev, error) {
	for pos := 0; pos < len(b); {
		var line []byte
		line, pos = kfile.NextLine(b, pos)
		dev, p := kfile.Field(line, 0)
		if dev == nil || string(dev) == "Total" {
			continue
		}
		op, p := kfile.Field(line, p)
		val, p := kfile.Field(line, p)
		if extra, _ := kfile.Field(line, p); !isMajMin(dev) || val == nil || extra != nil {
			return dst, kfile.ParseError("blkio", line, kfile.ErrSyntax)
		}
		n, err := kfile.ParseUint(val)
		if err != nil {
			return dst, kfile.ParseError("blkio", line, err)
		}
		i := 0
		for i < len(dst) && !bytes.Equal(dst[i].Dev, dev) {
			i++
		}
		if i == len(dst) {
			if len(dst) >= maxIODevs {
				continue
			}
			dst = append(dst, ioDev{Dev: dev})
		}
		d := &dst[i]
		switch {
		case string(op) == "Read" && ops:
			d.RIOs = n
		case string(op) == "Write" && ops:
			d.WIOs = n
		case string(op) == "Read":
			d.RBytes = n
		case string(op) == "Write":
			d.WBytes = n
		}
	}
	return dst, nil
}

func isMajMin(b []byte) bool {
	maj, min, ok := bytes.Cut(b, []byte(":"))
	if !ok || len(maj) == 0 || len(min) == 0 {
		return false
	}
	return allDigits(maj) && allDigits(min)
}

func allDigits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// parsePressure parses a PSI file (cpu.pressure, memory.pressure, io.pressure: "some
// avg10=0.00 avg60=0.00 avg300=0.00 total=123" and a "full ..." line, in µs) into the totals
// of its some and full lines, and whether each was there.
func parsePressure(b []byte) (some, full uint64, haveSome, haveFull bool, err error) {
	for pos := 0; pos < len(b); {
		var line []byte
		line, pos = kfile.NextLine(b, pos)
		kind, p := kfile.Field(line, 0)
		if kind == nil {
			continue
		}
		var total uint64
		found := false
		for {
			var f []byte
			if f, p = kfile.Field(line, p); f == nil {
				break
			}
			if v, ok := bytes.CutPrefix(f, []byte("total=")); ok {
				if total, err = kfile.ParseUint(v); err != nil {
					return 0, 0, false, false, kfile.ParseError("pressure", line, err)
				}
				found = true
			}
		}
		if !found {
			return 0, 0, false, false, kfile.ParseError("pressure", line, kfile.ErrSyntax)
		}
		switch string(kind) {
		case "some":
			some, haveSome = total, true
		case "full":
			full, haveFull = total, true
		}
	}
	return some, full, haveSome, haveFull, nil
}
