#!/bin/sh
# install-deps-remotewrite.sh installs the receivers the remote-write end-to-end test and
# benchmark (e2e/remotewrite_test.go, bench/remotewrite_test.go) run against: Prometheus
# (Debian `prometheus`, started with --web.enable-remote-write-receiver) and VictoriaMetrics with
# vmagent (Debian `victoria-metrics`).
#
# Idempotent: does nothing when every program is already there; otherwise runs `apt-get update`
# once and installs what is missing. Services are never started by the install (the tests start
# their own instances on loopback with temporary directories).
set -eu

. "$(dirname "$0")/apt-lib.sh"

need_pkg prometheus prometheus
need_pkg victoria-metrics victoria-metrics
need_pkg vmagent victoria-metrics
install_needed install-deps-remotewrite.sh prometheus victoria-metrics vmagent
