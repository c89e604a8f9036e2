#!/usr/bin/env bash
# The package test (issue 11): `pip install .` of the repository into a fresh venv made by
# PYTHON, outside the source and build trees, then hpref decodes a segment there with no
# PYTHONPATH: the wheel is self-contained (the C++ library compiled into hpref._core).
# Usage: package_test.sh PYTHON SOURCE_DIR WORK_DIR
set -euo pipefail
python=$1 source=$2 work=$3
rm -rf "$work"
mkdir -p "$work"
"$python" -m venv "$work/venv"
echo "package_test: pip install $source into $work/venv (builds the extension; minutes)"
CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2} \
  "$work/venv/bin/pip" install --quiet --no-cache-dir "$source" \
  --config-settings=build-dir="$work/wheel-build"
cd "$work"
env -u PYTHONPATH "$work/venv/bin/python" - <<'PY'
import pathlib
import hpref
where = pathlib.Path(hpref.__file__).resolve()
assert "site-packages" in where.parts, f"hpref imported from {where}, not the installed wheel"
segment = hpref.codec.encode([((7, 0), {"text": "abc", "data": b"\x00\x01"})])
items = hpref.codec.decode(segment, tensors="numpy")
assert items == [((7, 0), {"text": "abc", "data": b"\x00\x01"})], items
assert isinstance(items[0][0], hpref.Key)
print(f"package_test: hpref from {where.parent} decoded {len(segment)} bytes: {items}")
# The typing a user's mypy or pyright reads from the wheel: py.typed and a stub beside every
# module (the extension's included; __init__.py is typed inline).
pkg = where.parent
assert (pkg / "py.typed").is_file(), f"no py.typed in {pkg}"
modules = {p.stem for p in pkg.glob("*.py")} - {"__init__"}
modules |= {p.name.split(".")[0] for p in pkg.glob("_core.*.so")}
missing = sorted(m for m in modules if not (pkg / f"{m}.pyi").is_file())
assert modules and not missing, f"no .pyi stub in the wheel for: {missing}"
print(f"package_test: py.typed and {len(modules)} stubs installed")
PY
