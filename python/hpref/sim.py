"""Python code on the deterministic simulated cluster (SPEC 9.3, issue 12).

:func:`run` forks one process per rank from the calling process; in each, the rank's
:func:`communicator` is the simulator's, ``torch.distributed`` (when the calling process
has imported torch: the ranks are its forks, and a rank that imports torch itself gets no
simulated process group) is initialised on it with the world as the default group, and
``fn(rank, *args)`` runs.
Every communicator call is a scheduling point: the same program and seed give the same
schedule, the same results and the same trace hash; mismatched collectives, deadlocks and
dead peers are named, never waited out.

Output: the calling process's ``sys.stdout`` and ``sys.stderr`` are flushed before the
ranks fork (else a buffered line is printed once per rank), and in each rank they are
line-buffered, so what a rank printed before a crash fault or the turn timeout killed it
arrives. Where the caller's stream has no file descriptor (pytest ``--capture=sys``, a
notebook), the ranks write to a temporary file, copied into that stream when the run ends."""
from __future__ import annotations

import builtins
import dataclasses
import gc
import io
import numbers
import os
import pickle
import sys
import tempfile
import traceback
from typing import Any, Callable, Dict, List, Optional, Sequence

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
        """The error as an exception object: an hpref.Error subclass for hpref kinds, the
        rank's own type where it is a builtin exception (``KeyError``, ``ValueError``, ...;
        the message then starts with ``rank R:``), else ``RuntimeError`` naming the type."""
        if self.status == "ok":
            return None
        if self.kind and self.kind != "exception":
            return error_class(self.kind)(self.message)
        builtin = getattr(builtins, self.error_type or "", None)
        if isinstance(builtin, type) and issubclass(builtin, Exception):
            try:
                return builtin(f"rank {self.rank}: {self.message}")
            except Exception:  # noqa: BLE001 - a constructor of other arguments (UnicodeError)
                pass
        what = f"{self.error_type}: {self.message}" if self.error_type else self.message
        return RuntimeError(f"rank {self.rank} {self.status}: {what}")

    def is_peer_failure(self) -> bool:
        """True when this rank failed only because a peer had already failed (an echo of
        another rank's failure, not a cause)."""
        return self.status == "error" and self.kind == "comm_peer_failed"


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
        """Every rank's return value, in rank order; if any rank did not return, raises the
        error of the first rank whose failure is a cause (not a peer failure echoing
        another rank's), or else of the first rank that did not return."""
        cause = self.first_failure()
        if cause is not None:
            raise cause.exception()
        return [r.value for r in self.ranks]

    def first_failure(self) -> Optional[RankResult]:
        """The first rank that did not return and whose failure is not a peer failure (the
        cause), else the first that did not return; None when every rank returned."""
        failed = [r for r in self.ranks if r.status != "ok"]
        causes = [r for r in failed if not r.is_peer_failure()]
        return (causes or failed or [None])[0]


def _startup_environ() -> Optional[Dict[str, str]]:
    """The environment this process started with (Linux: /proc/self/environ), which
    os.environ no longer shows once code has changed it; None where it cannot be read."""
    try:
        with open("/proc/self/environ", "rb") as f:
            data = f.read()
    except OSError:
        return None
    env = {}
    for entry in data.split(b"\0"):
        name, eq, value = entry.partition(b"=")
        if eq:
            env[os.fsdecode(name)] = os.fsdecode(value)
    return env


def _hash_seed() -> Optional[str]:
    """The PYTHONHASHSEED this interpreter's str hashes use, or None when they are random.
    The interpreter reads the variable once, at startup: setting os.environ later (in a
    conftest, say) changes nothing, so the startup environment is what counts."""
    if not sys.flags.hash_randomization:
        return "0"
    if sys.flags.ignore_environment:  # -E or -I: PYTHONHASHSEED was not read
        return None
    env = _startup_environ()
    seed = (os.environ if env is None else env).get("PYTHONHASHSEED")
    return None if seed in (None, "", "random") else seed


def _hash_seed_random() -> bool:
    return _hash_seed() is None


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


_STREAMS = ("stdout", "stderr")


def _flush_streams() -> None:
    for name in _STREAMS:
        stream = getattr(sys, name, None)
        try:
            if stream is not None:
                stream.flush()
        except Exception:  # noqa: BLE001 - a closed stream must not stop the run
            pass


def _has_fd(stream: Any) -> bool:
    try:
        stream.fileno()
        return True
    except Exception:  # noqa: BLE001 - io.UnsupportedOperation, AttributeError, ValueError
        return False


def _captures() -> Dict[str, Any]:
    """A temporary file for each of sys.stdout and sys.stderr that has no file descriptor
    (an in-memory stream): a rank's copy of such a stream dies with the rank."""
    return {name: tempfile.TemporaryFile() for name in _STREAMS
            if getattr(sys, name, None) is not None and not _has_fd(getattr(sys, name))}


