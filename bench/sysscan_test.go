package bench

// Peer comparison for internal/sysscan: a machine scan and a process scan of the real /proc
// against prometheus/procfs doing the same reads, in one run.
//
//	cd bench && go test -run '^$' -bench 'Scan' -benchtime 3s -count 3 .
//
// cpu-ns/op is the user+system CPU time of the whole test process (getrusage) per scan, which
// includes the kernel's work of generating the /proc files and the garbage collector's. The
// "1000" variants first start 1000 sleep processes. procfs is given the easier job: it only
// reads (no series are built) and it reads neither cmdline nor environ, which sysscan reads once
// per new process.

import (
	"context"
	"os/exec"
	"testing"

	"github.com/prometheus/procfs"
	"github.com/prometheus/procfs/blockdevice"

	"github.com/cantal-go/cantal/internal/procscan"
	"github.com/cantal-go/cantal/internal/series"
	"github.com/cantal-go/cantal/internal/sysscan"
	"github.com/cantal-go/cantal/internal/testsupport/cputime"
)

func startSleepers(b *testing.B, n int) {
	b.Helper()
	cmds := make([]*exec.Cmd, 0, n)
	b.Cleanup(func() {
		for _, c := range cmds {
			c.Process.Kill()
			c.Wait()
		}
	})
	for range n {
		c := exec.Command("sleep", "3600")
		if err := c.Start(); err != nil {
			b.Fatalf("start sleeper: %v", err)
		}
		cmds = append(cmds, c)
	}
}

// measure runs scan b.N times after one warm-up scan and reports CPU time per scan.
func measure(b *testing.B, scan func() error) {
	if err := scan(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := cputime.Process()
	for b.Loop() {
		if err := scan(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cputime.Process()-start)/float64(b.N), "cpu-ns/op")
}

func sysscanMachine(b *testing.B) func() error {
	m := sysscan.NewMachine(sysscan.Options{})
	b.Cleanup(func() { m.Close() })
	sink := &series.Discard{}
	return func() error { return m.Collect(context.Background(), sink) }
}

func sysscanProcesses(b *testing.B) func() error {
	p := procscan.NewProcesses(procscan.Options{})
	b.Cleanup(func() { p.Close() })
	sink := &series.Discard{}
	return func() error { return p.Collect(context.Background(), sink) }
}

func procfsMachine(b *testing.B) func() error {
	fs, err := procfs.NewFS("/proc")
	if err != nil {
		b.Fatal(err)
	}
	bd, err := blockdevice.NewFS("/proc", "/sys")
	if err != nil {
		b.Fatal(err)
	}
	self, err := fs.Self()
	if err != nil {
		b.Fatal(err)
	}
	return func() error {
		if _, err := fs.Stat(); err != nil {
			return err
		}
		if _, err := fs.Meminfo(); err != nil {
			return err
		}
		if _, err := fs.LoadAvg(); err != nil {
			return err
		}
		if _, err := fs.NetDev(); err != nil {
			return err
		}
		if _, err := self.Snmp(); err != nil {
			return err
		}
		if _, err := self.Netstat(); err != nil {
			return err
		}
		if _, err := bd.ProcDiskstats(); err != nil {
			return err
		}
		if _, err := fs.NetTCP(); err != nil {
			return err
		}
		_, _ = fs.NetTCP6() // absent without IPv6
		return nil
	}
}

func procfsProcesses(b *testing.B) func() error {
	fs, err := procfs.NewFS("/proc")
	if err != nil {
		b.Fatal(err)
	}
	return func() error {
		procs, err := fs.AllProcs()
		if err != nil {
			return err
		}
		for _, p := range procs {
			// Errors are processes that exited mid-scan, or io of protected ones.
			if _, err := p.Stat(); err != nil {
				continue
			}
			_, _ = p.NewStatus()
			_, _ = p.IO()
			_, _ = p.Cgroups()
		}
		return nil
	}
}

func BenchmarkScanMachine(b *testing.B) {
	b.Run("sysscan", func(b *testing.B) { measure(b, sysscanMachine(b)) })
	b.Run("procfs", func(b *testing.B) { measure(b, procfsMachine(b)) })
}

func BenchmarkScanProcesses(b *testing.B) {
	b.Run("sysscan", func(b *testing.B) { measure(b, sysscanProcesses(b)) })
	b.Run("procfs", func(b *testing.B) { measure(b, procfsProcesses(b)) })
}

func BenchmarkScanProcesses1000(b *testing.B) {
	startSleepers(b, 1000)
	b.Run("sysscan", func(b *testing.B) { measure(b, sysscanProcesses(b)) })
	b.Run("procfs", func(b *testing.B) { measure(b, procfsProcesses(b)) })
}

// BenchmarkScanFull1000 is the whole 2 s scan this package is responsible for (machine and
// processes with cgroups) at 1000 extra processes.
func BenchmarkScanFull1000(b *testing.B) {
	startSleepers(b, 1000)
	b.Run("sysscan", func(b *testing.B) {
		m, p := sysscanMachine(b), sysscanProcesses(b)
		measure(b, func() error {
			if err := m(); err != nil {
				return err
			}
			return p()
		})
	})
	b.Run("procfs", func(b *testing.B) {
		m, p := procfsMachine(b), procfsProcesses(b)
		measure(b, func() error {
			if err := m(); err != nil {
				return err
			}
			return p()
		})
	})
}
