#!/usr/bin/env bash
# SPEC 2.3 / issue 10 section 5 "output expansion": a segment of a few KB whose memo
# references and overlapping binary ranges expand to gigabytes of JSON is refused with
# output_limit (exit 2) before the text is built, under a 256 MiB address-space cap; what
# fits is streamed (a 1 GB answer in a few MB of memory).
source "$(dirname "$0")/common.sh"

"$python" - "$tmp" <<'PY'
import pickle, struct, sys
d = sys.argv[1]
# legacy segment: 2000 items sharing one list of 1000 references to one 1000-char string
s = "x" * 1000
shared = [s] * 1000
open(d + "/legacy.bin", "wb").write(pickle.dumps([((i, 0), shared) for i in range(2000)], protocol=2))
# legacy segment expanding to about 100 MB: streamed, not refused
open(d + "/medium.bin", "wb").write(pickle.dumps([((i, 0), shared) for i in range(100)], protocol=2))
# framed segment: 2000 items of 1000 references to one bytes leaf over the same 1000 bytes
child = ("__hp_bytes__", 0, 1000)
kids = tuple([child] * 1000)
meta = pickle.dumps([((i, 0), ("__hp_tuple__", kids)) for i in range(2000)], protocol=2)
binary = b"\xab" * 1000
seg = b"HPB1" + struct.pack(">QQ", len(meta), len(binary)) + meta + binary
open(d + "/framed.bin", "wb").write(seg)
open(d + "/framed.hex", "w").write(seg.hex())
PY
for f in legacy framed; do
  size=$(stat -c %s "$tmp/$f.bin")
  [ "$size" -lt 100000 ] || fail "$f.bin is $size bytes, expected a small segment"
  capped 256 frame decode "$tmp/$f.bin" > "$tmp/out" 2> "$tmp/err"; rc=$?
  [ $rc -eq 2 ] || fail "frame decode $f exited $rc, expected 2: $(head -c 300 "$tmp/err")"
  grep -q '\[output_limit\]' "$tmp/err" || fail "frame decode $f: no output_limit: $(head -c 300 "$tmp/err")"
  [ ! -s "$tmp/out" ] || fail "frame decode $f wrote $(stat -c %s "$tmp/out") bytes before refusing"
done
echo "decode: refused at the default 1 GiB cap"

# An explicit cap, and inspect (whose schema tree repeats the shared children).
capped 256 frame decode "$tmp/medium.bin" --max-output-bytes 1000000 > /dev/null 2> "$tmp/err"
rc=$?; [ $rc -eq 2 ] && grep -q output_limit "$tmp/err" || fail "decode --max-output-bytes: exit $rc"
capped 256 frame inspect "$tmp/framed.bin" --max-output-bytes 100000 > "$tmp/out" 2> "$tmp/err"
rc=$?; [ $rc -eq 2 ] && grep -q output_limit "$tmp/err" || fail "inspect --max-output-bytes: exit $rc"
[ ! -s "$tmp/out" ] || fail "inspect wrote output before refusing"
echo "inspect and --max-output-bytes: refused"

# What fits is streamed: about 100 MB of JSON under the 256 MiB cap, exactly counted.
capped 256 frame decode "$tmp/medium.bin" > "$tmp/medium.json" 2> "$tmp/err"
rc=$?; [ $rc -eq 0 ] || fail "decode of the 100 MB answer exited $rc: $(head -c 300 "$tmp/err")"
bytes=$(stat -c %s "$tmp/medium.json")
[ "$bytes" -gt 100000000 ] || fail "the streamed answer has $bytes bytes, expected > 1e8"
"$python" -c "import json,sys; j=json.load(open(sys.argv[1])); assert len(j['items']) == 100 and len(j['items'][7][1]['list']) == 1000" "$tmp/medium.json" \
  || fail "the streamed answer is not the items"
# The cap counts the whole output exactly, {"items": ...}\n included, as its help says.
capped 256 frame decode "$tmp/medium.bin" --max-output-bytes "$((bytes - 1))" > /dev/null 2>&1
[ $? -eq 2 ] || fail "a cap one byte under the output's $bytes bytes was not refused"
capped 256 frame decode "$tmp/medium.bin" --max-output-bytes "$bytes" > /dev/null 2>&1
[ $? -eq 0 ] || fail "a cap equal to the output's $bytes bytes was refused"
printf '[]' | "$hpref" frame encode --hex > "$tmp/empty.hex"
for cap in 0 13; do
  "$hpref" frame decode --hex "$tmp/empty.hex" --max-output-bytes $cap > "$tmp/out" 2> "$tmp/err"
  [ $? -eq 2 ] && grep -q "more than $cap bytes" "$tmp/err" || fail "cap $cap: $(cat "$tmp/err")"
done
"$hpref" frame decode --hex "$tmp/empty.hex" --max-output-bytes 14 > "$tmp/out" || fail "cap 14"
[ "$(cat "$tmp/out")" = '{"items": []}' ] || fail "cap 14: $(cat "$tmp/out")"
echo "decode: $bytes bytes streamed under a 256 MiB cap"

# The batch answers: refused with the kind, the next line answered, exit 2.
{
  printf '{"op":"decode_segment","frame_hex":"%s","id":1}\n' "$(cat "$tmp/framed.hex")"
  printf '{"op":"decode_segment","frame_hex":"%s","id":2,"max_output_bytes":10}\n' "$(cat "$tmp/framed.hex")"
  printf '{"op":"decode_segment","frame_hex":"","id":3}\n'
} > "$tmp/batch.jsonl"
capped 256 frame --batch < "$tmp/batch.jsonl" > "$tmp/answers" 2> "$tmp/err"; rc=$?
[ $rc -eq 2 ] || fail "frame --batch exited $rc, expected 2 (two lines refused)"
[ "$(wc -l < "$tmp/answers")" -eq 3 ] || fail "expected 3 answers: $(head -c 500 "$tmp/answers")"
[ "$(grep -c '"kind": "output_limit"' "$tmp/answers")" -eq 2 ] || fail "no output_limit answers: $(head -c 500 "$tmp/answers")"
grep -q '"ok": true, "items": \[\], "id": 3' "$tmp/answers" || fail "line 3 not answered"
grep -q '2 of 3 batch lines were refused' "$tmp/err" || fail "stderr does not count the refusals: $(cat "$tmp/err")"
echo "batch: output_limit answers, the stream goes on"
echo PASS
