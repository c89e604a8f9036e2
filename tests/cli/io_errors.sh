#!/usr/bin/env bash
# Input and output that fail are errors, never silence: a directory given as an input file,
# a stdin that cannot be read (a directory, closed) and a stdout that cannot be written
# (/dev/full) end every command with kind io and exit 2, not an empty input, a success or
# a crash ('terminate called', an abort).
source "$(dirname "$0")/common.sh"

expect_io() {  # expect_io "<stderr text>" STDIN STDOUT args...; STDIN "closed": no fd 0
  local want=$1 in=$2 out=$3 rc
  shift 3
  if [ "$in" = closed ]; then
    "$hpref" "$@" <&- > "$out" 2> "$tmp/err"; rc=$?
  else
    "$hpref" "$@" < "$in" > "$out" 2> "$tmp/err"; rc=$?
  fi
  [ $rc -eq 2 ] || fail "hpref $* <$in >$out exited $rc, expected 2: $(cat "$tmp/err")"
  grep -qF -- "[io]: $want" "$tmp/err" || fail "hpref $* <$in >$out: stderr lacks '$want': $(cat "$tmp/err")"
}

mkdir "$tmp/adir"
for sub in decode inspect encode; do
  expect_io "cannot read input file '$tmp/adir': Is a directory" /dev/null /dev/null frame $sub "$tmp/adir"
done
expect_io "cannot open input file '$tmp/missing'" /dev/null /dev/null frame decode "$tmp/missing"
echo "a directory or a missing file as input: io, exit 2"

# An output file that cannot be opened or written is named with the reason.
printf '[]' > "$tmp/empty.json"
printf '[]' | "$hpref" frame encode -o "$tmp/empty.hpb1" || fail "frame encode of []"
expect_io "cannot open output file '$tmp/missing/x': No such file or directory" /dev/null /dev/null \
  frame decode -o "$tmp/missing/x" "$tmp/empty.hpb1"
expect_io "cannot open output file '$tmp/missing/x': No such file or directory" /dev/null /dev/null \
  frame encode -o "$tmp/missing/x" "$tmp/empty.json"
if [ -w /dev/full ]; then
  expect_io "cannot write output file '/dev/full': No space left on device" /dev/null /dev/null \
    frame decode -o /dev/full "$tmp/empty.hpb1"
fi
# sim run --trace: a file that cannot be opened is refused before the run (nothing printed),
# never after it in place of the run's exit class (planted_bug seed 9: mismatch, 3).
expect_io "cannot open trace file '$tmp/missing/x': No such file or directory" /dev/null "$tmp/out" \
  sim run planted_bug --seed 9 --trace "$tmp/missing/x"
[ ! -s "$tmp/out" ] || fail "sim run --trace $tmp/missing/x ran before refusing: $(cat "$tmp/out")"
"$hpref" sim run planted_bug --seed 9 --trace "$tmp/trace.txt" > "$tmp/out" 2> "$tmp/err"; rc=$?
[ $rc -eq 3 ] && [ -s "$tmp/trace.txt" ] || fail "sim run planted_bug --seed 9 --trace exited $rc: $(cat "$tmp/err")"
echo "output files that cannot be opened or written: io naming the reason, before a run"

expect_io "cannot read stdin: Is a directory" "$tmp/adir" /dev/null frame decode
expect_io "cannot read stdin: Is a directory" "$tmp/adir" /dev/null frame encode
expect_io "cannot read stdin: Bad file descriptor" closed /dev/null frame decode
expect_io "cannot read stdin" closed /dev/null frame --batch
expect_io "cannot read stdin" closed /dev/null route --batch
expect_io "cannot read stdin" "$tmp/adir" /dev/null route --batch
echo "stdin that cannot be read: io, exit 2"

if [ -w /dev/full ]; then
  mkdir "$tmp/logs"
  printf '{"rank":0,"group":0,"ranks":[0],"seq":0,"kind":"barrier"}\n' > "$tmp/logs/rank0.jsonl"
  printf '[]' | "$hpref" frame encode -o "$tmp/empty.hpb1"
  while read -r line; do
    # shellcheck disable=SC2086
    expect_io "cannot write to stdout" /dev/null /dev/full $line
  done <<LINES
route sliding-window --boundaries 0,6,12 --local-length 4 --size 3 --rank 1 --window 3
route sliding-window --boundaries 0,6,12 --local-length 4 --size 3 --rank 1 --window 3 --json
route plan-all sliding-window --boundaries 0,6,12 --local-length 4 --size 3 --window 3
sim list
sim run collectives --json
sim run collectives
sim explore collectives --seeds 1..2 --json
demo --steps 1 --json
demo --steps 1
demo --codec
verify $tmp/logs
verify $tmp/logs --json
frame inspect $tmp/empty.hpb1
frame decode $tmp/empty.hpb1
--version
LINES
  echo "stdout that cannot be written: io, exit 2"
fi
echo PASS
