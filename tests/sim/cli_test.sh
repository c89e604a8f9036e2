#!/usr/bin/env bash
# hpref sim from the command line: explore finds the planted bug and its replay line
# reproduces it exactly; exit codes per failure class; determinism check; list; --json;
# --trace errors; --help defaults; interrupts and --turn-timeout-ms without fixed sleeps.
set -u
hpref=$1
. "$(dirname "$0")/lib.sh"

out=$("$hpref" sim explore planted_bug --ranks 4 --seeds 1..200); rc=$?
[ $rc -eq 3 ] || fail "explore exited $rc, expected 3 (mismatch): $out"
replay=$(printf '%s\n' "$out" | sed -n 's/^replay: //p')
[ -n "$replay" ] || fail "explore printed no replay line"
seed_line=$(printf '%s\n' "$out" | grep '^SEED=')
echo "explore: $seed_line -> $replay"
set -- $replay
shift  # drop the word hpref
first=$("$hpref" "$@"); rc1=$?
second=$("$hpref" "$@"); rc2=$?
[ $rc1 -eq 3 ] && [ $rc2 -eq 3 ] || fail "replay exited $rc1/$rc2, expected 3"
h1=$(printf '%s\n' "$first" | grep '^trace:' | sed 's/(.*//')
h2=$(printf '%s\n' "$second" | grep '^trace:' | sed 's/(.*//')
[ "$h1" = "$h2" ] || fail "replays differ: $h1 vs $h2"
err_explore=$(printf '%s\n' "$out" | grep '^rank 0:')
err_replay=$(printf '%s\n' "$first" | grep '^rank 0:')
[ "$err_explore" = "$err_replay" ] || fail "replay reports '$err_replay', explore '$err_explore'"

"$hpref" sim run deadlock_cycle --ranks 3 --seed 2 > /dev/null; [ $? -eq 4 ] || fail "deadlock exit code"
"$hpref" sim run rank_exits_early --ranks 2 > /dev/null; [ $? -eq 5 ] || fail "peer failure exit code"
"$hpref" sim run mutated_send_buffer --ranks 2 > /dev/null; [ $? -eq 1 ] || fail "check exit code"
"$hpref" sim run collectives --ranks 5 --seed 9 --check-determinism | grep -q "same hash" || fail "determinism"
"$hpref" sim run collectives --ranks 3 --fault crash:1@2 > /dev/null; [ $? -eq 5 ] || fail "crash fault exit code"
"$hpref" sim run nosuch --ranks 2 > /dev/null 2>&1; [ $? -eq 2 ] || fail "unknown scenario is bad usage"
"$hpref" sim list | grep -q '^planted_bug' || fail "list"
out=$("$hpref" sim run collectives --ranks 2 --seed 5); printf '%s\n' "$out" | head -1 | grep -q '^SEED=5$' || fail "SEED= first"

# --json: `sim run` prints exactly one object; `sim explore` one per seed run (JSON Lines),
# the failing run last; a fault that never fired is reported (text and JSON).
out=$("$hpref" sim run deadlock_cycle --ranks 2 --fault delay:1@3 --fault crash:0@99 --json); rc=$?
[ $rc -eq 4 ] || fail "--json deadlock exited $rc"
[ "$(jv "$out" 'j["failure"] + " " + str(j["exit_code"])')" = "deadlock 4" ] || fail "--json failure class: $out"
[ "$(jv "$out" 'j["replay"]')" = "hpref sim run deadlock_cycle --ranks 2 --seed 1 --fault delay:1@3 --fault crash:0@99" ] ||
  fail "--json replay: $out"
[ "$(jv "$out" '[o["kind"] for o in j["outcomes"]]')" = '["comm_deadlock", "comm_deadlock"]' ] || fail "--json outcomes: $out"
[ "$(jv "$out" 'len(j["faults_not_fired"]) == 1 and j["faults_not_fired"][0].startswith("crash:0@99")')" = true ] ||
  fail "--json: the crash at call 99 never fired and is not reported: $out"
"$hpref" sim run deadlock_cycle --ranks 2 --fault delay:1@3 --fault crash:0@99 | grep -q '^fault never fired: crash:0@99' ||
  fail "text: the unfired fault is not reported"
