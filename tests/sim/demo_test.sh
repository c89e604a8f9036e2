#!/usr/bin/env bash
# hpref demo: every check passes for several meshes, the same seed prints the same trace
# hash, the checks can fail, and a failure exits with the failure class of hpref sim
# (1 check, 5 peer failure, 2 bad usage) with its replay line; --json prints exactly one
# JSON object whatever happens; a fault that never fires is reported.
set -u
hpref=$1
. "$(dirname "$0")/lib.sh"

a=$("$hpref" demo --json --seed 5) || fail "demo --seed 5 exited $?: $a"
b=$("$hpref" demo --json --seed 5) || fail "second demo --seed 5 exited $?"
[ "$(jv "$a" 'j["ok"]')" = "true" ] || fail "demo not ok: $a"
[ "$(jv "$a" 'j["failure"]')" = "none" ] || fail "failure class: $a"
[ "$(jv "$a" 'j["checks_failed"]')" = "0" ] || fail "checks failed: $a"
[ "$(jv "$a" 'j["steps_completed"] == j["steps"] == 5')" = "true" ] || fail "steps completed: $a"
[ "$(jv "$a" 'j["data_checksum"] is not None and j["replay"] is None')" = "true" ] || fail "checksum/replay: $a"
[ "$(jv "$a" 'j["trace_hash"]')" = "$(jv "$b" 'j["trace_hash"]')" ] || fail "same seed, different hashes: $a / $b"
c=$("$hpref" demo --json --seed 6)
[ "$(jv "$a" 'j["trace_hash"]')" != "$(jv "$c" 'j["trace_hash"]')" ] || fail "different seeds gave the same hash"
for mesh in "--ranks 4 --dp 4" "--ranks 8 --dp 1" "--ranks 1 --dp 1" "--ranks 6 --dp 3 --ratio 1 --window 7"; do
  out=$("$hpref" demo --json --steps 3 $mesh) || fail "demo $mesh exited $?: $out"
done

# A flipped byte the checks catch (the first operation of rank 4 where a flip shows):
# exit 1 (a check), the failed check on stderr, one JSON object with the replay line.
found=""
for k in $(seq 1 40); do
  out=$("$hpref" demo --json --steps 1 --fault "flip:4@$k" 2> "$tmp/err"); rc=$?
  if [ "$(jv "$out" 'j["failure"]')" = check ]; then found=$k; break; fi
done
[ -n "$found" ] || fail "no flip of rank 4's first 40 operations failed a check"
[ $rc -eq 1 ] || fail "a failed check exited $rc"
grep -q "CHECK FAILED on rank 4" "$tmp/err" || fail "the failed check is not on stderr: $(cat "$tmp/err")"
[ "$(jv "$out" 'j["checks_failed"] > 0 and j["exit_code"] == 1')" = "true" ] || fail "flip summary: $out"
[ "$(jv "$out" 'j["replay"]')" = "hpref demo --ranks 8 --dp 2 --steps 1 --seed 1 --window 64 --ratio 2 --fault flip:4@$found" ] ||
  fail "flip replay line: $out"

# A crashed rank: exit 5 (peer failure), the dead rank and the replay line in the text,
# every rank's error in the one JSON object and on stderr.
out=$("$hpref" demo --steps 2 --fault crash:3@12 2>&1); rc=$?
[ $rc -eq 5 ] || fail "a crashed rank exited $rc"
printf '%s\n' "$out" | grep -q "needs rank 3, which died" || fail "the crash was not reported: $out"
printf '%s\n' "$out" | grep -q "^result: peer failure$" || fail "no failure class: $out"
replay=$(printf '%s\n' "$out" | sed -n 's/^replay: //p')
[ "$replay" = "hpref demo --ranks 8 --dp 2 --steps 2 --seed 1 --window 64 --ratio 2 --fault crash:3@12" ] ||
  fail "replay line '$replay'"
set -- $replay
shift
again=$("$hpref" "$@" 2>&1); rc=$?
[ $rc -eq 5 ] || fail "the replay exited $rc"
[ "$(printf '%s\n' "$out" | grep 'trace hash')" = "$(printf '%s\n' "$again" | grep 'trace hash')" ] ||
  fail "the replay gave another trace hash"
out=$("$hpref" demo --json --steps 2 --fault crash:3@12 2> "$tmp/err"); rc=$?
[ $rc -eq 5 ] || fail "--json: a crashed rank exited $rc"
[ "$(jv "$out" 'j["failure"]')" = peer_failure ] || fail "--json failure class: $out"
[ "$(jv "$out" '[e["status"] for e in j["rank_errors"] if e["rank"] == 3]')" = '["died"]' ] ||
  fail "--json: rank 3's death: $out"
[ "$(jv "$out" 'len(j["rank_errors"]) == 8 and all(e["kind"] and e["message"] for e in j["rank_errors"])')" = true ] ||
  fail "--json: every rank's error kind and message: $out"
