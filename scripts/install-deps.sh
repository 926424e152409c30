#!/bin/sh
# install-deps.sh [run|test]: installs from Debian what scripts/deps.txt lists as missing (a
# command not on PATH, or a path that does not exist) for building and running the agent (run)
# or for that and the whole test suite (test, the default). One table, one install: apt-get
# update runs once, and only when something is missing; nothing is installed when all is there.
#
# Every daemon's start is refused during the install by a temporary policy-rc.d (the tests start
# their own instances on loopback with temporary directories); afterwards each row is checked
# again, and a row still missing fails the script, naming it. Needs root, or sudo. POSIX sh.
set -eu
cd "$(dirname "$0")/.."
want=${1:-test}
case "$want" in run | test) ;; *)
	echo "usage: install-deps.sh [run|test]" >&2
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
		if [ "$want" = test ] || [ "$for" = run ]; then
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
