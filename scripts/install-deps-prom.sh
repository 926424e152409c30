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

need=""
command -v prometheus-node-exporter >/dev/null 2>&1 || need="$need prometheus-node-exporter"
command -v promtool >/dev/null 2>&1 || need="$need prometheus"
command -v prometheus >/dev/null 2>&1 || case "$need" in *" prometheus"\ *|*" prometheus") ;; *) need="$need prometheus" ;; esac

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
# --no-install-recommends: node_exporter recommends its textfile collectors (smartmontools,
# moreutils...), which the tests do not use.
# shellcheck disable=SC2086 # word splitting of $need is intended
$SUDO apt-get install -y -qq --no-install-recommends $need >/dev/null

for p in prometheus-node-exporter promtool prometheus; do
	if ! command -v "$p" >/dev/null 2>&1; then
		echo "install-deps-prom.sh: $p still missing after installing:$need" >&2
		exit 1
	fi
done
