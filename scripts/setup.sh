#!/bin/sh
# setup.sh installs everything the agent's build and the whole test suite need on a fresh Debian
# machine of this project's kind: the Debian packages scripts/deps.txt lists (only those missing,
# by scripts/install-deps.sh), the Go modules of every module (the agent's; the client libraries'
# internal/jsonstr, shm, metrics, rrdd and influx, each a module of its own so an application
# importing one does not pull the agent's dependencies; bench's, packaging's, deploy's and
# e2e/otelapp's: the OpenTelemetry SDK application the OTLP test builds, a module of its own so
# the agent's go.mod does not carry the SDK) and the web UI (scripts/build-ui.sh).
# Idempotent and quiet when nothing is missing. Run as root (the agent and its tests are root).
#
# `setup.sh --run` installs only what building and running the agent needs: the table's "run"
# rows (Node.js and npm), the agent's Go modules and the web UI.
set -eu
cd "$(dirname "$0")/.."

if [ "${1:-}" = "--run" ]; then
	sh scripts/install-deps.sh run
	go mod download
	sh scripts/build-ui.sh
	exit 0
fi

sh scripts/install-deps.sh test
go mod download
for m in internal/jsonstr shm metrics rrdd influx; do (cd "$m" && go mod download); done
(cd bench && go mod download)
(cd packaging && go mod download)
(cd deploy && go mod download)
(cd e2e/otelapp && go mod download)
sh scripts/build-ui.sh
