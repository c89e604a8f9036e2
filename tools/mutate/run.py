#!/usr/bin/env python3
"""Mutation testing for hpref with universalmutator (called by `./dev mutate`).

The working tree is never touched: the files of the committed HEAD are copied into
build/mutate/tree (uncommitted edits are not part of the run), which gets its own
RelWithDebInfo build with _GLIBCXX_ASSERTIONS (no bench, no fuzzers) in
build/mutate/tree/build. For each mutant of a seeded random sample:
  1. the mutant is written over the copy's source file;
  2. only its object file is compiled; a compile error discards the mutant (uncompilable);
  3. trivial compiler equivalence: the object's .text section is hashed (an inserted line
     is first moved onto the next line, so later __LINE__ immediates do not change); equal to the
     original's hash -> equivalent, equal to an earlier mutant's -> duplicate (both TCE,
     no tests run);
  4. otherwise the test targets are rebuilt incrementally and ctest runs the unit, property
     and sim labels (-j2, stop on first failure, --timeout on the whole run): any failure
     or a timeout = killed;
  5. the original source is restored.
Results go to build/mutate/report.txt; score = killed / (killed + survived).

Python modules (python/hpref/x.py named as files, or their mutants named by --only) are run
by python_run.py, beside this file: same options, same report format (its docstring says
how).
"""

import argparse
import difflib
import hashlib
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "build", "mutate")
TREE = os.path.join(OUT, "tree")
BUILD = os.path.join(TREE, "build")
TARGETS = ["hpref_unit", "hpref_property", "hpref_sim_test", "hpref_sim_leftover", "hpref"]
LABELS = "unit|property|sim"


def sh(cmd, cwd=None, timeout=None):
    return subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=timeout)


def sync_tree():
    """Makes TREE hold exactly the files of the committed HEAD (others' uncommitted edits
    in the working tree stay out), rewriting only files that differ so the copy's build
    stays incremental."""
    with tempfile.TemporaryDirectory() as d:
        tar = os.path.join(d, "head.tar")
        r = sh(["git", "archive", "-o", tar, "HEAD"], cwd=ROOT)
        if r.returncode:
            sys.exit("mutate: git archive failed: " + r.stdout)
        head = os.path.join(d, "head")
        os.makedirs(head)
        sh(["tar", "-xf", tar, "-C", head])
        wanted = set()
        for dirpath, _, names in os.walk(head):
            for n in names:
                src = os.path.join(dirpath, n)
                rel = os.path.relpath(src, head)
                wanted.add(rel)
                dst = os.path.join(TREE, rel)
                if os.path.islink(src):
                    continue
                with open(src, "rb") as f:
                    data = f.read()
                if os.path.exists(dst):
                    with open(dst, "rb") as f:
                        if f.read() == data:
                            continue
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                with open(dst, "wb") as f:
                    f.write(data)
                shutil.copymode(src, dst)
    for dirpath, dirs, names in os.walk(TREE):
        if dirpath == TREE:
            dirs[:] = [x for x in dirs if x != "build"]
        for n in names:
            path = os.path.join(dirpath, n)
            if os.path.relpath(path, TREE) not in wanted:
                os.remove(path)


def configure_and_build(jobs):
    # _GLIBCXX_ASSERTIONS as in CI's asan and debug builds: a mutant that reads an empty
    # std::optional or indexes past a vector aborts there, so it must abort here too.
    generator = [] if os.path.exists(os.path.join(BUILD, "CMakeCache.txt")) else ["-G", "Ninja"]
    r = sh(["cmake", "-S", TREE, "-B", BUILD] + generator + ["-DCMAKE_CXX_COMPILER=g++",
            "-DCMAKE_BUILD_TYPE=RelWithDebInfo", "-DHPREF_BUILD_BENCH=OFF",
            "-DHPREF_BUILD_FUZZERS=OFF", "-DCMAKE_CXX_FLAGS=-D_GLIBCXX_ASSERTIONS"])
    if r.returncode:
        sys.exit("mutate: configure failed:\n" + r.stdout)
    r = build(TARGETS, jobs)
    if r.returncode:
        sys.exit("mutate: the unmutated copy does not build:\n" + r.stdout[-4000:])


def build(targets, jobs):
    # The copy has its own build tree, so no lock is needed against other builds.
    return sh(["cmake", "--build", BUILD, "-j", str(jobs), "--target"] + targets)


def object_of(rel):
    """The ninja output path of the object compiled from source `rel`."""
    # reference/src/x.cpp compiles to reference/CMakeFiles/<target>.dir/src/x.cpp.o, and
    # simulator/src/x.cpp to simulator/CMakeFiles/...: the top folder, then the rest.
    top, rest = rel.split("/", 1)
    pattern = re.escape(top) + r"/CMakeFiles/[^/\s]+\.dir/" + re.escape(rest) + r"\.o"
    with open(os.path.join(BUILD, "build.ninja")) as f:
        for line in f:
            m = re.match(r"build (" + pattern + r"):", line)
            if m:
                return m.group(1)
    sys.exit("mutate: no object file for " + rel)


