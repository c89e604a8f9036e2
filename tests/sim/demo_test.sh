#!/usr/bin/env bash
# hpref demo: every check passes for several meshes, the same seed prints the same trace
# hash, and the checks can fail: a flipped byte or a crashed rank fails the run.
set -u
hpref=$1
fail() { echo "FAIL: $*"; exit 1; }
field() { printf '%s\n' "$1" | sed -n "s/.*\"$2\": \\([^,}]*\\).*/\\1/p"; }

a=$("$hpref" demo --json --seed 5) || fail "demo --seed 5 exited $?: $a"
b=$("$hpref" demo --json --seed 5) || fail "second demo --seed 5 exited $?"
[ "$(field "$a" ok)" = "true" ] || fail "demo not ok: $a"
[ "$(field "$a" checks_failed)" = "0" ] || fail "checks failed: $a"
[ "$(field "$a" trace_hash)" = "$(field "$b" trace_hash)" ] || fail "same seed, different hashes: $a / $b"
c=$("$hpref" demo --json --seed 6)
[ "$(field "$a" trace_hash)" != "$(field "$c" trace_hash)" ] || fail "different seeds gave the same hash"
for mesh in "--ranks 4 --dp 4" "--ranks 8 --dp 1" "--ranks 1 --dp 1" "--ranks 6 --dp 3 --ratio 1 --window 7"; do
  out=$("$hpref" demo --json --steps 3 $mesh) || fail "demo $mesh exited $?: $out"
done
out=$("$hpref" demo --steps 2 --fault flip:4@7 2>&1); rc=$?
[ $rc -eq 1 ] || fail "a flipped byte in the exchange exited $rc"
printf '%s\n' "$out" | grep -q "CHECK FAILED on rank 4" || fail "the flipped byte was not reported: $out"
out=$("$hpref" demo --steps 2 --fault crash:3@12 2>&1); rc=$?
[ $rc -eq 1 ] || fail "a crashed rank exited $rc"
printf '%s\n' "$out" | grep -q "needs rank 3, which died" || fail "the crash was not reported: $out"
out=$("$hpref" demo --steps 1 | head -3)
printf '%s\n' "$out" | head -1 | grep -q '^SEED=1$' || fail "SEED= is not the first line: $out"
"$hpref" demo --codec > /dev/null || fail "demo --codec"
echo "demo ok"
