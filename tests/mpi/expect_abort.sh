#!/usr/bin/env bash
# Runs a command (mpirun ...) that must end with exit status STATUS after printing an
# "ok:" line and no "FAIL" line (label mpi): the job aborted as SPEC 9.2 asks.
#   expect_abort.sh STATUS command [args...]
set -uo pipefail
want=$1
shift
. "$(dirname "$0")/bounded.sh"
out=$(bounded 120 "$@")
rc=$?
echo "$out"
echo "$out" | grep -q '^ok: ' || { echo "FAIL: no rank printed its ok line"; exit 1; }
if echo "$out" | grep -q 'FAIL'; then echo "FAIL: a rank failed"; exit 1; fi
[ "$rc" -eq "$want" ] || { echo "FAIL: exit status $rc, not $want"; exit 1; }
echo "ok: the job ended with status $want"
