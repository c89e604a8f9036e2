#!/usr/bin/env bash
# SPEC 9.1: `mpirun -np 8 hpref demo --backend mpi --seed S` prints the same progress, the
# same checks and the same data checksum as `hpref demo --seed S` on the simulator.
set -uo pipefail
hpref=$1
fail() { echo "FAIL: $*"; exit 1; }
. "$(dirname "$0")/bounded.sh"
for seed in 3 11; do
  sim=$("$hpref" demo --seed "$seed" --steps 4) || { echo "$sim"; fail "the simulated demo failed (seed $seed)"; }
  mpi=$(bounded 600 mpirun --allow-run-as-root --oversubscribe --bind-to none -np 8 \
        "$hpref" demo --backend mpi --seed "$seed" --steps 4 --timeout-ms 120000) ||
    { echo "$mpi"; fail "the MPI demo failed (seed $seed)"; }
  keep() { grep -E '^(SEED=|step |\| (steps|samples|bytes exchanged|token imbalance|checks|data checksum) )'; }
  if [ "$(echo "$sim" | keep)" != "$(echo "$mpi" | keep)" ]; then
    echo "simulator:"; echo "$sim"; echo "mpi:"; echo "$mpi"
    fail "seed $seed: the MPI demo differs from the simulated one"
  fi
  echo "$mpi" | grep -q '^every check passed$' || fail "seed $seed: the MPI demo did not pass every check"
  echo "ok: seed $seed: $(echo "$mpi" | grep -E '\| (checks|data checksum) ' | tr -s ' ' | tr '\n' ' ')"
done
# A deadline past the clock's range waits without end (it overflowed into a deadline already
# past: every wait timed out at once and the job was aborted).
far=$(bounded 300 mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 \
      "$hpref" demo --backend mpi --steps 1 --timeout-ms 9223372036854775807) ||
  { echo "$far"; fail "the MPI demo with --timeout-ms 9223372036854775807 failed"; }
echo "$far" | grep -q '^every check passed$' || { echo "$far"; fail "--timeout-ms 9223372036854775807: not every check passed"; }
echo "ok: --timeout-ms 9223372036854775807 waits without end"
# A configuration error under mpirun: each rank reports it as one whole line (lines written
# in pieces interleaved: "hpref: error [hpref: error [..."), naming mpirun's rank count, not a
# --ranks that was never given. mpirun aborts the job when the first rank exits, so the
# others may be killed before they write: at least one line, and every hpref line whole.
bad=$(bounded 120 mpirun --allow-run-as-root --oversubscribe --bind-to none -np 3 \
      "$hpref" demo --backend mpi --steps 1) && fail "--dp 2 on 3 MPI ranks was accepted"
want='hpref: error [invalid_argument]: --dp 2 must divide the 3 ranks mpirun started'
echo "$bad" | grep -qxF "$want" || { echo "$bad"; fail "3 MPI ranks: no line '$want'"; }
torn=$(echo "$bad" | grep -E 'hpref: |invalid_argument|must divide' | grep -vxF "$want")
[ -z "$torn" ] || { echo "$bad"; fail "3 MPI ranks: a line other than '$want': $torn"; }
echo "ok: a configuration error under mpirun: whole lines, none torn"
