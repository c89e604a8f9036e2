#!/usr/bin/env bash
# ./dev refuses bad arguments before building or running anything (exit 2, naming them):
# `./dev bench --help` was taken for a benchmark named '--help' and `./dev bench bogus`
# reached ninja ("unknown target"); `./dev fuzz ""` ran every target; `./dev format FILE
# --check` refused --check; `./dev mutate --report DIR` failed with a traceback after the
# build and the first mutant. Arguments: the hpref binary (unused), a Python 3 interpreter,
# prlimit (unused).
source "$(dirname "$0")/common.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)

expect_refusal() {  # expect_refusal "<stderr text>" command...
  local want=$1
  shift
  "$@" > "$tmp/out" 2> "$tmp/err" < /dev/null; local rc=$?
  [ $rc -eq 2 ] || fail "$* exited $rc, expected 2: $(cat "$tmp/err")"
  grep -qF -- "$want" "$tmp/err" || fail "$*: stderr lacks '$want': $(cat "$tmp/err")"
}

benches="codec routes sim_collectives dispatch mpi_overhead python_codec python_sim python_checked"
expect_refusal "dev: bench: unknown benchmark 'bogus' ($benches)" "$root/dev" bench bogus
expect_refusal "dev: bench takes a benchmark name first ($benches), then its flags; got '--iters'" \
  "$root/dev" bench --iters 3
"$root/dev" bench --help > "$tmp/out" 2> "$tmp/err" || fail "./dev bench --help exited $?: $(cat "$tmp/err")"
grep -qF "./dev bench [codec|routes|sim_collectives" "$tmp/out" || fail "./dev bench --help: $(cat "$tmp/out")"
expect_refusal "dev: fuzz: the target is empty (all, python or a target name)" "$root/dev" fuzz "" 10
expect_refusal "dev: fuzz: the all run length must be a positive whole number, got '0'" "$root/dev" fuzz all 0
expect_refusal "dev: test takes no argument but --asan, got 'bogus'" "$root/dev" test bogus
expect_refusal "dev: format: no file '$tmp/missing.cpp'" "$root/dev" format "$tmp/missing.cpp" --check
# --check after a file is taken (it was refused: "format takes --check and C++ files, got
# '--check'"); the missing file after it is refused before any package is looked for.
printf 'int x;\n' > "$tmp/ok.cpp"
expect_refusal "dev: format: no file '$tmp/missing.cpp'" "$root/dev" format "$tmp/ok.cpp" --check "$tmp/missing.cpp"
expect_refusal "--report '$tmp' is a directory; name a file" "$python" "$root/tools/mutate/run.py" --report "$tmp"
expect_refusal "--report '$tmp/no/r.txt': no directory '$tmp/no'" \
  "$python" "$root/tools/mutate/run.py" --report "$tmp/no/r.txt"
echo "dev_usage: ok"
