package sysscan

// /proc/pressure/{cpu,memory,io}: pressure stall information (System).

import (
	"bytes"
	"fmt"
	"math"

	"github.com/cantal-go/cantal/internal/kfile"
	"github.com/cantal-go/cantal/internal/series"
)

// psiLine is one line ("some" or "full") of a /proc/pressure file.
type psiLine struct {
	Present bool
	Avg     [3]float64 // avg10, avg60, avg300, in %
	Total   uint64     // µs
}

// psi is a /proc/pressure/{cpu,memory,io} file.
type psi struct {
	Some, Full psiLine
}

var psiAvgKeys = [3]string{"avg10=", "avg60=", "avg300="}

// parsePressure parses a pressure stall file:
//
//	some avg10=0.00 avg60=0.00 avg300=0.00 total=12345
//	full avg10=0.00 avg60=0.00 avg300=0.00 total=6789
func parsePressure(b []byte) (psi, error) {
	var r psi
	for pos := 0; pos < len(b); {
		var line []byte
		line, pos = kfile.NextLine(b, pos)
		kind, p := kfile.Field(line, 0)
		if kind == nil {
			continue
		}
		var l *psiLine
		switch string(kind) {
		case "some":
			l = &r.Some
		case "full":
			l = &r.Full
		default:
			return r, kfile.ParseError("pressure", line, kfile.ErrSyntax)
		}
		var got [4]bool
		for {
			var f []byte
			f, p = kfile.Field(line, p)
			if f == nil {
				break
			}
			matched := false
			for i, k := range psiAvgKeys {
				if bytes.HasPrefix(f, []byte(k)) {
					v, err := kfile.ParseDecimal(f[len(k):])
					if err != nil {
						return r, kfile.ParseError("pressure", line, err)
					}
					l.Avg[i], got[i], matched = v, true, true
				}
			}
			if bytes.HasPrefix(f, []byte("total=")) {
				v, err := kfile.ParseUint(f[len("total="):])
				if err != nil {
					return r, kfile.ParseError("pressure", line, err)
				}
				l.Total, got[3], matched = v, true, true
			}
			if !matched {
				return r, kfile.ParseError("pressure", line, kfile.ErrSyntax)
			}
		}
		if !got[3] {
			return r, kfile.ParseError("pressure", line, fmt.Errorf("no total"))
		}
		l.Present = true
	}
	if !r.Some.Present {
		return r, fmt.Errorf("parse pressure: no some line")
	}
	return r, nil
}

var psiResources = [3]string{"cpu", "memory", "io"}

// psiRefs are the series of one line (some or full) of a pressure file.
type psiRefs struct {
	total *series.Ref
	avg   [3]*series.Ref
}

var psiLineNames = [2]string{"some", "full"}

var psiAvgNames = [3]string{"avg10", "avg60", "avg300"}

func (s *System) collectPressure(res int, b []byte, sink series.Sink) error {
	p, err := parsePressure(b)
	if err != nil {
		return err
	}
	for li, l := range [2]*psiLine{&p.Some, &p.Full} {
		if !l.Present {
			continue
		}
		refs := &s.psi[res][li]
		if refs.total == nil {
			base := "pressure." + psiResources[res] + "." + psiLineNames[li]
			refs.total = sink.Series(series.Labels{"metric": base + "_us"}, series.Counter)
			for j := range refs.avg {
				refs.avg[j] = sink.Series(series.Labels{"metric": base + "_" + psiAvgNames[j]}, series.Float)
			}
		}
		sink.Put(refs.total, l.Total)
		for j, v := range l.Avg {
			sink.Put(refs.avg[j], math.Float64bits(v))
		}
	}
	return nil
}

// pressureState is what System keeps of /proc/pressure.
type pressureState struct {
	psi [3][2]psiRefs
}
