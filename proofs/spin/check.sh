#!/usr/bin/env bash
# Model-checks the Spin models in this directory (see README.md) and their mutants.
#
#   proofs/spin/check.sh            (from any directory; needs spin and gcc)
#
# Every run: spin -a [macros] model.pml; gcc -O<k> -DSAFETY -DMEMLIM=2048 [-DCOLLAPSE]
# -o pan pan.c; ./pan -m<depth> [-E only where a mutant row says so].  The large
# searches (rows marked big, 10^5..10^7 states) are compiled with -O2; the small ones
# (a few thousand states, and the mutants, which stop at their first error) with -O0,
# because there compiling pan.c with -O2 (3-6 s) costs far more than the search.
# Runs go JOBS (default 2) at a time; the table keeps the order below.  Safety runs
# check assertion violations AND invalid end states (deadlocks / hangs): -E is never
# passed to a run that must pass, and the script checks that pan reports
# "invalid end states +".  All searches are exhaustive (no bitstate hashing);
# -DCOLLAPSE is lossless state compression.  A run that hits the depth limit
# ("search depth too small") or the memory limit (-DMEMLIM=2048, 2 GB) is a FAIL,
# since its search was truncated.
#
# A "pass" row must report errors: 0.  A "fail:<text>" row (a mutant, or a
# configuration the protocol does not survive) must report errors >= 1 and pan's
# first error must contain <text> (an assertion's text, or "invalid end state"), so
# each row also shows WHICH check caught it.  Exits non-zero on any unexpected result.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
depth=100000

for tool in spin gcc; do
  command -v "$tool" >/dev/null || { echo "check.sh: $tool is not installed" >&2; exit 2; }
done

work="$(mktemp -d "${TMPDIR:-/tmp}/hpref-spin.XXXXXX")"
trap 'rm -rf "$work"' EXIT

jobs_max="${JOBS:-2}"
runs=0
start=$(date +%s.%N)

# one_run MODEL N "MACROS" EXPECT OPT [CC-FLAGS] [PAN-FLAGS]: prints one table row
one_run() {
  local model="$1" n="$2" macros="$3" expect="$4" opt="$5" ccflags="${6:-}" panflags="${7:-}"
  local dir out result states="" errors secs t0 variant want first
  dir="$(mktemp -d "$work/run.XXXXXX")"
  t0=$(date +%s.%N)
  result=OK
  # shellcheck disable=SC2086  # macros and flags are word lists
  if ! (cd "$dir" && spin -a -DN="$n" $macros "$here/$model.pml" >spin.out 2>&1); then
    result="FAIL(spin: $(head -c 120 "$dir/spin.out" | tr '\n' ' '))"
  elif ! (cd "$dir" && gcc -w "$opt" -DSAFETY -DMEMLIM=2048 $ccflags -o pan pan.c >gcc.out 2>&1); then
    result="FAIL(gcc: $(head -c 120 "$dir/gcc.out" | tr '\n' ' '))"
  else
    (cd "$dir" && ./pan -m"$depth" $panflags >pan.out 2>&1) || true
    out="$dir/pan.out"
    states=$(awk '/states, stored/ {print $1; exit}' "$out")
    errors=$(sed -n 's/.*errors: \([0-9][0-9]*\).*/\1/p' "$out" | head -n1)
    first=$(grep -m1 '^pan:1:' "$out" || true)
    if [[ -z "$errors" ]]; then
      result="FAIL(no pan result)"
    elif grep -q "depth too small" "$out"; then
      result="FAIL(depth -m$depth too small: search truncated)"
    elif grep -q "reached -DMEMLIM bound" "$out"; then
      result="FAIL(2 GB memory limit reached: search truncated)"
    elif [[ "$panflags" != *-E* ]] && ! grep -q "invalid end states.*+" "$out"; then
      result="FAIL(invalid end state check is off)"
    elif [[ "$expect" == pass ]]; then
      [[ "$errors" == 0 ]] || result="FAIL(errors: $errors; $first)"
    else
      want="${expect#fail:}"
      if [[ "$errors" == 0 ]]; then
        result="FAIL(mutant not caught: errors: 0)"
      elif [[ "$first" != *"$want"* ]]; then
        result="FAIL(caught, but by: $first)"
      else
        result="OK (errors: $errors)"
      fi
    fi
  fi
  secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}')
  variant="${macros:-default}${ccflags:+ cc:$ccflags}${panflags:+ pan:$panflags}"
  printf '%-17s %-2s %-38s %-29s %9s %5s  %s\n' "$model" "$n" "$variant" "$expect" "${states:--}" "$secs" "$result"
  rm -rf "$dir"
}

# check [big] MODEL N "MACROS" EXPECT [CC-FLAGS] [PAN-FLAGS]: queue one run
check() {
  local opt=-O0
  if [[ "$1" == big ]]; then opt=-O2; shift; fi
  while (($(jobs -rp | wc -l) >= jobs_max)); do wait -n || true; done
  one_run "$1" "$2" "$3" "$4" "$opt" "${5:-}" "${6:-}" >"$work/row.$(printf %03d "$runs")" &
  runs=$((runs + 1))
}

