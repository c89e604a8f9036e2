#!/usr/bin/env bash
# Issue 12 (acceptance 1): `hpref demo --dump DIR` writes, per step and rank, what hpref's
# C++ transports produced (received items, batch, dispatch results, the plan) as HPB1
# segments, then DIR/manifest.json; the default output is unchanged; the same seed writes
# the same bytes; a bad DIR is refused by name (exit 2) before any rank starts; a run that
# fails part way leaves no manifest. With a fourth argument "mpi": the same dump from
# `mpirun -np 8 hpref demo --backend mpi` is byte for byte the simulator's.
source "$(dirname "$0")/common.sh"
mode=${4:-sim}
args=(demo --seed 3 --steps 2)

if [ "$mode" = mpi ]; then
  command -v mpirun > /dev/null || fail "no mpirun on PATH (this test is registered only where CMake found MPI)"
  "$hpref" "${args[@]}" --dump "$tmp/sim" > "$tmp/out" 2>&1 || fail "simulated dump: $(cat "$tmp/out")"
  timeout 600 mpirun --allow-run-as-root --oversubscribe --bind-to none -np 8 \
    "$hpref" "${args[@]}" --backend mpi --timeout-ms 120000 --dump "$tmp/mpi" > "$tmp/out" 2>&1 < /dev/null ||
    fail "MPI dump: $(cat "$tmp/out")"
  grep -qF "dump: $tmp/mpi/manifest.json" "$tmp/out" || fail "MPI: no dump line: $(cat "$tmp/out")"
  diff -r -x manifest.json "$tmp/sim" "$tmp/mpi" || fail "the MPI dump differs from the simulator's"
  [ "$(find "$tmp/mpi" -name '*.hpb1' | wc -l)" -eq 42 ] || fail "MPI: not 42 segments: $(find "$tmp/mpi")"
  grep -q '"backend": "mpi"' "$tmp/mpi/manifest.json" || fail "MPI manifest: $(cat "$tmp/mpi/manifest.json")"
  echo "PASS: the MPI dump equals the simulator's byte for byte"
  exit 0
fi

# --help names the option.
"$hpref" demo --help > "$tmp/help" || fail "demo --help"
grep -qF -- "--dump DIR" "$tmp/help" || fail "demo --help lacks --dump DIR: $(cat "$tmp/help")"

# A complete dump: the table ends with the manifest's path, nothing else in the output changes.
"$hpref" "${args[@]}" > "$tmp/plain" 2>&1 || fail "hpref ${args[*]}: $(cat "$tmp/plain")"
"$hpref" "${args[@]}" --dump "$tmp/d1" > "$tmp/dumped" 2>&1 || fail "--dump: $(cat "$tmp/dumped")"
grep -qxF "dump: $tmp/d1/manifest.json" "$tmp/dumped" || fail "no dump line: $(cat "$tmp/dumped")"
grep -q '^dump:' "$tmp/plain" && fail "the default output names a dump"
diff <(grep -v -e '^| wall time' "$tmp/plain") <(grep -v -e '^| wall time' -e '^dump: ' "$tmp/dumped") ||
  fail "--dump changed the demo's output"

# The files: every listed segment exists and decodes (hpref frame decode --strict); the
# manifest lists exactly what is there; items only on data-plane ranks.
"$python" - "$tmp/d1" "$hpref" <<'PY' || fail "the dump's files"
import json, pathlib, subprocess, sys
folder, hpref = pathlib.Path(sys.argv[1]), sys.argv[2]
m = json.loads((folder / "manifest.json").read_text())
assert (m["seed"], m["steps"], m["ranks"], m["dp"], m["cp"], m["backend"]) == (3, 2, 8, 2, 4, "sim"), m
assert m["data_plane"] == [0, 3, 4, 7], m["data_plane"]
listed = {"manifest.json"}
def items(relative):
    run = subprocess.run([hpref, "frame", "decode", "--strict", str(folder / relative)], capture_output=True, text=True)
    assert run.returncode == 0, (relative, run.stderr)
    return json.loads(run.stdout)["items"]
