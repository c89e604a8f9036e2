"""Checked mode for real PyTorch jobs (issue 13; README "Check a real job"; docs/backends.md,
"From Python: hpref.torch's checked process groups").

Importing this module registers the torch.distributed backend ``"hpref_checked"``: a
process group made with it (``init_process_group("hpref_checked", ...)``,
``new_group(ranks, backend="hpref_checked")``, or :func:`checked`) runs every operation on
a real gloo group of the same ranks, under SPEC 9.2's checked mode
(:class:`hpref._checked.CheckedComm`): before each collective the members all-gather its
signature — kind, root, reduce op, dtype, byte counts, and for all-to-all the bytes to and
from every member — and a disagreement raises ``hpref.CommMismatch`` on every member
(naming group, sequence number, ranks and, for all-to-all, the first pair: ``rank 1 sends 96
bytes to rank 3, which expects 64``) instead of hanging or corrupting data; a send buffer
changed before ``wait()`` raises ``BufferMutated``; a wait past the deadline raises
``CommTimeout`` naming what each member last launched.

The operations are those of :mod:`hpref._torch_pg` (all_reduce sum/min/max over int32,
int64, float32, float64; broadcast; all_gather; all_to_all_single; all_to_all; barrier;
and the object collectives built on them); the others are refused at once, naming them.

Options (:func:`configure`, or the environment of every rank): ``timeout_s``
(``HPREF_CHECKED_TIMEOUT_S``; a finite number of seconds > 0; default: the group's torch
timeout), ``log_dir`` (``HPREF_CHECKED_LOG``: one JSON line per operation in
``<dir>/rank<R>.jsonl``, read by ``hpref verify``), ``check_buffers``
(``HPREF_CHECKED_BUFFERS``: ``1``/``true``/``yes``/``on``, ``0``/``false``/``no``/``off``
turns the send-buffer check off, ``all`` adds CUDA buffers). A value outside these is
refused (``hpref.errors.InvalidArgumentError``), naming the option and the value.
"""
from __future__ import annotations

import functools
import math
import numbers
import operator
import os
import time
import warnings
import weakref
import zlib
from datetime import timedelta
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import torch.distributed as dist
import torch.distributed.distributed_c10d as _c10d

from ._checked import CheckedComm, peer_went_away, store_has
from ._torch_comm import TorchComm
from ._torch_pg import _TORCH2, HprefProcessGroup, _refuse_ddp_on_torch1, _relabel
from .errors import _from_core, _iterable

__all__ = ["BACKEND", "BACKEND_NCCL", "checked", "configure", "options", "comm_of", "enable", "disable"]

BACKEND = "hpref_checked"
# The same over a real nccl group (CUDA tensors): what checked() and enable() make for nccl.
BACKEND_NCCL = "hpref_checked_nccl"

_OPTIONS: Dict[str, Any] = {"timeout_s": None, "log_dir": None, "check_buffers": None}

# HPREF_CHECKED_BUFFERS's values (any case) and what they mean.
_BUFFERS_WORDS = {"1": True, "true": True, "yes": True, "on": True,
                  "0": False, "false": False, "no": False, "off": False, "all": "all"}


def _invalid(name: str, want: str, value: Any) -> Exception:
    return _from_core("invalid_argument", f"{name} must be {want}, got {value!r}")


def _timeout_option(value: Any, name: str = "timeout_s") -> float:
    """``value`` as a deadline in seconds: a finite number > 0 (a bool is no number; the
    environment's text is parsed), else refused naming ``name`` and the value."""
    seconds = None
    if isinstance(value, str) and name.startswith("HPREF_"):
        try:
            seconds = float(value.strip())
        except ValueError:
            pass
    elif isinstance(value, numbers.Real) and not isinstance(value, bool):
        seconds = float(value)
    if seconds is None or not math.isfinite(seconds) or seconds <= 0:
        raise _invalid(name, "a finite number of seconds > 0", value)
    if seconds > _MAX_TIMEOUT_S:  # torch's timedelta conversion overflowed (at ~1e14) later
        raise _invalid(name, f"at most {_MAX_TIMEOUT_S} seconds", value)
    return seconds


_MAX_TIMEOUT_S = 2**31 - 1  # 68 years