[ "$(jv "$out" 'j["faults"] == ["crash:3@12"] and j["data_checksum"] is None and j["ok"] is False')" = true ] ||
  fail "--json: fault plan: $out"
grep -q "^rank 3 did not finish" "$tmp/err" || fail "--json: the rank errors are not on stderr"

# The summary of a run that fails part way counts the steps that completed: the same
# samples, bytes, checks and imbalance as a clean run of that many steps.
partial=""
for k in $(seq 20 20 400); do
  out=$("$hpref" demo --json --steps 3 --fault "crash:3@$k" 2> /dev/null)
  done_steps=$(jv "$out" 'j["steps_completed"]')
  if [ "$(jv "$out" 'j["failure"]')" = peer_failure ] && [ "$done_steps" -ge 1 ]; then partial=$out; break; fi
done
[ -n "$partial" ] || fail "no crash of rank 3 failed the run after a completed step"
clean=$("$hpref" demo --json --steps "$done_steps") || fail "a clean run of $done_steps steps failed"
for f in samples bytes_exchanged checks_passed checks_failed imbalance_before imbalance_after; do
  [ "$(jv "$partial" "j['$f']")" = "$(jv "$clean" "j['$f']")" ] ||
    fail "$f after $done_steps completed steps: $partial vs a clean run: $clean"
done

# A fault that never fires is reported (text and JSON), and the run still passes.
out=$("$hpref" demo --steps 1 --fault crash:0@100000 2>&1) || fail "an unfired fault failed the run: $out"
printf '%s\n' "$out" | grep -q "^fault never fired: crash:0@100000" || fail "unfired fault not reported: $out"
out=$("$hpref" demo --json --steps 1 --fault crash:0@100000 2> /dev/null)
[ "$(jv "$out" 'len(j["faults_not_fired"]) == 1 and j["faults_not_fired"][0].startswith("crash:0@100000")')" = true ] ||
  fail "--json: unfired fault: $out"

# Bad usage: exit 2, and under --json still exactly one object naming the error.
out=$("$hpref" demo --json --dp 3 2> /dev/null); rc=$?
[ $rc -eq 2 ] || fail "--dp 3 on 8 ranks exited $rc"
[ "$(jv "$out" 'j["failure"] + " " + j["error"]["kind"]')" = "usage invalid_argument" ] || fail "--json usage: $out"
"$hpref" demo --turn-timeout-ms 0 > /dev/null 2>&1; [ $? -eq 2 ] || fail "--turn-timeout-ms 0 accepted"

# --backend mpi outside mpirun: the world has one rank; say how to launch; exit 2.
# (In the sanitizer build LeakSanitizer would report Open MPI's own allocations after
# MPI_Init and replace the exit status with its own; the leak check is off for this call.)
out=$(ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" "$hpref" demo --backend mpi 2>&1 < /dev/null); rc=$?
[ $rc -eq 2 ] || fail "--backend mpi outside mpirun exited $rc: $out"
if ! printf '%s\n' "$out" | grep -q "built without MPI"; then
  printf '%s\n' "$out" | grep -q "the MPI world has one rank" || fail "no one-rank message: $out"
  printf '%s\n' "$out" | grep -q "mpirun -np 8 hpref demo --backend mpi" || fail "no launch line: $out"
  out=$("$hpref" demo --backend mpi --json 2> /dev/null < /dev/null)
  [ "$(jv "$out" 'j["exit_code"]')" = 2 ] || fail "--backend mpi --json: $out"
fi

# --help shows every default.
help=$("$hpref" demo --help)
for opt in "--ranks INT=0" "--dp INT=2" "--steps INT=5" "--seed UINT=1" "--window INT=64" "--ratio INT=2" \
           "--backend TEXT=sim" "--timeout-ms INT=600000" "--turn-timeout-ms .*=120000"; do
  printf '%s\n' "$help" | grep -q -- "$opt" || fail "demo --help lacks '$opt'"
done

# --turn-timeout-ms reaches the simulator: a rank stopped (SIGSTOP) while it waits for the
# baton is killed when the monitor hands it the baton, and the run ends as a peer
# failure. The rank is chosen while the monitor is frozen, so the run is in progress.
"$hpref" demo --json --steps 1000000 --turn-timeout-ms 300 > "$tmp/stalled" 2> /dev/null &
pid=$!
stop_waiting_rank $pid "the demo"
wait $pid; rc=$?
out=$(cat "$tmp/stalled")
[ $rc -eq 5 ] || fail "a stopped rank exited $rc: $out"
[ "$(jv "$out" 'any(e["status"] == "died" and "more than 300 ms" in e["message"] for e in j["rank_errors"])')" = true ] ||
  fail "the stopped rank was not killed for the turn timeout: $out"

out=$("$hpref" demo --steps 1 | head -3)
printf '%s\n' "$out" | head -1 | grep -q '^SEED=1$' || fail "SEED= is not the first line: $out"
"$hpref" demo --codec > /dev/null || fail "demo --codec"
echo "demo ok"
