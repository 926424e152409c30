#!/bin/sh
# load.sh measures the agent under the issue's scale load: APPS processes × METRICS shm metrics
# each (default 1000 × 100 = 100k series), scanned every INTERVAL, for SECONDS after WARMUP
# seconds (default 10: the first scans register every series). It prints the agent's CPU per
# scan (user+system from /proc/PID/stat over the window, divided by the scans done in it), its
# CPU share of one core, its RSS at the end and its peak over the window (sampled every 5 s),
# the garbage collections in the window, the scan duration reported by the agent, and the
# history's bytes per point.
#
#   sh scripts/load.sh                    # 1000 × 100 for 60 s
#   APPS=100 METRICS=100 SECONDS=30 sh scripts/load.sh
#   WARMUP=3600 SECONDS=1800 sh scripts/load.sh   # the hour held: the last 30 min of 90
set -eu
cd "$(dirname "$0")/.."
SECONDS_=${SECONDS:-60}
WARMUP=${WARMUP:-10}
INTERVAL=${INTERVAL:-2s}
PORT=${PORT:-22699}
tmp=$(mktemp -d)
lg= ag= sampler=
. scripts/load-lib.sh
trap 'kill $lg $ag $sampler 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$tmp" "$loaddir"' EXIT

start_load --interval "$INTERVAL" --state-dir "${STATE_DIR-$tmp/state}"
wait_agent
sleep "$WARMUP"

ticks() { awk '{print $14 + $15}' /proc/$ag/stat; }
hz=$(getconf CLK_TCK)
st0=$(status); s0=$(echo "$st0" | field 'd["last_scan"]["scans"]'); t0=$(ticks)
(while :; do awk '/VmRSS/ {print $2}' /proc/$ag/status; sleep 5; done) >"$tmp/rss" 2>/dev/null &
sampler=$!
sleep "$SECONDS_"
s1=$(status | field 'd["last_scan"]["scans"]'); t1=$(ticks)
st=$(status)
rss=$(awk '/VmRSS/ {print $2}' /proc/$ag/status)
peak=$(sort -n "$tmp/rss" | tail -1)
python3 - "$s0" "$s1" "$t0" "$t1" "$hz" "$SECONDS_" "$rss" "${peak:-$rss}" "$st" "$st0" <<'PY'
import json, sys
s0, s1, t0, t1, hz, secs, rss, peak = map(float, sys.argv[1:9])
st, st0 = json.loads(sys.argv[9]), json.loads(sys.argv[10])
scans = s1 - s0
cpu_ms = (t1 - t0) * 1000 / hz
c = st["counts"]
print(f"series={c['series']} live={c['live_series']} apps={c['apps']} processes={c['processes']}")
print(f"scans={scans:.0f} in {secs:.0f}s; agent CPU {cpu_ms:.0f} ms = {cpu_ms/scans:.1f} ms/scan = "
      f"{100*cpu_ms/1000/secs:.2f}% of one core")
print(f"last scan duration {st['last_scan']['duration_ms']:.1f} ms; RSS {rss/1024:.0f} MiB, "
      f"peak {peak/1024:.0f} MiB in the window; {st['memory']['num_gc'] - st0['memory']['num_gc']} GCs in it")
if c["history_points"]:
    print(f"history {c['history_bytes']/1e6:.1f} MB for {c['history_points']} points = "
          f"{c['history_bytes']/c['history_points']:.2f} B/point (the open block is uncompressed)")
PY
