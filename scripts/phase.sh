#!/bin/sh
# phase.sh NAME CMD...: runs CMD, then prints NAME's wall time and the CPU time (user + system)
# of CMD and everything it waited for, in seconds; exits with CMD's status. CPU near 2 × wall on
# 2 cores means the phase is bound by the processors, far below it that it mostly waits.
name=$1
shift
start=$(date +%s)
status=0
"$@" || status=$?
tf=$(mktemp)
times > "$tf" # not in a pipe or $(...): a subshell has no children's times
cpu=$(sed -n 2p "$tf" | awk '{ n = 0; for (i = 1; i <= 2; i++) { split($i, a, "m"); sub("s", "", a[2]); n += a[1] * 60 + a[2] } printf "%.0f", n }')
rm -f "$tf"
echo "phase $name: $(($(date +%s) - start)) s (exit $status, CPU $cpu s)"
exit $status
