"""Mutation testing of the Python package, python/hpref/*.py (run.py dispatches here when the
files named, or the mutants named by --only, are Python modules; same command, same report).

The working tree is never touched. build/mutate/python-tree/hpref is a scratch copy of the
package: the compiled extension (_core*.so) from build/release/python/hpref (refused when it
is missing or older than any C++ source it is built from: build it first), and every file of
python/hpref as committed at HEAD (the .py and .pyi files of the working tree's uncommitted
edits are not part of the run, as in the C++ runs). The tests are the working tree's, so a
test written for a survivor is rerun with --only before it is committed, copied at the start
(tests/, README.md and docs/ into build/mutate/python-root, the tree's other top-level
entries linked there, build/mutate/shared linked to ../shared) so that edits and commits
made during a run do not reach it.

  1. universalmutator (`mutate FILE python --noCheck`) writes every mutant of each module;
  2. dropped before sampling, and counted: a mutant that does not compile (uncompilable);
     one whose AST, docstrings and `pass` beside other statements removed, equals the
     original's (equivalent by text: it changes only comments, docstrings or blank text, or
     turns a docstring into `pass`); one whose AST equals a lower-numbered mutant's
     (duplicate). Mutants change one line, so each is parsed and compared by the top-level
     statement (or method) that holds the change; a sampled mutant is compiled whole again;
  3. a seeded random sample of N of the remaining (same files and seed: same mutants);
  4. per mutant, written over the copy's module: python.stubtest of the module (mypy's
     stubtest against its .pyi, as ctest's python.stubtest) when it has a stub, then each
     pytest file that exercises the module, fastest first, `-x -q -p no:cacheprovider`,
     PYTHONHASHSEED=0, PYTHONDONTWRITEBYTECODE=1, PYTHONPATH the copy, cwd the copy of
     tests/python, Hypothesis's database in build/mutate (emptied for each mutant), with
     .venv's Python (torch 2.13; not .venv-torch113), all under --timeout: a failure, an error
     or a timeout = killed; the original module is restored.
The unmutated copy must pass the same stubtest and pytest files first.

Which test files exercise a module is derived from imports (test_map): a test file's
`import hpref.x`, `from hpref import x`, `from hpref.x import ...`, a string naming `hpref.x`
(importorskip, pytest_plugins) or code in a string (a subprocess's program), the same in
the tests/python modules it imports (conftest.py's count for every file), then every module
those import at their top level inside the package (hpref.torch -> _checked, _torch_pg,
...; `import hpref` -> hpref/__init__.py's). Imports inside functions are not followed
(hpref.sim's of _torch_pg). EXTRA adds what no import shows.
"""

import ast
import io
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import textwrap
import time
import tokenize
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "build", "mutate")
TREE = os.path.join(OUT, "python-tree")  # on PYTHONPATH: TREE/hpref is the package
PKG = os.path.join(TREE, "hpref")
MYPY_DIR = os.path.join(OUT, "python-mypy")  # stubtest's cwd (its .mypy_cache)
RELEASE = os.path.join(ROOT, "build", "release", "python", "hpref")
# The tests run in a snapshot of the working tree taken at the start (commits and edits made
# during a run do not reach it): tests/, README.md and docs/ copied, every other top-level
# entry of the tree linked, and OUT/shared linked to ../shared (tests find the original's
# code at parents[3] / "shared").
TEST_ROOT = os.path.join(OUT, "python-root")
COPIED = ("tests", "README.md", "docs")
TESTS = os.path.join(TEST_ROOT, "tests", "python")
PYTHON = os.path.join(ROOT, ".venv", "bin", "python")
SRC = "python/hpref"
# The C++ the extension is built from (python/CMakeLists.txt: python/src, hpref::reference,
# hpref::simulator).
EXTENSION_SOURCES = ("python/src", "reference/src", "reference/include", "simulator/src",
                     "simulator/include")
ALL = "*"
# Test files that exercise a module no import of theirs shows.
EXTRA = {
    "test_stubs.py": ALL,  # imports every module by name (importlib.import_module)
    "test_readme_checked_example.py": {"torch"},  # runs the README's check_job.py
}
KINDS = (("killed", "killed"), ("survived", "survived"), ("equivalent", "equivalent by text"),
         ("duplicate", "duplicate"), ("uncompilable", "uncompilable"))


