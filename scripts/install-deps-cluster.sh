#!/bin/sh
# install-deps-cluster.sh installs what the multi-node cluster tests (internal/testsupport/netns and the
# agent's network-namespace tests) run: iproute2 (`ip netns`, veth, bridge, `tc netem`),
# nftables (packet loss on kernels built without netem), ping (iputils-ping) and unshare
# (util-linux: the fleet tests give each agent a PID namespace of its own).
#
# Idempotent: does nothing when every program is already there; otherwise runs `apt-get update`
# once and installs what is missing. The tests need root to create network namespaces.
set -eu

need=""
command -v ip >/dev/null 2>&1 || need="$need iproute2"
command -v tc >/dev/null 2>&1 || case "$need" in *iproute2*) ;; *) need="$need iproute2" ;; esac
command -v nft >/dev/null 2>&1 || need="$need nftables"
command -v ping >/dev/null 2>&1 || need="$need iputils-ping"
command -v unshare >/dev/null 2>&1 || need="$need util-linux"

if [ -z "$need" ]; then
	exit 0
fi
if [ "$(id -u)" != 0 ]; then
	echo "install-deps-cluster.sh: need root to install:$need" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $need >/dev/null
