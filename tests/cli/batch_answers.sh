#!/usr/bin/env bash
# Issue 10 sections 5 and 6: a batch answers every line, always. Out of memory on one line
# (under a prlimit --as cap) is an ok:false answer and the next line is answered; a NUL
# byte is refused, not a silent truncation; invalid UTF-8 gets a valid UTF-8 answer; ids
# are echoed exactly or refused; a 5 MB line of objects parses within the ctest TIMEOUT;
# exit 2 and a count on stderr when a line was refused, 0 with --keep-going.
source "$(dirname "$0")/common.sh"

# 1. Out of memory: a 96 MB line (its hex and its parse need more than the cap leaves)
#    between two good lines.
{
  printf '{"op":"decode_segment","frame_hex":"","id":"before"}\n'
  printf '{"op":"decode_segment","id":"big","frame_hex":"'
  "$python" -c "import sys; sys.stdout.write('00' * 48000000)"
  printf '"}\n'
  printf '{"op":"decode_segment","frame_hex":"","id":"after"}\n'
} > "$tmp/oom.jsonl"
# At 160 MiB reading the line fails, at 300 MiB parsing it: both are answered.
for cap in 160 300; do
  capped $cap frame --batch < "$tmp/oom.jsonl" > "$tmp/answers" 2> "$tmp/err"; rc=$?
  [ $rc -eq 2 ] || fail "the out-of-memory batch exited $rc at $cap MiB, expected 2: $(head -c 300 "$tmp/err")"
  [ "$(wc -l < "$tmp/answers")" -eq 3 ] || fail "expected 3 answers, got: $(head -c 600 "$tmp/answers")"
  sed -n 1p "$tmp/answers" | grep -q '"ok": true.*"id": "before"' || fail "line 1: $(sed -n 1p "$tmp/answers")"
  sed -n 2p "$tmp/answers" | grep -q '"ok": false, "kind": "internal", "error": "out of memory' \
    || fail "line 2 is not an out-of-memory answer: $(sed -n 2p "$tmp/answers" | head -c 300)"
  sed -n 3p "$tmp/answers" | grep -q '"ok": true.*"id": "after"' || fail "line 3: $(sed -n 3p "$tmp/answers")"
done
echo "out of memory: answered, the stream goes on"

# 2. NUL bytes, invalid UTF-8 and ids.
{
  printf '{"op":"decode_segment","frame_hex":"","id":1}\0{"garbage"\n'
  printf '{"op":"x\377\376","id":2}\n'
  printf '{"op":"decode_segment","frame_hex":"","id":123456789012345678901234567890}\n'
  printf '{"op":"decode_segment","frame_hex":"","id":1.50}\n'
  printf '{"op":"decode_segment","frame_hex":"","id":[18446744073709551615,-9223372036854775808,0.1,"\\u00e9"]}\n'
  printf '{"op":"decode_segment","frame_hex":"","id":-0}\n'
  printf '{"op":"decode_segment","frame_hex":"","id":1e400}\n'
} > "$tmp/odd.jsonl"
"$hpref" frame --batch --keep-going < "$tmp/odd.jsonl" > "$tmp/answers" 2> "$tmp/err"; rc=$?
[ $rc -eq 0 ] || fail "--keep-going exited $rc"
"$python" - "$tmp/answers" <<'PY' || fail "odd lines: $(head -c 1500 "$tmp/answers")"
import json, sys
raw = open(sys.argv[1], "rb").read()
text = raw.decode("utf-8")  # every answer is valid UTF-8
lines = text.split("\n")[:-1]
assert len(lines) == 7, lines
a = [json.loads(l) for l in lines]
assert a[0]["kind"] == "json_syntax" and "NUL" in a[0]["error"], a[0]
assert a[1]["kind"] == "json_syntax" and a[1]["ok"] is False, a[1]
assert a[2]["kind"] == "invalid_request" and "echoed exactly" in a[2]["error"], a[2]
assert a[3]["kind"] == "invalid_request" and "echoed exactly" in a[3]["error"], a[3]
assert a[4]["ok"] is True, a[4]
assert '"id": [18446744073709551615, -9223372036854775808, 0.1, "\u00e9"]' in lines[4], lines[4]
for i in (5, 6):  # -0 (read as 0) and 1e400 (beyond a double): valid JSON, not echoable
    assert a[i]["kind"] == "invalid_request" and "echoed exactly" in a[i]["error"], a[i]
    assert "id" not in a[i], a[i]
PY
grep -q '6 of 7 batch lines were refused' "$tmp/err" || fail "stderr: $(cat "$tmp/err")"
echo "NUL, UTF-8, ids: refused or echoed exactly"

# 3. Exit status without --keep-going; none refused -> 0.
printf '{"op":"nope"}\n' | "$hpref" frame --batch > /dev/null 2> "$tmp/err"; rc=$?
[ $rc -eq 2 ] || fail "a refused line exited $rc, expected 2"
grep -q '1 of 1 batch lines were refused' "$tmp/err" || fail "stderr: $(cat "$tmp/err")"
printf '{"op":"decode_segment","frame_hex":""}\n' | "$hpref" frame --batch > /dev/null; rc=$?
[ $rc -eq 0 ] || fail "a good batch exited $rc"
printf '{"op":"nope"}\n' | "$hpref" route --batch > /dev/null 2> "$tmp/err"; rc=$?
[ $rc -eq 2 ] || fail "route --batch with a refused line exited $rc, expected 2"
printf '{"op":"nope"}\n' | "$hpref" route --batch --keep-going > /dev/null 2>&1; rc=$?
[ $rc -eq 0 ] || fail "route --batch --keep-going exited $rc"
echo "exit status: 2 on refusals, 0 with --keep-going"

# 4. Linear JSON: a 5 MB line of 100,000 objects, under a 512 MiB cap and the ctest TIMEOUT
#    (the quadratic parser took minutes for this).
"$python" -c "
import json
items = [[{'key': [i, 0]}, {'dict': [['a', 1]]}] for i in range(100000)]
print(json.dumps({'op': 'encode_segment', 'items': items, 'id': 'big'}))" > "$tmp/objects.jsonl"
[ "$(stat -c %s "$tmp/objects.jsonl")" -gt 4000000 ] || fail "the objects line is too small"
capped 512 frame --batch < "$tmp/objects.jsonl" > "$tmp/answers" 2> "$tmp/err"; rc=$?
[ $rc -eq 0 ] || fail "the objects line exited $rc: $(head -c 300 "$tmp/err") $(head -c 300 "$tmp/answers")"
grep -q '^{"ok": true, "frame_hex": "' "$tmp/answers" || fail "the objects line was not encoded"
echo "a 5 MB line of objects: answered"

# 5. A write error is an error: /dev/full.
if [ -w /dev/full ]; then
  printf '{"op":"decode_segment","frame_hex":""}\n' | "$hpref" frame --batch > /dev/full 2> "$tmp/err"; rc=$?
  [ $rc -eq 2 ] && grep -q '\[io\]' "$tmp/err" || fail "batch to /dev/full exited $rc: $(cat "$tmp/err")"
  printf '[]' | "$hpref" frame encode --hex > /dev/full 2> "$tmp/err"; rc=$?
  [ $rc -eq 2 ] && grep -q '\[io\]' "$tmp/err" || fail "encode to /dev/full exited $rc: $(cat "$tmp/err")"
  echo "/dev/full: exit 2, kind io"
fi
echo PASS
