"""pytest plugin (issue 12): run a test's body on the simulated cluster, over many seeds.

    @pytest.mark.hpref_cluster(world_size=8, seeds=range(1, 65), faults=["random"])
    def test_step(rank):
        dist.all_reduce(...)          # torch.distributed is on the simulator in each rank

The body runs as ``hpref.sim.run(world_size, body, seed=s, faults=...)`` for each seed in
turn, stopping at the first failing seed, whose replay line is printed, a shell command:
``PYTHONHASHSEED=0 /usr/bin/python3 -m pytest -p hpref.pytest_plugin tests/x.py::test_step
--hpref-seed=9 --hpref-fault=flip:3@8`` (this interpreter; the session's ``-p`` plugins kept). The ``rank``
argument is this rank's world rank (the ``rank`` fixture is None outside the cluster); other
fixtures are set up once, in the parent, before the ranks fork. ``seeds`` is any non-empty
iterable of seeds, read once when the test is collected.

A seed fails when the run's failure class is a collective mismatch or a deadlock, or when a
rank did not return. With ``faults``, only what a fault that fired explains passes: the
rank a fired crash fault killed (SIGKILL), after a fired flip the errors a flipped byte can
cause (a decode error, a ``*_mismatch`` of sizes or of the oracle, a refused exchange, ...:
:data:`FLIP_KINDS`), and peer failures naming only ranks so explained. Anything else fails:
a rank that hangs past ``timeout_s`` or dies by another signal, a ``CommUsageError``, an
``AssertionError`` (wrong data), an error under a fault that never fired or a delay. The
plugin does not check determinism (the CLI's ``--check-determinism`` does; from Python,
compare two runs' ``trace_hash``).

``pytest.skip``, ``pytest.importorskip`` and ``pytest.xfail`` in the body work when every
rank reaches them: the test is skipped (xfailed). Reached on some ranks only, the test fails
naming them (the other ranks went on into collectives the skipping ranks never joined).

Determinism needs a fixed ``PYTHONHASHSEED`` (str hashes order sets and dicts built from
sets), read when the interpreter starts: when a marked test is collected and the process
did not start with it, the plugin re-runs pytest with ``PYTHONHASHSEED=0`` (say
``--hpref-no-reexec`` to keep going without). It re-runs only when pytest is the program
(``pytest ...``, ``python -m pytest ...``); under ``pytest.main()`` in another program it
warns instead. The replay line names the value.

Registered as the ``hpref`` pytest11 entry point; in a source tree, ``-p hpref.pytest_plugin``."""
from __future__ import annotations

import collections
import dataclasses
import os
import re
import signal
import sys
import warnings
from typing import Any, Dict, Iterable, List, Optional, Set

import pytest

DEFAULTS = {"world_size": 4, "seeds": (1,), "faults": (), "timeout_s": 120.0}

# Error kinds a flipped byte of a received payload can cause, beyond the decode errors
# (hpref.errors.DecodeError and ValueModelError kinds): sizes, headers and routes read from
# corrupted bytes, a result the oracle does not recognise, an exchange a rank refused.
FLIP_KINDS = frozenset({"oracle_mismatch", "transport_size_limit", "transport_limit_mismatch",
                        "transport_spec_mismatch", "exchange_refused", "batch_header",
                        "dispatch_route"})

_SEEDS = pytest.StashKey[tuple]()


def pytest_addoption(parser):
    """The replay options: --hpref-seed, --hpref-fault, --hpref-no-reexec."""
    group = parser.getgroup("hpref", "hpref simulated cluster")
    group.addoption("--hpref-seed", type=int, default=None, metavar="SEED",
                    help="run hpref_cluster tests with this seed only (a replay)")
    group.addoption("--hpref-fault", action="append", default=None, metavar="PLAN",
                    help="fault plan for hpref_cluster tests instead of the marker's (crash:R@K, "
                         "flip:R@K[:B], delay:R@K, random); repeat for several")
    group.addoption("--hpref-no-reexec", action="store_true", default=False,
                    help="do not re-run pytest with PYTHONHASHSEED=0 when it is unset")