def text_hash(obj):
    """sha256 of the object's .text section(s) (code only: debug info and line numbers
    are not part of it)."""
    with tempfile.TemporaryDirectory() as d:
        stripped = os.path.join(d, "o")
        r = sh(["objcopy", "--only-section=.text*", "-O", "binary",
                os.path.join(BUILD, obj), stripped])
        if r.returncode:
            sys.exit("mutate: objcopy failed: " + r.stdout)
        with open(stripped, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()


def keep_line_numbers(original, mutant):
    """A mutant that inserts a line (universalmutator adds `break;`, `continue;`, ...) shifts
    every later line, and HPREF_CHECK passes __LINE__ as an immediate, so the object code
    would differ from the original even when the inserted statement is dead, defeating the
    TCE check. The inserted text is moved to the start of the next line instead (unless that
    is a preprocessor line): same statement, same meaning, line numbers kept."""
    a, b = original.splitlines(True), mutant.splitlines(True)
    if len(b) != len(a) + 1:
        return mutant
    i = 0
    while i < len(a) and a[i] == b[i]:
        i += 1
    if i >= len(a) or b[i + 1:] != a[i:] or a[i].lstrip().startswith("#"):
        return mutant
    inserted = b[i].strip()
    if not inserted or "//" in inserted:
        return mutant
    indent = a[i][:len(a[i]) - len(a[i].lstrip())]
    return "".join(a[:i] + [indent + inserted + " " + a[i].lstrip()] + a[i + 1:])


def run_tests(timeout):
    """Runs the labels; the whole run is limited to `timeout` seconds (a mutant that hangs
    a test counts as killed), and the process group (simulated ranks too) is ended then."""
    p = subprocess.Popen(["ctest", "--test-dir", BUILD, "-L", LABELS, "-j2", "--timeout",
                          str(timeout), "--stop-on-failure", "--output-on-failure"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True)
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, 9)
        p.communicate()
        return False, [f"(timed out after {timeout}s)"]
    failed = re.findall(r"\d+ - (\S+) \(", out)
    return p.returncode == 0, failed


def generate(rel, mutant_dir):
    os.makedirs(mutant_dir, exist_ok=True)
    mutate = os.path.join(ROOT, ".venv", "bin", "mutate")
    r = sh([mutate, os.path.join(TREE, rel), "cpp", "--noCheck", "--mutantDir", mutant_dir])
    if r.returncode:
        sys.exit("mutate: universalmutator failed on " + rel + ":\n" + r.stdout[-2000:])
    base = os.path.splitext(os.path.basename(rel))[0]
    pat = re.compile(re.escape(base) + r"\.mutant\.(\d+)\.cpp$")
    found = [(int(m.group(1)), n) for n in os.listdir(mutant_dir) for m in [pat.match(n)] if m]
    return [os.path.join(mutant_dir, n) for _, n in sorted(found)]


SOURCE_DIRS = ("reference/src", "simulator/src")


def source_named(base):
    """The source a mutant name's file part names (`value` -> reference/src/value.cpp),
    looked for in SOURCE_DIRS; exits naming the places looked at when none or two hold it."""
    found = [d + "/" + base + ".cpp" for d in SOURCE_DIRS
             if os.path.isfile(os.path.join(ROOT, d, base + ".cpp"))]
    if len(found) != 1:
        where = " and ".join(SOURCE_DIRS)
        sys.exit(f"mutate: --only {base}.mutant...: {'no' if not found else 'more than one'} "
                 f"{base}.cpp in {where}; name the file too")
    return found[0]


def is_python_run(args):
    """Whether the files named, or else the mutants --only names, are Python modules
    (python/hpref/x.py); exits when both kinds are named."""
    if args.files:
        for f in args.files:  # a .hpp or .pyi would be built and run with no mutant to show
            if not f.endswith((".cpp", ".py")):
                sys.exit(f"mutate: {f}: name C++ sources (.cpp) or Python modules "
                         "(python/hpref/x.py)")
        kinds = {f.endswith(".py") for f in args.files}
    else:
        kinds = set()
        for n in args.only:
            base = n.split(".mutant.")[0]
            if n.endswith((".py", ".cpp")):
                kinds.add(n.endswith(".py"))
            else:  # a bare name is C++ where SOURCE_DIRS has it, as before Python runs
                kinds.add(not any(os.path.isfile(os.path.join(ROOT, d, base + ".cpp"))
                                  for d in SOURCE_DIRS) and
                          os.path.isfile(os.path.join(ROOT, "python", "hpref", base + ".py")))
    if len(kinds) > 1:
        sys.exit("mutate: name C++ sources or Python modules (python/hpref/x.py), not both")
    return kinds == {True}


def whole(least):
    """An argparse type: an int of at least `least`, refused at once (before any build)."""
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"must be at least {least}, got {value}")
        return value
    return parse


