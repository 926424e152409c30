package sysscan

import (
	"context"
	"os/exec"
	"testing"

	"github.com/cantal-go/cantal/internal/procscan"
	"github.com/cantal-go/cantal/internal/series"
	"github.com/cantal-go/cantal/internal/testsupport/cputime"
)

// startSleepers starts n sleep processes and stops them when the benchmark ends.
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

func benchScan(b *testing.B, cs ...series.Collector) {
	ctx := context.Background()
	sink := &series.Discard{}
	for _, c := range cs { // first scan registers every series and reads every environ
		if err := c.Collect(ctx, sink); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := cputime.Process()
	for b.Loop() {
		for _, c := range cs {
			if err := c.Collect(ctx, sink); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(cputime.Process()-start)/float64(b.N), "cpu-ns/op")
}

// BenchmarkMachine is one machine scan of the real /proc.
func BenchmarkMachine(b *testing.B) {
	benchScan(b, NewMachine(Options{}))
}

// BenchmarkFullScan is a machine and process scan of the real /proc.
func BenchmarkFullScan(b *testing.B) {
	benchScan(b, NewMachine(Options{}), procscan.NewProcesses(procscan.Options{}))
}

// BenchmarkFullScan1000 is the same with 1000 extra processes running.
func BenchmarkFullScan1000(b *testing.B) {
	startSleepers(b, 1000)
	benchScan(b, NewMachine(Options{}), procscan.NewProcesses(procscan.Options{}))
}

// BenchmarkParseTCP measures the socket table parser on a line of each family.
func BenchmarkParseTCPLine(b *testing.B) {
	l4 := []byte("   3: 0100007F:C350 0100007F:1F90 01 00000010:00000000 00:00000000 00000000  1001        0 1004 1 0000000000000000 20 4 30 10 -1")
	b.ReportAllocs()
	b.SetBytes(int64(len(l4)))
	for b.Loop() {
		if _, _, err := parseTCPLine(l4); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMachineTCPStat is BenchmarkMachine with Options.TCPStat (node_tcp_connection_states):
// the difference is the puts of the states with sockets and the two queue sums, every scan.
func BenchmarkMachineTCPStat(b *testing.B) {
	benchScan(b, NewMachine(Options{TCPStat: true}))
}
