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

// run is the state of one Run: its server and the metrics sent since it started or was
// last scraped. Stop drops it, and with it every metric not yet scraped.
type run struct {
	srv  *http.Server
	addr atomic.Pointer[string]

	mu   sync.Mutex
	agg  *MetricsAggregate
	hist *MetricsReservoirSampling
}

var (
	current atomic.Pointer[run]

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
// once; after Stop, Run starts afresh, on the same port or another. It returns the listen
// error (such as "bind: address already in use") if it cannot listen, and the package is
// then not running (ECS stays "running" until Stop).
//
// Every request to the endpoint, whatever its method, is answered with every metric sent
// since the previous one, as Format writes them, and empties the store: one scraper only.
// An endpointName net/http's ServeMux refuses serves nothing, as in ECS.
func Run(port uint16, endpointName string) error {
	r := &run{agg: NewMetricsAggregate(), hist: NewMetricsReservoirSampling()}
	mux := http.NewServeMux()
	func() {
		defer func() { recover() }() // an invalid pattern: served nowhere, as ECS
		mux.HandleFunc(endpointName, r.exportMetricsAndReset)
	}()
	r.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	if !current.CompareAndSwap(nil, r) {
		return nil // only one Run serves
	}
	ln, err := net.Listen("tcp", fmt.Sprintf(":%d", port))
	if err != nil {
		current.CompareAndSwap(r, nil)
		return err
	}
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

// Stop stops the server Run started (waiting up to 5 s for scrapes in progress) and drops
// every metric not yet scraped. Run returns, and may be called again. Sends made while
// stopped are discarded. Stop without Run does nothing.
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
// channel of 100000 and drops what overflows). It discards the metric while not running, as
// ECS, and, where ECS would panic, when a field is NaN or infinite or has another type than
// the same field in the bucket (logged at most once a second).
func Send(metric *Metric) {
	r := current.Load()
	if r == nil {
		return
	}
	if err := metric.checkFinite(); err != nil {
		discard(err)
		return
	}
	r.mu.Lock()
	err := r.agg.add(metric)
	r.mu.Unlock()
	if err != nil {
		discard(err)
	}
}

// SendHistogrammable adds each field of metric, as a float64, to the reservoir of its
// measurement, tags (in order), field and second; a scrape reports each as one line of
// statistics (see MetricsReservoirSampling). Otherwise as Send.
func SendHistogrammable(metric *Metric) {
	r := current.Load()
	if r == nil {
		return
	}
	if err := metric.checkFinite(); err != nil {
		discard(err)
		return
	}
	r.mu.Lock()
	r.hist.AddMetric(metric)
	r.mu.Unlock()
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
func (r *run) exportMetricsAndReset(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain")
	r.mu.Lock()
	metrics := r.agg.drain()
	hist := r.hist.drain()
	r.mu.Unlock()
	metrics = append(metrics, reservoirMetrics(hist)...) // sorting reservoirs: outside the lock
	if err := Format(w, metrics); err != nil {
		slog.Error("ecs monitoring: failed to export metrics; this scrape's metrics are lost", "err", err)
	}
}
