// Package ecs is the ECS-compatible face of package influx: the package-level API of ALICE
// ECS's common/monitoring (github.com/AliceO2Group/Control), with the same function names and
// signatures, writing what ECS writes byte for byte. A program written against ECS switches by
// changing its import:
//
//	import monitoring "github.com/cantal-go/cantal/influx/ecs"
//
//	go monitoring.Run(8088, "/ecsmetrics")
//	monitoring.WaitUntilRunning(time.Second)
//	m := monitoring.NewMetric("kafka", time.Now())
//	m.AddTag("subsystem", "ECS")
//	m.SetFieldUInt64("sent_messages", 42)
//	monitoring.Send(&m)                  // summed per second
//	monitoring.SendHistogrammable(&m)    // statistics per second
//	monitoring.Stop()
//
// The API: Run, Stop, IsRunning, WaitUntilRunning, Send, SendHistogrammable; Metric with
// NewMetric, NewDefaultMetric, AddTag, SetFieldInt64, SetFieldUInt64, SetFieldFloat64,
// GetFields, MergeFields, AddResult and AddError with the result values SUCCESS, ERROR,
// TIMEOUT and CANCELLED; the gRPC client interceptors SetupUnaryClientInterceptor and
// SetupStreamClientInterceptor with NameConvertType, AddEnvAndRunType, EnvIDKey and
// RunTypeKey; Format; the containers MetricsAggregate and
// MetricsReservoirSampling; Timer, TimerSendSingle, TimerSendHist with TimeResolution
// Millisecond and Nanosecond, and the names earlier ECS versions used (TimerSend, TimerMS,
// TimerNS, TimeUnit, Milliseconds, Nanoseconds). NewMetric accepts both forms ECS has had:
// NewMetric(name, timestamp), and NewMetric(name), which stamps now and adds subsystem=ECS.
// Addr, which tells where Run listens, is the one addition. The test file api_test.go holds
// every function and method of ECS's package at its head as a value of ECS's type, so the
// package stops building if one goes missing or changes. Of the four result values, SUCCESS,
// ERROR and TIMEOUT are checked against ECS's source; the fourth's name (CANCELLED) was not
// available to check.
//
// The interceptors need google.golang.org/grpc's types, so this package imports grpc (as
// every ECS program already does: ECS's package imports it too). That is the one dependency
// here beyond package influx's; the agent does not use grpc and package influx does not
// import it. A build tag or a sub-package would have kept it out, but then code calling
// monitoring.SetupUnaryClientInterceptor would not build with only its import path changed.
//
// What is as in ECS, the points package influx deliberately does otherwise:
//
//   - Buckets: one per measurement, tags in their order (a=1,b=2 and b=2,a=1 are two) and
//     second, and for histograms one per field too: a histogrammable metric with two fields
//     gives two lines.
//   - Histogram lines: f_mean, f_median, f_min, f_p10, f_p30, f_p70, f_p90, f_max are floats
//     over the field's reservoir of up to 1000 values (mean, min and max included);
//     percentile p is the sample at index ⌊n·0.01·p⌋ (computed in float64, as ECS) of the
//     sorted reservoir of n samples, so values 1..10 give p10 2, median 6, p90 10;
//     f_count (values sent in the second) and f_poolsize (n) are unsigned: f_count=10u.
//   - A Send with no fields is stored: it creates or joins its bucket. A bucket that never
//     gets a field cannot be written, which makes the whole scrape fail (next point).
//   - Format, and so every scrape, is all or nothing: if any line cannot be encoded (no
//     field, an invalid name, tag keys repeated or not in increasing order), it writes
//     nothing, and the scrape's metrics are lost. A zero timestamp is written as none.
//   - A scrape returns everything sent since the previous scrape and empties the store:
//     one scraper only. Nothing expires otherwise: unscraped, the store grows by a bucket
//     per series and second.
//   - Sends are kept whether Run serves or not: what is sent before the first Run, not
//     scraped before Stop, or sent between Stop and the next Run is in the next Run's first
//     scrape (unscraped, the store grows as above). A second Run while one serves returns
//     nil at once; Run after Stop serves again; Run returns http.ErrServerClosed after Stop.
//     Stop returns only once Run's port is closed, so a Run on the same port right after
//     Stop does not fail with "address already in use" (ECS's does not either).
//
// Where it departs from ECS, only where ECS loses data or crashes:
//
//   - Send and SendHistogrammable aggregate synchronously and never drop a metric for lack
//     of room; ECS queues into channels of 100000 metrics and drops what overflows (most of
//     a tight loop's sends).
//   - Metrics are copied at Send: ECS stores the sent metric's field map, so changing or
//     re-sending a Metric after Send changes the stored sums.
//   - A metric with a NaN or infinite field, or with a field of another type than the same
//     field already in its bucket, is discarded and logged (at most once a second); ECS
//     panics (at the scrape, or in its event loop). Float sums and reservoir means beyond
//     ±MaxFloat64 are clamped to it (ECS panics formatting ±Inf).
//   - Buckets compare names, not only their hash: ECS hashes names unseparated, so tags
//     a=bc and ab=c share its bucket.
//   - Fields are written in the order first set, lines by second then creation, sums before
//     histograms; ECS writes sums before histograms too but otherwise in Go map order, which
//     changes from scrape to scrape. No consumer of line protocol depends on either order.
//   - Run serves on its own ServeMux; ECS registers on http.DefaultServeMux, and so also
//     serves whatever else is registered there (and its endpoint appears on every other
//     server using it). A Run that cannot listen leaves the package stopped (ECS stays
//     "running" until Stop), and WaitUntilRunning reports true only once Run listens
//     (ECS: just before).
//   - GetFields returns the fields (ECS's writes into a nil map and panics).
//   - Reservoir sampling draws from its own generator: once more than 1000 values of a field
//     arrive in one second, which ones are kept differs from ECS's draw (with the same
//     distribution); up to 1000, the output is identical.
//
// The sums, reservoirs and statistics are those of package influx (StatisticsECS); see its
// package documentation for the full table of differences between ECS, influx and this
// package.
package ecs