def _ranks_option(ranks: Any) -> List[int]:
    """checked()'s ``ranks``: a sequence of ints (operator.index: not a bool, float or str),
    sorted; else refused naming the value."""
    if not _iterable(ranks):
        raise _invalid("ranks", "a sequence of global ranks (ints)", ranks)
    out = []
    for r in ranks:
        try:
            if isinstance(r, bool):
                raise TypeError
            out.append(operator.index(r))
        except TypeError:
            raise _invalid("ranks", "a sequence of global ranks (ints)", ranks) from None
    return sorted(out)


def _log_dir_option(value: Any, name: str = "log_dir") -> str:
    """``value`` as a log directory: a non-empty str or os.PathLike naming one."""
    path = os.fspath(value) if isinstance(value, (str, os.PathLike)) else None
    if not isinstance(path, str) or not path:
        raise _invalid(name, "a directory (a non-empty str or os.PathLike)", value)
    return path


def _buffers_option(value: Any, name: str = "check_buffers") -> Union[bool, str]:
    """``value`` as check_buffers: True, False or "all"; the environment's text is one of
    _BUFFERS_WORDS."""
    if isinstance(value, str) and name.startswith("HPREF_"):
        word = _BUFFERS_WORDS.get(value.strip().lower())
        if word is None:
            raise _invalid(name, "one of " + ", ".join(sorted(_BUFFERS_WORDS)), value)
        return word
    if isinstance(value, bool) or (isinstance(value, str) and value == "all"):
        return value
    raise _invalid(name, "True, False or 'all'", value)


def _checked_options(timeout_s: Any, log_dir: Any, check_buffers: Any) -> Dict[str, Any]:
    """The options given (None: not given), each validated as configure() takes it."""
    return {"timeout_s": None if timeout_s is None else _timeout_option(timeout_s),
            "log_dir": None if log_dir is None else _log_dir_option(log_dir),
            "check_buffers": None if check_buffers is None else _buffers_option(check_buffers)}


def configure(*, timeout_s: Optional[float] = None, log_dir: Optional[Union[str, "os.PathLike[str]"]] = None,
              check_buffers: Optional[Union[bool, str]] = None) -> None:
    """Sets the options of the checked groups this process makes from now on (None: the
    environment's, then the default): ``timeout_s``, the deadline of every wait in seconds,
    a finite number > 0 (default: the group's torch timeout); ``log_dir``, a directory where
    each rank appends one JSON line per operation (default: none); ``check_buffers``,
    whether send buffers are compared at ``wait()``: True (the default) checks host
    buffers, ``"all"`` CUDA buffers too (a device sync and a copy to the host at launch and
    at wait, so off by default), False none. Anything else is refused
    (``hpref.errors.InvalidArgumentError``, naming the option and the value), and nothing is
    set."""
    _OPTIONS.update(_checked_options(timeout_s, log_dir, check_buffers))


def options(torch_timeout: Optional[timedelta] = None) -> Dict[str, Any]:
    """The options a checked group made now gets: configure()'s, else the environment's
    (``HPREF_CHECKED_TIMEOUT_S``, ``HPREF_CHECKED_LOG``, ``HPREF_CHECKED_BUFFERS``; empty
    means unset), else the defaults (``torch_timeout``, a timedelta > 0, else 30 minutes; no
    log; buffers checked). An environment value outside the documented ones is refused,
    naming the variable, as is a ``torch_timeout`` that is no timedelta > 0 where it is used
    (neither configure() nor the environment set the timeout)."""
    timeout_s = _OPTIONS["timeout_s"]
    env = os.environ.get("HPREF_CHECKED_TIMEOUT_S", "")
    if timeout_s is None and env.strip():
        timeout_s = _timeout_option(env, "HPREF_CHECKED_TIMEOUT_S")
    if timeout_s is None and torch_timeout is not None:
        if not isinstance(torch_timeout, timedelta) or torch_timeout <= timedelta(0):
            # A group made with timeout=timedelta(0) or less would time out every wait at once.
            raise _invalid("the group's torch timeout (torch_timeout)", "a timedelta > 0",
                           torch_timeout)
        timeout_s = torch_timeout.total_seconds()
    if timeout_s is None:
        timeout_s = 1800.0
    log_dir = _OPTIONS["log_dir"]
    env = os.environ.get("HPREF_CHECKED_LOG", "")
    if log_dir is None and env:
        log_dir = _log_dir_option(env, "HPREF_CHECKED_LOG")
    check = _OPTIONS["check_buffers"]
    env = os.environ.get("HPREF_CHECKED_BUFFERS", "")
    if check is None:
        check = _buffers_option(env, "HPREF_CHECKED_BUFFERS") if env.strip() else True
    return {"timeout_s": float(timeout_s), "log_dir": log_dir, "check_buffers": check}


