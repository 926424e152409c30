# apt-lib.sh: what the scripts/install-deps-*.sh share, sourced, not run (setup.sh runs only the
# install-deps-* scripts). POSIX sh.
#
# need_pkg CMD PKG    adds PKG to $need when CMD is not on PATH (once per package)
# install_needed NAME CMD...
#                     installs $need from Debian (apt-get update once, no recommends), with
#                     every daemon's start refused by a temporary policy-rc.d (the tests start
#                     their own instances on loopback), then fails, naming NAME, when one of the
#                     CMDs is still missing. Does nothing when $need is empty.

need=""

need_pkg() {
	command -v "$1" >/dev/null 2>&1 && return 0
	case " $need " in *" $2 "*) return 0 ;; esac
	need="$need $2"
}

install_needed() {
	name=$1
	shift
	[ -n "$need" ] || return 0
	sudo=""
	if [ "$(id -u)" -ne 0 ]; then
		sudo="sudo"
	fi
	# Keep Debian's maintainer scripts from starting the daemons: a policy-rc.d that refuses every
	# action, only for the duration of this install and only if the machine has none.
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
	if [ "$own_policy" -eq 1 ]; then
		$sudo rm -f "$policy"
	fi
	if [ "$status" -ne 0 ]; then
		echo "$name: apt-get failed ($status) installing:$need" >&2
		return 1
	fi
	for p in "$@"; do
		if ! command -v "$p" >/dev/null 2>&1; then
			echo "$name: $p still missing after installing:$need" >&2
			return 1
		fi
	done
}
