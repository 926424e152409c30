#!/bin/sh
# install-deps-eco.sh installs the real programs the ecosystem tests (internal/export,
# internal/ingest, internal/carbon) run against: Prometheus and promtool (Debian `prometheus`),
# InfluxDB 1.x (Debian `influxdb`) and netcat (`nc -u`).
#
# Idempotent: does nothing when every program is already there; otherwise runs `apt-get update`
# once and installs what is missing. Services are never started by the install (the tests start
# their own instances on loopback with temporary directories).
set -eu

. "$(dirname "$0")/apt-lib.sh"

need_pkg promtool prometheus
need_pkg prometheus prometheus
need_pkg influxd influxdb
need_pkg nc netcat-openbsd
install_needed install-deps-eco.sh promtool prometheus influxd nc