def _group_names(pg: Any) -> Tuple[int, Tuple[int, ...]]:
    """torch's id and global ranks of ``pg``: the group name torch gives every group (a
    counter all ranks agree on; a hash of it when the name is not a number) and its global
    ranks in group order."""
    if _TORCH2:
        name = _c10d._world.pg_names.get(pg, "")
        ranks = tuple(dist.get_process_group_ranks(pg))
    else:
        name = _c10d._pg_names.get(pg, "")
        table = _c10d._pg_group_ranks.get(pg, {})
        ranks = tuple(g for g, _ in sorted(table.items(), key=lambda kv: kv[1]))
    gid = int(name) if str(name).isdigit() else zlib.crc32(str(name).encode()) & 0x7FFFFFFF
    return gid, ranks


def _inner_nccl(store: Any, rank: int, size: int, deadline: timedelta) -> Any:
    """A real ProcessGroupNCCL of the group's ranks (torch 1.13 and 2.x take an Options
    object whose ``_timeout`` is the deadline); on the current CUDA device."""
    opts = dist.ProcessGroupNCCL.Options()
    opts._timeout = deadline
    return dist.ProcessGroupNCCL(store, rank, size, opts)


# The global ranks of the group being made, where the caller knows them (enable()'s group
# helper, checked()): the creator torch calls gets group ranks only.
_MAKING: Dict[str, Any] = {}
_ARRIVED_KEY = "hpref_checked/arrived/"


def _present(store: Any, key: str) -> bool:
    """Whether ``store`` holds ``key`` (store_has: at once on torch's stores; a tenth of a
    second on a Python Store subclass without check or compare_set); False too when the
    store is gone."""
    try:
        return store_has(store, key, 0.1)
    except Exception:  # noqa: BLE001 - the store is gone
        return False


def _poll(store: Any, keys: List[str], until: float) -> None:
    """Returns once ``store`` holds every key of ``keys``, asked in order: each round asks
    the first key not yet seen, and those after it while they are there (so N ranks ask
    O(N) times in all, not N per round), after a pause that doubles from 1 ms to 50 ms;
    TimeoutError at ``until`` (time.monotonic())."""
    pause, seen = 0.001, 0
    while True:
        while seen < len(keys) and store_has(store, keys[seen], 0.01):
            seen += 1
        now = time.monotonic()
        if seen == len(keys):
            return
        if now >= until:
            raise TimeoutError(f"timed out waiting for the store's key {keys[seen]!r}")
        time.sleep(min(pause, until - now))
        pause = min(2 * pause, 0.05)


def _arrive(store: Any, rank: int, size: int, wait: timedelta) -> None:
    """Waits, within ``wait`` (torch's timeout of the group, or the deadline where longer),
    until every rank of the group has come to make it: ``timeout_s`` is the deadline of
    operations, not of a job's start (a rank that loads data before init_process_group);
    once all are there, gloo's connect (made with the deadline) has its peers at hand. A
    rank that never comes is CommTimeout naming it. Where the store has no ``check``
    (torch 1.13's) the keys are polled (store_has), not waited for: 1.13's TCPStore answers
    a wait that timed out once its keys are set, and the client reads that answer as the
    reply to its next call - a rank that came late would break the store's connection of
    the ranks that gave up on it."""
    store.set(f"{_ARRIVED_KEY}{rank}", "1")
    keys = [f"{_ARRIVED_KEY}{r}" for r in range(size)]
    start = time.monotonic()
    try:
        if hasattr(store, "check"):
            store.wait(keys, wait)
        else:
            _poll(store, keys, start + wait.total_seconds())
    except Exception as e:  # noqa: BLE001 - the store's wait timed out (or its host went)
        missing = [r for r in range(size) if not _present(store, keys[r])]
        if not missing or rank in missing:  # its own key unread: the store failed, not a peer
            raise
        world = _MAKING.get("ranks") or list(range(size))
        names = [world[r] for r in missing] if len(world) == size else missing
        raise _from_core("comm_timeout", f"making a checked gloo group of ranks {list(world)} (rank {rank} of "
                                         f"{size}): rank{'s' if len(names) > 1 else ''} "
                                         f"{', '.join(map(str, names))} did not come within "
                                         f"{time.monotonic() - start:.1f} s (the group's torch timeout, "
                                         f"{wait.total_seconds():g} s)") from e