def pytest_configure(config):
    """Registers the hpref_cluster marker."""
    config.addinivalue_line(
        "markers",
        "hpref_cluster(world_size=4, seeds=(1,), faults=(), timeout_s=120): run the test body "
        "on world_size simulated ranks (hpref.sim.run) for every seed, stopping at the first "
        "failure and printing the line that replays it")


@pytest.fixture
def rank() -> Optional[int]:
    """This simulated rank's world rank inside an hpref_cluster test (None outside)."""
    return None


def _pytest_is_the_program() -> bool:
    """Whether this process is pytest's own command (``pytest``, ``python -m pytest``),
    whose arguments pytest.main received: only then is re-running it the same run."""
    argv0 = sys.argv[0] if sys.argv else ""
    if os.path.basename(argv0) in ("pytest", "py.test", "pytest.exe", "py.test.exe"):
        return True
    return os.path.normpath(argv0).endswith(os.path.join("pytest", "__main__.py"))


def _interpreter_flags() -> List[str]:
    """The running interpreter's -X/-W/... options, for the re-run."""
    try:
        import subprocess
        return list(subprocess._args_from_interpreter_flags())
    except Exception:  # noqa: BLE001 - a private helper: without it, a plain interpreter
        return []


def pytest_collection_modifyitems(session, config, items):
    """Reads each marked test's seeds once (an iterator is shared by parametrized cases), and
    re-runs pytest with PYTHONHASHSEED=0 when a marked test is collected and it is unset."""
    marked = [item for item in items if item.get_closest_marker("hpref_cluster")]
    if not marked:
        return
    read: Dict[int, Any] = {}  # id(mark) -> its seeds as a tuple
    for item in marked:
        mark = item.get_closest_marker("hpref_cluster")
        if id(mark) not in read:
            seeds = mark.kwargs.get("seeds", DEFAULTS["seeds"])
            read[id(mark)] = (tuple(seeds) if isinstance(seeds, Iterable)
                              and not isinstance(seeds, (str, bytes)) else seeds)
        item.stash[_SEEDS] = read[id(mark)]
    from .sim import _hash_seed_random

    if not _hash_seed_random() or config.getoption("hpref_no_reexec") \
            or os.environ.get("HPREF_PYTEST_REEXEC") == "1":
        return
    random = ("PYTHONHASHSEED was not set when this process started, so str hashes (set "
              "order) differ from run to run and a seed's replay may not reproduce its run")
    if sys.flags.ignore_environment:
        warnings.warn(pytest.PytestWarning(
            f"hpref: {random}; python -E or -I ignores PYTHONHASHSEED: run without them"))
        return
    if not _pytest_is_the_program():
        warnings.warn(pytest.PytestWarning(
            f"hpref: {random}; pytest.main() was called from another program, which hpref does "
            "not re-run: set PYTHONHASHSEED=0 in the environment that starts it"))
        return
    sys.stderr.write("hpref: re-running pytest with PYTHONHASHSEED=0 so that simulated runs "
                     "replay exactly (set PYTHONHASHSEED yourself, or --hpref-no-reexec)\n")
    sys.stderr.flush()
    sys.stdout.flush()
    env = dict(os.environ, PYTHONHASHSEED="0", HPREF_PYTEST_REEXEC="1")
    params = config.invocation_params
    os.chdir(params.dir)
    os.execve(sys.executable, [sys.executable, *_interpreter_flags(), "-m", "pytest", *params.args],
              env)


@dataclasses.dataclass
class _Outcome:
    """pytest.skip or pytest.xfail reached in a rank, carried back as its return value."""

    kind: str  # "skip" or "xfail"
    message: str


def _fired_faults(result) -> List[str]:
    """The run's faults less those that never fired (each unfired line starts "plan: ")."""
    unfired = collections.Counter(line.split(": ", 1)[0] for line in result.unfired_faults)
    fired = []
    for plan in result.faults:
        if unfired[plan]:
            unfired[plan] -= 1
        else:
            fired.append(plan)
    return fired


def _flip_can_cause(kind: Optional[str]) -> bool:
    from .errors import DecodeError, ValueModelError, error_class

    if not kind or kind == "exception":
        return False
    return kind in FLIP_KINDS or issubclass(error_class(kind), (DecodeError, ValueModelError))


