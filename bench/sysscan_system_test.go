package bench

// Peer comparison for sysscan's System and Filesystems collectors: one scan of the real /proc
// and /sys against the reads node_exporter 1.5's collectors make for the same series
// (prometheus/procfs where node_exporter uses it, the files read whole otherwise), in one run.
//
//	cd bench && go test -run '^$' -bench 'ScanSystem|ScanFilesystems' -benchtime 3s -count 3 .
//
// cpu-ns/op is the process's CPU time per scan (getrusage), the kernel's work generating the
// files included. The peers only read and parse (no series are built); sysscan builds and
// writes series into a Discard sink. sysscan reads some sources every 5th or 15th scan and
// mountinfo only after a change (docs/metrics.md says which), node_exporter every scrape:
// that is part of what is compared.

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/procfs"
	"github.com/prometheus/procfs/sysfs"
	"golang.org/x/sys/unix"

	"github.com/cantal-go/cantal/internal/series"
	"github.com/cantal-go/cantal/internal/sysscan"
)

func BenchmarkScanSystem(b *testing.B) {
	b.Run("sysscan", func(b *testing.B) {
		s := sysscan.NewSystem(sysscan.Options{})
		b.Cleanup(func() { s.Close() })
		sink := &series.Discard{}
		measure(b, func() error { return s.Collect(context.Background(), sink) })
	})
	b.Run("procfs", func(b *testing.B) {
		measure(b, procfsSystem(b))
	})
}

func BenchmarkScanFilesystems(b *testing.B) {
	b.Run("sysscan", func(b *testing.B) {
		f := sysscan.NewFilesystems(sysscan.Options{}, sysscan.FSOptions{})
		b.Cleanup(func() { f.Close() })
		sink := &series.Discard{}
		measure(b, func() error { return f.Collect(context.Background(), sink) })
	})
	b.Run("procfs", func(b *testing.B) {
		fs, err := procfs.NewFS("/proc")
		if err != nil {
			b.Fatal(err)
		}
		mpx := regexp.MustCompile(sysscan.DefaultFSMountPointsExclude)
		tx := regexp.MustCompile(sysscan.DefaultFSTypesExclude)
		measure(b, func() error {
			mounts, err := fs.GetProcMounts(1)
			if err != nil {
				return err
			}
			for _, m := range mounts {
				if mpx.MatchString(m.MountPoint) || tx.MatchString(m.FSType) {
					continue
				}
				var st unix.Statfs_t
				_ = unix.Statfs(m.MountPoint, &st)
			}
			return nil
		})
	})
}

// readVmstat reads /proc/vmstat as node_exporter's vmstat collector does (it does not use
// procfs for it): a line scanner, strings.Fields and strconv.ParseFloat.
func readVmstat() (int, error) {
	f, err := os.Open("/proc/vmstat")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.Fields(sc.Text())
		if len(parts) == 2 {
			if _, err := strconv.ParseFloat(parts[1], 64); err == nil {
				n++
			}
		}
	}
	return n, sc.Err()
}

func procfsSystem(b *testing.B) func() error {
	fs, err := procfs.NewFS("/proc")
	if err != nil {
		b.Fatal(err)
	}
	sfs, err := sysfs.NewFS("/sys")
	if err != nil {
		b.Fatal(err)
	}
	self, err := fs.Self()
	if err != nil {
		b.Fatal(err)
	}
	return func() error {
		if _, err := readVmstat(); err != nil {
			return err
		}
		for _, r := range []string{"cpu", "memory", "io"} {
			_, _ = fs.PSIStatsForResource(r) // absent with psi=0
		}
		if _, err := fs.NetSockstat(); err != nil {
			return err
		}
		_, _ = fs.NetSockstat6()
		_, _ = self.Snmp6()
		for _, f := range []string{"/proc/sys/net/netfilter/nf_conntrack_count", "/proc/sys/net/netfilter/nf_conntrack_max"} {
			if v, err := os.ReadFile(f); err == nil {
				strconv.ParseUint(string(bytes.TrimSpace(v)), 10, 64)
			}
		}
		_, _ = fs.ConntrackStat()
		if _, err := fs.KernelRandom(); err != nil {
			return err
		}
		if _, err := fs.NetSoftnetStat(); err != nil {
			return err
		}
		_, _ = fs.GatherARPEntries()
		_, _ = fs.NetUDPSummary()
		_, _ = fs.NetUDP6Summary()
		_, _ = fs.MDStat()
		if _, err := sfs.NetClass(); err != nil {
			return err
		}
		var tx unix.Timex
		if _, err := unix.Adjtimex(&tx); err != nil {
			return err
		}
		var u unix.Utsname
		if err := unix.Uname(&u); err != nil {
			return err
		}
		if _, err := os.ReadFile("/etc/os-release"); err != nil {
			return err
		}
		return nil
	}
}
