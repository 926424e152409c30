package sysscan

import (
	"context"
	"strings"
	"testing"

	"github.com/cantal-go/cantal/internal/series"
)

func TestParseInterrupts(t *testing.T) {
	lines, vals, ncpu, err := parseInterrupts(readFixture(t, "proc/interrupts"), nil, nil)
	if err != nil || ncpu != 4 {
		t.Fatalf("ncpu %d, %v", ncpu, err)
	}
	if len(lines) != 10 { // ERR and MIS left out
		t.Fatalf("%d lines", len(lines))
	}
	l := lines[3]
	if string(l.Name) != "16" || vals[l.Vals] != 0 {
		t.Errorf("line 16: %q %v", l.Name, vals[l.Vals:l.Vals+4])
	}
	if info, dev := irqLabels(l.Name, l.Rest); info != "IO-APIC" || dev != "16-fasteoi i801_smbus, ehci_hcd:usb1" {
		t.Errorf("16: info %q devices %q", info, dev)
	}
	l = lines[7]
	if string(l.Name) != "LOC" || vals[l.Vals+3] != 81231125 {
		t.Errorf("LOC: %q %v", l.Name, vals[l.Vals:l.Vals+4])
	}
	if info, dev := irqLabels(l.Name, l.Rest); info != "Local timer interrupts" || dev != "" {
		t.Errorf("LOC: info %q devices %q", info, dev)
	}
	// aarch64 puts no space between a long name's colon and its first count.
	lines, vals, _, err = parseInterrupts([]byte("  CPU0\nIPI0:123 Rescheduling interrupts\n"), nil, nil)
	if err != nil || len(lines) != 1 || string(lines[0].Name) != "IPI0" || vals[0] != 123 {
		t.Errorf("aarch64: %+v %v %v", lines, vals, err)
	}
	for _, bad := range []string{"", "\n", "  CPU0\n 1: x IO-APIC\n", "  CPU0\n: 1 IO-APIC\n"} {
		if _, _, _, err := parseInterrupts([]byte(bad), nil, nil); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// TestInterruptsFixture: with Options.Interrupts, a counter per interrupt and CPU with
// node_exporter's labels; without, none (off by default, as on node_exporter).
func TestInterruptsFixture(t *testing.T) {
	for _, on := range []bool{false, true} {
		opt := fixtureOptions()
		opt.Interrupts = on
		s := NewSystem(opt)
		r := series.NewRecorder()
		if err := s.Collect(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		s.Close()
		if len(r.Problems) != 0 {
			t.Errorf("problems: %v", r.Problems)
		}
		n := 0
		for k := range r.Values {
			if strings.Contains(k, `"metric":"interrupts"`) {
				n++
			}
		}
		if want := map[bool]int{false: 0, true: 40}[on]; n != want {
			t.Errorf("Interrupts=%v: %d series, want %d", on, n, want)
		}
		if !on {
			continue
		}
		refs := r.Refs()
		for k, v := range map[string]uint64{
			`{"cpu":"2","devices":"524288-edge nvme0q0","info":"PCI-MSI","metric":"interrupts","type":"124"}`: 123456,
			`{"cpu":"3","devices":"","info":"Local timer interrupts","metric":"interrupts","type":"LOC"}`:     81231125,
		} {
			if r.Values[k] != v || refs[k] == nil || refs[k].Kind != series.Counter {
				t.Errorf("%s = %d (ref %v), want %d", k, r.Values[k], refs[k], v)
			}
		}
	}
}
