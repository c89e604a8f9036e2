#!/usr/bin/env bash
# Issue 13: `hpref verify LOGDIR` on hand-written checked-mode logs (the lines
# python/hpref/_checked.py writes: rank, group, ranks, seq, kind and the kind's fields).
# Agreeing logs exit 0 with one summary line; the first divergence (another kind, a missing
# operation, an all_to_all_v pair in the checked mode's words) exits 1; --routes checks the
# all_to_all_v counts against SPEC 7; malformed logs are refused naming file and line (2).
source "$(dirname "$0")/common.sh"

W=0,3,10,16  # 4 ranks of 4 rows; window 3: 0->1 1 row, 1->2 2 rows, 2->3 2 rows
# The all_to_all_v of the window routes with 8-byte rows, as rank $1 logs it.
a2a() {
  local ins outs
  case $1 in
    0) ins="0,8,0,0" outs="0,0,0,0" ;;
    1) ins="0,0,16,0" outs="8,0,0,0" ;;
    2) ins="0,0,0,16" outs="0,16,0,0" ;;
    3) ins="0,0,0,0" outs="0,0,16,0" ;;
  esac
  local sum=$(( ${ins//,/+} ))
  printf '{"rank":%s,"group":1,"ranks":[0,1,2,3],"seq":%s,"kind":"all_to_all_v","bytes":%s,"counts_in":[%s],"counts_out":[%s]}\n' \
    "$1" "$2" "$sum" "$ins" "$outs"
}
# A clean 4-rank log: group 0 (world) all_reduce and broadcast, group 1 the dispatch
# all_to_all_v, group 0 barrier.
clean() {  # clean DIR
  mkdir -p "$1"
  for r in 0 1 2 3; do
    {
      printf '{"rank":%s,"group":0,"ranks":[0,1,2,3],"seq":0,"kind":"all_reduce","op":"sum","dtype":"int64","bytes":8}\n' $r
      printf '{"rank":%s,"group":0,"ranks":[0,1,2,3],"seq":1,"kind":"broadcast","root":0,"bytes":64}\n' $r
      a2a $r 0
      printf '{"rank":%s,"group":0,"ranks":[0,1,2,3],"seq":2,"kind":"barrier"}\n' $r
    } > "$1/rank$r.jsonl"
  done
}
run() {  # run WANT_RC args...: output in $tmp/out, $tmp/err
  local want=$1
  shift
  capped 512 verify "$@" > "$tmp/out" 2> "$tmp/err"; local rc=$?
  [ $rc -eq "$want" ] || fail "verify $* exited $rc, expected $want: $(cat "$tmp/out" "$tmp/err")"
}
has() { grep -qF -- "$1" "$tmp/out" || fail "stdout lacks '$1': $(cat "$tmp/out")"; }
err() { grep -qF -- "$1" "$tmp/err" || fail "stderr lacks '$1': $(cat "$tmp/err")"; }

# ---- agreeing logs ----------------------------------------------------------------------
clean "$tmp/ok"
echo "not a log" > "$tmp/ok/notes.txt"
run 0 "$tmp/ok"
has "hpref verify: 4 rank logs, 2 groups, 4 operations agree"
[ "$(wc -l < "$tmp/out")" -eq 1 ] || fail "the summary is not one line: $(cat "$tmp/out")"
run 0 "$tmp/ok" --json
"$python" -c "import json,sys; j=json.load(open(sys.argv[1])); assert j['ok'] and j['divergence'] is None and j['records'] == 16 and j['ranks'] == [0,1,2,3], j" "$tmp/out" \
  || fail "--json: $(cat "$tmp/out")"
echo "agreeing logs: exit 0, one line"

# ---- new_group in the world order (checked mode logs it, SPEC 9.1) ------------------------
ng() {  # ng DIR: the clean logs with a new_group([0, 1] on gloo) as world seq 2 before the barrier
  clean "$1"
  for r in 0 1 2 3; do
    sed -i 's/"seq":2,"kind":"barrier"/"seq":3,"kind":"barrier"/' "$1/rank$r.jsonl"
    sed -i "3a {\"rank\":$r,\"group\":0,\"ranks\":[0,1,2,3],\"seq\":2,\"kind\":\"new_group\",\"members\":[0,1],\"backend\":\"gloo\"}" "$1/rank$r.jsonl"
  done
}
ng "$tmp/ng"
run 0 "$tmp/ng"
has "hpref verify: 4 rank logs, 2 groups, 5 operations agree"
ng "$tmp/ng_skip"  # rank 3 skipped the new_group: its barrier is world seq 2
sed -i '/"kind":"new_group"/d; s/"seq":3,"kind":"barrier"/"seq":2,"kind":"barrier"/' "$tmp/ng_skip/rank3.jsonl"
run 1 "$tmp/ng_skip"
has "collective mismatch on group 0 seq 2: rank 0 launched new_group([0, 1] on gloo) but rank 3 launched barrier"
ng "$tmp/ng_other"
sed -i 's/"members":\[0,1\]/"members":[2,3]/' "$tmp/ng_other/rank2.jsonl"
run 1 "$tmp/ng_other"
has "new_group mismatch on group 0 seq 2: rank 0 asked for [0, 1] on gloo but rank 2 asked for [2, 3] on gloo"
ng "$tmp/ng_bad"
sed -i 's/"members":\[0,1\]/"members":[0,0]/' "$tmp/ng_bad/rank1.jsonl"
run 2 "$tmp/ng_bad"
err "not a distinct world rank"
echo "new_group lines: agree, skipped, other members, malformed"

# ---- a kind divergence --------------------------------------------------------------------
clean "$tmp/kind"
sed -i 's/"kind":"barrier"/"kind":"all_gather","bytes":4/' "$tmp/kind/rank3.jsonl"
run 1 "$tmp/kind"
has "collective mismatch on group 0 seq 2: rank 0 launched barrier but rank 3 launched all_gather(4 bytes each)"
clean "$tmp/dtype"
sed -i 's/"int64","bytes":8/"float32","bytes":4/' "$tmp/dtype/rank2.jsonl"
run 1 "$tmp/dtype" --json
"$python" -c "
import json,sys; j=json.load(open(sys.argv[1])); d=j['divergence']
assert not j['ok'] and j['exit_code'] == 1 and d['type'] == 'mismatch' and d['group'] == 0 and d['seq'] == 0 and d['ranks'] == [0, 2], j
assert d['message'] == 'collective mismatch on group 0 seq 0: rank 0 launched all_reduce(sum, int64, 8 bytes) but rank 2 launched all_reduce(sum, float32, 4 bytes)', d" "$tmp/out" \
  || fail "--json dtype: $(cat "$tmp/out")"
echo "kind / dtype divergence: named, exit 1"

# ---- a missing operation (rank 2 died before the barrier) ---------------------------------
clean "$tmp/missing"
sed -i '$d' "$tmp/missing/rank2.jsonl"
run 1 "$tmp/missing"
has "missing operation on group 0 seq 2: rank 0 launched barrier but rank 2 never did (its last operation on group 0 is seq 1, broadcast(root 0, 64 bytes))"
rm "$tmp/missing/rank3.jsonl"
run 1 "$tmp/missing"
has "missing operation on group 0 seq 0: rank 0 launched all_reduce(sum, int64, 8 bytes) but rank 3 never did (it has no log (rank3.jsonl))"
# A mismatch comes before a missing operation, whatever their lines: rank 3 raised at the
# barrier mismatch, so an operation rank 0 launched with it on another group at an earlier
# line of rank 0's log (group 5) is its consequence, not the divergence.
clean "$tmp/knock_on"
sed -i 's/"kind":"barrier"/"kind":"all_gather","bytes":4/' "$tmp/knock_on/rank3.jsonl"
sed -i '1i {"rank":0,"group":5,"ranks":[0,3],"seq":0,"kind":"barrier"}' "$tmp/knock_on/rank0.jsonl"
run 1 "$tmp/knock_on"
has "collective mismatch on group 0 seq 2: rank 0 launched barrier but rank 3 launched all_gather(4 bytes each)"
echo "missing operation: named, exit 1; after any mismatch"

# ---- an all_to_all_v pair: the checked mode's words ---------------------------------------
clean "$tmp/pair"
sed -i 's/"counts_out":\[0,16,0,0\]/"counts_out":[0,24,0,0]/' "$tmp/pair/rank2.jsonl"
run 1 "$tmp/pair"
has "all_to_all_v counts disagree on group 1 seq 0: rank 1 sends 16 bytes to rank 2, which expects 24"
# The first divergence in log order: a later barrier mismatch does not hide it.
sed -i 's/"kind":"barrier"/"kind":"all_gather","bytes":4/' "$tmp/pair/rank3.jsonl"
run 1 "$tmp/pair"
has "rank 1 sends 16 bytes to rank 2, which expects 24"
[ "$(wc -l < "$tmp/out")" -eq 1 ] || fail "more than the first divergence: $(cat "$tmp/out")"
echo "all_to_all_v pair: named as the checked mode names it"

# ---- --routes ------------------------------------------------------------------------------
R=(--routes window --boundaries $W --local-length 4 --window 3 --row-bytes 8)
run 0 "$tmp/ok" "${R[@]}"
has "4 operations agree; 4 all_to_all_v records match the window routes"
run 1 "$tmp/ok" --routes window --boundaries $W --local-length 4 --window 4 --row-bytes 8
has "all_to_all_v on group 1 seq 0: rank 1 sends 16 bytes to rank 2, but the window routes send 3 rows x 8 = 24 bytes"
run 1 "$tmp/ok" --routes prefix --boundaries $W --local-length 4 --ratio 1 --row-bytes 8 --json
"$python" -c "
import json,sys; j=json.load(open(sys.argv[1])); d=j['routes']['difference']
assert not j['ok'] and j['divergence'] is None and j['routes']['checked'] == 4, j
assert d['ranks'] == [0, 2] and d['message'] == 'all_to_all_v on group 1 seq 0: rank 0 sends 0 bytes to rank 2, but the prefix routes send 1 rows x 8 = 8 bytes', d" "$tmp/out" \
  || fail "--routes prefix --json: $(cat "$tmp/out")"
# Both ranks of a pair change their counts together: the ranks agree, the routes do not.
clean "$tmp/route"
sed -i 's/"bytes":16,"counts_in":\[0,0,16,0\]/"bytes":24,"counts_in":[0,0,24,0]/' "$tmp/route/rank1.jsonl"
sed -i 's/"counts_out":\[0,16,0,0\]/"counts_out":[0,24,0,0]/' "$tmp/route/rank2.jsonl"
run 0 "$tmp/route"
run 1 "$tmp/route" "${R[@]}"
has "rank 1 sends 24 bytes to rank 2, but the window routes send 2 rows x 8 = 16 bytes"
# A filter that selects no all_to_all_v is refused naming it, never a pass of nothing.
run 2 "$tmp/route" "${R[@]}" --group 0
err "--routes window: --group 0 selects no all_to_all_v record (the logs' all_to_all_v records are on groups [1], seqs [0])"
run 2 "$tmp/route" "${R[@]}" --group 1 --seq 9 --json
"$python" -c "import json,sys; j=json.load(open(sys.argv[1])); assert j['ok'] is False and j['exit_code'] == 2 and '--group 1 --seq 9 selects no' in j['error']['message'], j" "$tmp/out" \
  || fail "--routes selecting nothing, --json: $(cat "$tmp/out")"
clean "$tmp/noa2a"
sed -i '/all_to_all_v/d' "$tmp/noa2a"/rank*.jsonl
run 2 "$tmp/noa2a" "${R[@]}"
err "--routes window: the logs hold no all_to_all_v record to check"
run 2 "$tmp/route" "${R[@]}" --seq 1
err "--seq 1 selects no all_to_all_v record"
run 1 "$tmp/route" "${R[@]}" --group 0 --group 1 --seq 0
run 2 "$tmp/ok" --routes window --boundaries $W --local-length 4 --window 3
err "[invalid_argument]"; err "--row-bytes"
run 2 "$tmp/ok" --routes window --boundaries $W --local-length 4 --window 3 --row-bytes -8
err "--routes window needs --row-bytes (> 0, got -8)"
run 2 "$tmp/ok" --routes prefix --boundaries $W --local-length -4 --ratio 0 --row-bytes 8
err "--routes prefix needs --local-length (> 0, got -4) --ratio (1 or 2, got 0)"
run 2 "$tmp/ok" --routes prefix --boundaries $W --local-length 4 --row-bytes 8
err "--routes prefix needs --ratio (1 or 2)"
run 2 "$tmp/ok" --routes window --boundaries $W --local-length 4 --window 3 --row-bytes 8 --ratio 0
err "--routes window needs (no --ratio: that is --routes prefix)"
run 2 "$tmp/ok" --boundaries ""
err "--boundaries: the boundary list is empty"
run 2 "$tmp/ok" --routes window --boundaries 0,3,10,20 --local-length 4 --window 3 --row-bytes 8
err "[route_boundaries]"; err "group 1 (4 members"
run 2 "$tmp/ok" --window 3
err "go with --routes"
# 0 is a value like any other: given without --routes it is refused, not taken for "not given".
for opt in --local-length --window --ratio --row-bytes; do
  run 2 "$tmp/ok" $opt 0
  err "go with --routes"
done
run 2 "$tmp/ok" --routes ring
echo "--routes: matches, first differing pair named, usage refused"

# ---- runs: a job that destroys its default group and makes it again -------------------------
# torch restarts group ids and seqs at 0; hpref.torch's checked groups log "run": k for the
# k-th default group of the process (no field for the first).
runs() {  # runs DIR: the clean logs, then the same operations again as run 1
  clean "$1"
  for r in 0 1 2 3; do
    sed 's/^{"rank":\([0-9]\),/{"rank":\1,"run":1,/' "$1/rank$r.jsonl" > "$1/again"
    cat "$1/again" >> "$1/rank$r.jsonl"
    rm "$1/again"
  done
}
runs "$tmp/runs"
run 0 "$tmp/runs"
has "hpref verify: 4 rank logs, 2 runs, 4 groups, 8 operations agree"
run 0 "$tmp/runs" --json
"$python" -c "import json,sys; j=json.load(open(sys.argv[1])); assert j['ok'] and j['runs'] == 2 and j['groups'] == 4 and j['operations'] == 8, j" "$tmp/out" \
  || fail "--json runs: $(cat "$tmp/out")"
run 0 "$tmp/ok" --json
"$python" -c "import json,sys; j=json.load(open(sys.argv[1])); assert j['runs'] == 1, j" "$tmp/out" || fail "--json one run: $(cat "$tmp/out")"
runs "$tmp/runs_kind"  # rank 3's barrier of run 1 is an all_gather
sed -i '/"run":1/s/"kind":"barrier"/"kind":"all_gather","bytes":4/' "$tmp/runs_kind/rank3.jsonl"
run 1 "$tmp/runs_kind" --json
"$python" -c "
import json,sys; j=json.load(open(sys.argv[1])); d=j['divergence']
assert d['type'] == 'mismatch' and d['run'] == 1 and d['group'] == 0 and d['seq'] == 2 and d['ranks'] == [0, 3], j
assert d['message'] == 'run 1: collective mismatch on group 0 seq 2: rank 0 launched barrier but rank 3 launched all_gather(4 bytes each)', d" "$tmp/out" \
  || fail "--json run 1 mismatch: $(cat "$tmp/out")"
runs "$tmp/runs_missing"  # rank 2 died before run 1's barrier
sed -i '$d' "$tmp/runs_missing/rank2.jsonl"
run 1 "$tmp/runs_missing"
has "run 1: missing operation on group 0 seq 2: rank 0 launched barrier but rank 2 never did (its last operation on group 0 is seq 1, broadcast(root 0, 64 bytes))"
runs "$tmp/runs_route"  # run 1's pair 1 -> 2 moves 3 rows, not the window routes' 2
sed -i '/"run":1/s/"bytes":16,"counts_in":\[0,0,16,0\]/"bytes":24,"counts_in":[0,0,24,0]/' "$tmp/runs_route/rank1.jsonl"
sed -i '/"run":1/s/"counts_out":\[0,16,0,0\]/"counts_out":[0,24,0,0]/' "$tmp/runs_route/rank2.jsonl"
run 1 "$tmp/runs_route" "${R[@]}"
has "run 1: all_to_all_v on group 1 seq 0: rank 1 sends 24 bytes to rank 2, but the window routes send 2 rows x 8 = 16 bytes"
run 0 "$tmp/runs_route" "${R[@]}" --run 0
has "4 all_to_all_v records match the window routes"
run 2 "$tmp/runs_route" "${R[@]}" --run 2
err "--routes window: --run 2 selects no all_to_all_v record (the logs' all_to_all_v records are in runs [0, 1], on groups [1], seqs [0])"
run 2 "$tmp/ok" --run 1
err "go with --routes"
runs "$tmp/runs_back"  # a run-0 line after run 1: another job's log appended
echo '{"rank":0,"group":7,"ranks":[0],"seq":0,"kind":"barrier"}' >> "$tmp/runs_back/rank0.jsonl"
run 2 "$tmp/runs_back"
err "line 9 of rank0.jsonl: run 0 after run 1 (line 5): two jobs' logs in one directory?"
runs "$tmp/runs_again"  # run 1's seq repeated
sed -n 5p "$tmp/runs_again/rank0.jsonl" >> "$tmp/runs_again/rank0.jsonl"
run 2 "$tmp/runs_again"
err "line 9 of rank0.jsonl: run 1: group 0 seq 0 again (line 5)"
echo "runs: agree per run, divergences and route differences named with their run"

# ---- malformed logs: refused naming file and line, never a crash --------------------------
bad() {  # bad NAME "stderr text" LINE: rank1.jsonl gets LINE as its second line
  clean "$tmp/$1"
  sed -i "2i $3" "$tmp/$1/rank1.jsonl"
  run 2 "$tmp/$1"
  err "$2"
}
bad json "line 2 of rank1.jsonl is not JSON" '{"rank":1,'
bad array "line 2 of rank1.jsonl: not a JSON object" '[1,2]'
bad rank "line 2 of rank1.jsonl: \"rank\" is 0 in the log of rank 1" '{"rank":0,"group":5,"ranks":[0,1],"seq":0,"kind":"barrier"}'
bad kindname "line 2 of rank1.jsonl: \"kind\" 'scatter' is not" '{"rank":1,"group":5,"ranks":[0,1],"seq":0,"kind":"scatter"}'
bad counts "line 2 of rank1.jsonl: \"counts_in\" must be an array of 2" '{"rank":1,"group":5,"ranks":[0,1],"seq":0,"kind":"all_to_all_v","bytes":0,"counts_in":[0],"counts_out":[0,0]}'
bad negative "\"counts_out\" holds -4, not a byte count" '{"rank":1,"group":5,"ranks":[0,1],"seq":0,"kind":"all_to_all_v","bytes":0,"counts_in":[0,0],"counts_out":[0,-4]}'
# A long value is quoted shortened (the whole of it was: 5 KB of error for a 5 KB rank entry).
bad longrank "\"ranks\" holds \"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx... (302 characters), not a distinct world rank" '{"rank":1,"group":5,"ranks":[0,"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"],"seq":0,"kind":"barrier"}'
bad sum "\"bytes\" is not the sum of \"counts_in\"" '{"rank":1,"group":5,"ranks":[0,1],"seq":0,"kind":"all_to_all_v","bytes":1,"counts_in":[0,0],"counts_out":[0,0]}'
bad seqgap "line 2 of rank1.jsonl: group 0 seq 5 follows seq 0 (an edited or truncated log?)" '{"rank":1,"group":0,"ranks":[0,1,2,3],"seq":5,"kind":"barrier"}'
# The group's first record not seq 0 ("follows seq -1" until 2026-12-03).
bad seqfirst "line 2 of rank1.jsonl: group 5 seq 1 is the group's first record, not seq 0 (an edited or truncated log?)" '{"rank":1,"group":5,"ranks":[0,1],"seq":1,"kind":"barrier"}'
bad huge "\"seq\" must be an integer in [0, 9223372036854775807], got 99999999999999999999" '{"rank":1,"group":5,"ranks":[1],"seq":99999999999999999999,"kind":"barrier"}'
bad negrun "\"run\" must be an integer in [0, 2147483647], got -1" '{"rank":1,"run":-1,"group":5,"ranks":[1],"seq":0,"kind":"barrier"}'
bad members "group 0 has members [0, 1, 2]" '{"rank":1,"group":0,"ranks":[0,1,2],"seq":0,"kind":"barrier"}'
# Two jobs appended to one log: seq 0 again.
clean "$tmp/twice"
cp "$tmp/twice/rank0.jsonl" "$tmp/run1" && cat "$tmp/run1" >> "$tmp/twice/rank0.jsonl"
run 2 "$tmp/twice"; err "line 5 of rank0.jsonl: group 0 seq 0 again (line 1)"
# A line past --max-line-bytes, records past --max-records, a NUL byte, no logs at all.
clean "$tmp/long"
head -c 5000 /dev/zero | tr '\0' ' ' >> "$tmp/long/rank3.jsonl"
run 2 "$tmp/long" --max-line-bytes 4096; err "line 5 of rank3.jsonl is longer than --max-line-bytes 4096"
run 2 "$tmp/ok" --max-records 15; err "past --max-records 15"
run 2 "$tmp/ok" --max-log-bytes 100; err "more than --max-log-bytes 100"
clean "$tmp/nul"
printf '{"rank":0,"group":0,"ranks":[0],"seq":0,\0"kind":"barrier"}\n' > "$tmp/nul/rank0.jsonl"
run 2 "$tmp/nul"; err "line 1 of rank0.jsonl is not JSON"
# A malformed last line without its newline (the file closed once: no double free), and
# --max-records passed there.
mkdir -p "$tmp/lastline"
printf 'x' > "$tmp/lastline/rank0.jsonl"
run 2 "$tmp/lastline"; err "line 1 of rank0.jsonl is not JSON"
run 2 "$tmp/lastline" --json
"$python" -c "import json,sys; j=json.load(open(sys.argv[1])); assert j['ok'] is False and j['exit_code'] == 2 and j['error']['kind'] == 'json_syntax' and 'line 1 of rank0.jsonl' in j['error']['message'], j" "$tmp/out" \
  || fail "--json malformed last line: $(cat "$tmp/out")"
printf '{"rank":0,"group":0,"ranks":[0],"seq":0,"kind":"barrier"}\n{"rank":0,"group":0,"ranks":[0],"seq":1,"kind":"barrier"}' > "$tmp/lastline/rank0.jsonl"
run 2 "$tmp/lastline" --max-records 1; err "line 2 of rank0.jsonl is record 2 of the logs, past --max-records 1"
mkdir -p "$tmp/dirlog/rank0.jsonl"
run 2 "$tmp/dirlog"; err "cannot read rank0.jsonl"
mkdir -p "$tmp/empty"
run 2 "$tmp/empty"; err "holds no rank<R>.jsonl"
run 2 "$tmp/ok/rank0.jsonl"; err "is not a directory"
run 2 "$tmp/empty" --json
"$python" -c "import json,sys; j=json.load(open(sys.argv[1])); assert j['ok'] is False and j['exit_code'] == 2 and j['error']['kind'] == 'io', j" "$tmp/out" \
  || fail "--json usage error: $(cat "$tmp/out")"
# Deep nesting is a syntax error, not a stack overflow.
clean "$tmp/deep"
"$python" -c "print('[' * 200000 + ']' * 200000)" >> "$tmp/deep/rank2.jsonl"
run 2 "$tmp/deep"; err "line 5 of rank2.jsonl is not JSON"
echo "malformed logs: refused naming file and line"

# ---- --help ---------------------------------------------------------------------------------
"$hpref" verify --help > "$tmp/help" || fail "verify --help"
for want in "--routes" "--boundaries" "--local-length" "--window" "--ratio" "--row-bytes" "--run" "--group" "--seq" \
            "--json" "--max-line-bytes UINT=1048576" "--max-records" "Exit codes: 0" "element size"; do
  grep -qF -- "$want" "$tmp/help" || fail "verify --help lacks '$want': $(cat "$tmp/help")"
done
"$hpref" --help | grep -q "verify" || fail "hpref --help does not list verify"
echo "--help: every option explained"
echo PASS
