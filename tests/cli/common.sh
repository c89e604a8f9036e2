# Shared by the tests/cli scripts: $hpref, $python, $prlimit, a scratch dir and fail().
set -u
hpref=$1
python=$2
prlimit=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
# Runs hpref with at most $1 MiB of address space; the rest are its arguments.
capped() {
  local mib=$1
  shift
  "$prlimit" --as=$((mib * 1024 * 1024)) "$hpref" "$@"
}