def _inner_gloo(store: Any, rank: int, size: int, deadline: timedelta,
                arrival: Optional[timedelta] = None) -> Any:
    """A real ProcessGroupGloo of the group's ranks. Making it connects to every peer (gloo's
    connectFullMesh), within ``deadline``: with ``arrival``, every rank is first waited for
    that long (see _arrive). A peer that exits meanwhile - a rank failing just after it made
    the group - is PeerFailed, as at a wait, not gloo's bare RuntimeError."""
    if arrival is not None:
        _arrive(store, rank, size, max(arrival, deadline))
    try:
        return dist.ProcessGroupGloo(store, rank, size, deadline)
    except RuntimeError as e:
        if not peer_went_away(str(e)):
            raise
        raise _from_core("comm_peer_failed", f"making a checked gloo group (rank {rank} of {size}): a peer "
                                             f"went away ({str(e).strip()})") from e


# Which default process group of this process the checked groups made now belong to: a job
# that destroys its default group and makes it again restarts torch's group ids and every
# group's seq at 0, so each group logs its "run" (the k-th default group, from 0) and
# ``hpref verify`` lines up (run, group, seq). "world": a weak reference to the default group
# seen last (a strong one would keep a destroyed gloo group and its threads alive);
# "making": the libraries of the checked default group being made (torch makes one backend
# per device, each library once, before it sets WORLD).
_RUNS: Dict[str, Any] = {"count": 0, "world": None, "making": set()}


def _new_process_runs() -> None:
    """A forked child is a rank process of its own: its runs count from 0, as a spawned
    rank's do, whatever default groups its parent made (else ranks forked from a process that
    had made some would log "run": k, and a job of forked and spawned ranks would not line
    up in ``hpref verify``)."""
    _RUNS.update(count=0, world=None, making=set())


os.register_at_fork(after_in_child=_new_process_runs)


def _run_index(library: Optional[str] = None) -> int:
    """The run of a group made now. A new run begins when init_process_group makes a checked
    default group (WORLD not set yet; a library made again is the next init), or when a
    group is made under a default group other than the one seen last (made since with
    another backend; :func:`checked` asks on every rank, members or not). A rank that makes
    no group of a run and whose run changes from a checked default group to a plain one
    cannot tell; it is not counted."""
    world = _c10d.GroupMember.WORLD
    if world is None:
        if not _RUNS["making"] or library in _RUNS["making"]:
            _RUNS["count"] += 1
            _RUNS["making"] = set()
        _RUNS["making"].add(library)
        _RUNS["world"] = None
    else:
        seen = _RUNS["world"]() if _RUNS["world"] is not None else None
        if seen is not world:
            if not _RUNS["making"]:  # else the default group just made: its run
                _RUNS["count"] += 1
            _RUNS.update(world=weakref.ref(world), making=set())
    return _RUNS["count"] - 1


def _default_store() -> Any:
    """The store every group of the job is made over (torch's default store), or None while
    the default group is being made."""
    try:
        return _c10d._get_default_store()
    except Exception:  # noqa: BLE001 - no default group yet (RuntimeError, ValueError by version)
        return None


