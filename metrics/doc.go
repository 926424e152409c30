// Package metrics is a Mesos libprocess-style metrics library: counters, gauges and timers that
// an application registers explicitly in a Registry, which serves them as one flat JSON object
// ({"name": 42, "name/p99": 17.5, ...}) and can mirror them into Cantal shared-memory files so a
// node's cantal-agent sees them.
//
// # Metrics and windows
//
// A metric is created with a name and, optionally, a window (WithWindow) that keeps the history
// of its recent values as libprocess' TimeSeries does; Statistics (count, min, max, p25, p50,
// p75, p90 … p9999, and a mean) are computed on demand from a copy of that history, once it
// holds at least two values. Without a window no history is kept and no statistics exist.
//
// Where libprocess defines the behaviour, the package follows it:
//
//   - A windowed Counter records its initial 0 when it is created: ten increments leave eleven
//     values, 0 to 10, whose p50 is 5 and p90 is 9.
//   - Each new value drops the values older than the window before it, and only a new value
//     does: a metric that stops changing keeps its statistics.
//   - Beyond the window's capacity, the older half of the history is thinned (every other value,
//     in rounds) rather than the oldest values dropped: recent values keep full granularity,
//     older ones a coarser one, and the history still spans the window.
//   - Stopping a Timer key that is not running is not an error. A Timer has no value, and is
//     absent from snapshots, until its first duration.
//   - Registry.Remove removes by name. Registry.ServeHTTP is libprocess' /metrics/snapshot,
//     answering every method (POST included): ?timeout= bounds pulled gauges, and without it
//     the snapshot waits for them without bound (libprocess' Duration::max; the client going
//     away still ends it); ?jsonp=CALLBACK wraps the object as CALLBACK(OBJECT);; snapshots are
//     limited to two a second, a request that comes sooner waiting for its turn rather than
//     being refused.
//   - The body is libprocess' byte for byte: sorted keys, no spaces and no newline after it,
//     "/" in names escaped as \/, every value a double as stout writes it (42 is 42.0, 0.1 is
//     0.1, 1e10 is 10000000000.0, 1.5e15 is 1.50000000000000e+15). One deliberate difference:
//     stout trims the zeros of an exponent too, writing 1e20 as 1.00000000000000e+2 (a
//     hundred); the exponent is kept here.
//   - A snapshot reports a windowed metric's statistics as name/count, /min, /max, /p50, /p90,
//     /p95, /p99, /p999 and /p9999; like libprocess', not p25 and p75 (Statistics has them).
//   - Timer units are stout's: Nanoseconds … Hours, Days and Weeks, named _ns, _us, _ms,
//     _secs, _mins, _hrs, _days and _weeks.
//
// One deliberate difference in the window: libprocess' TimeSeries keys values by time, so a
// value set at the same time as another replaces it, and one set at an earlier time is
// inserted there. Values here are stamped with a coarse clock (see WithWindow), so a busy
// metric sets many values within one tick: all are kept, and a value that reaches the window
// after a newer one (only concurrent updates do that) is stamped as the newest.
//
// Additions are options: WithMean adds name/mean to snapshots, WithRateLimit and
// WithoutRateLimit change or lift the rate limit, WithoutJSONP turns JSONP off.
//
// # Percentiles
//
// A percentile is computed as libprocess' Statistics computes it: over the n values of the
// window, sorted, the p-quantile is the value at position p·(n−1), counting from 0, linearly
// interpolated between the two values around that position. Over 0, 1, …, 10 that gives
// p50 = 5, p90 = 9, p95 = 9.5, p99 = 9.9; over 1, 2, 3, 4 it gives p50 = 2.5 and p90 = 3.7.
//
// # Concurrency
//
// Metrics are pointers: share a *Counter between goroutines rather than copying it. Every method
// of Counter, Gauge, GaugeFunc, Timer and Registry is safe for concurrent use. Updating a metric
// without a window is a single atomic operation (Timer.Start/Stop, which keep a map of running
// keys, take a mutex). Updating a metric with a window also appends to its history under a
// mutex, as libprocess does under a spin lock; a writer that finds the mutex taken sets its
// value aside instead of waiting, to be added, in order, by the next holder.
//
// # Registration
//
// Creating a metric does not make it visible: call Registry.Add, and Registry.Remove when done.
// A metric that is no longer referenced by the application but still registered keeps being
// reported, as in libprocess.
package metrics
