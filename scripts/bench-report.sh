#!/bin/sh
# bench-report.sh is the one command of the side-by-side performance and resilience report
# (issue 10). It installs the peers (scripts/install-deps.sh bench, rows of scripts/deps.txt: Debian netdata,
# prometheus-node-exporter, wrk), builds the agent, bench/loadgen and bench/report, runs every
# phase and writes BENCHMARKS.md at the top of the tree. Run it as root on an otherwise idle
# machine:
#
#   sh scripts/bench-report.sh                          # the full report (about 1 h 10 min)
#   COMPARE_DUR=1m SCALE_DUR=30s SOAK_DUR=1m WARMUP=10s CHURN=500 BENCHTIME=100ms sh scripts/bench-report.sh
#
# Every duration and size is an environment variable (defaults below). PHASES picks phases
# (default "compare scale soak resilience micro"). Each phase is a subcommand of bench/report,
# which owns and removes every process and file it starts, also when interrupted; this script
# removes its own temporary directory on any exit.
set -eu
cd "$(dirname "$0")/.."
COMPARE_DUR=${COMPARE_DUR:-10m}
SCALE_DUR=${SCALE_DUR:-2m}
SOAK_DUR=${SOAK_DUR:-30m}
WARMUP=${WARMUP:-30s}
APPS=${APPS:-1000}
METRICS=${METRICS:-100}
CHURN=${CHURN:-10000}
CHURN_LIFE=${CHURN_LIFE:-300s}
SOAK_CHURN=${SOAK_CHURN:-2000}
SOAK_CHURN_LIFE=${SOAK_CHURN_LIFE:-30s}
SOAK_HISTORY=${SOAK_HISTORY:-10m}
RES_APPS=${RES_APPS:-200}
RES_METRICS=${RES_METRICS:-50}
BENCHTIME=${BENCHTIME:-1s}
BENCH_FILTER=${BENCH_FILTER:-.}
BENCH_SKIP=${BENCH_SKIP:-}
CLUSTER=${CLUSTER:-1}
CLUSTER_TIMEOUT=${CLUSTER_TIMEOUT:-20m}
PHASES=${PHASES:-compare scale soak resilience micro}
PORT=${PORT:-22750}
OUT=${OUT:-BENCHMARKS.md}

