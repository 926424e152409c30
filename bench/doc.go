// Package bench holds the benchmarks that compare this project's packages with their peers
// (Prometheus, VictoriaMetrics, expvar, ...). It is its own module so that the peers stay out of
// the main module's dependency graph. Run: cd bench && go test -run '^$' -bench . -benchmem
package bench
