// Command otelapp is an application instrumented with the OpenTelemetry Go SDK, for the agent's
// end-to-end test of OTLP ingest (e2e/otlp_test.go): it pushes a counter, a gauge and a
// histogram with the otlpmetrichttp exporter to -endpoint, for -rounds rounds, flushing after
// each, then exits. What it records is fixed, so the test knows what the agent must show:
// round k (1-based) adds 5 to the counter app.requests{route="/a"}, records k+21.5 on the
// gauge app.temperature, and records 1, 2, ..., 100 ms on the histogram app.latency.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
)

func main() {
	endpoint := flag.String("endpoint", "127.0.0.1:22682", "the agent's host:port")
	service := flag.String("service", "otelapp", "service.name")
	instance := flag.String("instance", "i-1", "service.instance.id")
	rounds := flag.Int("rounds", 3, "rounds of recording, each flushed")
	pause := flag.Duration("pause", 2500*time.Millisecond, "time between rounds")
	delta := flag.Bool("delta", false, "export with delta temporality")
	reserved := flag.Bool("reserved", false, `give the counter the attribute metric="x", which the agent refuses`)
	flag.Parse()
	if err := run(*endpoint, *service, *instance, *rounds, *pause, *delta, *reserved); err != nil {
		fmt.Fprintln(os.Stderr, "otelapp:", err)
		os.Exit(1)
	}
}

func run(endpoint, service, instance string, rounds int, pause time.Duration, delta, reserved bool) error {
	ctx := context.Background()
	opts := []otlpmetrichttp.Option{otlpmetrichttp.WithEndpoint(endpoint), otlpmetrichttp.WithInsecure(),
		otlpmetrichttp.WithURLPath("/v1/metrics"), otlpmetrichttp.WithTimeout(10 * time.Second)}
	if delta {
		opts = append(opts, otlpmetrichttp.WithTemporalitySelector(func(sdkmetric.InstrumentKind) metricdata.Temporality {
			return metricdata.DeltaTemporality
		}))
	}
	exp, err := otlpmetrichttp.New(ctx, opts...)
	if err != nil {
		return fmt.Errorf("exporter: %w", err)
	}
	res := resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName(service), semconv.ServiceInstanceID(instance))
	// The periodic reader's own interval is long: the rounds flush explicitly.
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithResource(res),
		sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp, sdkmetric.WithInterval(time.Hour))))
	m := mp.Meter("otelapp")
	requests, err := m.Int64Counter("app.requests", metric.WithDescription("requests served"))
	if err != nil {
		return err
	}
	temp, err := m.Float64Gauge("app.temperature", metric.WithUnit("Cel"))
	if err != nil {
		return err
	}
	latency, err := m.Float64Histogram("app.latency", metric.WithUnit("ms"),
		metric.WithExplicitBucketBoundaries(10, 25, 50, 75, 100))
	if err != nil {
		return err
	}
	route := metric.WithAttributes(attribute.String("route", "/a"))
	if reserved {
		route = metric.WithAttributes(attribute.String("route", "/a"), attribute.String("metric", "x"))
	}
	for k := 1; k <= rounds; k++ {
		requests.Add(ctx, 5, route)
		temp.Record(ctx, float64(k)+21.5)
		for v := 1; v <= 100; v++ {
			latency.Record(ctx, float64(v))
		}
		if err := mp.ForceFlush(ctx); err != nil {
			return fmt.Errorf("flush round %d: %w", k, err)
		}
		fmt.Println("flushed round", k)
		if k < rounds {
			time.Sleep(pause)
		}
	}
	return mp.Shutdown(ctx)
}
