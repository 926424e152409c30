#!/bin/sh
# install-deps-otlp.sh fetches the modules of e2e/otelapp, the OpenTelemetry Go SDK application
# (go.opentelemetry.io/otel/sdk/metric with the otlpmetrichttp exporter) that the OTLP
# end-to-end test (e2e/otlp_test.go) builds and runs against the agent. It is a module of its
# own, so the agent's go.mod does not carry the SDK. No Debian package is needed.
#
# Idempotent: `go mod download` does nothing when the module cache already holds them.
set -eu
cd "$(dirname "$0")/../e2e/otelapp"
go mod download
