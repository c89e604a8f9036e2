#!/usr/bin/env bash
# Issue 10 sections 5 and 6: an unknown subcommand is named (exit 2); --help shows the
# defaults; an out-of-range integer option is refused naming the value, never clamped.
source "$(dirname "$0")/common.sh"

expect_usage() {  # expect_usage "<stderr text>" args...
  local want=$1
  shift
  "$hpref" "$@" > "$tmp/out" 2> "$tmp/err"; local rc=$?
  [ $rc -eq 2 ] || fail "hpref $* exited $rc, expected 2"
  grep -qF -- "$want" "$tmp/err" || fail "hpref $*: stderr lacks '$want': $(cat "$tmp/err")"
}

expect_usage "hpref: unknown command 'bogus'" bogus
expect_usage "hpref route: unknown command 'bogus'" route bogus
expect_usage "hpref route plan-all: unknown command 'sliding'" route plan-all sliding
expect_usage "hpref: unknown option '--bogus'" --bogus
expect_usage "hpref sim: unknown option '--bogus'" sim --bogus
expect_usage "hpref route plan-all: unknown option '--bogus'" route plan-all --bogus
expect_usage "hpref frame decode: unknown option '-x'" frame decode -x
# Every usage error, CLI11's own too, names its kind as the errors of a run do.
expect_usage "hpref: error [invalid_argument]: hpref: unknown command 'bogus'" bogus
expect_usage "hpref: error [invalid_argument]: --window: 'x' is not an integer" \
  route sliding-window --local-length 4 --size 2 --rank 0 --window x --boundaries 0,8
expect_usage "hpref: error [invalid_argument]: --local-length is required" \
  route plan-all sliding-window --size 2 --window 2 --boundaries 0,8
expect_usage "hpref: error [invalid_argument]: hpref sim: a subcommand (run, explore, list) is required" sim
expect_usage "hpref route plan-all: a subcommand (interval, sliding-window, document-prefix) is required" \
  route plan-all
# frame and route alone (they take --batch instead of a subcommand): the error, then the help.
expect_usage "hpref: error [invalid_argument]: hpref frame: a subcommand (encode, decode, inspect) or --batch is required" frame
grep -qE "^Usage: \S*hpref frame " "$tmp/err" || fail "hpref frame: no help after the error: $(cat "$tmp/err")"
expect_usage "hpref: error [invalid_argument]: hpref route: a subcommand (interval, sliding-window, document-prefix, plan-all) or --batch is required" route
grep -qE "^Usage: \S*hpref route " "$tmp/err" || fail "hpref route: no help after the error: $(cat "$tmp/err")"
echo "unknown commands and options: named"

# Refused, never ignored: an empty list item, --batch beside a subcommand, demo options
# that --codec or the simulator would not use.
expect_usage "--intervals: '' in '0:4,' is not start:end" route interval --local-length 4 --rank 0 --intervals 0:4,
# --hex input: a bad character named where it is in the input (was its place among the
# digits left once whitespace was removed: "position 4").
printf '80 05\n  zz\n' > "$tmp/bad.hex"
expect_usage "--hex input has 'z' at offset 8 (hex digits and whitespace only)" frame decode --hex "$tmp/bad.hex"
printf '80 05 4\n' > "$tmp/odd.hex"
expect_usage "--hex input has an odd number of hex digits (5): the last byte is half" frame decode --hex "$tmp/odd.hex"
# A bad item named with the whole list (was "'8:9' in '8:9' is not an int64").
expect_usage "--intervals: '2:8:9' in '0:4,2:8:9' is not start:end of two int64s" \
  route interval --local-length 4 --rank 0 --intervals 0:4,2:8:9
expect_usage "--intervals: 'a:b' in '0:4,a:b' is not start:end of two int64s" \
  route interval --local-length 4 --rank 0 --intervals 0:4,a:b
expect_usage "--boundaries: '' in '0,6,12,'" route sliding-window --local-length 4 --size 3 --rank 0 --window 3 --boundaries 0,6,12,
expect_usage "hpref frame --batch reads JSON requests from stdin and takes no subcommand, got 'decode'" \
  frame --batch decode nonexist < /dev/null
expect_usage "hpref route --batch reads JSON requests from stdin and takes no subcommand, got 'interval'" \
  route --batch interval --local-length 4 --rank 0 --intervals 0:4 < /dev/null
for opt in "--steps 0" "--backend bogus" "--ranks -5" "--json" "--dump $tmp/d" "--fault crash:1@1"; do
  # shellcheck disable=SC2086
  expect_usage "excludes" demo --codec $opt
