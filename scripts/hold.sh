#!/bin/sh
# hold.sh keeps the issue's scale load and an agent running across commands, so that builds can
# be compared on the same held state (the full hour of history) without waiting an hour for each:
# a graceful stop writes the history snapshot and the next build loads it.
#
#   sh scripts/hold.sh start [BIN]     # load (APPS × METRICS, default 1000 × 100) and an agent
#   sh scripts/hold.sh swap BIN        # stop the agent (snapshot written), start BIN on its state
#   sh scripts/hold.sh measure [SECS]  # CPU and switches per scan, GCs, RSS (and peak) over SECS (default 360)
#   sh scripts/hold.sh stop            # stop both and remove the load's files and the state
#
# BIN defaults to a build of ./cmd/cantal-agent. The agent's state, logs and pids live under
# $HOLD (default /tmp/cantal-hold), the load's files under $LOAD (a tmpfs, default
# /dev/shm/cantal-hold); the agent listens on 127.0.0.1:$PORT (default 22690). Wait an
# hour after start for the history to be full; measure windows that hold a few collections.
set -eu
cd "$(dirname "$0")/.."
HOLD=${HOLD:-/tmp/cantal-hold}
PORT=${PORT:-22690}
LOAD=${LOAD:-/dev/shm/cantal-hold}
. scripts/load-lib.sh
alive() { [ -f "$HOLD/$1.pid" ] && running "$(cat "$HOLD/$1.pid")"; }
# running: the process exists and has not exited. An exited one can linger as a zombie when
# its parent does not reap it (run in a PID namespace of its own, whose init is a plain
# program), and kill -0 would take it for alive.
running() { s=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) && [ -n "$s" ] && [ "$s" != Z ]; }

agent() {
	if alive agent; then
		p=$(cat "$HOLD/agent.pid")
		kill -TERM "$p"
		while running "$p"; do sleep 0.2; done
	fi
	setsid "$1" --listen 127.0.0.1:"$PORT" --state-dir "$HOLD/state" --pprof --log-level warn \
		>>"$HOLD/agent.log" 2>&1 </dev/null &
	echo $! >"$HOLD/agent.pid"
	wait_agent
	echo "agent $(cat "$HOLD/agent.pid") ($1) up at $(date -u +%T)"
}

case "${1:-}" in
start)
	mkdir -p "$HOLD"
	build_load "$HOLD"
	bin=${2:-$HOLD/cantal-agent}
	setsid "$HOLD/loadgen" -apps "$APPS" -metrics "$METRICS" -dir "$LOAD" >"$HOLD/loadgen.log" 2>&1 </dev/null &
	echo $! >"$HOLD/loadgen.pid"
	wait_load "$LOAD"
	agent "$bin"
	;;
swap)
	agent "${2:?swap needs the agent binary}"
	;;
measure)
	secs=${2:-360}
	ag=$(cat "$HOLD/agent.pid")
	sched() { cat /proc/"$ag"/task/*/schedstat | awk '{r += $1; s += $3} END {printf "%.0f %.0f\n", r, s}'; }
	a=$(status); set -- $(sched); r0=$1 c0=$2
	sleep "$secs"
	b=$(status); set -- $(sched); r1=$1 c1=$2
	s0=$(echo "$a" | field 'd["last_scan"]["scans"]') s1=$(echo "$b" | field 'd["last_scan"]["scans"]')
	g0=$(echo "$a" | field 'd["memory"]["num_gc"]') g1=$(echo "$b" | field 'd["memory"]["num_gc"]')
	n=$((s1 - s0))
	echo "$(date -u +%T) $(readlink /proc/"$ag"/exe): $n scans in ${secs}s;" \
		"CPU $(echo "$r0 $r1 $n" | awk '{printf "%.2f", ($2 - $1) / 1e6 / $3}') ms/scan;" \
		"$(echo "$c0 $c1 $n" | awk '{printf "%.1f", ($2 - $1) / $3}') switches/scan; $((g1 - g0)) GCs;" \
		"RSS $(($(awk '/VmRSS/ {print $2}' /proc/"$ag"/status) / 1024)) MiB" \
		"(peak $(($(awk '/VmHWM/ {print $2}' /proc/"$ag"/status) / 1024)) MiB);" \
		"$(echo "$b" | field 'd["counts"]["series"]') series"
	;;
stop)
	for p in agent loadgen; do
		if alive $p; then kill "$(cat "$HOLD/$p.pid")"; fi
	done
	sleep 1
	rm -rf "$HOLD" "$LOAD"
	;;
*)
	echo "usage: $0 start [BIN] | swap BIN | measure [SECS] | stop" >&2
	exit 2
	;;
esac
