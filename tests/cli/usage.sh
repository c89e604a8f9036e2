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
echo "unknown commands: named"

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
