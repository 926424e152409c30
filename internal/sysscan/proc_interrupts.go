package sysscan

// /proc/interrupts: interrupts per CPU (System, with Options.Interrupts), as node_exporter's
// interrupts collector reads them.

import (
	"bytes"
	"fmt"
	"strconv"

	"github.com/cantal-go/cantal/internal/kfile"
	"github.com/cantal-go/cantal/internal/scanmark"
	"github.com/cantal-go/cantal/internal/series"
)

// irqLine is one line of /proc/interrupts: its name ("24", "NMI"), one count per CPU in the
// values slice from Vals, and Rest, what follows the counts (the chip, hardware IRQ and devices
// of a numbered interrupt, the description of a named one).
type irqLine struct {
	Name []byte
	Vals int
	Rest []byte
}

// parseInterrupts parses /proc/interrupts:
//
//	           CPU0       CPU1
//	 24:          1          0  IO-APIC   5-edge      ACPI:Ged
//	NMI:          0          0   Non-maskable interrupts
//	ERR:          0
//
// The header has one column per CPU (ncpu). Lines with fewer than ncpu counts and something
// after them are left out, as node_exporter does (ERR, MIS). The counts are appended to vals.
func parseInterrupts(b []byte, dst []irqLine, vals []uint64) ([]irqLine, []uint64, int, error) {
	header, pos := kfile.NextLine(b, 0)
	ncpu := 0
	for p := 0; ; ncpu++ {
		var f []byte
		if f, p = kfile.Field(header, p); f == nil {
			break
		}
	}
	if ncpu == 0 {
		return dst, vals, 0, kfile.ParseError("interrupts", header, fmt.Errorf("no CPU columns"))
	}
	for pos < len(b) {
		var line []byte
		line, pos = kfile.NextLine(b, pos)
		colon := bytes.IndexByte(line, ':')
		if colon < 0 {
			continue
		}
		name := bytes.TrimLeft(line[:colon], " ")
		rest := line[colon+1:]
		// Count the fields first: node_exporter skips lines with fewer than ncpu+1.
		n, p := 0, 0
		for ; n <= ncpu; n++ {
			var f []byte
			if f, p = kfile.Field(rest, p); f == nil {
				break
			}
		}
		if n < ncpu+1 {
			continue
		}
		if len(name) == 0 {
			return dst, vals, ncpu, kfile.ParseError("interrupts", line, fmt.Errorf("no name"))
		}
		l := irqLine{Name: name, Vals: len(vals)}
		p = 0
		for range ncpu {
			var f []byte
			f, p = kfile.Field(rest, p)
			v, err := kfile.ParseUint(f)
			if err != nil {
				return dst, vals, ncpu, kfile.ParseError("interrupts", line, err)
			}
			vals = append(vals, v)
		}
		l.Rest = rest[p:]
		dst = append(dst, l)
	}
	return dst, vals, ncpu, nil
}

// irqLabels gives node_exporter's info and devices labels of an interrupt: for a numbered one
// the first field after the counts and the others joined by one space, for a named one all of
// them joined by one space and no devices.
func irqLabels(name, rest []byte) (info, devices string) {
	fields := bytes.Fields(rest)
	if _, err := strconv.Atoi(string(name)); err == nil {
		return kfile.ValidString(fields[0]), kfile.ValidString(bytes.Join(fields[1:], []byte(" ")))
	}
	return kfile.ValidString(bytes.Join(fields, []byte(" "))), ""
}

// interruptsState is System's state of /proc/interrupts. Only System's scan goroutine uses it.
type interruptsState struct {
	irqs    map[string]*irqState // by name
	irqBuf  []irqLine
	irqVals []uint64
}

type irqState struct {
	rest          []byte        // Rest when refs were registered: a change (a device renamed) registers new ones
	refs          []*series.Ref // by CPU
	scanmark.Mark               // the latest scan that saw it
}

// collectInterrupts puts interrupts{type,cpu,info,devices}, a counter per interrupt and CPU.
// The CPUs' labels are their column numbers, as node_exporter's ("0" for CPU0).
func (s *System) collectInterrupts(b []byte, sink series.Sink) error {
	st := &s.interruptsState
	if st.irqs == nil {
		st.irqs = map[string]*irqState{}
	}
	var ncpu int
	var err error
	st.irqBuf, st.irqVals, ncpu, err = parseInterrupts(b, st.irqBuf[:0], st.irqVals[:0])
	if err != nil {
		return err
	}
	for _, l := range st.irqBuf {
		q := st.irqs[string(l.Name)]
		if q == nil {
			q = &irqState{}
			st.irqs[string(l.Name)] = q
		}
		q.See(s.gen)
		if len(q.refs) != ncpu || !bytes.Equal(q.rest, l.Rest) {
			q.rest = append(q.rest[:0], l.Rest...)
			info, devices := irqLabels(l.Name, l.Rest)
			name := kfile.ValidString(l.Name)
			q.refs = q.refs[:0]
			for cpu := range ncpu {
				q.refs = append(q.refs, sink.Series(series.Labels{"metric": "interrupts", "type": name, "cpu": strconv.Itoa(cpu),
					"info": info, "devices": devices}, series.Counter))
			}
		}
		for cpu, r := range q.refs {
			sink.Put(r, st.irqVals[l.Vals+cpu])
		}
	}
	scanmark.Sweep(st.irqs, s.gen, nil)
	return nil
}
