package ecs

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// run is one Run: its server and the address it listens on. done is closed once Run has
// returned and its listener is closed, so that Stop can wait for the port to be free.
type run struct {
	srv  *http.Server
	addr atomic.Pointer[string]
	done chan struct{}
}

// store holds the metrics sent since the last scrape. It outlives Runs: sends before the first
// Run, and between Stop and the next Run, are kept for the next scrape, as in ECS.
type store struct {
	mu   sync.Mutex
	agg  *MetricsAggregate
	hist *MetricsReservoirSampling
}

var (
	current atomic.Pointer[run]
	metrics = store{agg: NewMetricsAggregate(), hist: NewMetricsReservoirSampling()}

	// ready is closed while Run is serving (WaitUntilRunning waits for it); Stop replaces
	// it with an open one.
	readyMu sync.Mutex
	ready   = make(chan struct{})

	discarded atomic.Uint64
	lastLog   atomic.Int64
)

// Run serves the metrics at http://:port/endpointName (endpointName starts with a slash, such
// as "/ecsmetrics") until Stop, and returns http.ErrServerClosed then, as ECS's Run. It
// blocks: call it in its own goroutine. While a Run is serving, another Run returns nil at
// once; after Stop, Run starts afresh, on the same port or another (Stop returns only once
// the port is closed, so a Run on the same port right after Stop does not fail). It returns
// the listen error (such as "bind: address already in use") if it cannot listen, and the
// package is then not running (ECS stays "running" until Stop).
//
// Every request to the endpoint, whatever its method, is answered with every metric sent
// since the previous one (or since the start of the program), as Format writes them, and
// empties the store: one scraper only. An endpointName net/http's ServeMux refuses serves
// nothing, as in ECS.
func Run(port uint16, endpointName string) error {
	r := &run{done: make(chan struct{})}
	mux := http.NewServeMux()
	func() {
		defer func() { recover() }() // an invalid pattern: served nowhere, as ECS
		mux.HandleFunc(endpointName, exportMetricsAndReset)
	}()
	r.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	if !current.CompareAndSwap(nil, r) {
		return nil // only one Run serves
	}
	defer close(r.done) // after the listener is closed (deferred below, so run first)
	ln, err := net.Listen("tcp", fmt.Sprintf(":%d", port))
	if err != nil {
		current.CompareAndSwap(r, nil)
		return err
	}
	// Serve closes ln when it returns, but not when Stop came before Serve started: close it
	// here in every case before done, on which Stop waits.
	defer ln.Close()
	addr := ln.Addr().String()
	r.addr.Store(&addr)
	readyMu.Lock()
	if current.Load() == r { // not stopped meanwhile
		select {
		case <-ready:
		default:
			close(ready)
		}
	}
	readyMu.Unlock()
	return r.srv.Serve(ln)
}

// Stop stops the server Run started (waiting up to 5 s for scrapes in progress) and returns
// once Run has returned and its port is closed. What was sent and not yet scraped is kept for
// the next Run's scrapes, and so are sends made while stopped, as in ECS. Stop without Run
// does nothing.
func Stop() {
	r := current.Swap(nil)
	if r == nil {
		return
	}
	readyMu.Lock()
	select {
	case <-ready:
		ready = make(chan struct{})
	default:
	}
	readyMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r.srv.Shutdown(ctx)
	<-r.done
}

// IsRunning reports whether Run has been called and Stop has not since.
func IsRunning() bool {
	return current.Load() != nil
}

// WaitUntilRunning waits until Run is serving, at most timeout, and reports whether it is.
// Unlike ECS's, it returns true only once Run listens, so that a scrape may follow at once.
func WaitUntilRunning(timeout time.Duration) bool {
	readyMu.Lock()
	ch := ready
	readyMu.Unlock()
	select {
	case <-ch:
		return true
	default:
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}

// Addr returns the address Run listens on, such as "[::]:8088", or "" when not serving. It
// is not in ECS; it tells where Run(0, ...) listens.
func Addr() string {
	if r := current.Load(); r != nil {
		if a := r.addr.Load(); a != nil {
			return *a
		}
	}
	return ""
}

// Send adds metric to the bucket of its measurement, tags (in order) and second, summing
// its fields with those already there. It copies metric, which may be reused at once, and
// never drops a metric for lack of room: it aggregates synchronously (ECS queues into a
// channel of 100000 and drops what overflows). Running or not, the metric is kept for the
// next scrape, as in ECS. Where ECS would panic, when a field is NaN or infinite or has
// another type than the same field in the bucket, the metric is discarded (logged at most
// once a second).
func Send(metric *Metric) {
	if err := metric.checkFinite(); err != nil {
		discard(err)
		return
	}
	metrics.mu.Lock()
	err := metrics.agg.add(metric)
	metrics.mu.Unlock()
	if err != nil {
		discard(err)
	}
}

// SendHistogrammable adds each field of metric, as a float64, to the reservoir of its
// measurement, tags (in order), field and second; a scrape reports each as one line of
// statistics (see MetricsReservoirSampling). Otherwise as Send.
func SendHistogrammable(metric *Metric) {
	if err := metric.checkFinite(); err != nil {
		discard(err)
		return
	}
	metrics.mu.Lock()
	metrics.hist.AddMetric(metric)
	metrics.mu.Unlock()
}

func discard(err error) {
	n := discarded.Add(1)
	now := time.Now().UnixNano()
	if last := lastLog.Load(); now-last >= int64(time.Second) && lastLog.CompareAndSwap(last, now) {
		slog.Warn("ecs monitoring: metric discarded", "err", err, "discarded", n)
	}
}

// exportMetricsAndReset answers a scrape: the aggregated metrics, then the histograms, and
// empties both, as ECS's handler.
func exportMetricsAndReset(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain")
	metrics.mu.Lock()
	agg := metrics.agg.drain()
	hist := metrics.hist.drain()
	metrics.mu.Unlock()
	agg = append(agg, reservoirMetrics(hist)...) // sorting reservoirs: outside the lock
	if err := Format(w, agg); err != nil {
		slog.Error("ecs monitoring: failed to export metrics; this scrape's metrics are lost", "err", err)
	}
}
