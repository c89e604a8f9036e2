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
echo "unknown commands and options: named"

# Refused, never ignored: an empty list item, --batch beside a subcommand, demo options
# that --codec or the simulator would not use.
expect_usage "--intervals: '' in '0:4,' is not start:end" route interval --local-length 4 --rank 0 --intervals 0:4,
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
echo "empty items, --batch with a subcommand, unused demo options: refused"

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
echo "--help: defaults shown"
echo PASS
