#!/bin/sh
# threads.sh measures where the agent's CPU goes by thread under the issue's scale load (APPS
# processes × METRICS shm metrics, default 1000 × 100): it reads /proc/PID/task/TID/schedstat
# (exact run time and the number of times each thread was switched in) before and after SECONDS
# (default 60) that start WARMUP seconds (default 70) after the agent, and prints per thread and
# in total the CPU milliseconds and switches per scan. Extra arguments go to the agent, e.g.
#
#   sh scripts/threads.sh                      # defaults
#   sh scripts/threads.sh --timer-slack 0      # the kernel's default timer slack, for comparison
#
# The Go runtime's monitor thread (sysmon) is the second thread; with the kernel's 50 µs slack
# it wakes tens of times per scan (see --timer-slack in README.md).
set -eu
cd "$(dirname "$0")/.."
SECONDS_=${SECONDS:-60}
WARMUP=${WARMUP:-70}
PORT=${PORT:-22698}
tmp=$(mktemp -d)
lg= ag=
. scripts/load-lib.sh
trap 'kill $lg $ag 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$tmp" "$loaddir"' EXIT

start_load --state-dir "$tmp/state" "$@"
sleep "$WARMUP"
snap() {
	for t in /proc/$ag/task/*; do
		echo "$(basename "$t") $(cat "$t/schedstat") $(cat "/proc/$(basename "$t")/timerslack_ns")"
	done | sort
}
snap >"$tmp/a"
sleep "$SECONDS_"
snap >"$tmp/b"
# schedstat: run time (ns), wait time (ns), times switched in.
join "$tmp/a" "$tmp/b" | awk -v scans=$((SECONDS_ / 2)) '
	{ r = ($6 - $2) / 1e6; s = $8 - $4; tr += r; ts += s
	  printf "thread %s  slack %s ns  %.2f ms/scan  %.1f switches/scan\n", $1, $9, r / scans, s / scans }
	END { printf "total      %.2f ms/scan  %.1f switches/scan (%d scans at 2 s)\n", tr / scans, ts / scans, scans }'