def fail(msg):
    sys.exit("mutate: " + msg)


def rel(path):
    return os.path.relpath(path, ROOT)


def read(path):
    """The text of `path`, None when there is no such file."""
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError:
        return None


# ---- the scratch copy ------------------------------------------------------------------

def extension():
    found = [n for n in os.listdir(RELEASE) if n.startswith("_core") and n.endswith(".so")] \
        if os.path.isdir(RELEASE) else []
    if len(found) != 1:
        fail(f"{rel(RELEASE)} has no _core extension (or more than one): build the Python "
             "package first (./dev python -c 'import hpref', or ./dev build release)")
    so = os.path.join(RELEASE, found[0])
    built = os.path.getmtime(so)
    for d in EXTENSION_SOURCES:
        for dirpath, _, names in os.walk(os.path.join(ROOT, d)):
            for n in names:
                p = os.path.join(dirpath, n)
                if n.endswith((".cpp", ".hpp", ".h", ".inc")) and os.path.getmtime(p) > built:
                    fail(f"{rel(so)} is older than {rel(p)}: build it first "
                         "(./dev python -c 'import hpref', or ./dev build release)")
    return so


def snapshot_tests():
    """Makes TEST_ROOT a copy of the working tree's tests/, README.md and docs/ with every
    other top-level entry linked to the tree's."""
    shutil.rmtree(TEST_ROOT, ignore_errors=True)
    os.makedirs(TEST_ROOT)
    for n in sorted(os.listdir(ROOT)):
        src, dst = os.path.join(ROOT, n), os.path.join(TEST_ROOT, n)
        if n in COPIED:
            if os.path.isdir(src):
                shutil.copytree(src, dst, symlinks=True, ignore=shutil.ignore_patterns(
                    "__pycache__", ".hypothesis", ".pytest_cache"))
            else:
                shutil.copy2(src, dst)
        elif n != ".git":
            os.symlink(src, dst)
    shared = os.path.join(os.path.dirname(ROOT), "shared")
    link = os.path.join(OUT, "shared")
    if os.path.islink(link):
        os.remove(link)
    if os.path.isdir(shared) and not os.path.exists(link):
        os.symlink(shared, link)


