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

need=""
command -v prometheus >/dev/null 2>&1 || need="$need prometheus"
command -v victoria-metrics >/dev/null 2>&1 || need="$need victoria-metrics"
command -v vmagent >/dev/null 2>&1 || case "$need" in *victoria-metrics*) ;; *) need="$need victoria-metrics" ;; esac

if [ -z "$need" ]; then
	exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
	SUDO="sudo"
fi

# Keep Debian's maintainer scripts from starting the daemons: a policy-rc.d that refuses every
# action, only for the duration of this install and only if the machine has none.
policy=/usr/sbin/policy-rc.d
own_policy=0
if [ ! -e "$policy" ]; then
	printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null
	$SUDO chmod 755 "$policy"
	own_policy=1
fi
cleanup() {
	if [ "$own_policy" -eq 1 ]; then
		$SUDO rm -f "$policy"
	fi
}
trap cleanup EXIT

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null
# shellcheck disable=SC2086 # word splitting of $need is intended
$SUDO apt-get install -y -qq --no-install-recommends $need >/dev/null

for p in prometheus victoria-metrics vmagent; do
	if ! command -v "$p" >/dev/null 2>&1; then
		echo "install-deps-remotewrite.sh: $p still missing after installing:$need" >&2
		exit 1
	fi
done
