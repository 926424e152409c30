// Command metrics-app is a small HTTP service instrumented with package metrics, the
// Mesos-style metrics library. It serves the libprocess-style snapshot and, when CANTAL_PATH is
// set (or -cantal-path given), mirrors it into Cantal shared-memory files for the agent:
//
//	CANTAL_PATH=/dev/shm/metrics-app go run ./examples/metrics-app -listen 127.0.0.1:8081 -self
//	curl http://127.0.0.1:8081/hello
//	curl 'http://127.0.0.1:8081/metrics/snapshot?timeout=1secs'
//	cat /dev/shm/metrics-app.meta
//
// It counts requests (a Counter), times them (a Timer in milliseconds with a one-minute window,
// so the snapshot carries latency_ms/p50 … /p9999), tracks requests in flight (a Gauge) and
// reports the number of goroutines (a GaugeFunc pulled at snapshot time). With -self it sends
// itself a request every 50ms. On SIGINT or SIGTERM it stops and removes its files.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/cantal-go/cantal/metrics"
	"github.com/cantal-go/cantal/shm"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:8081", "HTTP address to serve")
	cantalPath := flag.String("cantal-path", os.Getenv("CANTAL_PATH"), "base path of the shm files (default $CANTAL_PATH; empty: no mirror)")
	self := flag.Bool("self", false, "send ourselves a request every 50ms")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		slog.Error("metrics-app: listen", "err", err)
		os.Exit(1)
	}
	if err := run(ctx, ln, *cantalPath, *self); err != nil {
		slog.Error("metrics-app failed", "err", err)
		os.Exit(1)
	}
}

// app holds the metrics.
type app struct {
	reg      *metrics.Registry
	requests *metrics.Counter
	latency  *metrics.Timer
	inFlight *metrics.Gauge
}

func newApp() (*app, error) {
	a := &app{
		reg:      metrics.NewRegistry(),
		requests: metrics.NewCounter("http/requests"),
		latency:  metrics.NewTimer("http/latency", metrics.Milliseconds, metrics.WithWindow(time.Minute, 1000)),
		inFlight: metrics.NewGauge("http/in_flight"),
	}
	goroutines := metrics.NewGaugeFunc("runtime/goroutines", func(context.Context) (float64, error) {
		return float64(runtime.NumGoroutine()), nil
	})
	for _, m := range []metrics.Metric{a.requests, a.latency, a.inFlight, goroutines} {
		if err := a.reg.Add(m); err != nil {
			return nil, err
		}
	}
	return a, nil
}

func run(ctx context.Context, ln net.Listener, cantalPath string, self bool) error {
	a, err := newApp()
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics/snapshot", a.reg)
	mux.Handle("/", a)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	mirrorDone := make(chan error, 1)
	if cantalPath != "" {
		mir := metrics.NewMirror(a.reg, shm.Options{Path: cantalPath})
		go func() { mirrorDone <- mir.Run(ctx, time.Second) }() // removes the files on exit
		slog.Info("mirroring metrics", "path", cantalPath)
	} else {
		mirrorDone <- nil
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	slog.Info("serving", "addr", ln.Addr().String())
	if self {
		go selfTraffic(ctx, "http://"+ln.Addr().String()+"/self")
	}
	select {
	case err = <-errc:
	case <-ctx.Done():
	}
	cancel()
	shutdown, cancelShutdown := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancelShutdown()
	srv.Shutdown(shutdown)
	if err == nil {
		err = <-errc
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return errors.Join(err, <-mirrorDone)
}

func (a *app) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.inFlight.Add(1)
	defer a.inFlight.Add(-1)
	a.requests.Inc()
	a.latency.Time(func() {
		time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond) // pretend to work
		fmt.Fprintf(w, "hello from %s\n", r.URL.Path)
	})
}

func selfTraffic(ctx context.Context, url string) {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if err != nil {
				return
			}
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}
	}
}