lines=$("$hpref" sim explore planted_bug --ranks 4 --seeds 1..200 --json); rc=$?
[ $rc -eq 3 ] || fail "explore --json exited $rc"
n=$(printf '%s\n' "$lines" | wc -l)
last=$(printf '%s\n' "$lines" | tail -1)
[ "$(jv "$last" 'j["seed"]')" = "$n" ] || fail "explore --json: $n lines for seeds 1..$(jv "$last" 'j["seed"]')"
[ "$(jv "$last" 'j["replay"]')" = "$replay" ] || fail "explore --json replay differs from the text one"
[ "$(printf '%s\n' "$lines" | head -n -1 | while IFS= read -r l; do jv "$l" 'j["ok"]'; done | sort -u)" = true ] ||
  fail "explore --json: a run before the last is not ok"
out=$("$hpref" sim run nosuch --ranks 2 --json 2> /dev/null); rc=$?
[ $rc -eq 2 ] && [ "$(jv "$out" 'j["error"]["kind"]')" = invalid_argument ] || fail "--json bad usage ($rc): $out"

# --trace: written in full, or a non-zero exit naming the file (kind io).
"$hpref" sim run collectives --ranks 3 --seed 4 --trace "$tmp/trace" > "$tmp/run" || fail "--trace run"
lines_said=$(sed -n 's/^trace: \([0-9]*\) lines.*/\1/p' "$tmp/run")
[ -n "$lines_said" ] && [ "$(wc -l < "$tmp/trace")" -eq "$lines_said" ] || fail "the trace file is not complete"
# An existing file is replaced only by a finished trace (written beside it, then renamed),
# keeps a plain file's mode, and no temporary file is left.
"$hpref" sim run collectives --ranks 3 --seed 4 --trace "$tmp/trace" > /dev/null || fail "--trace rerun"
[ "$(wc -l < "$tmp/trace")" -eq "$lines_said" ] || fail "a rerun's trace file is not complete"
[ "$(stat -c %a "$tmp/trace")" = "$(umask_mode=$(umask); printf '%o' $((0666 & ~umask_mode)))" ] ||
  fail "the trace file's mode is $(stat -c %a "$tmp/trace")"
[ -z "$(ls "$tmp" | grep '^trace\.')" ] || fail "--trace left $(ls "$tmp" | grep '^trace\.')"
# A run refused after the trace file is made (no room to map the simulator's segment under
# this address-space limit) leaves the existing file as it was. Not under ASan (HPREF_SANITIZED):
# its shadow memory does not fit under the limit.
if [ -z "${HPREF_SANITIZED:-}" ]; then
  cp "$tmp/trace" "$tmp/trace.kept"
  (ulimit -v 400000; "$hpref" sim run collectives --ranks 2 --trace "$tmp/trace" > /dev/null 2> "$tmp/err"); rc=$?
  [ $rc -eq 2 ] && grep -q "error \[comm_resource\]" "$tmp/err" || fail "a run under ulimit -v exited $rc: $(cat "$tmp/err")"
  cmp -s "$tmp/trace" "$tmp/trace.kept" || fail "a refused run changed the existing trace file"
  rm "$tmp/trace.kept"
  [ -z "$(ls "$tmp" | grep '^trace\.')" ] || fail "a refused run left $(ls "$tmp" | grep '^trace\.')"
fi
# A symlink is written through (its target replaced, the link kept); the replaced file's
# mode is kept.
ln -s trace "$tmp/link"
chmod 600 "$tmp/trace"
"$hpref" sim run collectives --ranks 2 --seed 4 --trace "$tmp/link" > /dev/null || fail "--trace through a symlink"
[ -L "$tmp/link" ] && [ "$(readlink "$tmp/link")" = trace ] || fail "--trace replaced the symlink itself"
[ "$(stat -c %a "$tmp/trace")" = 600 ] || fail "the replaced trace's mode is $(stat -c %a "$tmp/trace"), not 600"
[ -z "$(ls "$tmp" | grep -E '^(trace|link)\.')" ] || fail "--trace through a symlink left $(ls "$tmp")"
rm "$tmp/link"
# A dangling symlink names the file to make: the trace is written there, the link kept (the
# link was replaced by a regular file until 2026-12-03).
ln -s made "$tmp/dangling"
"$hpref" sim run collectives --ranks 2 --seed 4 --trace "$tmp/dangling" > /dev/null || fail "--trace through a dangling symlink"
[ -L "$tmp/dangling" ] && [ -s "$tmp/made" ] || fail "--trace through a dangling symlink: $(ls -l "$tmp")"
cmp -s "$tmp/made" "$tmp/trace" || fail "--trace through a dangling symlink wrote another trace"
[ -z "$(ls "$tmp" | grep -E '^(made|dangling)\.')" ] || fail "--trace through a dangling symlink left $(ls "$tmp")"
rm "$tmp/dangling" "$tmp/made"
# ... through a chain of links to the missing end (one hop replaced the second link)
ln -s second "$tmp/first" && ln -s made "$tmp/second"
"$hpref" sim run collectives --ranks 2 --seed 4 --trace "$tmp/first" > /dev/null || fail "--trace through a chain of links"
[ -L "$tmp/first" ] && [ -L "$tmp/second" ] && [ -s "$tmp/made" ] || fail "--trace through a chain of links: $(ls -l "$tmp")"
rm "$tmp/first" "$tmp/second" "$tmp/made"
# --check-determinism with --trace: FILE.second only when the hashes differ (here they agree).
"$hpref" sim run collectives --ranks 2 --seed 4 --trace "$tmp/trace" --check-determinism > /dev/null ||
  fail "--trace --check-determinism"