# "rank 2, which died", "ranks [2, 4], which died, and rank 0, which exited": the ranks a
# peer failure names as gone.
_GONE = re.compile(r"\branks? (\d+|\[[\d, ]*\]), which (?:died|exited)")


def _gone_ranks(message: str) -> Set[int]:
    return {int(n) for m in _GONE.finditer(message) for n in re.findall(r"\d+", m.group(1))}


def _explained(result) -> Dict[int, str]:
    """The ranks whose failure a fired fault explains, each with why: the rank a fired
    crash fault killed, errors a flipped byte can cause after a fired flip, and peer
    failures naming only ranks so explained."""
    fired = _fired_faults(result)
    why: Dict[int, str] = {}
    killed = f"killed by signal {int(signal.SIGKILL)}"
    for plan in fired:
        m = re.match(r"crash:(\d+)@", plan)
        r = int(m.group(1)) if m else -1
        if 0 <= r < len(result.ranks) and result.ranks[r].status == "died" \
                and result.ranks[r].message == f"rank {r} {killed}":
            why[r] = plan
    flips = [plan for plan in fired if plan.startswith("flip:")]
    for r in result.ranks:
        if flips and r.status == "error" and _flip_can_cause(r.kind):
            why[r.rank] = flips[0]
    grew = True
    while grew:
        grew = False
        for r in result.ranks:
            if r.rank in why or not r.is_peer_failure():
                continue
            gone = _gone_ranks(r.message)
            if gone and gone <= set(why):
                why[r.rank] = "a peer failure after " + ", ".join(why[g] for g in sorted(gone))
                grew = True
    return why


def _outcome_of(result) -> Optional[Any]:
    """The pytest outcome (skip, xfail) the ranks reached, or a failure text when some
    ranks reached one and others did not; None when no rank reached one."""
    reached = {r.rank: r.value for r in result.ranks
               if r.status == "ok" and isinstance(r.value, _Outcome)}
    if not reached:
        return None
    kinds = {o.kind for o in reached.values()}
    if len(reached) == len(result.ranks) and len(kinds) == 1:
        return next(iter(reached.values()))
    others = [r.rank for r in result.ranks if r.rank not in reached]
    what = " and ".join(f"pytest.{k} on ranks {sorted(r for r, o in reached.items() if o.kind == k)}"
                        for k in sorted(kinds))
    return (f"{what}, not on every rank{f' (not on ranks {others})' if others else ''}: "
            f"skip or xfail an hpref_cluster test on every rank, before ranks part ways")


def _verdict(result) -> Optional[str]:
    """Why this run fails the test, or None: a mismatch or a deadlock, else the first rank
    that did not return for a reason the fired faults do not explain (a cause before a peer
    failure that echoes it)."""
    if result.failure in ("collective mismatch", "deadlock"):
        return result.failure
    explained = _explained(result)
    failed = [r for r in result.ranks if r.status != "ok" and r.rank not in explained]
    causes = [r for r in failed if not r.is_peer_failure()]
    for r in causes or failed:
        what = r.error_type or r.status
        return f"rank {r.rank}: {what}: {r.message}"
    return None


def _describe(result) -> str:
    lines = [f"failure class: {result.failure}; trace hash {result.trace_hash:016x}"]
    if result.faults:
        lines.append(f"faults: {', '.join(result.faults)}"
                     + (f" (never fired: {'; '.join(result.unfired_faults)})" if result.unfired_faults else ""))
    for r in result.ranks:
        if r.status == "ok":
            detail = f"pytest.{r.value.kind}: {r.value.message}" if isinstance(r.value, _Outcome) else "returned"
        else:
            detail = f"{r.status}: {r.error_type or ''} {r.message}".strip()
        lines.append(f"  rank {r.rank}: {detail}")
    return "\n".join(lines)