done
"$hpref" demo --codec --seed 2 > /dev/null || fail "demo --codec --seed 2"
expect_usage "--timeout-ms must be positive, got -1" demo --steps 1 --timeout-ms -1
expect_usage "--timeout-ms 5 is the deadline under mpirun" demo --steps 1 --timeout-ms 5
# Options that would do nothing: --keep-going without --batch, --trace-format without --trace.
printf '[]' | "$hpref" frame encode -o "$tmp/empty.hpb1" || fail "frame encode of []"
expect_usage "hpref frame --keep-going goes with --batch" frame --keep-going decode "$tmp/empty.hpb1"
expect_usage "hpref route --keep-going goes with --batch" route --keep-going
expect_usage "hpref route --keep-going goes with --batch" \
  route --keep-going interval --local-length 4 --rank 0 --intervals 0:4
expect_usage "--trace-format chrome goes with --trace" sim run collectives --trace-format chrome
expect_usage "--trace-format text goes with --trace" sim run collectives --trace-format text
# An empty value is refused naming the option, never taken for an option not given.
printf '[]' > "$tmp/empty.json"
expect_usage "--key-class: the class name is empty" frame encode --key-class "" "$tmp/empty.json"
expect_usage "--key-fields: the field list is empty" frame encode --key-class a.B --key-fields "" "$tmp/empty.json"
expect_usage "--key-class: the class name is empty" frame decode --key-class "" "$tmp/empty.hpb1"
expect_usage "--key-fields: the field list is empty" frame decode --key-fields "" "$tmp/empty.hpb1"
expect_usage "--key-fields: the field list is empty" frame inspect --key-fields "" "$tmp/empty.hpb1"
expect_usage "--trace: the file name is empty" sim run collectives --trace ""
expect_usage "--owner-offsets: the offset list is empty" \
  route interval --local-length 4 --rank 0 --intervals 0:4 --owner-offsets ""
expect_usage "--owner-offsets: the offset list is empty" \
  route plan-all interval --local-length 4 --intervals 0:4 --owner-offsets ""
expect_usage "--dump: the directory name is empty" demo --dump ""
# plan-all interval takes each rank's length from --owner-offsets when given: --local-length
# is then not needed (it was required, and not read); without either it is refused.
expect_usage "hpref: error [invalid_argument]: --local-length (or --owner-offsets) is required" \
  route plan-all interval --intervals 0:4,2:8
"$hpref" route plan-all interval --intervals 0:4,2:8 --owner-offsets 0,4,8 --json > "$tmp/owners.json" \
  || fail "route plan-all interval --owner-offsets without --local-length"
"$hpref" route plan-all interval --intervals 0:4,2:8 --local-length 4 --json > "$tmp/length.json" \
  || fail "route plan-all interval --local-length 4"
cmp -s "$tmp/owners.json" "$tmp/length.json" \
  || fail "plan-all interval: --owner-offsets 0,4,8 and --local-length 4 plan differently"
expect_usage "hpref: error [invalid_argument]: --local-length is required" \
  route interval --rank 0 --intervals 0:4,2:8 --owner-offsets 0,4,8
# The rank count and --dp each named by their own check (a bad --ranks blamed --dp).
expect_usage "the demo runs on 1 to 64 ranks (--ranks, or the MPI job's size), got 65" demo --ranks 65 --dp 1
expect_usage "the demo runs on 1 to 64 ranks (--ranks, or the MPI job's size), got -3" demo --ranks -3
expect_usage "--dp 3 must divide --ranks 8" demo --ranks 8 --dp 3
# One message per option, naming the wrong one ("--steps and --window must be positive and
# --ratio 1 or 2, got 5, 64 and 3"; "--dp 0 must divide --ranks 8" until 2026-12-04).
expect_usage "hpref: error [invalid_argument]: --dp must be at least 1, got 0" demo --dp 0
expect_usage "hpref: error [invalid_argument]: --ratio must be 1 or 2, got 3" demo --ratio 3
expect_usage "hpref: error [invalid_argument]: --steps must be at least 1, got 0" demo --steps 0
expect_usage "hpref: error [invalid_argument]: --window must be at least 1, got -2" demo --window -2
# A plan that is none names every form, random too (left out until 2026-12-04).
expect_usage "fault 'bogus' is not crash:R@K, flip:R@K[:B], delay:R@K or random (one drawn from the seed)" \
  sim run collectives --fault bogus
