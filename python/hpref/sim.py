"""Python code on the deterministic simulated cluster (SPEC 9.3, issue 12).

:func:`run` forks one process per rank from the calling process; in each, the rank's
:func:`communicator` is the simulator's, ``torch.distributed`` (when torch is importable)
is initialised on it with the world as the default group, and ``fn(rank, *args)`` runs.
Every communicator call is a scheduling point: the same program and seed give the same
schedule, the same results and the same trace hash; mismatched collectives, deadlocks and
dead peers are named, never waited out."""
from __future__ import annotations

import dataclasses
import gc
import numbers
import os
import pickle
import sys
import traceback
from typing import Any, Callable, List, Optional, Sequence

from . import _core
from .errors import _checked_int, _from_core, _is_utf8, error_class

__all__ = ["run", "Result", "RankResult", "communicator", "rank"]

_COMM = None


def communicator():
    """This simulated rank's communicator (``hpref._core.Communicator``): rank(), size(),
    world(), new_group(), all_gather(), broadcast(), all_reduce(), all_to_all_v(), barrier()
    on (address, bytes) buffers. Only inside a function :func:`run` runs."""
    if _COMM is None:
        raise RuntimeError("hpref.sim.communicator() is only available inside hpref.sim.run")
    return _COMM


def rank() -> int:
    """This simulated rank's world rank (inside :func:`run`)."""
    return communicator().rank()


@dataclasses.dataclass
class RankResult:
    """One rank's end: ``status`` "ok" (``value`` is what fn returned), "error" (fn raised:
    ``error_type``, ``message`` and, for hpref errors, ``kind``) or "died" (the process
    ended without finishing: killed by a crash fault, a signal or the turn timeout;
    ``message`` says how)."""

    rank: int
    status: str
    value: Any = None
    error_type: Optional[str] = None
    message: str = ""
    kind: Optional[str] = None

    def exception(self) -> Optional[BaseException]:
        """The error as an exception object (an hpref.Error subclass for hpref kinds)."""
        if self.status == "ok":
            return None
        if self.kind and self.kind != "exception":
            return error_class(self.kind)(self.message)
        return RuntimeError(f"rank {self.rank} {self.status}: {self.message}")


@dataclasses.dataclass
class Result:
    """A run: each rank's :class:`RankResult`, the failure class (``"none"``, ``"check
    failed"``, ``"collective mismatch"``, ``"deadlock"``, ``"peer failure"`` — the CLI's exit
    classes), the trace hash, the trace lines (when asked), the faults as run, the faults
    that never fired, and the line that replays the run."""

    ranks: List[RankResult]
    failure: str
    exit_code: int
    trace_hash: int
    trace: Optional[List[str]]
    faults: List[str]
    unfired_faults: List[str]
    decisions: int
    seed: int
    replay: str
    hash_seed_random: bool

    @property
    def ok(self) -> bool:
        """True when every rank finished and returned."""
        return self.failure == "none"

    def values(self) -> List[Any]:
        """Every rank's return value, in rank order; raises the first rank's error if any
        rank did not return."""
        for r in self.ranks:
            if r.status != "ok":
                raise r.exception()
        return [r.value for r in self.ranks]


def _hash_seed_random() -> bool:
    seed = os.environ.get("PYTHONHASHSEED")
    return bool(sys.flags.hash_randomization) and (seed is None or seed == "random")


# The turn timeout reaches the simulator as an int of milliseconds.
_TIMEOUT_S_MAX = (2**31 - 1) // 1000


def _checked_faults(faults: Any) -> List[str]:
    """``faults`` as a list of str (a str itself is refused: it is not a list of plans)."""
    if isinstance(faults, (str, bytes)) or not hasattr(faults, "__iter__"):
        raise _from_core("invalid_argument", "faults must be a list of fault plans such as "
                         f"[\"crash:1@2\"], got {faults!r}")
    plans = list(faults)
    for i, plan in enumerate(plans):
        if not isinstance(plan, str) or not _is_utf8(plan):
            raise _from_core("invalid_argument", f"faults[{i}] must be a fault plan str such as "
                             f"\"crash:1@2\", got {plan!r}")
    return plans


def _checked_timeout_s(timeout_s: Any) -> float:
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, numbers.Real):
        raise TypeError(f"timeout_s must be a number of seconds, got {timeout_s!r}")
    if not 0 < timeout_s <= _TIMEOUT_S_MAX:  # NaN fails both comparisons
        raise ValueError(f"timeout_s must be a number of seconds in (0, {_TIMEOUT_S_MAX}], got {timeout_s!r}")
    return float(timeout_s)