def _options(pyfuncitem) -> Dict[str, Any]:
    """The marker's arguments over DEFAULTS, the seeds and faults as the command line may
    replace them; pytest.UsageError naming a bad one."""
    marker = pyfuncitem.get_closest_marker("hpref_cluster")
    opts = dict(DEFAULTS)
    unknown = set(marker.kwargs) - set(DEFAULTS)
    if unknown or marker.args:
        raise pytest.UsageError(f"hpref_cluster takes keyword arguments {sorted(DEFAULTS)}, "
                                f"got {sorted(unknown) or marker.args}")
    opts.update(marker.kwargs)
    config = pyfuncitem.config
    seed_option = config.getoption("hpref_seed")
    if seed_option is not None:
        opts["seeds"] = [seed_option]
    else:
        seeds = pyfuncitem.stash.get(_SEEDS, opts["seeds"])
        if not isinstance(seeds, Iterable) or isinstance(seeds, (str, bytes)):
            raise pytest.UsageError(f"hpref_cluster seeds must be an iterable of seeds such as "
                                    f"range(1, 65), got {seeds!r}")
        opts["seeds"] = list(seeds)
        if not opts["seeds"]:
            raise pytest.UsageError(f"hpref_cluster seeds must name at least one seed, got "
                                    f"{marker.kwargs.get('seeds')!r}, which holds none")
    fault_option = config.getoption("hpref_fault")
    opts["faults"] = list(fault_option) if fault_option is not None else list(opts["faults"])
    return opts


def _replay_line(pyfuncitem, seed: int, faults: List[str], hash_seed: Optional[str]) -> str:
    """A shell command that reruns the failing seed: the hash seed, this interpreter's
    ``-m pytest`` with the session's ``-p`` plugins (``-p
    hpref.pytest_plugin`` in a source tree, without which --hpref-seed is unknown), the test's
    node id, the seed and the run's faults, each word quoted for the shell; run from pytest's
    root directory (a ``cd`` first when it was started elsewhere)."""
    import shlex

    config = pyfuncitem.config
    args = [str(a) for a in config.invocation_params.args]
    plugins: List[str] = []
    for i, a in enumerate(args):
        if a == "-p" and i + 1 < len(args):
            plugins += ["-p", args[i + 1]]
        elif a.startswith("-p") and len(a) > 2:
            plugins += ["-p", a[2:]]
    # This interpreter, not a `python` or `pytest` looked up on PATH (another Python, or
    # none: Debian has no `python`), as the PYTHONHASHSEED re-run does.
    words = [sys.executable, "-m", "pytest", *plugins, pyfuncitem.nodeid, f"--hpref-seed={seed}",
             *(f"--hpref-fault={f}" for f in faults)]
    line = " ".join(shlex.quote(w) for w in words)
    if hash_seed is not None:
        line = f"PYTHONHASHSEED={hash_seed} {line}"
    else:
        line += "  # PYTHONHASHSEED was unset (random): the replay may differ"
    root = str(config.rootpath)
    if os.path.abspath(str(config.invocation_params.dir)) != os.path.abspath(root):
        line = f"cd {shlex.quote(root)} && {line}"
    return line


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    """Runs a marked test's body on the simulated cluster, seed after seed."""
    if pyfuncitem.get_closest_marker("hpref_cluster") is None:
        return None
    from . import sim

    opts = _options(pyfuncitem)
    seeds, faults = opts["seeds"], opts["faults"]
    names = pyfuncitem._fixtureinfo.argnames
    kwargs = {n: pyfuncitem.funcargs[n] for n in names if n != "rank"}
    test = pyfuncitem.obj

    def body(rank: int) -> Any:
        try:
            if "rank" in names:
                return test(rank=rank, **kwargs)
            return test(**kwargs)
        except pytest.xfail.Exception as e:
            return _Outcome("xfail", e.msg or "")
        except pytest.skip.Exception as e:
            return _Outcome("skip", e.msg or "")

    for seed in seeds:
        result = sim.run(opts["world_size"], body, seed=seed, faults=faults, timeout_s=opts["timeout_s"])
        outcome = _outcome_of(result)
        if isinstance(outcome, _Outcome):
            if outcome.kind == "xfail":
                pytest.xfail(outcome.message)
            try:
                raise pytest.skip.Exception(outcome.message, _use_item_location=True)
            except TypeError:  # a pytest without _use_item_location
                pytest.skip(outcome.message)
        why = outcome or _verdict(result)
        if why is None:
            continue
        replay = _replay_line(pyfuncitem, seed, result.faults, sim._hash_seed())
        pytest.fail(f"hpref_cluster: seed {seed} of {len(seeds)} failed: {why}\n{_describe(result)}\n"
                    f"replay: {replay}", pytrace=False)
    return True
