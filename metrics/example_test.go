package metrics_test

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"time"

	"github.com/cantal-go/cantal/metrics"
)

func ExampleCounter() {
	requests := metrics.NewCounter("http/requests")
	requests.Inc()
	requests.Add(4)
	requests.Dec()
	fmt.Println(requests.Value())
	// Output: 4
}

func ExampleTimer() {
	latency := metrics.NewTimer("db/query", metrics.Milliseconds, metrics.WithWindow(time.Minute, 1000))
	// Concurrent events are timed under their own keys.
	latency.Start("query-1")
	latency.Start("query-2")
	latency.Stop("query-1")
	// As in libprocess, stopping a key that is not running is not an error; it records nothing.
	if _, ok := latency.Stop("query-1"); !ok {
		fmt.Println("query-1 was not running")
	}
	latency.Observe(20 * time.Millisecond)
	latency.Observe(40 * time.Millisecond)
	s, _ := latency.Statistics()
	fmt.Println(latency.Name(), s.Count, s.Max)
	// Output:
	// query-1 was not running
	// db/query_ms 3 40
}

func ExampleRegistry() {
	reg := metrics.NewRegistry()
	jobs := metrics.NewCounter("jobs_done")
	queue := metrics.NewGaugeFunc("queue_length", func(context.Context) (float64, error) { return 3, nil })
	for _, m := range []metrics.Metric{jobs, queue} {
		if err := reg.Add(m); err != nil {
			fmt.Println(err)
		}
	}
	jobs.Add(42)

	// reg is an http.Handler: mount it at /metrics/snapshot in a real server.
	rec := httptest.NewRecorder()
	reg.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics/snapshot?timeout=1secs", nil))
	body, _ := io.ReadAll(rec.Body)
	fmt.Println(string(body))

	// As in libprocess, ?jsonp=CALLBACK wraps it for JSONP. (Snapshots served over HTTP are
	// limited to two a second by default; this one waits for its turn.)
	rec = httptest.NewRecorder()
	reg.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics/snapshot?jsonp=show", nil))
	fmt.Println(rec.Body.String())
	// Output:
	// {"jobs_done":42.0,"queue_length":3.0}
	// show({"jobs_done":42.0,"queue_length":3.0});
}

func ExampleWithWindow() {
	// A windowed counter records its initial 0, as in libprocess: ten increments leave the
	// eleven values 0 … 10, whose percentiles interpolate at position p·(n−1).
	c := metrics.NewCounter("requests", metrics.WithWindow(time.Hour, 0))
	for range 10 {
		c.Inc()
	}
	s, _ := c.Statistics()
	fmt.Println(s.Count, s.Min, s.P50, s.P90, s.P99, s.Max)
	// Output: 11 0 5 9 9.9 10
}

func ExampleNewStatistics() {
	s, ok := metrics.NewStatistics([]float64{1, 2, 3, 4})
	fmt.Println(ok, s.Count, s.Min, s.P50, s.P90, s.Max)
	// Output: true 4 1 2.5 3.7 4
}
