// Package influx is ALICE ECS-style application monitoring over the InfluxDB line protocol:
// an application builds Metrics (a measurement, tags, int64/uint64/float64 fields and a
// timestamp) and hands them to a Monitor from any number of goroutines; the Monitor aggregates
// them into one-second buckets and serves the buckets as line protocol at an HTTP endpoint
// (default port 8088, path /ecsmetrics) for Telegraf or a cantal-agent to scrape, and can push
// them to an agent's InfluxDB v1-compatible POST /write.
//
// Two kinds of sending exist. Send sums each field over the metrics with the same measurement,
// the same tags (in any order) and the same second. SendHistogrammable instead reservoir-samples
// each field's values (Algorithm R, up to Config.ReservoirSize values per field and second)
// and reports, per field f, f_mean, f_median, f_min, f_p10, f_p30, f_p70, f_p90, f_max,
// f_count (values sent) and f_poolsize (values kept).
//
// # Statistics and percentile rules
//
// Every path that computes statistics, and its rule for percentile p of a sorted reservoir
// s of n samples:
//
//   - Monitor.SendHistogrammable with Config.Statistics = StatisticsDefault (the zero value):
//     linear interpolation at rank r = p/100·(n−1), s[⌊r⌋] + (r−⌊r⌋)·(s[⌊r⌋+1]−s[⌊r⌋])
//     (Hyndman and Fan's type 7, the default of R and NumPy). f_mean, f_min and f_max are
//     exact over every value sent in the second, not only the reservoir's; f_count and
//     f_poolsize are floats. Values 1..10 give p10 1.9, median 5.5, p90 9.1.
//   - Monitor.SendHistogrammable with Config.Statistics = StatisticsECS: ECS's rule, the sample
//     s[⌊n·0.01·p⌋], the index computed in float64 as ECS computes it (so 58 samples put the
//     median at index 28); f_mean, f_min and f_max are the reservoir's; f_count and
//     f_poolsize are unsigned (10u). Values 1..10 give p10 2, p30 4, median 6, p70 8, p90 10.
//   - Package influx/ecs, the ECS facade: always ECS's rule, computed by the same code as
//     StatisticsECS, one line per field.
//
// Send computes no statistics: it sums.
//
// # Differences from ECS
//
// ECS is ALICE's common/monitoring (github.com/AliceO2Group/Control), which this package is
// modelled on. Package influx/ecs puts ECS's own package-level API over the statistics core of
// this package, writing what ECS writes byte for byte; use it where ECS's behaviour is needed. This table is every
// difference; the tests TestDefault_* check the influx column, the tests TestECS_* of
// influx/ecs the last one ("ECS" there means as in ECS).
//
//	Behaviour          ECS common/monitoring          influx (default)               influx/ecs
//	-----------------  -----------------------------  -----------------------------  ------------
//	API                package-level Run(port,        a Monitor: New(Config),        ECS's, plus
//	                   path), Stop, IsRunning,        Run(ctx)/Serve, Send and       Addr
//	                   WaitUntilRunning, Send,        SendHistogrammable return
//	                   SendHistogrammable, Timer*,    errors, AppendLines, Push;
//	                   AddError/AddResult, gRPC
//	                   client interceptors;
//	                   NewMetric(name) adds           NewMetric(name, ts) only
//	                   subsystem=ECS
//	Percentiles        sample ⌊n·p/100⌋ of the        interpolated at rank           ECS
//	                   sorted reservoir: 1..10 gives  p/100·(n−1): 1..10 gives
//	                   p10 2, median 6, p90 10        p10 1.9, median 5.5, p90 9.1;
//	                                                  StatisticsECS: as ECS
//	mean, min, max     of the reservoir (≤1000)       of every value sent;           ECS
//	                                                  StatisticsECS: as ECS
//	f_count,           unsigned: f_count=10u          floats: f_count=10 (InfluxDB   ECS
//	f_poolsize                                        holding ECS data: "field type
//	                                                  conflict"); StatisticsECS: 10u
//	Histogram lines    one line per field: 2 fields   one line for all the fields    ECS
//	                   over 2 seconds are 4 lines     of a bucket: 2 lines (the same
//	                                                  points once in InfluxDB)
//	Send, no fields    stored (creates or joins its   refused: ErrInvalidMetric      ECS
//	                   bucket); alone, its scrape
//	                   writes nothing
//	Tag order          significant: a=1,b=2 and       sorted by AddTag: ignored; a   ECS
//	                   b=2,a=1 aggregate apart; keys  repeated key replaces
//	                   out of order cannot be written
//	Unwritable line:   the whole scrape writes        refused at Send with           ECS (NaN and
//	no field, invalid  nothing and is lost            ErrInvalidMetric               Inf: below)
//	name, tag keys
//	unsorted/repeated
//	NaN, ±Inf          accepted; the scrape panics    refused at Send                discarded at
//	                                                                                 Send, logged
//	Float sum beyond   ±Inf; the scrape panics        clamped to ±MaxFloat64         clamped
//	±MaxFloat64
//	Field changes      the event loop panics (the     refused: ErrFieldType          discarded,
//	type in a bucket   program exits)                                                logged
//	Under load         queued in a channel of         aggregated synchronously       never drops
//	                   100000, which one goroutine    (striped locks): never
//	                   drains; what overflows is      dropped; beyond MaxBuckets
//	                   dropped silently (earlier      buckets ErrDropped, counted,
//	                   versions block the sender)     influx_monitor line
//	Metric reused      the bucket shares the sent     copied at Send: reusable at    copied
//	after Send         metric's fields: re-sending    once
//	                   or changing it changes sums
//	Zero timestamp     bucket of year 1, written      the current second             ECS
//	                   without a timestamp
//	Scrapes            destructive: everything since  non-destructive: every bucket  ECS
//	                   the last scrape, then emptied  of the last Retention (1 min);
//	                   (one scraper)                  ResetOnScrape: as ECS
//	Memory             grows until scraped            buckets expire after           ECS
//	                                                  Retention; at most MaxBuckets
//	Field, line order  Go map order (changes from     fields as first set; lines by  as influx
//	                   scrape to scrape)              second, then creation
//	Bucket identity    a hash of names unseparated:   names compared                 names
//	                   tags a=bc and ab=c share one                                  compared
//	Endpoint           :port/path on                  Config.Endpoint                :port/path,
//	                   http.DefaultServeMux, any      "[host:]port/path", own mux,   own mux, any
//	                   method                         GET and HEAD only              method
//	Run twice          while serving: returns nil;    one Run per endpoint at a      ECS; a failed
//	                   after Stop: serves afresh; a   time (another: "address        listen stops
//	                   failed listen stays "running"  already in use"); Run again
//	                                                  after ctx is done: buckets
//	                                                  kept
//	Stop               keeps what was not scraped     cancelling Run's ctx keeps     ECS; Stop
//	                   and what is sent before Run    the buckets (AppendLines) and  returns once
//	                   and while stopped, for the     pushes them; Send works        the port is
//	                   next Run (earlier versions     without Run                    closed
//	                   dropped both)
//	Push               none                           Config.PushURL, every second   none
//	Timers             Timer, TimerSendSingle,        none                           ECS's
//	                   TimerSendHist
//	Reservoir draw     math/rand                      per-shard PCG (Config.Seed)    own PCG
//
// Re-reading a bucket, as non-destructive scrapes do, is harmless to InfluxDB, where a point
// with the same measurement, tags and timestamp overwrites the previous one.
package influx
