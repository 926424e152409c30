package sysscan

import (
	"testing"

	"github.com/cantal-go/cantal/internal/procscan"
	"github.com/cantal-go/cantal/internal/series"
)

// BenchmarkSystem is one scan of the real /proc and /sys by System (vmstat, pressure,
// sockstat, snmp6, conntrack, adjtimex, entropy, netclass; uname, os-release and the rare
// netclass attributes every rareEvery scans).
func BenchmarkSystem(b *testing.B) {
	s := NewSystem(Options{})
	defer s.Close()
	benchScan(b, s)
}

// BenchmarkFilesystems is one scan of the real mounts: mountinfo and a statfs per mount
// through each mount's goroutine.
func BenchmarkFilesystems(b *testing.B) {
	f := NewFilesystems(Options{}, FSOptions{})
	defer f.Close()
	benchScan(b, f)
}

// BenchmarkMachineAndNew is Machine with the new collectors, the machine part of a scan as
// the agent runs it now.
func BenchmarkMachineAndNew(b *testing.B) {
	s := NewSystem(Options{})
	defer s.Close()
	f := NewFilesystems(Options{}, FSOptions{})
	defer f.Close()
	benchScan(b, NewMachine(Options{}), s, f)
}

// BenchmarkFullScanWithNew is BenchmarkFullScan's machine and process scan plus System and
// Filesystems, for the two side by side in one run.
func BenchmarkFullScanWithNew(b *testing.B) {
	s := NewSystem(Options{})
	defer s.Close()
	f := NewFilesystems(Options{}, FSOptions{})
	defer f.Close()
	benchScan(b, NewMachine(Options{}), procscan.NewProcesses(procscan.Options{}), s, f)
}

// BenchmarkBonding is the bonding collector's cost per scan on the fixture tree (three bonds,
// four slaves): bonding_masters, three bonding/slaves and four mii_status files.
func BenchmarkBonding(b *testing.B) {
	s := NewSystem(Options{Proc: "testdata/proc", Sys: "testdata/bonding/sys"})
	defer s.Close()
	sink := &series.Discard{}
	b.ReportAllocs()
	for b.Loop() {
		s.gen++
		s.collectBonding(s.opt.Sys, sink, false)
	}
}

// BenchmarkCpufreqRead is the cpufreq collector's cost per read (every cpufreqEvery scans) on
// the fixture tree: two CPUs with cpufreq (eleven files), one without.
func BenchmarkCpufreqRead(b *testing.B) {
	s := NewSystem(Options{Proc: "testdata/proc", Sys: "testdata/cpufreq/sys"})
	defer s.Close()
	sink := &series.Discard{}
	s.gen = 1
	s.collectCpufreq(s.opt.Sys, sink, true) // lists the CPUs and registers the series
	b.ReportAllocs()
	for b.Loop() {
		s.cpufreqState.read(s.cpufreqState.cfDir, sink)
	}
}

// BenchmarkPowerSupplyRead is the power supply collector's cost per read (every psEvery scans)
// on the fixture tree: a mains adapter and a battery (18 files).
func BenchmarkPowerSupplyRead(b *testing.B) {
	s := NewSystem(Options{Proc: "testdata/proc", Sys: "testdata/power_supply/sys"})
	defer s.Close()
	sink := &series.Discard{}
	s.gen = 1
	s.collectPowerSupply(s.opt.Sys, sink, true) // lists the supplies and registers the series
	b.ReportAllocs()
	for b.Loop() {
		s.powerSupplyState.read(sink)
	}
}

// BenchmarkSystemInterrupts is BenchmarkSystem with Options.Interrupts: the difference is the
// read of this machine's /proc/interrupts and its counters' puts.
func BenchmarkSystemInterrupts(b *testing.B) {
	s := NewSystem(Options{Interrupts: true})
	defer s.Close()
	benchScan(b, s)
}

// BenchmarkInterruptsParse is the parse and puts of the 4-CPU fixture's /proc/interrupts (40
// counters), without the kernel's cost of generating the file.
func BenchmarkInterruptsParse(b *testing.B) {
	s := NewSystem(Options{Interrupts: true})
	defer s.Close()
	buf := readFixture(b, "proc/interrupts")
	sink := &series.Discard{}
	b.ReportAllocs()
	for b.Loop() {
		s.gen++
		if err := s.collectInterrupts(buf, sink); err != nil {
			b.Fatal(err)
		}
	}
}