def main():
    ap = argparse.ArgumentParser(prog="./dev mutate")
    ap.add_argument("files", nargs="*", help="sources to mutate, e.g. simulator/src/matcher.cpp "
                    "(default reference/src/*.cpp), or Python modules, python/hpref/x.py "
                    "(tools/mutate/python_run.py; not both kinds in one run)")
    ap.add_argument("--sample", type=whole(0), default=0, metavar="N",
                    help="run a seeded random sample of N mutants (default 0: all)")
    ap.add_argument("--seed", type=int, default=1, metavar="S",
                    help="seed of the sample (default 1): same files and seed, same mutants")
    ap.add_argument("--jobs", type=whole(1), default=2, metavar="J", help="C++: build parallelism "
                    "(default 2); Python mutants run one at a time")
    ap.add_argument("--timeout", type=whole(1), default=None, metavar="SECS",
                    help="limit on one mutant's tests, seconds (C++: all labels, default 120; "
                         "Python: stubtest and the module's test files, default twice the "
                         "unmutated run's time plus 60)")
    ap.add_argument("--only", action="append", default=[], metavar="NAME",
                    help="run only the named mutants (e.g. value.mutant.425 or "
                         "_checked.mutant.123; repeatable; the file is inferred when no files "
                         "are given: a bare name is C++ where reference/src or simulator/src "
                         "has its .cpp, else python/hpref's .py; add .py to choose Python); "
                         "--sample is ignored")
    ap.add_argument("--report", default=os.path.join(OUT, "report.txt"), metavar="FILE",
                    help="where to write the report (default build/mutate/report.txt)")
    args = ap.parse_args()
    if args.report != ap.get_default("report"):  # refused now, not after the build and a mutant
        where = os.path.dirname(os.path.abspath(args.report))
        if os.path.isdir(args.report):
            ap.error(f"--report {args.report!r} is a directory; name a file")
        if not os.path.isdir(where):
            ap.error(f"--report {args.report!r}: no directory {where!r}")
        if not os.access(where, os.W_OK):
            ap.error(f"--report {args.report!r}: cannot write in {where!r}")
    if is_python_run(args):
        import python_run  # tools/mutate/python_run.py, beside this file
        python_run.main(args, write_report, log_mutant)
        return
    if args.timeout is None:
        args.timeout = 120
    only = {n if n.endswith(".cpp") else n + ".cpp" for n in args.only}
    if only and not args.files:
        args.files = sorted({source_named(n.split(".mutant.")[0]) for n in only})
    for f in args.files:
        if not os.path.isfile(os.path.join(ROOT, f)):
            sys.exit(f"mutate: no such source file: {f}")

    files = args.files or sorted(
        "reference/src/" + n for n in os.listdir(os.path.join(ROOT, "reference/src"))
        if n.endswith(".cpp"))
    files = [os.path.relpath(os.path.abspath(f), ROOT) for f in files]

    os.makedirs(TREE, exist_ok=True)
    print(f"mutate: copying the working tree to {os.path.relpath(TREE, ROOT)}", flush=True)
    sync_tree()
    t0 = time.time()
    configure_and_build(args.jobs)
    print(f"mutate: copy built in {time.time() - t0:.0f}s", flush=True)
    t0 = time.time()
    ok, failed = run_tests(args.timeout)
    if not ok:
        sys.exit("mutate: the unmutated copy fails its tests: " + ", ".join(failed))
    print(f"mutate: unmutated tests pass in {time.time() - t0:.0f}s", flush=True)

    mutants = []  # (file, mutant path)
    for rel in files:
        mdir = os.path.join(OUT, "mutants", rel.replace("/", "_"))
        shutil.rmtree(mdir, ignore_errors=True)
        ms = generate(rel, mdir)
        print(f"mutate: {rel}: {len(ms)} mutant{'' if len(ms) == 1 else 's'}", flush=True)
        mutants += [(rel, m) for m in ms]
    rng = random.Random(args.seed)
    if only:
        names = {os.path.basename(m) for _, m in mutants}
        missing = sorted(only - names)
        if missing:
            sys.exit("mutate: no such mutant: " + ", ".join(missing))
        mutants = [(r, m) for r, m in mutants if os.path.basename(m) in only]
    elif args.sample and args.sample < len(mutants):
        mutants = rng.sample(mutants, args.sample)
    print(f"mutate: running {len(mutants)} mutant{'' if len(mutants) == 1 else 's'} (seed {args.seed})", flush=True)

    originals, orig_hash, seen = {}, {}, {}
    stats = {}  # file -> counts
    survivors, log = [], []
    t_start = time.time()
    report = args.report
    for i, (rel, mpath) in enumerate(mutants, 1):
        src = os.path.join(TREE, rel)
        if rel not in originals:
            with open(src) as f:
                originals[rel] = f.read()
            orig_hash[rel] = text_hash(object_of(rel))
            seen[rel] = {}
        st = stats.setdefault(rel, {"killed": 0, "survived": 0, "tce": 0, "uncompilable": 0})
        with open(mpath) as f:
            mutant = keep_line_numbers(originals[rel], f.read())
        name = os.path.basename(mpath)
        t = time.time()
        detail = ""
        try:
            with open(src, "w") as f:
                f.write(mutant)
            obj = object_of(rel)
            if build([obj], args.jobs).returncode:
                verdict = "uncompilable"
            else:
                h = text_hash(obj)
                if h == orig_hash[rel]:
                    verdict = "tce"
                    detail = "same .text as the original"
                elif h in seen[rel]:
                    verdict = "tce"
                    detail = "same .text as " + seen[rel][h]
                else:
                    seen[rel][h] = name
                    if build(TARGETS, args.jobs).returncode:
                        verdict = "uncompilable"
                    else:
                        ok, failed = run_tests(args.timeout)
                        verdict = "survived" if ok else "killed"
                        detail = ", ".join(failed[:3])
        finally:
            with open(src, "w") as f:
                f.write(originals[rel])
        st[verdict] += 1
        log_mutant(log, survivors, f"{i}/{len(mutants)}", rel, name, verdict, detail,
                   time.time() - t, originals[rel], mutant)
        write_report(report, args, files, stats, survivors, log, time.time() - t_start)
    # Leave the copy's objects matching the restored sources.
    build(TARGETS, args.jobs)
    write_report(report, args, files, stats, survivors, log, time.time() - t_start)
    print(open(report).read().split("\n\nLog\n")[0])


