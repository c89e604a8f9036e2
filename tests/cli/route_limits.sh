#!/usr/bin/env bash
# SPEC 7 / issue 10 section 5 "route planning aborts": a size whose tables cannot fit is
# refused with route_too_large (exit 2) before allocating, under a 256 MiB address-space
# cap; one bad `route --batch` line does not end the stream; plan-all (O(P^2)) is refused
# past its cap, never truncated.
source "$(dirname "$0")/common.sh"

big=4611686018427387904  # 2^62
capped 256 route sliding-window --local-length 1 --size $big --rank 0 --window 1 \
  --boundaries 0,$big > "$tmp/out" 2> "$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -q '\[route_too_large\]' "$tmp/err" || fail "sliding-window 2^62 exited $rc: $(cat "$tmp/err")"
capped 256 route document-prefix --local-length 2 --size 100000000 --rank 5 --ratio 2 \
  --boundaries 0,200000000 > "$tmp/out" 2> "$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -q '\[route_too_large\]' "$tmp/err" || fail "document-prefix 1e8 exited $rc: $(cat "$tmp/err")"
echo "single routes: route_too_large"

# The largest accepted single-rank size still plans under the cap.
n=1048576
capped 256 route sliding-window --local-length 1 --size $n --rank 3 --window 1 \
  --boundaries 0,$n --json > "$tmp/out" 2> "$tmp/err"; rc=$?
[ $rc -eq 0 ] || fail "size 2^20 exited $rc: $(cat "$tmp/err")"
echo "size 2^20: planned"

# plan-all: P^2 tables, refused past 2048 ranks; the largest accepted one is complete.
capped 256 route plan-all sliding-window --local-length 1 --size 2049 --window 1 \
  --boundaries 0,2049 --json > "$tmp/out" 2> "$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -q '\[route_too_large\]' "$tmp/err" || fail "plan-all 2049 exited $rc: $(cat "$tmp/err")"
[ ! -s "$tmp/out" ] || fail "plan-all 2049 wrote output before refusing"
capped 512 route plan-all sliding-window --local-length 1 --size 2048 --window 2 \
  --boundaries 0,2048 --json > "$tmp/out" 2> "$tmp/err"; rc=$?
[ $rc -eq 0 ] || fail "plan-all 2048 exited $rc: $(cat "$tmp/err")"
"$python" -c "import json,sys; r=json.load(open(sys.argv[1])); assert len(r) == 2048 and all(len(x['input_splits']) == 2048 for x in r)" "$tmp/out" \
  || fail "plan-all 2048 is not 2048 complete routes"
echo "plan-all: refused past 2048 ranks, complete at 2048"

# plan-all's table sums the rows each rank sends, and ranks send overlapping rows: a total
# beyond int64 is refused (route_overflow, exit 2), never printed wrapped.
"$hpref" route plan-all sliding-window --boundaries 0,9223372036854775804 \
  --local-length 2305843009213693951 --size 4 --window 9223372036854775804 > "$tmp/out" 2> "$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -qF '[route_overflow]: send-matrix total = 6917529027641081853 + 4611686018427387902 is beyond int64' "$tmp/err" \
  || fail "plan-all total beyond int64 exited $rc: $(cat "$tmp/out" "$tmp/err")"
[ ! -s "$tmp/out" ] || fail "plan-all total beyond int64 printed a table: $(cat "$tmp/out")"
echo "plan-all: a total beyond int64 is route_overflow"

# route --batch: huge sizes are answers, the stream goes on.
{
  printf '{"op":"sliding_window_route","boundaries":[0,%s],"local_length":1,"size":%s,"rank":0,"window":1,"id":1}\n' $big $big
  printf '{"op":"document_prefix_route","boundaries":[0,%s],"local_length":1,"size":%s,"rank":0,"ratio":1,"id":2}\n' $big $big
  printf '{"op":"sliding_window_route","boundaries":[0,4],"local_length":2,"size":2,"rank":1,"window":1,"id":3}\n'
} > "$tmp/batch.jsonl"
capped 256 route --batch < "$tmp/batch.jsonl" > "$tmp/answers" 2> "$tmp/err"; rc=$?
[ $rc -eq 2 ] || fail "route --batch exited $rc, expected 2: $(cat "$tmp/err")"
[ "$(wc -l < "$tmp/answers")" -eq 3 ] || fail "expected 3 answers: $(cat "$tmp/answers")"
[ "$(grep -c '"kind": "route_too_large"' "$tmp/answers")" -eq 2 ] || fail "answers: $(cat "$tmp/answers")"
sed -n 3p "$tmp/answers" | grep -q '"ok": true' || fail "line 3: $(sed -n 3p "$tmp/answers")"
echo "route --batch: route_too_large answers, the stream goes on"
echo PASS
