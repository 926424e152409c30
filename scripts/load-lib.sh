# load-lib.sh is sourced by load.sh and threads.sh after they set APPS, METRICS, PORT and tmp (a
# temporary directory). start_load builds the agent and the load generator into $tmp, starts
# APPS processes × METRICS shm metrics writing under $loaddir, waits until their files exist,
# then starts the agent on 127.0.0.1:PORT with its arguments as extra flags. lg and ag are then
# the two pids, for the caller's trap to stop; $loaddir is the caller's to remove.
loaddir=/dev/shm/cantal-load-$$
start_load() {
	CGO_ENABLED=0 go build -o "$tmp/" ./cmd/cantal-agent
	(cd bench && go build -o "$tmp/" ./loadgen)
	"$tmp/loadgen" -apps "$APPS" -metrics "$METRICS" -dir "$loaddir" &
	lg=$!
	while [ "$(ls "$loaddir" 2>/dev/null | wc -l)" -lt $((APPS * 2)) ]; do sleep 0.5; done
	"$tmp/cantal-agent" --listen 127.0.0.1:"$PORT" --log-level warn "$@" &
	ag=$!
}
