// Package influx is ALICE ECS-style application monitoring over the InfluxDB line protocol:
// an application builds Metrics (a measurement, tags, int64/uint64/float64 fields and a
// timestamp) and hands them to a Monitor from any number of goroutines; the Monitor aggregates
// them into one-second buckets and serves the buckets as line protocol at an HTTP endpoint
// (default port 8088, path /ecsmetrics) for Telegraf or a cantal-agent to scrape, and can push
// them to an agent's InfluxDB v1-compatible POST /write.
//
// Two kinds of sending exist. Send sums each field over the metrics with the same measurement,
// the same tags (in any order) and the same second. SendHistogrammable instead reservoir-samples
// each field's values (Algorithm R) and reports, per field f, f_mean, f_median, f_min, f_p10,
// f_p30, f_p70, f_p90, f_max, f_count and f_poolsize.
//
// Compared with the ECS implementation this package is modelled on: tag order does not matter;
// Send aggregates synchronously under a striped lock instead of through a bounded channel, so
// nothing is dropped silently (a bucket beyond Config.MaxBuckets is dropped, counted, and the
// count is exported); and scraping does not reset the buckets unless Config.ResetOnScrape is
// set, so several scrapers can read the same data: buckets expire Config.Retention after they
// were created. Re-reading a bucket is harmless to InfluxDB, where a point with the same
// measurement, tags and timestamp overwrites the previous one.
package influx
