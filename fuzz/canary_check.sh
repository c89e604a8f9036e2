#!/usr/bin/env bash
# ctest fuzz.canary: runs the canary libFuzzer target from an empty corpus and passes
# only if it crashes within <seconds> with <pattern> in its output (the planted bug was
# found and reported). Prints the time to the crash.
#
#   fuzz/canary_check.sh <fuzz_canary binary> <seconds> <pattern> <work-dir>
set -uo pipefail
if [ $# -ne 4 ]; then
  sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
bin=$1
seconds=$2
pattern=$3
work=$4
rm -rf "$work"
mkdir -p "$work/corpus"
start_ns=$(date +%s%N)
"$bin" -max_total_time="$seconds" -artifact_prefix="$work/" "$work/corpus" >"$work/log" 2>&1
rc=$?
elapsed_ms=$(( ($(date +%s%N) - start_ns) / 1000000 ))
elapsed=$((elapsed_ms / 1000)).$(printf %03d $((elapsed_ms % 1000)))
if [ $rc -eq 0 ]; then
  echo "canary: FAILED: no crash within $seconds s; the fuzz setup cannot find bugs" >&2
  tail -n 20 "$work/log" >&2
  exit 1
fi
if ! grep -qF -- "$pattern" "$work/log"; then
  echo "canary: FAILED: exit $rc but no '$pattern' in the output:" >&2
  tail -n 40 "$work/log" >&2
  exit 1
fi
if ! ls "$work"/crash-* >/dev/null 2>&1; then
  echo "canary: FAILED: exit $rc but no crash-* reproducer written in $work" >&2
  exit 1
fi
runs=$(grep -oE '^#[0-9]+' "$work/log" | tail -n 1)
echo "canary: crashed as planted after ${elapsed}s (exit $rc, last status line ${runs:-#?}):"
grep -m1 -F -- "$pattern" "$work/log"
echo "canary: reproducer $(ls "$work"/crash-*)"