[ ! -e "$tmp/trace.second" ] && [ -z "$(ls "$tmp" | grep '^trace\.')" ] || fail "an agreeing --check-determinism left $(ls "$tmp")"
for bad in /dev/full "$tmp/no/such/dir/trace"; do
  "$hpref" sim run collectives --ranks 2 --trace "$bad" > /dev/null 2> "$tmp/err"; rc=$?
  [ $rc -eq 2 ] || fail "--trace $bad exited $rc"
  grep -q "error \[io\]: cannot .* trace file '$bad'" "$tmp/err" || fail "--trace $bad: $(cat "$tmp/err")"
done
out=$("$hpref" sim run collectives --ranks 2 --trace /dev/full --json 2> /dev/null); rc=$?
[ $rc -eq 2 ] && [ "$(jv "$out" 'j["error"]["kind"]')" = io ] || fail "--trace /dev/full --json ($rc): $out"

# --help shows every default.
for sub in run explore; do
  help=$("$hpref" sim $sub --help)
  for opt in "--ranks .*=4" "--turn-timeout-ms .*=120000"; do
    printf '%s\n' "$help" | grep -q -- "$opt" || fail "sim $sub --help lacks '$opt'"
  done
done
"$hpref" sim run --help | grep -q -- "--seed UINT=1" || fail "sim run --help lacks the seed default"
"$hpref" sim explore --help | grep -q -- "--seeds TEXT=1..100" || fail "sim explore --help lacks the seeds default"

# Interrupting a run in progress. The monitor is frozen (SIGSTOP) until it is caught with
# rank processes alive, so the signal lands inside a run, not between two.
# SIGTERM (a script's background job ignores SIGINT, and an ignored signal stays ignored)
# ends the run: the monitor dies of SIGTERM, its ranks with it, and no segment is left.
"$hpref" sim explore collectives --ranks 8 --seeds 1..1000000 > /dev/null &
pid=$!
children=""
for _ in $(seq 2000); do
  freeze $pid || break
  children=$(pgrep -P $pid)
  [ -n "$children" ] && break
  kill -CONT $pid
  sleep 0.01
done
[ -n "$children" ] || { kill -KILL $pid 2>/dev/null; fail "never caught hpref sim explore inside a run"; }
kill -TERM $pid
kill -CONT $pid
for _ in $(seq 600); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
kill -0 $pid 2>/dev/null && { kill -KILL $pid; fail "SIGTERM did not end hpref sim explore"; }
wait $pid; rc=$?
[ $rc -eq 143 ] || fail "an interrupted explore exited $rc, not 143 (SIGTERM)"
left=$(ls /dev/shm 2>/dev/null | grep "^hpref-sim-$pid-" || true)
[ -z "$left" ] || fail "an interrupted run left $left"
for child in $children; do
  for _ in $(seq 600); do [ -d /proc/$child ] || break; sleep 0.1; done  # reaped (init reaps orphans)
  [ -d /proc/$child ] && fail "an interrupted run left rank process $child ($(state $child))"
done

# --turn-timeout-ms: a rank stopped while it waits for the baton is killed when the monitor
# hands it the baton; the run ends as a peer failure naming the timeout.
"$hpref" sim explore collectives --ranks 4 --seeds 1..1000000 --turn-timeout-ms 200 --json > "$tmp/stalled" &
pid=$!
stop_waiting_rank $pid explore
wait $pid; rc=$?
last=$(tail -1 "$tmp/stalled")
[ $rc -eq 5 ] || fail "a stopped rank exited $rc: $last"
[ "$(jv "$last" 'any(o["status"] == "died" and "more than 200 ms" in o["message"] for o in j["outcomes"])')" = true ] ||
  fail "the stopped rank was not killed for the turn timeout: $last"
[ "$(jv "$last" 'j["replay"].endswith("--turn-timeout-ms 200")')" = true ] || fail "replay without the turn timeout: $last"
echo "cli ok"
