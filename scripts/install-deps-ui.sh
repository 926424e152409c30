#!/bin/sh
# install-deps-ui.sh installs what the web UI's build and its browser tests need and builds it:
# Debian's nodejs/npm (the build) and chromium (internal/web's headless browser tests), then
# scripts/build-ui.sh (npm ci + esbuild into internal/web/dist). Run by scripts/setup.sh like
# every scripts/install-deps-*.sh. Idempotent: `apt-get update` runs once, only when something
# is missing.
set -eu
cd "$(dirname "$0")/.."

need=""
command -v node >/dev/null 2>&1 || need="$need nodejs"
command -v npm >/dev/null 2>&1 || need="$need npm"
command -v chromium >/dev/null 2>&1 || need="$need chromium"
# Fonts for readable screenshots (chromium pulls no font by itself with --no-install-recommends).
[ -e /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || need="$need fonts-dejavu-core"

if [ -n "$need" ]; then
	SUDO=""
	[ "$(id -u)" -ne 0 ] && SUDO="sudo"
	export DEBIAN_FRONTEND=noninteractive
	$SUDO apt-get update -qq >/dev/null
	# shellcheck disable=SC2086 # word splitting of $need is intended
	$SUDO apt-get install -y -qq --no-install-recommends $need >/dev/null
fi
sh scripts/build-ui.sh
