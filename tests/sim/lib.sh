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
