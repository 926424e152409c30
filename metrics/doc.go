// Package metrics is a Mesos libprocess-style metrics library: counters, gauges and timers that
// an application registers explicitly in a Registry, which serves them as one flat JSON object
// ({"name": 42, "name/p99": 17.5, ...}) and can mirror them into Cantal shared-memory files so a
// node's cantal-agent sees them.
//
// A metric is created with a name and, optionally, a window (WithWindow) that keeps the history
// of its recent values; Statistics (count, min, max, mean, p50 … p9999) are computed on demand
// from a copy of that history. Without a window no history is kept and no statistics exist.
//
// Metrics are pointers: share a *Counter between goroutines rather than copying it. Every method
// of Counter, Gauge, GaugeFunc, Timer and Registry is safe for concurrent use. Updating a metric
// without a window is a single atomic operation (Timer.Start/Stop, which keep a map of running
// keys, take a mutex); updating a metric with a window also appends to a per-processor shard of
// its history, taking an uncontended lock.
//
// Creating a metric does not make it visible: call Registry.Add, and Registry.Remove when done.
// A metric that is no longer referenced by the application but still registered keeps being
// reported, as in libprocess.
package metrics
