#!/bin/sh
# bench-deps.sh installs what scripts/bench-report.sh compares the agent with: Debian's netdata,
# prometheus-node-exporter and wrk. Idempotent: it does nothing when all three are present.
# Debian's maintainer scripts would start netdata and node_exporter as system daemons, which
# would load the very machine being measured; a temporary policy-rc.d refuses every start during
# the install, and any daemon that started anyway is stopped and disabled afterwards. The report
# runs its own unprivileged foreground instances with their own configs and ports.
set -eu
have() { command -v "$1" >/dev/null 2>&1; }
netdata_bin() { for b in /usr/sbin/netdata /usr/bin/netdata; do [ -x "$b" ] && { echo "$b"; return 0; }; done; return 1; }
if netdata_bin >/dev/null && have prometheus-node-exporter && have wrk; then
	exit 0
fi
if [ "$(id -u)" != 0 ]; then
	echo "bench-deps: need root to install netdata prometheus-node-exporter wrk" >&2
	exit 1
fi
policy=/usr/sbin/policy-rc.d
made_policy=
if [ ! -e "$policy" ]; then
	printf '#!/bin/sh\nexit 101\n' >"$policy"
	chmod 755 "$policy"
	made_policy=1
fi
cleanup() { [ -n "$made_policy" ] && rm -f "$policy"; return 0; }
trap cleanup EXIT
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends netdata prometheus-node-exporter wrk >/dev/null
# Stop and disable whatever started anyway (systemd hosts ignore policy-rc.d for some paths).
for svc in netdata prometheus-node-exporter; do
	if have systemctl && [ -d /run/systemd/system ]; then
		systemctl disable --now "$svc" >/dev/null 2>&1 || true
	fi
	if have update-rc.d; then update-rc.d -f "$svc" remove >/dev/null 2>&1 || true; fi
done
# Daemons started by the maintainer scripts without systemd: stop them by their pid files or by
# the exact binary path of the system service (never a process of ours: those run as children
# of bench-report.sh with their own configs).
for pidf in /run/netdata/netdata.pid /var/run/netdata/netdata.pid /run/prometheus-node-exporter.pid; do
	[ -f "$pidf" ] && kill "$(cat "$pidf")" 2>/dev/null || true
done
netdata_bin >/dev/null && have prometheus-node-exporter && have wrk