received = 0
for step, files in enumerate(m["files"]):
    listed.add(files["plan"])
    [(key, plan)] = items(files["plan"])
    assert key == "plan" and len(plan["tuple"][0]["list"]) == 32, (step, key)
    for e in files["ranks"]:
        assert (e["items"] is not None) == (e["rank"] in m["data_plane"]), e
        if e["items"] is not None:
            listed.add(e["items"])
            got = items(e["items"])
            received += len(got)
            assert all(k == {"key": k["key"]} for k, _ in got), got[:1]  # SampleKeys
        listed.update((e["batch"], e["dispatch"]))
        [(key, batch)] = items(e["batch"])
        assert key == "batch" and [k for k, _ in batch["dict"]] == ["tokens", "doc_lens", "images"], (e, key)
        assert [k for k, _ in items(e["dispatch"])] == ["window_forward", "window_backward", "prefix_forward",
                                                         "prefix_backward"], e
assert received == 2 * 32, received
there = {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}
assert there == listed, sorted(there ^ listed)
print(f"{len(listed)} files listed and decoded")
PY
echo "a complete dump: manifest and segments"

# The same seed writes the same bytes; --json names the manifest (and only with --dump).
"$hpref" "${args[@]}" --dump "$tmp/d2" --json > "$tmp/json" 2> "$tmp/err" || fail "--json --dump: $(cat "$tmp/err")"
diff -r "$tmp/d1" "$tmp/d2" > /dev/null || fail "two runs of seed 3 wrote different dumps"
"$python" -c "import json,sys; j=json.load(open(sys.argv[1])); assert j['dump'] == sys.argv[2], j" \
  "$tmp/json" "$tmp/d2/manifest.json" || fail "--json: $(cat "$tmp/json")"
"$hpref" "${args[@]}" --json > "$tmp/json" 2> "$tmp/err" || fail "--json: $(cat "$tmp/err")"
"$python" -c "import json,sys; assert 'dump' not in json.load(open(sys.argv[1]))" "$tmp/json" ||
  fail "the default --json object names a dump: $(cat "$tmp/json")"
echo "same seed, same bytes"

# A run that fails part way leaves no manifest, an earlier one's included.
"$hpref" "${args[@]}" --fault crash:3@12 --dump "$tmp/d2" > "$tmp/out" 2>&1; rc=$?
[ $rc -eq 5 ] || fail "crash:3@12 exited $rc, expected 5: $(cat "$tmp/out")"
[ ! -e "$tmp/d2/manifest.json" ] || fail "a failed run left a manifest"
grep -qF "dump: $tmp/d2 is incomplete" "$tmp/out" || fail "no incomplete line: $(cat "$tmp/out")"
[ -z "$(find "$tmp/d2" -name '*.part')" ] || fail "partial files left: $(find "$tmp/d2" -name '*.part')"
echo "a failed run: no manifest"

# Bad DIRs: refused by name, exit 2, before any rank runs (nothing printed on stdout but
# the --json object).
expect_refused() {  # expect_refused "<stderr text>" DIR [more args]
  local want=$1 dir=$2
  shift 2
  "$hpref" "${args[@]}" --dump "$dir" "$@" > "$tmp/out" 2> "$tmp/err"; local rc=$?
  [ $rc -eq 2 ] || fail "--dump '$dir' $* exited $rc, expected 2: $(cat "$tmp/out" "$tmp/err")"
  grep -qF -- "$want" "$tmp/err" || fail "--dump '$dir' $*: stderr lacks '$want': $(cat "$tmp/err")"
}
echo data > "$tmp/file"
expect_refused "[invalid_argument]: --dump '$tmp/file' exists and is not a directory" "$tmp/file"
[ ! -s "$tmp/out" ] || fail "a refused --dump printed: $(cat "$tmp/out")"
expect_refused "[io]: --dump '$tmp/file/sub': cannot create the directory '$tmp/file/sub'" "$tmp/file/sub"
expect_refused "--dump '$tmp/file' exists and is not a directory" "$tmp/file" --json
"$python" -c "import json,sys; j=json.load(open(sys.argv[1])); assert j['exit_code'] == 2 and j['error']['kind'] == 'invalid_argument', j" \
  "$tmp/out" || fail "--json refusal: $(cat "$tmp/out")"
expect_refused "the directory name is empty" ""
expect_refused "excludes" "$tmp/d3" --codec
[ ! -e "$tmp/d3" ] || fail "--codec --dump created the folder"
[ "$(cat "$tmp/file")" = data ] || fail "the refused file was changed"
echo "bad DIRs: refused by name"
echo PASS
