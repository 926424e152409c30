# load-lib.sh is sourced by load.sh, threads.sh and hold.sh after they set PORT (and, for
# start_load, tmp: a temporary directory). It holds what they share:
#   build_load DIR        builds cantal-agent and the load generator into DIR
#   wait_load DIR         waits until APPS applications have written their files under DIR
#   start_load [FLAGS]    builds into $tmp, starts APPS processes × METRICS shm metrics writing
#                         under $loaddir, waits for them, then starts the agent on
#                         127.0.0.1:PORT with FLAGS; lg and ag are then the two pids, for the
#                         caller's trap to stop; $loaddir is the caller's to remove
#   status, field EXPR    the agent's /api/v1/status; EXPR of the JSON on stdin (d is the object)
#   wait_agent            waits until the agent on PORT answers
APPS=${APPS:-1000}
METRICS=${METRICS:-100}
loaddir=/dev/shm/cantal-load-$$
build_load() {
	CGO_ENABLED=0 go build -o "$1/" ./cmd/cantal-agent
	(cd bench && go build -o "$1/" ./loadgen)
}
wait_load() {
	while [ "$(ls "$1" 2>/dev/null | wc -l)" -lt $((APPS * 2)) ]; do sleep 0.5; done
}
start_load() {
	build_load "$tmp"
	"$tmp/loadgen" -apps "$APPS" -metrics "$METRICS" -dir "$loaddir" &
	lg=$!
	wait_load "$loaddir"
	"$tmp/cantal-agent" --listen 127.0.0.1:"$PORT" --log-level warn "$@" &
	ag=$!
}
status() { curl -sf "http://127.0.0.1:$PORT/api/v1/status"; }
wait_agent() { until status >/dev/null 2>&1; do sleep 0.5; done; }
field() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }
