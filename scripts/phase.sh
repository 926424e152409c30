#!/bin/sh
# phase.sh NAME CMD...: runs CMD, then prints NAME's wall time in seconds; exits with CMD's status.
name=$1
shift
start=$(date +%s)
status=0
"$@" || status=$?
echo "phase $name: $(($(date +%s) - start)) s (exit $status)"
exit $status
