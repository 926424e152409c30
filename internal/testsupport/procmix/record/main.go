// Command record scans this machine's /proc at the agent's interval and writes the realistic mix
// used by the history package's tests and benchmarks.
//
//	go run ./internal/testsupport/procmix/record -scans 300 -interval 2s -out internal/history/testdata/procmix.json.gz
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"time"

	"github.com/cantal-go/cantal/internal/testsupport/procmix"
)

func main() {
	proc := flag.String("proc", "/proc", "proc file system root")
	scans := flag.Int("scans", 300, "number of scans")
	interval := flag.Duration("interval", 2*time.Second, "time between scans")
	out := flag.String("out", "internal/history/testdata/procmix.json.gz", "output file")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *proc, *scans, *interval, *out); err != nil {
		slog.Error("record failed", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, proc string, scans int, interval time.Duration, out string) error {
	m, err := procmix.NewRecorder(proc).Record(ctx, scans, interval)
	if err != nil && ctx.Err() == nil {
		return err
	}
	f, err := os.Create(out)
	if err != nil {
		return fmt.Errorf("record: %w", err)
	}
	if err := m.Write(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("record: %w", err)
	}
	slog.Info("recorded", "series", len(m.Series), "scans", len(m.Scans), "points", m.Points(), "out", out)
	return nil
}