def _make(store: Any, rank: int, size: int, timeout: Any, library: str) -> HprefProcessGroup:
    """A process group of the same ranks on ``library`` ("gloo" or "nccl") over ``store``,
    served through a CheckedComm; registered as the creator of BACKEND and BACKEND_NCCL."""
    torch_timeout = timeout if isinstance(timeout, timedelta) else None
    opts = options(torch_timeout)
    deadline = timedelta(seconds=opts["timeout_s"])
    prefixed = dist.PrefixStore(f"hpref_checked/{library}/", store)
    holder: Dict[str, Any] = {}

    def names(group: Any) -> Tuple[int, Tuple[int, ...]]:
        # A weak reference: a strong one would make a cycle (pg -> comm -> names -> pg) that
        # keeps the group, and its inner gloo group with its threads, alive until interpreter
        # shutdown, where torch 1.13's gloo aborts ("terminate called without an active
        # exception") instead of being released by destroy_process_group.
        pg = holder["pg"]() if "pg" in holder else None
        if pg is None or pg not in (_c10d._world.pg_names if _TORCH2 else _c10d._pg_names):
            raise KeyError(group.id)  # not registered (yet): the group's own, not kept
        gid, ranks = _group_names(pg)
        return gid, (ranks if len(ranks) == group.size else tuple(group.ranks))

    if library == "nccl":
        import torch
        device = torch.device("cuda", torch.cuda.current_device())
        comm = TorchComm(_inner_nccl(prefixed, rank, size, deadline), store=store, timeout=deadline, device=device,
                         names=names)
    else:
        inner = _inner_gloo(prefixed, rank, size, deadline, torch_timeout or timedelta(minutes=30))
        comm = TorchComm(inner, store=store, timeout=deadline, names=names)
    checked_comm = CheckedComm(comm, names=names, store=store, timeout_s=opts["timeout_s"], log_dir=opts["log_dir"],
                               check_buffers=opts["check_buffers"], run=_run_index(library),
                               latest_store=_default_store)
    name = BACKEND_NCCL if library == "nccl" else BACKEND
    pg = HprefProcessGroup(checked_comm, comm.world(), name, device_tensors="cuda" if library == "nccl" else "cpu")
    holder["pg"] = weakref.ref(pg)
    return pg


def _create(store: Any, rank: int, size: int, timeout: Any) -> HprefProcessGroup:
    """The creator registered for "hpref_checked": real gloo underneath."""
    return _make(store, rank, size, timeout, "gloo")


def _create_nccl(store: Any, rank: int, size: int, timeout: Any) -> HprefProcessGroup:
    """The creator registered for "hpref_checked_nccl": real nccl underneath, CUDA tensors."""
    return _make(store, rank, size, timeout, "nccl")


def _register() -> None:
    # torch 1.13's DistributedDataParallel would wait forever on a checked group's work
    # (its C++ never calls a Python group's wait()): refused at once, naming it.
    _refuse_ddp_on_torch1()
    for name, creator, devices in ((BACKEND, _create, ["cpu"]), (BACKEND_NCCL, _create_nccl, ["cuda"])):
        if name.upper() in getattr(dist.Backend, "_plugins", {}):
            continue
        if _TORCH2:
            dist.Backend.register_backend(name, creator, devices=devices)
        else:
            dist.Backend.register_backend(name, creator)


def _checked_backend(name: str) -> str:
    """The checked backend standing in for a group of library ``name``: BACKEND_NCCL for nccl
    (refused, naming why, where this torch has no nccl), BACKEND for gloo (each also for its
    own checked name); any other name is refused, naming it."""
    lowered = str(name).strip().lower()
    if lowered in ("gloo", BACKEND):
        return BACKEND
    if lowered in ("nccl", BACKEND_NCCL):
        if not dist.is_nccl_available():
            raise _from_core("comm_usage", f"a checked {name!r} group needs nccl, and this torch "
                                           f"({__import__('torch').__version__}) was built without it")
        return BACKEND_NCCL
    raise _from_core("comm_usage", f"checked mode wraps gloo and nccl groups, not {name!r}")


def _libraries(name: Any) -> List[str]:
    """The libraries torch runs a group of backend ``name`` on, in its device order: torch
    2.x's BackendConfig (the default "undefined" resolves to the machine's accelerator's
    library, gloo without one; "cpu:gloo,cuda:nccl" to each device's), torch 1.13's one
    name."""
    config = getattr(_c10d, "BackendConfig", None)
    if config is not None:
        try:
            with warnings.catch_warnings():  # "device capability of <name> unknown"
                warnings.simplefilter("ignore")
                devices = config(dist.Backend(str(name))).get_device_backend_map()
            return list(dict.fromkeys(str(b).lower() for b in devices.values()))
        except Exception:  # noqa: BLE001 - a name torch refuses: torch says so when it makes the group
            pass
    return [str(name).lower()]


def comm_of(group: Any) -> CheckedComm:
    """The CheckedComm serving a checked process group (for its ``last_launches()``)."""
    if not isinstance(group, HprefProcessGroup) or not isinstance(group._comm, CheckedComm):
        raise _from_core("invalid_argument", f"{group!r} is not a process group of the hpref_checked backends")
    return group._comm


