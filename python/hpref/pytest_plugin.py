"""pytest plugin (issue 12): run a test's body on the simulated cluster, over many seeds.

    @pytest.mark.hpref_cluster(world_size=8, seeds=range(1, 65), faults=["random"])
    def test_step(rank):
        dist.all_reduce(...)          # torch.distributed is on the simulator in each rank

The body runs as ``hpref.sim.run(world_size, body, seed=s, faults=...)`` for each seed in
turn, stopping at the first failing seed, whose replay line is printed:
``pytest tests/x.py::test_step --hpref-seed=9 --hpref-fault=flip:3@8``. The ``rank``
argument is this rank's world rank (the ``rank`` fixture is None outside the cluster); other
fixtures are set up once, in the parent, before the ranks fork.

A seed fails when the run's failure class is a mismatch, a deadlock or a determinism
violation, or when a rank raised. With faults, a rank that died or raised an hpref error
(the fault detected and reported: PeerFailed, a decode error, ...) is what the fault should
cause and passes; any other exception (an AssertionError: wrong data) fails.

Determinism needs a fixed ``PYTHONHASHSEED`` (str hashes order sets and dicts built from
sets): when a marked test is collected and it is not set, the plugin re-runs pytest with
``PYTHONHASHSEED=0`` (say ``--hpref-no-reexec`` to keep going without), and the replay line
names the value.

Registered as the ``hpref`` pytest11 entry point; in a source tree, ``-p hpref.pytest_plugin``."""
from __future__ import annotations

import os
import sys
from typing import Any, List, Optional

import pytest

DEFAULTS = {"world_size": 4, "seeds": (1,), "faults": (), "timeout_s": 120.0}


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


def _hash_seed_random() -> bool:
    seed = os.environ.get("PYTHONHASHSEED")
    return bool(sys.flags.hash_randomization) and (seed is None or seed == "random")


def pytest_collection_modifyitems(session, config, items):
    """Re-runs pytest with PYTHONHASHSEED=0 when a marked test is collected and it is unset."""
    if not any(item.get_closest_marker("hpref_cluster") for item in items):
        return
    if _hash_seed_random() and not config.getoption("hpref_no_reexec") \
            and os.environ.get("HPREF_PYTEST_REEXEC") != "1":
        sys.stderr.write("hpref: re-running pytest with PYTHONHASHSEED=0 so that simulated runs "
                         "replay exactly (set PYTHONHASHSEED yourself, or --hpref-no-reexec)\n")
        sys.stderr.flush()
        env = dict(os.environ, PYTHONHASHSEED="0", HPREF_PYTEST_REEXEC="1")
        os.execve(sys.executable, [sys.executable, "-m", "pytest"] + sys.argv[1:], env)


def _verdict(result, faulted: bool) -> Optional[str]:
    """Why this run fails the test, or None."""
    if result.failure in ("collective mismatch", "deadlock", "determinism violation"):
        return result.failure
    for r in result.ranks:
        if r.status == "ok":
            continue
        if faulted and (r.status == "died" or (r.kind and r.kind != "exception")):
            continue  # the fault, detected and reported
        what = r.error_type or r.status
        return f"rank {r.rank}: {what}: {r.message}"
    return None


def _describe(result) -> str:
    lines = [f"failure class: {result.failure}; trace hash {result.trace_hash:016x}"]
    if result.faults:
        lines.append(f"faults: {', '.join(result.faults)}"
                     + (f" (never fired: {'; '.join(result.unfired_faults)})" if result.unfired_faults else ""))
    for r in result.ranks:
        detail = "returned" if r.status == "ok" else f"{r.status}: {r.error_type or ''} {r.message}".strip()
        lines.append(f"  rank {r.rank}: {detail}")
    return "\n".join(lines)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    """Runs a marked test's body on the simulated cluster, seed after seed."""
    marker = pyfuncitem.get_closest_marker("hpref_cluster")
    if marker is None:
        return None
    from . import sim

    opts = dict(DEFAULTS)
    unknown = set(marker.kwargs) - set(DEFAULTS)
    if unknown or marker.args:
        raise pytest.UsageError(f"hpref_cluster takes keyword arguments {sorted(DEFAULTS)}, "
                                f"got {sorted(unknown) or marker.args}")
    opts.update(marker.kwargs)
    config = pyfuncitem.config
    seed_option = config.getoption("hpref_seed")
    seeds: List[int] = [seed_option] if seed_option is not None else list(opts["seeds"])
    fault_option = config.getoption("hpref_fault")
    faults = list(fault_option) if fault_option is not None else list(opts["faults"])
    names = pyfuncitem._fixtureinfo.argnames
    kwargs = {n: pyfuncitem.funcargs[n] for n in names if n != "rank"}
    test = pyfuncitem.obj

    def body(rank: int) -> Any:
        if "rank" in names:
            return test(rank=rank, **kwargs)
        return test(**kwargs)

    for seed in seeds:
        result = sim.run(opts["world_size"], body, seed=seed, faults=faults, timeout_s=opts["timeout_s"])
        why = _verdict(result, bool(faults))
        if why is None:
            continue
        replay = (f"pytest {pyfuncitem.nodeid} --hpref-seed={seed}"
                  + "".join(f" --hpref-fault={f}" for f in result.faults)
                  + f"   (PYTHONHASHSEED={os.environ.get('PYTHONHASHSEED', 'unset: random')})")
        pytest.fail(f"hpref_cluster: seed {seed} of {len(seeds)} failed: {why}\n{_describe(result)}\n"
                    f"replay: {replay}", pytrace=False)
    return True
