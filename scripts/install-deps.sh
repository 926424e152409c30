#!/bin/sh
# install-deps.sh [run|test|bench]: installs from Debian what scripts/deps.txt lists as missing
# (a command not on PATH, or a path that does not exist) for building and running the agent
# (run), for that and the whole test suite (test, the default), or for that and what
# `make bench-report` compares the agent with (bench). One table, one install: apt-get update
# runs once, and only when something is missing; nothing is installed when all is there.
#
# Every daemon's start is refused during the install by a temporary policy-rc.d (the tests and
# the report start their own instances on loopback with their own configs), and a service of a
# package just installed that systemd started anyway is stopped and disabled, so it does not
# load the machine the report measures; afterwards each row is checked again, and a row still
# missing fails the script, naming it. Needs root, or sudo. POSIX sh.
set -eu
cd "$(dirname "$0")/.."
want=${1:-test}
case "$want" in run | test | bench) ;; *)
	echo "usage: install-deps.sh [run|test|bench]" >&2
	exit 2
	;;
esac

present() {
	case "$1" in
	/*) [ -e "$1" ] ;;
	*) command -v "$1" >/dev/null 2>&1 ;;
	esac
}

# rows prints "have package" for the rows this run needs.
rows() {
	while read -r have pkg for _; do
		case "$have" in '' | '#'*) continue ;; esac
		if [ "$for" = run ] || [ "$for" = "$want" ]; then
			echo "$have $pkg"
		fi
	done <scripts/deps.txt
}

for_rows_missing() {
	rows | while read -r have pkg; do
		present "$have" || echo "$have $pkg"
	done
}
missing=$(for_rows_missing)
[ -n "$missing" ] || exit 0
need=$(echo "$missing" | awk '{print $2}' | sort -u | tr '\n' ' ')
echo "install-deps: installing $need"

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
policy=/usr/sbin/policy-rc.d
own_policy=0
if [ ! -e "$policy" ]; then
	printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null
	$sudo chmod 755 "$policy"
	own_policy=1
fi
export DEBIAN_FRONTEND=noninteractive
status=0
$sudo apt-get update -qq >/dev/null || status=$?
# shellcheck disable=SC2086 # word splitting of $need is intended
[ "$status" -ne 0 ] || $sudo apt-get install -y -qq --no-install-recommends $need >/dev/null || status=$?
[ "$own_policy" -eq 0 ] || $sudo rm -f "$policy"
# systemd ignores policy-rc.d on some paths: stop and disable what we just installed and it started.
if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
	for pkg in $need; do
		if systemctl is-enabled --quiet "$pkg" 2>/dev/null || systemctl is-active --quiet "$pkg" 2>/dev/null; then
			$sudo systemctl disable --now "$pkg" >/dev/null 2>&1 || true
		fi
	done
fi
if [ "$status" -ne 0 ]; then
	echo "install-deps: apt-get failed ($status) installing: $need" >&2
	exit 1
fi
still=$(for_rows_missing)
if [ -n "$still" ]; then
	echo "install-deps: still missing after the install (have package):" >&2
	echo "$still" >&2
	exit 1
fi
