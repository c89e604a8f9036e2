#!/usr/bin/env bash
# hpref sim from the command line: explore finds the planted bug and its replay line
# reproduces it exactly; exit codes per failure class; determinism check; list.
set -u
hpref=$1
fail() { echo "FAIL: $*"; exit 1; }

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
# A terminated run removes its segment and its rank processes (SIGTERM: a script's
# background job ignores SIGINT, and an ignored signal stays ignored).
"$hpref" sim explore collectives --ranks 8 --seeds 1..1000000 > /dev/null &
pid=$!
sleep 0.5
kill -TERM $pid
for _ in $(seq 50); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
kill -0 $pid 2>/dev/null && { kill -KILL $pid; fail "SIGTERM did not end hpref sim explore"; }
wait $pid 2>/dev/null
sleep 0.2
left=$(ls /dev/shm 2>/dev/null | grep "^hpref-sim-$pid-" || true)
[ -z "$left" ] || fail "an interrupted run left $left"
orphans=$(pgrep -P $pid 2>/dev/null || true)
[ -z "$orphans" ] || fail "an interrupted run left rank processes $orphans"
echo "cli ok"