def checked(group: Any = None, *, ranks: Optional[Sequence[int]] = None, timeout_s: Optional[float] = None,
            log_dir: Optional[Union[str, "os.PathLike[str]"]] = None, check_buffers: Optional[Union[bool, str]] = None,
            backend: Optional[str] = None) -> Any:
    """A checked twin of ``group``: ``new_group`` over the same ranks with the
    ``hpref_checked`` backend (real gloo underneath; ``hpref_checked_nccl``, real nccl and
    CUDA tensors, for an nccl group), every operation's signature agreed first. Like
    ``new_group`` it is a call every rank of the world makes, in the same order; a rank
    outside ``group`` passes ``ranks=`` (the group's global ranks) and gets torch's
    non-member handle. ``group=None`` (and no ``ranks``): the whole world. ``backend``: the
    library of ``group`` ("gloo" or "nccl"; default: asked of ``group``, or of the world
    where this rank is outside it; a name of several libraries, "cpu:gloo,cuda:nccl", gives
    its first). The keyword options override :func:`configure`'s for this group, validated
    as it validates them."""
    given = _checked_options(timeout_s, log_dir, check_buffers)
    if ranks is not None:
        ranks = _ranks_option(ranks)  # refused before anything is made or counted
    outside = group is _c10d.GroupMember.NON_GROUP_MEMBER
    if group is not None and not outside and not isinstance(group, dist.ProcessGroup):
        raise _invalid("group", "a torch.distributed process group or None", group)  # was a bare KeyError
    if ranks is None and group is not None:
        if outside:
            raise _from_core("invalid_argument", "checked(group) on a rank outside the group needs ranks= "
                                                 "(the group's global ranks): it is a new_group every rank makes")
        ranks = _group_names(group)[1]
    if backend is None:
        backend = str(dist.get_backend(None if group is None or outside else group))
    inner = _checked_backend(_libraries(backend)[0])
    _run_index()  # on every rank, members or not: the run of a twin made after init_process_group again
    saved = dict(_OPTIONS)
    _OPTIONS.update({k: v for k, v in given.items() if v is not None})
    members = None if ranks is None else sorted(int(r) for r in ranks)
    _MAKING["ranks"] = members
    try:
        kwargs: Dict[str, Any] = {"backend": inner}
        if given["timeout_s"] is not None:
            kwargs["timeout"] = timedelta(seconds=given["timeout_s"])
        return dist.new_group(ranks=members, **kwargs)
    finally:
        _OPTIONS.clear()
        _OPTIONS.update(saved)
        _MAKING.clear()


_ENABLED: Dict[str, Any] = {}


def _checked_world() -> Optional[CheckedComm]:
    """The CheckedComm of the default group when it is a checked one, else None."""
    world = _c10d.GroupMember.WORLD
    if not isinstance(world, HprefProcessGroup) or not isinstance(world._comm, CheckedComm):
        return None
    return world._comm


def _agree_new_group(ranks: Sequence[int], backend: str) -> None:
    """new_group as a world collective of the checked world order (SPEC 9.1): when the
    default group is a checked one, every world rank agrees the request (member ranks and
    ``backend``, the libraries the backend name asked for resolves to: "gloo",
    "gloo,nccl") over it before torch makes the group — torch calls its group helper on
    every world rank, members or not (docs/python.md). A rank that skipped this new_group
    meets it with its next world operation or new_group: ``CommMismatch`` on every rank
    instead of a hang. The default group's own creation (no world yet) is not agreed."""
    comm = _checked_world()
    if comm is None:
        return
    members = list(ranks) if ranks else list(range(comm.size()))
    comm.agree_new_group(members, backend)


def _enabled_library(libraries: Sequence[str]) -> Optional[str]:
    """The library enable() checks a group on: the first of torch's ``libraries`` for its
    backend name (_libraries: the default resolved, "cpu:gloo,cuda:nccl" per device) that
    enable() lists, or None."""
    listed = _ENABLED.get("names", ())
    return next((lib for lib in libraries if lib in listed), None)


def _local_synchronization_refused(original: Any) -> Any:
    @functools.wraps(original)
    def new_group_with_tag(*args: Any, **kwargs: Any) -> Any:
        local = kwargs.get("use_local_synchronization", args[5] if len(args) > 5 else False)
        if local and _checked_world() is not None:
            raise _from_core("comm_usage", "new_group(use_local_synchronization=True) lets the ranks outside the "
                                           "group skip the call; under hpref.torch.enable() every new_group is "
                                           "agreed over the checked world group, which every world rank must "
                                           "reach (SPEC 9.1): drop use_local_synchronization")
        return original(*args, **kwargs)
    return new_group_with_tag


