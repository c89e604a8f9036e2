#!/usr/bin/env bash
# Runs libFuzzer targets with the checked-in corpus as a read-only seed.
#
#   fuzz/run.sh <build-dir> <target|all> <seconds> [libFuzzer flags...]
#
# Called by `./dev fuzz [target] [seconds]` (build dir build/asan). For each target it
# runs <build-dir>/fuzz/fuzz_<target> for <seconds> (-max_total_time) with
#   - new inputs written to a scratch corpus, <build-dir>/fuzz-work/<target> (libFuzzer
#     only writes to its first corpus directory; fuzz/corpus/<target> comes second),
#   - crash, leak, timeout and OOM reproducers written to fuzz/artifacts/,
#   - the dictionary fuzz/dicts/<target>.dict when there is one,
# and prints libFuzzer's final stats. Exit status: 0 when every target ran clean, else
# the first failing target's libFuzzer status. Extra arguments go to libFuzzer as they are
# (e.g. -runs=1000000 -jobs=2).
#
# Environment (used by ctest's fuzz.<target> smoke tests):
#   HPREF_FUZZ_BIN_DIR    where fuzz_<target> lives (default <build-dir>/fuzz)
#   HPREF_FUZZ_WORK       scratch corpus root (default <build-dir>/fuzz-work)
#   HPREF_FUZZ_ARTIFACTS  reproducer directory (default fuzz/artifacts)
#   HPREF_FUZZ_FRESH=1    empty the scratch corpus first (a run that depends only on the seed)
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
targets_all=(segment_decode pickle_read received_merge json_value route_args batch_header)

if [ $# -lt 3 ]; then
  sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
build=$1
target=$2
seconds=$3
shift 3
case "$seconds" in
  '' | *[!0-9]*) echo "run.sh: seconds must be a whole number, got '$seconds'" >&2; exit 2 ;;
esac

bin_dir=${HPREF_FUZZ_BIN_DIR:-$build/fuzz}
work_root=${HPREF_FUZZ_WORK:-$build/fuzz-work}
artifacts=${HPREF_FUZZ_ARTIFACTS:-$here/artifacts}

if [ "$target" = all ]; then
  targets=("${targets_all[@]}")
else
  targets=("$target")
fi

run_one() {
  local t=$1
  shift
  local bin=$bin_dir/fuzz_$t
  local seed=$here/corpus/$t
  local work=$work_root/$t
  if [ ! -d "$seed" ]; then
    echo "run.sh: unknown target '$t': no seed corpus $seed (targets: ${targets_all[*]})" >&2
    return 2
  fi
  if [ ! -x "$bin" ]; then
    echo "run.sh: $bin is missing: build the asan preset (./dev build asan)" >&2
    return 2
  fi
  [ "${HPREF_FUZZ_FRESH:-0}" = 1 ] && rm -rf "$work"
  mkdir -p "$work" "$artifacts"
  # Inputs as large as the issue-10 findings need: the pickle stack and hash-flooding
  # inputs are hundreds of KB to a few MB (the targets' RssBound holds each input to a
  # multiple of its size; -rss_limit_mb bounds the process).
  local max_len
  case $t in
    pickle_read | segment_decode | received_merge) max_len=4194304 ;;
    json_value) max_len=2097152 ;;
    *) max_len=65536 ;;
  esac
  # -timeout: a unit slower than 60 s is a finding; the seed corpus's 3 MiB regression
  # input takes ~15 s under ASan and coverage on 2 cores (more on a loaded host).
  local flags=(-max_total_time="$seconds" -print_final_stats=1 -timeout=60
    -max_len="$max_len" -rss_limit_mb=3072 -artifact_prefix="$artifacts/")
  [ -f "$here/dicts/$t.dict" ] && flags+=(-dict="$here/dicts/$t.dict")
  local log=$work_root/$t.log
  echo "run.sh: $bin ${flags[*]} $* $work $seed"
  "$bin" "${flags[@]}" "$@" "$work" "$seed" >"$log" 2>&1
  local rc=$?
  # The stats libFuzzer prints last, and the one line that says how it ended.
  grep -E '^(Done [0-9]+ runs|stat::)' "$log"
  if [ $rc -ne 0 ]; then
    echo "run.sh: $t FAILED (libFuzzer exit $rc); log $log; the last 60 lines:" >&2
    tail -n 60 "$log" >&2
    ls -t "$artifacts" 2>/dev/null | head -n 3 | sed "s|^|run.sh: reproducer $artifacts/|" >&2
  else
    echo "run.sh: $t clean; scratch corpus $work holds $(ls "$work" | wc -l) inputs"
  fi
  return $rc
}

status=0
for t in "${targets[@]}"; do
  run_one "$t" "$@"
  rc=$?
  [ $rc -ne 0 ] && [ $status -eq 0 ] && status=$rc
done
exit $status