# ---- (a) SPEC 6.3 header-first batch broadcast -------------------------------------
m=batch_broadcast
check $m 2 "" pass
check big $m 3 "" pass
check big $m 4 "" pass -DCOLLAPSE
check $m 2 "-DCOARSE" pass
check $m 3 "-DCOARSE" pass
check $m 4 "-DCOARSE" pass
check $m 4 "-DCOARSE -DBUF=1" pass
check big $m 4 "-DCOARSE -DMAXF=3 -DSTEPS=3" pass
check $m 4 "-DCOARSE -DUNCHECKED" pass
check $m 4 "-DCOARSE -DMUTANT=1" "fail:(rseq==seq)&&(rkind==2)"
check $m 4 "-DCOARSE -DMUTANT=1 -DUNCHECKED" "fail:==sent[k])"
check $m 4 "-DCOARSE -DMUTANT=2" "fail:invalid end state"
check $m 4 "-DCOARSE -DMUTANT=3" "fail:invalid end state"
check $m 4 "-DCOARSE -DMUTANT=3" "fail:(status==1)" "" -E
check $m 4 "-DCOARSE -DMUTANT=4" "fail:outcome[r]==outcome[0]"
check $m 4 "-DCOARSE -DMUTANT=5" "fail:(rseq==seq)&&(rkind==2)"
check $m 4 "-DCOARSE -DMUTANT=5 -DUNCHECKED" "fail:(count==c)&&(x==f)" "" -E
check $m 4 "-DCOARSE -DSKEW" "fail:invalid end state"

# ---- (b) SPEC 5.2 size-then-bytes payload exchange ---------------------------------
m=payload_exchange
check $m 2 "" pass
check big $m 3 "" pass
check big $m 4 "" pass -DCOLLAPSE
check $m 2 "-DCOARSE" pass
check $m 3 "-DCOARSE" pass
check $m 4 "-DCOARSE" pass
check $m 4 "-DCOARSE -DROUNDS=3" pass
check big $m 2 "-DVMAX=2" pass
check $m 3 "-DCOARSE -DVMAX=1" pass
check $m 4 "-DCOARSE -DOVERSIZE -DROUNDS=2" pass
check big $m 3 "-DOVERSIZE" pass
check $m 4 "-DCOARSE -DSKEW" pass
check $m 4 "-DCOARSE -DSKEW -DNOLIMITAGREE" pass
check $m 4 "-DCOARSE -DOVERSIZE -DMUTANT=6" "fail:invalid end state"
check $m 4 "-DCOARSE -DSKEW -DNOLIMITAGREE -DMUTANT=6" "fail:invalid end state"
check $m 4 "-DCOARSE -DOVERSIZE -DMUTANT=7" "fail:invalid end state"
check $m 4 "-DCOARSE -DMUTANT=1" "fail:(nsizes==4)"
check $m 4 "-DCOARSE -DMUTANT=1 -DFITONLY" "fail:((off+cnt)<=total)"
check $m 3 "-DCOARSE -DMUTANT=1 -DFITONLY -DVMAX=1" "fail:((off+cnt)<=total)"
check $m 4 "-DCOARSE -DMUTANT=2" "fail:(cnt==sin[q])"
check $m 4 "-DCOARSE -DMUTANT=3" "fail:(off==total)"
check $m 4 "-DCOARSE -DMUTANT=4" "fail:(recvd[((me*4)+q)]=="
check $m 4 "-DCOARSE -DMUTANT=5 -DOVERSIZE" "fail:((outcome[r]==1)==(outcome[0]==1))"

# ---- (c) SPEC 4.1 padded object all-gather -----------------------------------------
m=object_allgather
check $m 2 "" pass
check big $m 3 "" pass
check big $m 4 "" pass -DCOLLAPSE
check big $m 3 "-DOVERSIZE -DROUNDS=2" pass -DCOLLAPSE
check $m 2 "-DCOARSE" pass
check $m 3 "-DCOARSE" pass
check $m 4 "-DCOARSE" pass
check $m 4 "-DCOARSE -DROUNDS=2" pass
check big $m 4 "-DCOARSE -DOVERSIZE -DROUNDS=2" pass
check $m 4 "-DCOARSE -DUNCHECKED" pass
check $m 4 "-DCOARSE -DMUTANT=1" "fail:(cnt==pad)"
check $m 4 "-DCOARSE -DMUTANT=1 -DUNCHECKED" "fail:(outcome[r]==outcome[0])"
check $m 4 "-DCOARSE -DMUTANT=2 -DOVERSIZE" "fail:(pad<=2)"
check $m 4 "-DCOARSE -DMUTANT=3" "fail:(got[q]=="
check $m 4 "-DCOARSE -DMUTANT=4" "fail:(outcome[0]!=3)"
check $m 4 "-DCOARSE -DMUTANT=5 -DOVERSIZE" "fail:(pad<=2)"

wait

printf '%-17s %-2s %-38s %-29s %9s %5s  %s\n' model N variant expect states secs result
printf -- '-%.0s' {1..125}; echo
cat "$work"/row.*
failures=$(cat "$work"/row.* | grep -vc '  OK' || true)
total=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN {printf "%.0f", b - a}')
echo
if ((failures)); then
  echo "check.sh: $failures of $runs runs FAILED (${total}s wall)"
  exit 1
fi
echo "check.sh: all $runs runs as expected (${total}s wall, $jobs_max at a time)"