def _entry_for(fn: Callable, args: tuple, setup: Optional[Callable]):
    def entry(comm) -> bytes:
        global _COMM
        _COMM = comm
        try:
            if setup is not None:
                setup(comm)
            value = fn(comm.rank(), *args)
            return pickle.dumps(value)
        except BaseException as e:
            from .errors import Error
            if not isinstance(e, Error):  # the user's own bug: where it happened
                traceback.print_exc(file=sys.stderr)
            raise
        finally:
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except Exception:  # noqa: BLE001 - a closed stream must not hide the result
                    pass
    return entry


def _torch_setup(comm) -> None:
    """Single-threaded torch (determinism; no thread pool inherited across fork) and, where
    the process-group adapter is available, torch.distributed on this communicator."""
    torch = sys.modules.get("torch")
    if torch is None:
        return
    torch.set_num_threads(1)
    try:
        from . import _torch_pg
    except ImportError:
        return
    _torch_pg.install(comm)


def run(world_size: int, fn: Callable, *args: Any, seed: int = 1, faults: Sequence[str] = (),
        timeout_s: float = 120.0, trace: Any = None, torch_distributed: bool = True) -> Result:
    """Runs ``fn(rank, *args)`` on ``world_size`` (1..64) simulated ranks, one forked process
    each, and returns a :class:`Result`; never hangs on a deadlock or a dead rank.

    ``seed`` (an int in [0, 2**64)) picks the schedule; ``faults`` is a list of SPEC 9.3
    fault plans ("crash:R@K", "flip:R@K[:B]", "delay:R@K", or "random": one drawn from the
    seed). ``timeout_s`` (seconds, in (0, 2147483]): a rank that runs longer than this
    without a communicator call is killed and reported dead.
    ``trace``: True keeps the trace lines in the result; a path also writes them there
    (".json": Chrome trace-event JSON, else one line per operation). ``torch_distributed``:
    initialise torch.distributed on the simulator in each rank (when torch is imported).
    Return values cross back pickled; an exception in a rank is reported, not raised (see
    :meth:`Result.values`). A bad argument raises at once, naming it and its value:
    ``ValueError``/``TypeError`` for ``world_size``, ``fn`` and ``timeout_s``,
    ``hpref.errors.InvalidArgumentError`` for ``seed`` and ``faults``."""
    if isinstance(world_size, bool) or not isinstance(world_size, int) or not 1 <= world_size <= 64:
        raise ValueError(f"world_size must be an int in 1..64, got {world_size!r}")
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {fn!r}")
    timeout_s = _checked_timeout_s(timeout_s)
    seed = _checked_int("seed", seed, "invalid_argument", 0, 1 << 64)
    faults = _checked_faults(faults)
    setup = _torch_setup if torch_distributed else None
    if "torch" in sys.modules:
        # What torch imports lazily on a first backward (sympy, ~0.35 s) is imported once
        # here, not in every rank one after another.
        try:
            import torch.fx.experimental.symbolic_shapes  # noqa: F401
        except ImportError:
            pass
    # The parent's objects are frozen out of the cyclic GC while the ranks run: a collection
    # in a rank would otherwise write every object's GC header, copying the parent's heap
    # page by page into each rank (copy-on-write; most of a small operation's cost).
    gc.freeze()
    try:
        raw = _core.sim_run(world_size, _entry_for(fn, args, setup), seed=seed, faults=faults,
                            turn_timeout_ms=max(1, int(timeout_s * 1000)))
    finally:
        gc.unfreeze()
    ranks = []
    for r, (status, value, kind, message) in enumerate(raw["outcomes"]):
        if status == "ok":
            ranks.append(RankResult(r, status, pickle.loads(value)))
        elif status == "error":
            error_type = None
            if kind == "exception" and ": " in message:
                error_type, message = message.split(": ", 1)
            elif kind:
                error_type = error_class(kind).__name__
            ranks.append(RankResult(r, status, None, error_type, message, kind))
        else:
            ranks.append(RankResult(r, status, None, None, message, None))
    replay = (f"hpref.sim.run({world_size}, {getattr(fn, '__qualname__', fn)!s}, seed={seed}"
              + (f", faults={raw['faults']!r}" if raw["faults"] else "") + ")")
    random_hash = _hash_seed_random()
    if random_hash:
        replay += "  # with PYTHONHASHSEED unset, str hashes differ between runs: set it to replay exactly"
    result = Result(ranks, raw["failure"], raw["exit_code"], raw["trace_hash"],
                    list(raw["trace"]) if trace else None, list(raw["faults"]),
                    list(raw["unfired_faults"]), raw["decisions"], seed, replay, random_hash)
    if isinstance(trace, (str, os.PathLike)):
        _write_trace(os.fspath(trace), raw["trace"])
    return result


def _write_trace(path: str, lines: List[str]) -> None:
    with open(path, "w") as f:
        if path.endswith(".json"):
            f.write(_core.sim_chrome_trace(lines))
        else:
            f.writelines(line + "\n" for line in lines)
