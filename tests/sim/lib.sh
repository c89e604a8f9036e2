# Shared by the tests/sim CLI scripts (sourced): fail(), a scratch dir $tmp removed on
# exit, and jv for checking one-object JSON output.
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# jv TEXT EXPR: TEXT must be exactly one JSON object (one line); prints EXPR over it (j).
jv() {
  python3 -c '
import json, sys
lines = [l for l in sys.argv[1].split("\n") if l.strip()]
if len(lines) != 1: sys.exit("expected exactly one JSON line, got %d" % len(lines))
j = json.loads(lines[0])
if not isinstance(j, dict): sys.exit("not a JSON object")
r = eval(sys.argv[2])
print(r if isinstance(r, str) else json.dumps(r))' "$1" "$2"
}
state() { awk '{print $3}' "/proc/$1/stat" 2>/dev/null; }
freeze() {
  kill -STOP "$1" 2>/dev/null || return 1
  for _ in $(seq 1000); do [ "$(state "$1")" = T ] && return 0; sleep 0.01; done
  return 1
}
# stop_waiting_rank PID WHAT: with the monitor PID frozen (so the schedule cannot move
# on), SIGSTOP one of its rank children that waits for the baton (state S), thaw the
# monitor, then wait for PID to end; fails naming WHAT if no rank could be stopped or PID
# outlives the turn timeout (bounded waits as a safety net, no fixed sleep decides).
stop_waiting_rank() {
  local pid=$1 what=$2 stopped="" child
  for _ in $(seq 2000); do
    kill -0 "$pid" 2>/dev/null || break
    freeze "$pid" || break
    for child in $(pgrep -P "$pid"); do
      if [ "$(state "$child")" = S ]; then kill -STOP "$child"; stopped=$child; break; fi
    done
    kill -CONT "$pid"
    [ -n "$stopped" ] && break
    sleep 0.01
  done
  [ -n "$stopped" ] || { kill -KILL "$pid" 2>/dev/null; fail "found no waiting rank to stop"; }
  for _ in $(seq 1200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$pid" 2>/dev/null && { kill -KILL "$pid"; fail "a stopped rank stalled $what past --turn-timeout-ms"; }
  return 0
}