tmp=$(mktemp -d /tmp/cantal-bench-report.XXXXXX)
chmod 755 "$tmp"
pid=
cleanup() {
	if [ -n "$pid" ]; then kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# bg runs a command in the background and waits for it, so that the traps run (and forward
# SIGTERM to it) while it runs.
bg() {
	"$@" &
	pid=$!
	wait "$pid"
	rc=$?
	pid=
	return $rc
}

# ph_run N CMD... runs one phase; a failure is written into the phase's section, and the
# report goes on with the next phase.
ph_run() {
	n=$1
	shift
	if ! bg "$@" 2>"$tmp/$n.err"; then
		{ echo "## Phase $ph FAILED"; echo; tail -20 "$tmp/$n.err" | sed 's/^/    /'; echo; } >>"$tmp/$n.md"
	fi
	cat "$tmp/$n.err" >&2
}

sh scripts/install-deps.sh bench
CGO_ENABLED=0 go build -trimpath -o "$tmp/" ./cmd/cantal-agent
(cd bench && go build -o "$tmp/" ./loadgen ./report)
rep="$tmp/report"
common="-agent $tmp/cantal-agent -loadgen $tmp/loadgen -port $PORT -warmup $WARMUP"

started=$(date -u '+%Y-%m-%d %H:%M:%S UTC')
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
phase_note() { echo "_Phase $1: load average $2 → $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%H:%M:%S) UTC._"; }

for ph in $PHASES; do
	l0=$(cut -d' ' -f1-3 /proc/loadavg)
	echo "bench-report: phase $ph (load $l0)" >&2
	case $ph in
	compare)
		ph_run 1 "$rep" compare $common -dur "$COMPARE_DUR" -out "$tmp/1.md" ;;
	scale)
		ph_run 2 "$rep" scale $common -dur "$SCALE_DUR" -apps "$APPS" -metrics "$METRICS" -churn "$CHURN" \
			-churn-life "$CHURN_LIFE" -out "$tmp/2.md" ;;
	soak)
		ph_run 3 "$rep" soak $common -dur "$SOAK_DUR" -churn "$SOAK_CHURN" -churn-life "$SOAK_CHURN_LIFE" -history "$SOAK_HISTORY" -out "$tmp/3.md" ;;
	resilience)
		cl=
		if [ "$CLUSTER" = 1 ] && [ -d e2e/cluster ]; then
			echo "bench-report: go test -v ./e2e/cluster/" >&2
			bg go test -v -count 1 -timeout "$CLUSTER_TIMEOUT" ./e2e/cluster/ >"$tmp/cluster.log" 2>&1 || true
			cl="-cluster-log $tmp/cluster.log"
		fi
		ph_run 4 "$rep" resilience $common -apps "$RES_APPS" -metrics "$RES_METRICS" $cl -out "$tmp/4.md" ;;
	micro)
		{
			echo "## 5. Micro-benchmarks"
			echo
			echo "Peer comparisons (\`cd bench && go test -run '^\$' -bench '$BENCH_FILTER' -skip '$BENCH_SKIP' -benchmem -benchtime $BENCHTIME ./...\`) and the packages' own"
			echo "benchmarks (\`go test -run '^\$' -bench . -benchmem -benchtime $BENCHTIME\` on every package with one). Ratios (**bold**) are"
			echo "this project's figure over the peer's, measured in the same run; *cpu* figures are process CPU time, steadier than wall time on a loaded machine."
		} >"$tmp/5.md"
		(cd bench && bg go test -run '^$' -bench "$BENCH_FILTER" -skip "$BENCH_SKIP" -benchmem -benchtime "$BENCHTIME" -timeout 60m ./...) >"$tmp/bench.txt" 2>&1 || echo "bench module: exit $?" >>"$tmp/bench.txt"
		pkgs=$(grep -rl --include='*_test.go' '^func Benchmark' . | grep -v '^./bench/' | grep -v '^./e2e/' | xargs -n1 dirname | sort -u)
		# shellcheck disable=SC2086
		bg go test -run '^$' -bench . -benchmem -benchtime "$BENCHTIME" -timeout 60m $pkgs >"$tmp/pkg.txt" 2>&1 || echo "packages: exit $?" >>"$tmp/pkg.txt"
		"$rep" gobench <"$tmp/bench.txt" >>"$tmp/5.md"
		"$rep" gobench <"$tmp/pkg.txt" >>"$tmp/5.md"
		grep -h -E '^(FAIL|panic|--- FAIL|bench module: exit|packages: exit)' "$tmp/bench.txt" "$tmp/pkg.txt" | sed 's/^/    /' >>"$tmp/5.md" || true
		;;
	*) echo "bench-report: unknown phase $ph" >&2; exit 2 ;;
	esac
	n=$(case $ph in compare) echo 1;; scale) echo 2;; soak) echo 3;; resilience) echo 4;; micro) echo 5;; esac)
	{ echo; phase_note "$ph" "$l0"; echo; } >>"$tmp/$n.md"
done

{
	echo "# Benchmarks"
	echo
	echo "Generated by \`sh scripts/bench-report.sh\` (\`make bench-report\`) on $started, finished $(date -u '+%H:%M:%S UTC')."
	echo
	echo "Settings: COMPARE_DUR=$COMPARE_DUR SCALE_DUR=$SCALE_DUR SOAK_DUR=$SOAK_DUR WARMUP=$WARMUP APPS=$APPS METRICS=$METRICS"
	echo "CHURN=$CHURN CHURN_LIFE=$CHURN_LIFE SOAK_CHURN=$SOAK_CHURN SOAK_CHURN_LIFE=$SOAK_CHURN_LIFE SOAK_HISTORY=$SOAK_HISTORY RES_APPS=$RES_APPS RES_METRICS=$RES_METRICS BENCHTIME=$BENCHTIME BENCH_FILTER='$BENCH_FILTER' BENCH_SKIP='$BENCH_SKIP'."
	echo
	echo "Machine: $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')), $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo) memory,"
	echo "kernel $(uname -r), $(. /etc/os-release && echo "$PRETTY_NAME"), $(go version | cut -d' ' -f3). Load average at the start: $load_start (1, 5, 15 min); at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
	echo "Git: $(git describe --always --dirty 2>/dev/null || echo '?')."
	if [ -n "${REPORT_NOTE:-}" ]; then echo; echo "$REPORT_NOTE"; fi
	echo
	for n in 1 2 3 4 5; do [ -f "$tmp/$n.md" ] && cat "$tmp/$n.md"; done
} >"$tmp/report.md"
mv "$tmp/report.md" "$OUT"
echo "bench-report: wrote $OUT" >&2
