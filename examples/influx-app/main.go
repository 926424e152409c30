// Command influx-app is a small job-processing service instrumented with package influx, the
// ECS-style line-protocol monitoring. It serves its metrics for Telegraf or a cantal-agent to
// scrape and, with -push, also pushes them to an agent's POST /write:
//
//	go run ./examples/influx-app -endpoint 8088/ecsmetrics -push http://127.0.0.1:22682/write
//	curl http://127.0.0.1:8088/ecsmetrics
//
// Every job sends a counter metric (jobs and bytes processed, summed per second) and a
// histogrammable one (its duration, reported as duration_ms_mean … _p90 … _poolsize), tagged
// with the worker and the job kind. On SIGINT or SIGTERM it stops, after a last push.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/cantal-go/cantal/influx"
)

func main() {
	endpoint := flag.String("endpoint", influx.DefaultEndpoint, "where to serve metrics: [port]/[path] or [host:port]/[path]")
	push := flag.String("push", "", "InfluxDB v1 write URL to push to, such as http://127.0.0.1:22682/write")
	workers := flag.Int("workers", 4, "number of worker goroutines")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	mon, err := influx.New(influx.Config{Endpoint: *endpoint, PushURL: *push})
	if err != nil {
		fmt.Fprintln(os.Stderr, "influx-app:", err)
		os.Exit(2)
	}
	addr, _, _ := influx.ParseEndpoint(*endpoint)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		slog.Error("influx-app: listen", "err", err)
		os.Exit(1)
	}
	slog.Info("serving metrics", "addr", ln.Addr().String(), "endpoint", *endpoint, "push", *push)
	if err := run(ctx, mon, ln, *workers, 20*time.Millisecond); err != nil {
		slog.Error("influx-app failed", "err", err)
		os.Exit(1)
	}
}

// run serves mon on ln and runs the workers until ctx is done.
func run(ctx context.Context, mon *influx.Monitor, ln net.Listener, workers int, pace time.Duration) error {
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() { work(ctx, mon, fmt.Sprint(i), pace) })
	}
	err := mon.Serve(ctx, ln) // returns when ctx is done, after a last push
	wg.Wait()
	return err
}

// work processes fake jobs, reusing its two Metrics so that sending allocates nothing.
func work(ctx context.Context, mon *influx.Monitor, worker string, pace time.Duration) {
	kinds := []string{"small", "large"}
	count := influx.NewMetric("jobs", time.Time{})
	timing := influx.NewMetric("job_timing", time.Time{})
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(pace):
		}
		kind := kinds[rand.IntN(len(kinds))]
		start := time.Now()
		size := uint64(rand.IntN(1 << 16))
		time.Sleep(time.Duration(rand.IntN(5)) * time.Millisecond) // pretend to work
		took := time.Since(start)

		count.Reset("jobs", start)
		count.AddTag("worker", worker)
		count.AddTag("kind", kind)
		count.SetFieldUInt64("processed", 1)
		count.SetFieldUInt64("bytes", size)
		if err := mon.Send(&count); err != nil {
			slog.Warn("send", "err", err)
		}
		timing.Reset("job_timing", start)
		timing.AddTag("kind", kind)
		timing.SetFieldFloat64("duration_ms", float64(took)/float64(time.Millisecond))
		if err := mon.SendHistogrammable(&timing); err != nil {
			slog.Warn("send histogrammable", "err", err)
		}
	}
}
