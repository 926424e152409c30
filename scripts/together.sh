#!/bin/sh
# together.sh CMD...: runs each CMD (a shell command line) at once, waits for all of them, and
# exits 0 only if every one did; each one's status is printed when it ends. make test runs its
# integration lines with it (Makefile: e2e; e2e/cluster then packaging then deploy; internal/web).
set -u
pids=""
for cmd in "$@"; do
	sh -c "$cmd" &
	pids="$pids $!"
done
status=0
for p in $pids; do
	wait "$p" || status=1
done
exit $status
