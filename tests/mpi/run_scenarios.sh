#!/usr/bin/env bash
# The scenarios of tests/sim under mpirun (label mpi), each value compared with the
# simulator's for the same scenario, seed and rank count.
#   run_scenarios.sh normal  NP RUNNER HPREF [runner flags...]   every scenario, every seed
#   run_scenarios.sh broken  NP RUNNER HPREF                      each broken scenario's refusal
#   run_scenarios.sh large   2  RUNNER HPREF                      counts beyond INT_MAX
set -uo pipefail
mode=$1 np=$2 runner=$3 hpref=$4
shift 4
mpirun=(mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$np")
fail() { echo "FAIL: $*"; exit 1; }

case "$mode" in
normal)
  out=$(timeout 900 "${mpirun[@]}" "$runner" --normal "$@" 2>&1 < /dev/null)
  rc=$?
  echo "$out" | grep -v ': ok ' | head -50
  [ "$rc" -eq 0 ] || fail "mpirun -np $np $runner --normal $* exited $rc"
  runs=$(echo "$out" | grep -E '^[a-z_0-9]+ seed=[0-9]+ rank [0-9]+: ' | sed -E 's/ rank .*//' | sort -u)
  [ -n "$runs" ] || fail "no scenario ran"
  count=0
  while read -r scenario seedarg; do
    seed=${seedarg#seed=}
    want=$("$hpref" sim run "$scenario" --ranks "$np" --seed "$seed" | grep -E '^rank [0-9]+: ' | sort -V)
    got=$(echo "$out" | grep -E "^$scenario seed=$seed rank [0-9]+: " | sed -E "s/^$scenario seed=$seed //" | sort -V)
    if [ "$want" != "$got" ]; then
      echo "simulator:"; echo "$want"; echo "mpi:"; echo "$got"
      fail "$scenario seed $seed on $np ranks: MPI and the simulator disagree"
    fi
    count=$((count + 1))
  done <<< "$runs"
  echo "ok: $count scenario runs on $np MPI ranks equal the simulator's, rank by rank"
  ;;
broken)
  list=$("$runner" --list-broken) || fail "--list-broken failed"
  count=0
  while read -r name min expect; do
    [ "$np" -ge "$min" ] || continue
    out=$(timeout 300 "${mpirun[@]}" "$runner" --broken "$name" --timeout-ms 3000 2>&1 < /dev/null)
    rc=$?
    [ "$rc" -ne 124 ] || fail "$name: mpirun hung (killed by timeout after 300 s)"
    if [ "$expect" = timeout ]; then
      echo "$out" | grep -q ': error comm_timeout: ' || { echo "$out"; fail "$name: no rank raised comm_timeout"; }
      [ "$rc" -ne 0 ] || { echo "$out"; fail "$name: the job was not aborted after a timeout"; }
    else
      echo "$out" | grep -q "expected $expect, got it" || { echo "$out"; fail "$name: no rank raised the $expect refusal"; }
      if echo "$out" | grep -q ' instead$'; then echo "$out"; fail "$name: a rank raised another error"; fi
      [ "$rc" -eq 0 ] || { echo "$out"; fail "$name: mpirun exited $rc"; }
    fi
    echo "ok: $name -> $(echo "$out" | grep -m1 ': error ' | sed -E 's/^[^:]*: //' | cut -c1-160)"
    count=$((count + 1))
  done <<< "$list"
  [ "$count" -gt 0 ] || fail "no broken scenario ran"
  echo "ok: $count broken scenarios refused as expected on $np MPI ranks"
  ;;
large)
  out=$(timeout 900 "${mpirun[@]}" "$runner" --large 2>&1 < /dev/null)
  rc=$?
  echo "$out"
  [ "$rc" -eq 0 ] || fail "--large exited $rc"
  [ "$(echo "$out" | grep -c ': ok$')" -eq 2 ] || fail "both ranks must report ok"
  ;;
*) fail "unknown mode $mode" ;;
esac
