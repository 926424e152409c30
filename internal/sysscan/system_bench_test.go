package sysscan

import (
	"testing"

	"github.com/cantal-go/cantal/internal/procscan"
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