def _copy_back(captures: Dict[str, Any]) -> None:
    """Writes what the ranks wrote to the temporary files into the caller's streams."""
    for name, f in captures.items():
        try:
            f.seek(0)
            text = f.read().decode("utf-8", "backslashreplace")
            if text:
                getattr(sys, name).write(text)
        except Exception:  # noqa: BLE001 - a closed stream must not hide the result
            pass
        finally:
            f.close()


def _rank_streams(captures: Dict[str, Any]) -> None:
    """In a rank: sys.stdout and sys.stderr write each line at once, so that what was printed
    before a kill (crash fault, turn timeout) is not lost in a buffer; a stream without a
    file descriptor is replaced by an unbuffered one on its temporary file."""
    for name in _STREAMS:
        stream = getattr(sys, name, None)
        if name in captures:
            raw = io.FileIO(captures[name].fileno(), "w", closefd=False)
            setattr(sys, name, io.TextIOWrapper(raw, encoding="utf-8", errors="backslashreplace",
                                                write_through=True))
        elif stream is not None and hasattr(stream, "reconfigure"):
            try:
                stream.reconfigure(line_buffering=True)
            except Exception:  # noqa: BLE001 - a stream that cannot: left as it is
                pass


def _type_name(value: Any) -> str:
    t = type(value)
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def _report_dropped_at_return() -> None:
    """CommUsageError naming the torch.distributed works the rank's function dropped
    unwaited after its last operation (hpref._torch_pg names the others at the rank's next
    operation): on the simulator their outputs were never written."""
    torch_pg = sys.modules.get("hpref._torch_pg")
    if torch_pg is not None:
        torch_pg._report_dropped("when the rank's function returned")


