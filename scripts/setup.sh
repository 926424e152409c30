#!/bin/sh
# setup.sh installs everything the agent's build and the whole test suite need on a fresh Debian
# machine of this project's kind: Debian packages (only those missing; `apt-get update` once),
# the Go modules of both modules, and the per-area installers of the test suites.
# Idempotent and quiet when nothing is missing. Run as root (the agent and its tests are root).
#
# `setup.sh --run` installs only what building and running the agent needs: the Go modules and
# the web UI (Node.js and npm if missing, then scripts/build-ui.sh).
set -eu
cd "$(dirname "$0")/.."

if [ "${1:-}" = "--run" ]; then
	if ! command -v npm >/dev/null 2>&1; then
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -qq
		apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
	fi
	go mod download
	sh scripts/build-ui.sh
	exit 0
fi

# program:package pairs the core tests need.
need=""
for pair in python3:python3 unshare:util-linux ip:iproute2 ping:iputils-ping ps:procps \
	mount:mount nc:netcat-openbsd curl:curl; do
	cmd=${pair%%:*}
	pkg=${pair#*:}
	command -v "$cmd" >/dev/null 2>&1 || need="$need $pkg"
done
if [ -n "$need" ]; then
	echo "setup: installing$need"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends $need >/dev/null
fi

for s in scripts/install-deps-*.sh; do
	[ -e "$s" ] && sh "$s"
done

go mod download
(cd bench && go mod download)
(cd packaging && go mod download)