def log_mutant(log, survivors, progress, rel, name, verdict, detail, seconds, original, mutant):
    """Prints a mutant's line (`progress`: "3/30"; `detail`, such as the tests that failed, is
    shown unless it survived) and adds it to `log`; a survivor goes to `survivors` with its
    diff against `original`. Both runners' loops end here."""
    line = f"[{progress}] {rel} {name}: {verdict}"
    if detail and verdict != "survived":
        line += f" ({detail})"
    line += f" {seconds:.0f}s"
    print(line, flush=True)
    log.append(line)
    if verdict == "survived":
        diff = "".join(difflib.unified_diff(original.splitlines(True), mutant.splitlines(True),
                                            rel, rel + " (mutant)", n=1))
        survivors.append((rel, name, diff))


CPP_KINDS = (("killed", "killed"), ("survived", "survived"), ("tce", "TCE"),
             ("uncompilable", "uncompilable"))


def write_report(path, args, files, stats, survivors, log, elapsed, kinds=CPP_KINDS,
                 run_kinds=None, extra=()):
    """`kinds`: (key in stats, label) in report order; `run_kinds`: the keys counted as run
    (default all); `extra`: lines after the header (the Python runner's)."""
    keys = [k for k, _ in kinds]
    tot = {k: sum(s[k] for s in stats.values()) for k in keys}
    run = sum(tot[k] for k in (run_kinds or keys))
    denom = tot["killed"] + tot["survived"]
    score = f"{100.0 * tot['killed'] / denom:.1f}%" if denom else "n/a"
    when = time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())
    out = [f"hpref mutation testing (universalmutator 1.14.1), {when}",
           f"files: {' '.join(files) if len(files) < 6 else str(len(files)) + ' files'}",
           (f"only: {' '.join(sorted(args.only))}; run so far: {run}" if args.only else
            f"sample: {args.sample or 'all'}, seed {args.seed}; run so far: {run}"),
           "  ".join(f"{label} {tot[k]}" for k, label in kinds),
           f"score = killed / (killed + survived) = {score}",
           f"time: {elapsed:.0f}s, {elapsed / run if run else 0:.1f}s per mutant"]
    out += list(extra)
    out += ["", f"Per file ({'/'.join(label for _, label in kinds)})"]
    for rel in sorted(stats):
        s = stats[rel]
        out.append(f"  {rel}: {'/'.join(str(s[k]) for k in keys)}")
    out += ["", "Survivors"]
    for rel, name, diff in survivors:
        out += [f"--- {name}", diff.rstrip(), ""]
    out += ["", "Log"] + log
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:  # the mutated source was restored on the way out (finally)
        print("mutate: interrupted", file=sys.stderr)
        sys.exit(130)