expect_usage "fault 'crash:1' is not crash:R@K, flip:R@K[:B], delay:R@K or random" demo --fault crash:1
# A fault plan the cluster cannot run is refused before anything is printed.
expect_usage "fault crash:9@1 names rank 9 of a 4-rank cluster" sim run collectives --fault crash:9@1
[ ! -s "$tmp/out" ] || fail "sim run --fault crash:9@1 printed before refusing: $(cat "$tmp/out")"
expect_usage "faults crash:1@1 and crash:1@2 both crash rank 1: a rank dies once" \
  sim run collectives --fault crash:1@1 --fault crash:1@2
[ ! -s "$tmp/out" ] || fail "sim run with two crashes of rank 1 printed before refusing: $(cat "$tmp/out")"
# Delays of one rank add up: a total past 2^64 - 1 wrapped to a short delay (exit 0, the
# trace of delay:1@1) until 2026-12-03.
expect_usage "fault delay:1@2 takes the delays of rank 1 past 18446744073709551615 decisions in all (the delays of one rank add up)" \
  sim run collectives --fault delay:1@18446744073709551615 --fault delay:1@2
expect_usage "--fault random with delay:1@18446744073709551615: some seeds draw a fault that cannot join it (a delay of rank 1: the delays of one rank add up, past 2^64 - 1 decisions); explore with one of them, or run one seed with both (sim run)" \
  sim explore collectives --seeds 1..3 --fault random --fault delay:1@18446744073709551615
# ... and beside delays that pass it only with a drawn one added (a pairwise check missed them)
expect_usage "--fault random with delay:1@5: some seeds draw a fault that cannot join it (a delay of rank 1" \
  sim explore collectives --seeds 1..3 --fault delay:1@18446744073709551605 --fault delay:1@5 --fault random
expect_usage "fault crash:9@1 names rank 9 of a 4-rank cluster" sim explore collectives --fault crash:9@1
[ ! -s "$tmp/out" ] || fail "sim explore --fault crash:9@1 printed before refusing: $(cat "$tmp/out")"
expect_usage "fault crash:20@1 names rank 20 of a 8-rank cluster" demo --fault crash:20@1
# --fault random draws one fault from the seed: given twice it is refused (every command);
# sim explore refuses it beside a fault that some seed's draw could not join, before any
# seed runs (it was found only at that seed, after the lines before it).
for cmd in "sim run collectives" "sim explore collectives" "demo"; do
  expect_usage "--fault random is given 2 times: each draws the same fault from the seed" \
    $cmd --fault random --fault random
done
expect_usage "--fault random with crash:1@2: some seeds draw a fault that cannot join it (a crash of rank 1: a rank dies once)" \
  sim explore collectives --ranks 3 --seeds 1..50 --fault random --fault crash:1@2
[ ! -s "$tmp/out" ] || fail "sim explore --fault random --fault crash:1@2 printed before refusing: $(cat "$tmp/out")"
expect_usage "--fault random with flip:0@8: some seeds draw a fault that cannot join it (a flip of what rank 0 receives at its collective 8" \
  sim explore collectives --seeds 1..5 --fault flip:0@8 --fault random
[ ! -s "$tmp/out" ] || fail "demo --fault crash:20@1 printed before refusing: $(cat "$tmp/out")"
# A build without NCCL says so, under mpirun or not (not "launch with mpirun").
if [ "${HPREF_CLI_HAVE_NCCL:-}" = 0 ]; then
  expect_usage "--backend nccl: this hpref was built without NCCL" demo --backend nccl
fi
echo "empty items and values, --batch with a subcommand, unused options, bad fault plans: refused"

# --json: a usage error is one JSON object on stdout too (verify, demo, sim run, sim explore).
mkdir -p "$tmp/logs"
expect_json_usage() {  # expect_json_usage "<message text>" args...
  local want=$1
  shift
  expect_usage "$want" "$@"
  "$python" -c "
import json, sys
text = open(sys.argv[1]).read()
j = json.loads(text)
assert text.count('\n') == 1 and j['ok'] is False and j['failure'] == 'usage' and j['exit_code'] == 2, j
assert j['error']['kind'] == 'invalid_argument' and sys.argv[2] in j['error']['message'], j" "$tmp/out" "$want" \
    || fail "hpref $*: stdout is not one JSON usage error: $(cat "$tmp/out")"
}
expect_json_usage "hpref verify: unknown option '--bogus'" verify "$tmp/logs" --json --bogus
expect_json_usage "--steps: 'abc' is not an integer" demo --json --steps abc
expect_json_usage "--json excludes --codec" demo --json --codec
expect_json_usage "--ranks: Value 0 not in range 1 to 64" sim run collectives --json --ranks 0
expect_json_usage "hpref sim explore: unknown option '--bogus'" sim explore collectives --bogus --json
expect_json_usage "--timeout-ms must be positive" demo --json --timeout-ms 0
expect_json_usage "--trace-format chrome goes with --trace" sim run collectives --json --trace-format chrome
expect_json_usage "--trace: the file name is empty" sim run collectives --json --trace ""
# --json=V is read as CLI11 reads it after a parse: the last --json or --json=V decides.
for v in true 1 yes on; do
  expect_json_usage "--ranks: Value 0 not in range 1 to 64" sim run collectives --ranks 0 --json=$v
