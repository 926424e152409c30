#!/bin/sh
# install-deps-eco.sh installs the real programs the ecosystem tests (internal/export,
# internal/ingest, internal/carbon) run against: Prometheus and promtool (Debian `prometheus`),
# InfluxDB 1.x (Debian `influxdb`) and netcat (`nc -u`).
#
# Idempotent: does nothing when every program is already there; otherwise runs `apt-get update`
# once and installs what is missing. Services are never started by the install (the tests start
# their own instances on loopback with temporary directories).
set -eu

need=""
command -v promtool >/dev/null 2>&1 || need="$need prometheus"
command -v prometheus >/dev/null 2>&1 || case "$need" in *prometheus*) ;; *) need="$need prometheus" ;; esac
command -v influxd >/dev/null 2>&1 || need="$need influxdb"
command -v nc >/dev/null 2>&1 || need="$need netcat-openbsd"

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

for p in promtool prometheus influxd nc; do
	if ! command -v "$p" >/dev/null 2>&1; then
		echo "install-deps-eco.sh: $p still missing after installing:$need" >&2
		exit 1
	fi
done
