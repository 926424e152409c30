package sysscan

import (
	"context"
	"net"
	"testing"

	"github.com/cantal-go/cantal/internal/kfile"
	"github.com/cantal-go/cantal/internal/series"
	"github.com/cantal-go/cantal/internal/testsupport/cputime"
	"golang.org/x/sys/unix"
)

// openConns opens n loopback connections (2n sockets and a listener) for the benchmark.
func openConns(b *testing.B, n int) {
	b.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	for range n {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		s, err := ln.Accept()
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Close(); s.Close() })
	}
}

// BenchmarkTCP is one count of the machine's TCP sockets by each path, the netlink dump and the
// /proc/net/tcp{,6} files, with the series emitted: on the machine as it is, and with 1000
// extra loopback connections. cpu-ns/op is the process's CPU time (user and kernel, where the
// cost is) per scan; the ratio of the two paths is logged.
func BenchmarkTCP(b *testing.B) {
	for _, conns := range []int{0, 1000} {
		name := "idle"
		if conns > 0 {
			name = "conns=1000"
		}
		b.Run(name, func(b *testing.B) {
			openConns(b, conns)
			var cpu [2]float64
			for i, path := range []string{"netlink", "proc"} {
				b.Run(path, func(b *testing.B) {
					cpu[i] = benchTCPPath(b, path == "proc")
				})
			}
			if cpu[0] > 0 {
				b.Logf("%s: /proc / netlink CPU per scan = %.0f / %.0f ns = %.2f", name, cpu[1], cpu[0], cpu[1]/cpu[0])
			}
		})
	}
}

func benchTCPPath(b *testing.B, proc bool) float64 {
	procfd, err := kfile.OpenDir("/proc")
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close(procfd)
	ts := newTCPScan(false)
	defer ts.close()
	ts.noDiag = proc
	ctx := context.Background()
	rec := series.NewRecorder()
	ts.collect(ctx, procfd, "/proc", rec, 1) // opens the socket or files, registers the series
	if len(rec.Problems) != 0 || ts.diag.open == proc {
		b.Fatalf("problems %v, netlink open %v", rec.Problems, ts.diag.open)
	}
	sink := &series.Discard{}
	gen := uint64(1)
	b.ReportAllocs()
	b.ResetTimer()
	start := cputime.Process()
	for b.Loop() {
		gen++
		ts.collect(ctx, procfd, "/proc", sink, gen)
	}
	cpu := float64(cputime.Process()-start) / float64(b.N)
	b.ReportMetric(cpu, "cpu-ns/op")
	return cpu
}