def enable(backends: Union[str, Sequence[str]] = ("gloo",), *, timeout_s: Optional[float] = None,
           log_dir: Optional[Union[str, "os.PathLike[str]"]] = None,
           check_buffers: Optional[Union[bool, str]] = None) -> None:
    """Checks the code's own groups, unmodified: from now on every process group made with
    one of ``backends`` — library names, "gloo" and "nccl" (a single str is one name) —
    is an ``hpref_checked`` group (``hpref_checked_nccl`` for nccl: real nccl underneath,
    CUDA tensors), while ``dist.get_backend(group)`` still answers the name the code asked
    for. The name the code asks for is resolved as torch resolves it (torch 2.x's
    BackendConfig): ``init_process_group()`` with no backend is checked when the library
    it resolves to is listed (gloo on a machine without an accelerator), and a name of
    several libraries ("cpu:gloo,cuda:nccl") by a checked group of the first listed one —
    one checked group serves one library, so tensors of the other devices are then refused
    at once, naming their device. Wraps torch's group helper
    (``distributed_c10d._new_process_group_helper``, torch 1.13 and 2.x); :func:`disable`
    undoes it. Options as :func:`configure`. Once the default group is checked, every
    later ``new_group`` (any backend) is also an operation of the checked world order: its
    member ranks and backend are agreed over the world group first, so a rank that skipped
    one is ``CommMismatch`` on every rank, not a hang; ``new_group(...,
    use_local_synchronization=True)``, which lets non-members skip it, is refused at once.
    Any name but gloo and nccl (hccl; a typo), or nccl on a torch built without it, is
    refused at once, naming it."""
    if isinstance(backends, (str, bytes)):
        backends = (backends.decode() if isinstance(backends, bytes) else backends,)
    elif not hasattr(backends, "__iter__"):
        raise _invalid("backends", 'a library name or a sequence of them ("gloo", "nccl")', backends)
    names = {str(b).strip().lower() for b in backends}
    for n in sorted(names):
        if n in (BACKEND, BACKEND_NCCL):
            raise _from_core("comm_usage", f"enable() takes the library names the code uses (gloo, nccl), "
                                           f"not {n!r}: groups of {n!r} are checked already")
        _checked_backend(n)
    configure(timeout_s=timeout_s, log_dir=log_dir, check_buffers=check_buffers)
    if "original" in _ENABLED:
        _ENABLED["names"] = names
        return
    original = _c10d._new_process_group_helper

    @functools.wraps(original)
    def helper(group_size: int, group_rank: Any, ranks: Sequence[int], backend: Any, store: Any,
               *args: Any, **kwargs: Any) -> Any:
        name = str(backend)
        # Agreed by the libraries it resolves to, not the name asked for: new_group() and
        # new_group(backend="gloo") make the same gloo group on a machine without an
        # accelerator (a "new_group mismatch ... on undefined but ... on gloo" until 2026-12-04).
        libraries = _libraries(name)  # resolved once, for the agreement and the choice
        _agree_new_group(ranks, ",".join(libraries))
        library = _enabled_library(libraries)
        if library is None:
            return original(group_size, group_rank, ranks, backend, store, *args, **kwargs)
        _MAKING["ranks"] = [int(r) for r in ranks] or None
        try:
            result = original(group_size, group_rank, ranks, _checked_backend(library), store, *args, **kwargs)
        finally:
            _MAKING.clear()
        pg = result[0] if _TORCH2 else result
        if pg is not _c10d.GroupMember.NON_GROUP_MEMBER:
            _relabel(pg, name)
        return result

    _ENABLED.update(original=original, names=names)
    _c10d._new_process_group_helper = helper
    if hasattr(_c10d, "_new_group_with_tag"):  # torch 2.x: new_group's use_local_synchronization
        _ENABLED["new_group_with_tag"] = _c10d._new_group_with_tag
        _c10d._new_group_with_tag = _local_synchronization_refused(_c10d._new_group_with_tag)


def disable() -> None:
    """Undoes :func:`enable` (groups made meanwhile stay checked) and resets
    :func:`configure`'s options."""
    original = _ENABLED.pop("original", None)
    tagged = _ENABLED.pop("new_group_with_tag", None)
    _ENABLED.clear()
    if original is not None:
        _c10d._new_process_group_helper = original
    if tagged is not None:
        _c10d._new_group_with_tag = tagged
    configure()


_register()