def sync_tree():
    """Makes PKG hold HEAD's python/hpref and the release build's extension, and TEST_ROOT the
    working tree's tests; returns (HEAD's commit, the files of python/hpref whose uncommitted
    edits the run leaves out), and says which those are."""
    so = extension()
    snapshot_tests()
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                          stdout=subprocess.PIPE, check=True).stdout.strip()
    with tempfile.TemporaryDirectory() as d:
        tar = os.path.join(d, "pkg.tar")
        r = subprocess.run(["git", "archive", "-o", tar, "HEAD", SRC], cwd=ROOT,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode:
            fail("git archive failed: " + r.stdout)
        with tarfile.open(tar) as t:
            t.extractall(d)
        src = os.path.join(d, SRC)
        shutil.rmtree(PKG, ignore_errors=True)
        shutil.copytree(src, PKG)
    shutil.copy2(so, os.path.join(PKG, os.path.basename(so)))
    edited = [n for n in sorted(os.listdir(PKG)) if n.endswith((".py", ".pyi")) and
              read(os.path.join(ROOT, SRC, n)) != read(os.path.join(PKG, n))]
    if edited:
        print(f"mutate: note: {', '.join(edited)} in {SRC} differ from HEAD; the run uses HEAD's",
              flush=True)
    return head, edited


# ---- which test files exercise a module ------------------------------------------------

def package_modules():
    return sorted(n[:-3] for n in os.listdir(PKG) if n.endswith(".py"))


def named_modules(tree, modules, helpers):
    """(hpref modules, tests/python modules) that `tree` imports or names (see test_map)."""
    found, local = set(), set()

    def hpref_name(name):
        parts = name.split(".")
        if parts[0] != "hpref":
            return False
        found.add(parts[1] if len(parts) > 1 and parts[1] in modules else "__init__")
        return True

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if not hpref_name(a.name) and a.name.split(".")[0] in helpers:
                    local.add(a.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "hpref":
                found.update(a.name if a.name in modules else "__init__" for a in node.names)
            elif not hpref_name(node.module) and node.module.split(".")[0] in helpers:
                local.add(node.module.split(".")[0])
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            s = node.value
            if re.fullmatch(r"hpref(\.\w+)*", s):
                hpref_name(s)
            elif "import" in s and "hpref" in s:
                try:
                    code = ast.parse(textwrap.dedent(s))
                except (SyntaxError, ValueError):
                    continue
                f, l = named_modules(code, modules, helpers)
                found |= f
                local |= l
    return found, local


def package_graph(modules):
    """module -> the package modules it imports at its top level (not inside functions)."""
    graph = {}
    for m in modules:
        with open(os.path.join(PKG, m + ".py")) as f:
            tree = ast.parse(f.read())
        deps = {"__init__"} if m != "__init__" else set()
        todo = list(tree.body)
        while todo:
            node = todo.pop()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                if node.module:
                    deps.add(node.module.split(".")[0])
                else:
                    deps.update(a.name for a in node.names if a.name in modules)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == "hpref":
                deps.update(a.name for a in node.names if a.name in modules)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                parts = node.module.split(".")
                if parts[0] == "hpref" and len(parts) > 1 and parts[1] in modules:
                    deps.add(parts[1])
            elif isinstance(node, ast.Import):
                for a in node.names:
                    parts = a.name.split(".")
                    if parts[0] == "hpref" and len(parts) > 1 and parts[1] in modules:
                        deps.add(parts[1])
            todo.extend(ast.iter_child_nodes(node))
        graph[m] = deps & set(modules)
    return graph


def test_map():
    """{test file name: set of package modules it exercises} for tests/python/test_*.py."""
    modules = package_modules()
    graph = package_graph(modules)
    helpers = {n[:-3] for n in os.listdir(TESTS) if n.endswith(".py")}
    direct = {}

    def of(name, stack=()):
        if name in direct:
            return direct[name]
        with open(os.path.join(TESTS, name + ".py")) as f:
            found, local = named_modules(ast.parse(f.read()), modules, helpers)
        extra = EXTRA.get(name + ".py", set())
        found |= set(modules) if extra == ALL else extra
        for h in sorted(local - {name} - set(stack)):
            found |= of(h, stack + (name,))
        direct[name] = found
        return found

    base = of("conftest") if "conftest" in helpers else set()
    result = {}
    for n in sorted(helpers):
        if not n.startswith("test_"):
            continue
        todo, seen = list(of(n) | base), set()
        while todo:
            m = todo.pop()
            if m not in seen:
                seen.add(m)
                todo.extend(graph.get(m, ()))
        result[n + ".py"] = seen
    return result


# ---- generating and filtering mutants -------------------------------------------------

def generate(module, mutant_dir):
    os.makedirs(mutant_dir, exist_ok=True)
    mutate = os.path.join(ROOT, ".venv", "bin", "mutate")
    r = subprocess.run([mutate, os.path.join(PKG, module + ".py"), "python", "--noCheck",
                        "--mutantDir", mutant_dir], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    if r.returncode:
        fail(f"universalmutator failed on {module}.py:\n" + r.stdout[-2000:])
    pat = re.compile(re.escape(module) + r"\.mutant\.(\d+)\.py$")
    found = [(int(m.group(1)), n) for n in os.listdir(mutant_dir) for m in [pat.match(n)] if m]
    return [os.path.join(mutant_dir, n) for _, n in sorted(found)]


def without_docstrings(tree, module_level=True):
    """ast.dump of `tree` with the docstrings of functions and classes (and of the module
    when `module_level`) removed, and every `pass` beside other statements (a docstring
    that a mutant turns into `pass` is a docstring removed); line numbers are not part of
    a dump."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) or \
                (module_level and isinstance(node, ast.Module)):
            b = node.body
            if b and isinstance(b[0], ast.Expr) and isinstance(b[0].value, ast.Constant) \
                    and isinstance(b[0].value.value, str):
                node.body = b[1:] or [ast.Pass()]
        for field in ("body", "orelse", "finalbody"):
            b = getattr(node, field, None)
            if isinstance(b, list) and len(b) > 1:
                setattr(node, field, [x for x in b if not isinstance(x, ast.Pass)] or b[:1])
    return ast.dump(tree)


def compiles(text, name):
    """The AST of `text` when it compiles (py_compile's test), else None."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            tree = ast.parse(text, name)
            compile(tree, name, "exec", dont_inherit=True)  # leaves `tree` as it was
            return tree
        except (SyntaxError, ValueError):
            return None


def is_comment_or_blank(lines):
    return all(not x.strip() or x.lstrip().startswith("#") for x in lines)


def code_lines(text):
    """0-based numbers of the lines of `text` that hold a token other than a comment (a line
    inside a multi-line string too)."""
    found = set()
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
                            tokenize.DEDENT, tokenize.ENDMARKER):
            found.update(range(tok.start[0] - 1, tok.end[0]))
    return found


FALLBACK = object()  # a unit's lines that cannot be taken apart: parse the module whole


class Classifier:
    """Sorts the mutants of one module into uncompilable, equivalent (by text), duplicate and
    distinct. The units are the original's top-level statements and the statements of its
    top-level classes' bodies (methods, the docstring, attributes): a mutant whose changed
    lines lie inside one unit is parsed, compiled and compared on that unit's lines alone
    (dedented), which is what makes the thousands of mutants of a long module quick; any other
    is parsed whole. (Checked against parsing every mutant whole on errors.py and torch.py:
    the same verdicts; a sampled mutant is compiled whole again before it runs.)"""

    def __init__(self, original, name):
        self.name = name
        self.lines = original.splitlines(True)
        self.code = code_lines(original)
        self.whole = without_docstrings(ast.parse(original))
        tree = ast.parse(original)
        self.units = []  # (first line, last line: 0-based, inclusive; indent; a docstring?)
        for i, node in enumerate(tree.body):
            self.units.append(self.unit(node, i == 0))
            if isinstance(node, ast.ClassDef):
                self.units += [self.unit(sub, k == 0) for k, sub in enumerate(node.body)]
        self.unit_dumps = {}  # unit -> the original's dump of it
        self.seen = {}  # key -> the first mutant with it

    @staticmethod
    def unit(node, first_in_body):
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        docstring = first_in_body and isinstance(node, ast.Expr) and \
            isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
        return (first - 1, node.end_lineno - 1, node.col_offset, docstring)

    def unit_dump(self, lines, unit, last):
        """The dump of lines[unit's first:last + 1] dedented, None when they do not compile,
        FALLBACK when a line is indented less than the unit."""
        first, _, indent, docstring = unit
        text = lines[first:last + 1]
        if indent:
            if any(x.strip() and not x.startswith(" " * indent) for x in text):
                return FALLBACK
            text = [x[indent:] if x.strip() else x for x in text]
        tree = compiles("".join(text), self.name)
        return None if tree is None else without_docstrings(tree, module_level=docstring)

    def classify(self, mutant, mutant_name):
        """'uncompilable', 'equivalent', 'duplicate' (of an earlier mutant) or 'distinct'."""
        a, b = self.lines, mutant.splitlines(True)
        i = 0
        while i < min(len(a), len(b)) and a[i] == b[i]:
            i += 1
        j = 0
        while j < min(len(a), len(b)) - i and a[-1 - j] == b[-1 - j]:
            j += 1
        if not self.code.intersection(range(i, len(a) - j)) and \
                is_comment_or_blank(b[i:len(b) - j]):
            return "equivalent"  # comment or blank lines, still comment or blank
        key = None
        inside = [u for u in self.units if u[0] <= i and len(a) - j - 1 <= u[1]]
        if inside:
            unit = max(inside)  # a class's statement rather than the class
            if unit not in self.unit_dumps:
                self.unit_dumps[unit] = self.unit_dump(a, unit, unit[1])
            dump = self.unit_dump(b, unit, unit[1] + len(b) - len(a))
            if isinstance(self.unit_dumps[unit], str) and dump is not FALLBACK:
                if dump is None:
                    return "uncompilable"
                if dump == self.unit_dumps[unit]:
                    return "equivalent"
                key = ("unit", unit, dump)
        if key is None:  # parsed whole
            tree = compiles(mutant, self.name)
            if tree is None:
                return "uncompilable"
            dump = without_docstrings(tree)
            if dump == self.whole:
                return "equivalent"
            key = ("whole", dump)
        return "duplicate" if self.seen.setdefault(key, mutant_name) != mutant_name else "distinct"


# ---- running tests ---------------------------------------------------------------------

HYPOTHESIS_DIR = os.path.join(OUT, "python-hypothesis")


def environment():
    # Hypothesis's example database in the scratch area, emptied before each mutant (not
    # tests/python/.hypothesis: a mutant's failing examples stay out of later runs).
    return dict(os.environ, PYTHONPATH=TREE, PYTHONHASHSEED="0", PYTHONDONTWRITEBYTECODE="1",
                HYPOTHESIS_STORAGE_DIRECTORY=HYPOTHESIS_DIR)


def run_one(cmd, cwd, timeout):
    """(returncode or None on timeout, output, seconds); the process group is ended on a
    timeout (ranks the tests start too)."""
    t = time.time()
    p = subprocess.Popen(cmd, cwd=cwd, env=environment(), stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = p.communicate(timeout=max(timeout, 1))
        return p.returncode, out, time.time() - t
    except subprocess.TimeoutExpired:
        end_group(p)
        out, _ = p.communicate()
        return None, out, time.time() - t
    except BaseException:  # ^C or SIGTERM: the tests' processes end too, the module is restored
        end_group(p)
        raise


def end_group(p):
    try:
        os.killpg(p.pid, 9)
    except ProcessLookupError:
        pass


def pytest_cmd(test):
    return [PYTHON, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", test]


def stubtest_cmd(module):
    return [PYTHON, "-m", "mypy.stubtest", "hpref." + module, "--ignore-unused-allowlist",
            "--allowlist", os.path.join(TESTS, "stubtest_allowlist.txt")]


def has_stub(module):
    return module != "__init__" and os.path.exists(os.path.join(PKG, module + ".pyi"))


def failed_tests(out):
    """The node ids of pytest's short summary ("FAILED tests/x.py::t[a - b] - AssertionError"):
    whole, a parameter id in brackets included (spaces and " - " in it too), without the
    message after it."""
    return re.findall(r"^(?:FAILED|ERROR) ([^\s\[]+(?:\[[^\]]*\])?)", out, re.M)


def summary(out):
    lines = [x for x in out.strip().splitlines() if x.strip()]
    return lines[-1].strip("= ") if lines else ""


def run_checks(module, tests, timeout):
    """Runs stubtest (if the module has a stub) then the test files, stopping at the first
    failure; returns (ok, detail)."""
    deadline = time.time() + timeout
    shutil.rmtree(HYPOTHESIS_DIR, ignore_errors=True)
    if has_stub(module):
        rc, out, _ = run_one(stubtest_cmd(module), MYPY_DIR, deadline - time.time())
        if rc is None:
            return False, f"timed out after {timeout}s (python.stubtest)"
        if rc:
            first = next((x for x in out.splitlines() if x.startswith("error:")), "")
            return False, "python.stubtest" + (": " + first[6:].strip()[:100] if first else "")
    for test in tests:
        rc, out, _ = run_one(pytest_cmd(test), TESTS, deadline - time.time())
        if rc is None:
            return False, f"timed out after {timeout}s (in {test})"
        if rc:
            failed = failed_tests(out)
            return False, (", ".join(failed[:2]) if failed else f"{test} (exit {rc})")
    return True, ""


def baseline(modules, tmap, edited):
    """Runs each needed file on the unmutated copy (stops naming the ones that fail, and the
    uncommitted package edits, `edited`, a failing test may have been written for); returns
    {test file: seconds}."""
    need = sorted({t for m in modules for t, ms in tmap.items() if m in ms})
    times, bad = {}, []
    os.makedirs(MYPY_DIR, exist_ok=True)
    for m in modules:
        if has_stub(m):
            rc, out, dt = run_one(stubtest_cmd(m), MYPY_DIR, 900)
            print(f"mutate: unmutated python.stubtest hpref.{m}: "
                  f"{'ok' if rc == 0 else 'FAILED'} {dt:.0f}s", flush=True)
            if rc != 0:
                bad.append(f"python.stubtest hpref.{m}:\n{out[-1500:]}")
    for t in need:
        rc, out, dt = run_one(pytest_cmd(t), TESTS, 900)
        times[t] = dt
        print(f"mutate: unmutated {t}: {summary(out) if rc is not None else 'timed out'} "
              f"({dt:.0f}s)", flush=True)
        if rc != 0:
            bad.append(f"{t} ({'timed out after 900s' if rc is None else 'exit ' + str(rc)}):\n"
                       + out[-1500:])
    if bad:
        hint = (f"\n({', '.join(edited)} in {SRC} differ from HEAD and the run uses HEAD's: a "
                "test written for those edits fails here; commit them, or run without them)"
                if edited else "")
        fail("the unmutated copy fails: " + ", ".join(x.split(":")[0] for x in bad) + hint
             + "\n\n" + "\n\n".join(bad))
    return times


# ---- the run -------------------------------------------------------------------------

def module_of(path):
    """python/hpref/x.py -> x; exits for anything else."""
    r = os.path.relpath(os.path.abspath(path), ROOT)
    if os.path.dirname(r) != SRC or not r.endswith(".py"):
        fail(f"{path}: a Python module to mutate must be {SRC}/<module>.py")
    return os.path.basename(r)[:-3]


def main(args, write_report, log_mutant):
    """Runs the mutants of the Python modules args names (run.py's options); write_report and
    log_mutant are run.py's, so both runners report alike."""
    # SIGTERM as ^C: the current mutant's module is restored on the way out.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    only = {n[:-3] if n.endswith(".py") else n for n in args.only}
    for n in sorted(only):
        if not re.fullmatch(r"\w+\.mutant\.\d+", n):
            fail(f"--only {n}: a mutant's name is <module>.mutant.<number>[.py]")
    files = list(args.files)
    if only and not files:
        files = sorted({f"{SRC}/{n.split('.mutant.')[0]}.py" for n in only})
    modules = sorted({module_of(f) for f in files})
    for n in only:
        if n.split(".mutant.")[0] not in modules:
            fail(f"--only {n}: not a mutant of {', '.join(m + '.py' for m in modules)}")
    for m in modules:
        if subprocess.run(["git", "cat-file", "-e", f"HEAD:{SRC}/{m}.py"], cwd=ROOT,
                          stderr=subprocess.DEVNULL).returncode:
            fail(f"{SRC}/{m}.py is not in HEAD (the run mutates HEAD's package)"
                 if os.path.isfile(os.path.join(ROOT, SRC, m + ".py")) else
                 f"no such module: {SRC}/{m}.py")
    os.makedirs(OUT, exist_ok=True)
    print(f"mutate: copying HEAD's {SRC} and build/release's extension to {rel(PKG)}", flush=True)
    commit, edited = sync_tree()
    tmap = test_map()
    tests_of = {}
    for m in modules:
        tests_of[m] = sorted(t for t, ms in tmap.items() if m in ms)
        if not tests_of[m]:
            fail(f"no test file in tests/python exercises hpref.{m} (tools/mutate/python_run.py)")
        print(f"mutate: {m}.py: {'python.stubtest, ' if has_stub(m) else ''}"
              f"{', '.join(tests_of[m])}", flush=True)

    originals, classifiers, generated = {}, {}, {}
    pool = []  # (module, mutant path)
    stats = {}
    for m in modules:
        with open(os.path.join(PKG, m + ".py")) as f:
            originals[m] = f.read()
        classifiers[m] = Classifier(originals[m], m + ".py")
        mdir = os.path.join(OUT, "mutants", f"{SRC}/{m}.py".replace("/", "_"))
        shutil.rmtree(mdir, ignore_errors=True)
        t = time.time()
        ms = generate(m, mdir)
        generated[m] = len(ms)
        st = stats.setdefault(f"{SRC}/{m}.py", {k: 0 for k, _ in KINDS})
        if only:
            names = {os.path.basename(p)[:-3]: p for p in ms}
            missing = sorted(n for n in only if n.split(".mutant.")[0] == m and n not in names)
            if missing:
                fail("no such mutant: " + ", ".join(missing))
            pool += [(m, names[n]) for n in sorted(only, key=lambda n: int(n.rsplit(".", 1)[1]))
                     if n in names]
            print(f"mutate: {m}.py: {len(ms)} mutant{'' if len(ms) == 1 else 's'}", flush=True)
            continue
        distinct = 0
        for p in ms:
            with open(p) as f:
                kind = classifiers[m].classify(f.read(), os.path.basename(p)[:-3])
            if kind == "distinct":
                pool.append((m, p))
                distinct += 1
            else:
                st[kind] += 1
        print(f"mutate: {m}.py: {len(ms)} mutants: {st['uncompilable']} uncompilable, "
              f"{st['equivalent']} equivalent by text, {st['duplicate']} duplicates, {distinct} "
              f"distinct ({time.time() - t:.0f}s)", flush=True)
    rng = random.Random(args.seed)
    if not only and args.sample and args.sample < len(pool):
        pool = rng.sample(pool, args.sample)
    t0 = time.time()
    times = baseline(sorted({m for m, _ in pool}), tmap, edited)
    print(f"mutate: unmutated tests pass in {time.time() - t0:.0f}s", flush=True)
    for m in modules:
        tests_of[m].sort(key=lambda t: (times.get(t, 0), t))
    limit = {m: args.timeout or int(2 * sum(times.get(t, 0) for t in tests_of[m]) + 60)
             for m in modules}
    if not args.timeout:
        print("mutate: --timeout per mutant (twice the unmutated run, plus 60 s): " +
              ", ".join(f"{m}.py {limit[m]}s" for m in sorted({m for m, _ in pool})), flush=True)
    print(f"mutate: running {len(pool)} mutant{'' if len(pool) == 1 else 's'} (seed {args.seed})", flush=True)

    survivors, log = [], []
    t_start = time.time()
    extra = [f"HEAD {commit}; each mutant runs python.stubtest (where the module has a stub) "
             f"and the test files that exercise its module"]
    if not only:
        extra.append("of the mutants generated (" + ", ".join(
            f"{m}.py {generated[m]}" for m in modules) + "): the uncompilable, equivalent-by-"
            "text and duplicate ones are dropped before sampling")
    write_report(args.report, args, files, stats, survivors, log, 0.0, kinds=KINDS,
                 run_kinds=("killed", "survived"), extra=extra)
    for i, (m, mpath) in enumerate(pool, 1):
        key = f"{SRC}/{m}.py"
        st = stats[key]
        name = os.path.basename(mpath)
        with open(mpath) as f:
            mutant = f.read()
        t = time.time()
        detail = ""
        if compiles(mutant, name) is None:
            verdict = "uncompilable"
        elif only and classifiers[m].classify(mutant, name[:-3]) == "equivalent":
            verdict, detail = "equivalent", "comments or docstrings only"
        else:
            target = os.path.join(PKG, m + ".py")
            try:
                with open(target, "w") as f:
                    f.write(mutant)
                ok, detail = run_checks(m, tests_of[m], limit[m])
            finally:
                with open(target, "w") as f:
                    f.write(originals[m])
            verdict = "survived" if ok else "killed"
        st[verdict] += 1
        log_mutant(log, survivors, f"{i}/{len(pool)}", key, name, verdict, detail,
                   time.time() - t, originals[m], mutant)
        write_report(args.report, args, files, stats, survivors, log, time.time() - t_start,
                     kinds=KINDS, run_kinds=("killed", "survived"), extra=extra)
    print(open(args.report).read().split("\n\nLog\n")[0])
