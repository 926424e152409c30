#!/bin/sh
# install-deps-carbon.sh installs the real programs the carbon and CLI end-to-end tests run
# against: Graphite's carbon-cache (Debian `graphite-carbon`), whisper-fetch (Debian
# `python3-whisper`) to read what carbon stored, and tmux, which drives `cantal top` in a
# terminal of fixed size.
#
# Idempotent: does nothing when every program is already there; otherwise runs `apt-get update`
# once and installs what is missing. Services are never started by the install (the tests start
# their own carbon-cache on loopback with a temporary configuration).
set -eu

need=""
command -v carbon-cache >/dev/null 2>&1 || need="$need graphite-carbon"
command -v whisper-fetch >/dev/null 2>&1 || need="$need python3-whisper"
command -v tmux >/dev/null 2>&1 || need="$need tmux"

if [ -z "$need" ]; then
	exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
	SUDO="sudo"
fi

# Keep Debian's maintainer scripts from starting carbon-cache: a policy-rc.d that refuses every
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

for p in carbon-cache whisper-fetch tmux; do
	if ! command -v "$p" >/dev/null 2>&1; then
		echo "install-deps-carbon.sh: $p still missing after installing:$need" >&2
		exit 1
	fi
done