def _entry_for(fn: Callable, args: tuple, setup: Optional[Callable], captures: Dict[str, Any]):
    def entry(comm) -> bytes:
        global _COMM
        _COMM = comm
        _rank_streams(captures)
        try:
            if setup is not None:
                setup(comm)
            value = fn(comm.rank(), *args)
            _report_dropped_at_return()
            # The type's name travels apart from the value, to name it if the value does
            # not unpickle in the parent.
            return pickle.dumps((_type_name(value), pickle.dumps(value)))
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
    without a communicator call is killed and reported dead (in whole milliseconds, at
    least 1).
    ``trace``: True keeps the trace lines in the result; a path also writes them there
    (".json": Chrome trace-event JSON, else one line per operation). ``torch_distributed``:
    initialise torch.distributed on the simulator in each rank (when the calling process has
    imported torch). Return values cross back pickled (one that does not unpickle here is
    that rank's error, naming its type and why); an exception in a rank is reported, not
    raised (see :meth:`Result.values`). A bad argument raises at once, naming it and its value:
    ``ValueError``/``TypeError`` for ``world_size``, ``fn``, ``timeout_s``,
    ``torch_distributed`` (a bool) and ``trace`` (None, a bool or a non-empty path to a file
    that can be written: checked before any rank runs), ``hpref.errors.InvalidArgumentError``
    for ``seed`` and ``faults``."""
    if isinstance(world_size, bool) or not isinstance(world_size, int) or not 1 <= world_size <= 64:
        raise ValueError(f"world_size must be an int in 1..64, got {world_size!r}")
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {fn!r}")
    if not isinstance(torch_distributed, bool):  # "no" was read as True
        raise TypeError(f"torch_distributed must be True or False, got {torch_distributed!r}")
    timeout_s = _checked_timeout_s(timeout_s)
    if trace is not None and not isinstance(trace, (bool, str, os.PathLike)):
        raise TypeError(f"trace must be None, a bool or a path, got {trace!r}")
    if isinstance(trace, (str, os.PathLike)):
        _check_trace_path(os.fspath(trace))
    seed = _checked_int("seed", seed, "invalid_argument", 0, 1 << 64)
    faults = _checked_faults(faults)
    setup = _torch_setup if torch_distributed else None
    if "torch" in sys.modules:
        # What torch imports lazily on a first backward (sympy, ~0.35 s) is imported once
        # here, not in every rank one after another; so is the process-group adapter each
        # rank installs (its import took ~6 ms a rank, ~25 ms where no bytecode is cached).
        try:
            import torch.fx.experimental.symbolic_shapes  # noqa: F401
        except ImportError:
            pass
        if torch_distributed:
            try:
                from . import _torch_pg  # noqa: F401
            except ImportError:
                pass
    # The parent's objects are frozen out of the cyclic GC while the ranks run: a collection
    # in a rank would otherwise write every object's GC header, copying the parent's heap
    # page by page into each rank (copy-on-write; most of a small operation's cost). A
    # caller that froze objects itself keeps its freeze: gc.unfreeze() would undo it too,
    # so then nothing more is frozen.
    freeze = gc.get_freeze_count() == 0
    _flush_streams()  # else what the parent buffered is written once more by every rank
    captures = _captures()
    if freeze:
        gc.freeze()
    try:
        raw = _core.sim_run(world_size, _entry_for(fn, args, setup, captures), seed=seed,
                            faults=faults, turn_timeout_ms=max(1, int(timeout_s * 1000)),
                            keep_trace=bool(trace))
    finally:
        if freeze:
            gc.unfreeze()
        _copy_back(captures)
    ranks = [_rank_result(r, *outcome) for r, outcome in enumerate(raw["outcomes"])]
    failure, exit_code = raw["failure"], raw["exit_code"]
    if failure == "none" and any(r.status != "ok" for r in ranks):
        failure, exit_code = "check failed", 1  # a value that did not unpickle here
    random_hash = _hash_seed_random()
    replay = _replay_line(world_size, fn, args, seed, raw["faults"], timeout_s, torch_distributed)
    if random_hash:
        replay += "  # with PYTHONHASHSEED unset, str hashes differ between runs: set it to replay exactly"
    result = Result(ranks, failure, exit_code, raw["trace_hash"],
                    list(raw["trace"]) if trace else None, list(raw["faults"]),
                    list(raw["unfired_faults"]), raw["decisions"], seed, replay, random_hash)
    if isinstance(trace, (str, os.PathLike)):
        _write_trace(os.fspath(trace), raw["trace"])
    return result


def _rank_result(r: int, status: str, value: bytes, kind: str, message: str) -> RankResult:
    if status == "ok":
        type_name, payload = pickle.loads(value)
        try:
            return RankResult(r, status, pickle.loads(payload))
        except Exception as e:  # noqa: BLE001 - the value's own unpickling code may raise anything
            return RankResult(r, "error", None, type(e).__name__,
                              f"the rank's return value, a {type_name}, pickled in the rank but "
                              f"did not unpickle here: {type(e).__name__}: {e}", "exception")
    if status == "error":
        error_type = None
        if kind == "exception" and ": " in message:
            error_type, message = message.split(": ", 1)
        elif kind:
            error_type = error_class(kind).__name__
        return RankResult(r, status, None, error_type, message, kind)
    return RankResult(r, status, None, None, message, None)


# Longer argument reprs are left out of the replay line.
_REPLAY_REPR_MAX = 200


def _replay_arg(value: Any) -> Optional[str]:
    """repr(value) where it reads back as Python (parses, and is not a summary with "..."
    as numpy prints a large array), else None."""
    try:
        text = repr(value)
        compile(text, "<replay>", "eval")
    except Exception:  # noqa: BLE001 - a repr that raises, or "<object at 0x...>"
        return None
    if len(text) > _REPLAY_REPR_MAX or ("..." in text and not isinstance(value, str)):
        return None
    return text


def _replay_line(world_size: int, fn: Callable, args: tuple, seed: int, faults: List[str],
                 timeout_s: float, torch_distributed: bool) -> str:
    """The call that replays this run: the positional arguments (``...`` for one whose repr
    is not Python), the seed, the faults as run and the keywords not at their defaults."""
    reprs = [_replay_arg(a) for a in args]
    parts = [str(world_size), str(getattr(fn, "__qualname__", fn))]
    parts += [text if text is not None else "..." for text in reprs]
    parts.append(f"seed={seed}")
    if faults:
        parts.append(f"faults={list(faults)!r}")
    if timeout_s != 120.0:
        parts.append(f"timeout_s={timeout_s!r}")
    if not torch_distributed:
        parts.append("torch_distributed=False")
    line = f"hpref.sim.run({', '.join(parts)})"
    if None in reprs:
        line += "  # ...: an argument whose repr is not Python; pass the same value"
    return line


def _check_trace_path(path: Any) -> None:
    """Refuses, before any rank runs, a trace path that cannot be written (the run's result
    was lost to an OSError after it)."""
    if not isinstance(path, str):
        raise TypeError(f"trace must be None, a bool or a str path, got the bytes path {path!r}")
    if not path:
        raise ValueError("trace: the path is empty")
    if os.path.isdir(path):
        raise ValueError(f"trace: {path!r} is a directory; name a file")
    where = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(where):
        raise ValueError(f"trace: {path!r}: no directory {where!r}")
    if not os.access(path if os.path.exists(path) else where, os.W_OK):
        raise ValueError(f"trace: {path!r} cannot be written")


def _write_trace(path: str, lines: List[str]) -> None:
    with open(path, "w") as f:
        if path.endswith(".json"):
            f.write(_core.sim_chrome_trace(lines))
        else:
            f.writelines(line + "\n" for line in lines)
