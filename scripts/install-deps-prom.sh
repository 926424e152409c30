#!/bin/sh
# install-deps-prom.sh installs the real programs the node_exporter-compatibility tests and
# benchmark (e2e/nodeexporter_test.go, bench/nodeexporter_test.go) run side by side with the
# agent: node_exporter (Debian `prometheus-node-exporter`, 1.5 on Debian 12), Prometheus and
# promtool (Debian `prometheus`).
#
# Idempotent: does nothing when every program is already there; otherwise runs `apt-get update`
# once and installs what is missing. Services are never started by the install (the tests start
# their own instances on loopback ports); the node_exporter service the package enables is
# stopped and disabled again if the package's scripts started it anyway.
set -eu

. "$(dirname "$0")/apt-lib.sh"

need_pkg prometheus-node-exporter prometheus-node-exporter
need_pkg promtool prometheus
need_pkg prometheus prometheus
install_needed install-deps-prom.sh prometheus-node-exporter promtool prometheus