done
expect_json_usage "--steps: 'abc' is not an integer" demo --json=true --steps abc
expect_json_usage "--ranks: Value 0 not in range 1 to 64" sim run collectives --json=no --json --ranks 0
for v in false 0 no off; do
  expect_usage "--ranks: Value 0 not in range 1 to 64" sim run collectives --ranks 0 --json --json=$v
  [ ! -s "$tmp/out" ] || fail "sim run --json=$v: a usage error on stdout: $(cat "$tmp/out")"
done
"$hpref" verify --json --help > "$tmp/out" || fail "verify --json --help"
grep -q "Usage" "$tmp/out" || fail "verify --json --help: $(cat "$tmp/out")"
echo "--json usage errors: one JSON object"

big=99999999999999999999  # beyond int64 and uint64
for opt in --local-length --size --rank --window; do
  args=(route sliding-window --local-length 4 --size 1 --rank 0 --window 1 --boundaries 0,4)
  for i in "${!args[@]}"; do [ "${args[$i]}" = "$opt" ] && args[$((i + 1))]=$big; done
  expect_usage "'$big' is not an integer" "${args[@]}"
done
expect_usage "'$big' is not an integer" route document-prefix --local-length 4 --size 1 \
  --rank 0 --ratio $big --boundaries 0,4
expect_usage "--seed: '-1' is not an integer" demo --seed -1
expect_usage "--seed: '$big'" demo --seed $big
expect_usage "--window: '$big'" demo --window $big
expect_usage "--steps: '4294967296'" demo --steps 4294967296
expect_usage "--max-output-bytes: '-1'" frame decode --max-output-bytes -1
# 0..2^64-1 holds 2^64 seeds (one more than a uint64 holds): the count is not wrapped to 0.
"$hpref" sim explore barrier --ranks 1 --seeds 0..18446744073709551615 | head -n 2 > "$tmp/out"
grep -qxF "explored 25 of 18446744073709551616 seeds, all ok" "$tmp/out" \
  || fail "sim explore --seeds 0..2^64-1: $(cat "$tmp/out")"
# SPEC 1.4: a key class is "<module>.<Name>"; anything else is refused up front, even
# with nothing to encode or decode.
printf '[]' > "$tmp/empty.json"
expect_usage "key class 'NoDot' is not a dotted name" frame encode --key-class NoDot "$tmp/empty.json"
echo "out-of-range integers: refused naming the value"

"$hpref" demo --help > "$tmp/help" || fail "demo --help"
for want in "--steps INT=5" "--seed UINT=1" "--window INT=64" "--dp INT=2"; do
  grep -qF -- "$want" "$tmp/help" || fail "demo --help lacks '$want': $(cat "$tmp/help")"
done
"$hpref" frame decode --help > "$tmp/help" || fail "frame decode --help"
grep -qF -- "--max-output-bytes UINT=1073741824" "$tmp/help" || fail "frame decode --help: $(cat "$tmp/help")"
# A required option shows no default ("--rank INT=0 REQUIRED" until 2026-12-04: never used).
for cmd in "route interval" "route sliding-window" "route document-prefix" "route plan-all interval" \
           "route plan-all sliding-window" "route plan-all document-prefix" "frame encode" \
           "frame decode" "frame inspect" "sim run" "sim explore" "verify" "demo"; do
  # shellcheck disable=SC2086 # the command's words
  "$hpref" $cmd --help > "$tmp/help" || fail "$cmd --help"
  if grep -E "=[^ ]* +REQUIRED" "$tmp/help"; then fail "$cmd --help shows a default of a required option"; fi
done
"$hpref" route sliding-window --help > "$tmp/help"
grep -qE -- "--rank INT REQUIRED +This rank" "$tmp/help" || fail "route sliding-window --help: $(cat "$tmp/help")"
echo "--help: defaults shown, none for a required option"
echo PASS
