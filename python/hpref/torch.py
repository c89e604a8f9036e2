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
(``HPREF_CHECKED_TIMEOUT_S``; default: the group's torch timeout), ``log_dir``
(``HPREF_CHECKED_LOG``: one JSON line per operation in ``<dir>/rank<R>.jsonl``, read by
``hpref verify``), ``check_buffers`` (``HPREF_CHECKED_BUFFERS=0`` turns the send-buffer
check off).
"""
from __future__ import annotations

import functools
import os
import weakref
import zlib
from datetime import timedelta
from typing import Any, Dict, Optional, Sequence, Tuple, Union

import torch.distributed as dist
import torch.distributed.distributed_c10d as _c10d

from ._checked import CheckedComm, peer_went_away
from ._torch_comm import TorchComm
from ._torch_pg import _TORCH2, HprefProcessGroup, _relabel
from .errors import _from_core

__all__ = ["BACKEND", "BACKEND_NCCL", "checked", "configure", "options", "comm_of", "enable", "disable"]

BACKEND = "hpref_checked"
# The same over a real nccl group (CUDA tensors): what checked() and enable() make for nccl.
BACKEND_NCCL = "hpref_checked_nccl"

_OPTIONS: Dict[str, Any] = {"timeout_s": None, "log_dir": None, "check_buffers": None}


def configure(*, timeout_s: Optional[float] = None, log_dir: Optional[str] = None,
              check_buffers: Optional[Union[bool, str]] = None) -> None:
    """Sets the options of the checked groups this process makes from now on (None: the
    environment's, then the default): ``timeout_s``, the deadline of every wait (default:
    the group's torch timeout); ``log_dir``, where each rank appends one JSON line per
    operation (default: none); ``check_buffers``, whether send buffers are compared at
    ``wait()``: True (the default) checks host buffers, ``"all"`` CUDA buffers too (a device
    sync and a copy to the host at launch and at wait, so off by default), False none."""
    if timeout_s is not None and not float(timeout_s) > 0:
        raise _from_core("invalid_argument", f"timeout_s must be a positive number of seconds, got {timeout_s!r}")
    if check_buffers is not None and check_buffers not in (True, False, "all"):
        raise _from_core("invalid_argument", f"check_buffers is True, False or 'all', got {check_buffers!r}")
    _OPTIONS.update(timeout_s=timeout_s, log_dir=log_dir, check_buffers=check_buffers)


def options(torch_timeout: Optional[timedelta] = None) -> Dict[str, Any]:
    """The options a checked group made now gets: configure()'s, else the environment's
    (``HPREF_CHECKED_TIMEOUT_S``, ``HPREF_CHECKED_LOG``, ``HPREF_CHECKED_BUFFERS``), else
    the defaults (``torch_timeout``, no log, buffers checked)."""
    timeout_s = _OPTIONS["timeout_s"]
    if timeout_s is None and os.environ.get("HPREF_CHECKED_TIMEOUT_S"):
        timeout_s = float(os.environ["HPREF_CHECKED_TIMEOUT_S"])
    if timeout_s is None:
        timeout_s = torch_timeout.total_seconds() if torch_timeout is not None else 1800.0
    log_dir = _OPTIONS["log_dir"] or os.environ.get("HPREF_CHECKED_LOG") or None
    check = _OPTIONS["check_buffers"]
    if check is None:
        env = os.environ.get("HPREF_CHECKED_BUFFERS", "1").strip().lower()
        check = "all" if env == "all" else env not in ("0", "false", "no", "off")
    return {"timeout_s": float(timeout_s), "log_dir": log_dir, "check_buffers": check if check == "all" else bool(check)}


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


def _inner_gloo(store: Any, rank: int, size: int, deadline: timedelta) -> Any:
    """A real ProcessGroupGloo of the group's ranks. Making it connects to every peer (gloo's
    connectFullMesh); a peer that exits meanwhile - a rank failing just after it made the
    group - is CommPeerFailed, as at a wait, not gloo's bare RuntimeError."""
    try:
        return dist.ProcessGroupGloo(store, rank, size, deadline)
    except RuntimeError as e:
        if not peer_went_away(str(e)):
            raise
        raise _from_core("comm_peer_failed", f"making a checked gloo group (rank {rank} of {size}): a peer "
                                             f"went away ({str(e).strip()})") from e


def _make(store: Any, rank: int, size: int, timeout: Any, library: str) -> HprefProcessGroup:
    """A process group of the same ranks on ``library`` ("gloo" or "nccl") over ``store``,
    served through a CheckedComm; registered as the creator of BACKEND and BACKEND_NCCL."""
    opts = options(timeout if isinstance(timeout, timedelta) else None)
    deadline = timedelta(seconds=opts["timeout_s"])
    prefixed = dist.PrefixStore(f"hpref_checked/{library}/", store)
    if library == "nccl":
        import torch
        device = torch.device("cuda", torch.cuda.current_device())
        comm = TorchComm(_inner_nccl(prefixed, rank, size, deadline), store=store, timeout=deadline, device=device)
    else:
        comm = TorchComm(_inner_gloo(prefixed, rank, size, deadline), store=store, timeout=deadline)
    holder: Dict[str, Any] = {}

    def names(group: Any) -> Tuple[int, Tuple[int, ...]]:
        # A weak reference: a strong one would make a cycle (pg -> comm -> names -> pg) that
        # keeps the group, and its inner gloo group with its threads, alive until interpreter
        # shutdown, where torch 1.13's gloo aborts ("terminate called without an active
        # exception") instead of being released by destroy_process_group.
        pg = holder["pg"]() if "pg" in holder else None
        gid, ranks = _group_names(pg) if pg is not None else (group.id, group.ranks)
        return gid, (ranks if len(ranks) == group.size else tuple(group.ranks))

    checked_comm = CheckedComm(comm, names=names, store=store, timeout_s=opts["timeout_s"], log_dir=opts["log_dir"],
                               check_buffers=opts["check_buffers"])
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
    for name, creator, devices in ((BACKEND, _create, ["cpu"]), (BACKEND_NCCL, _create_nccl, ["cuda"])):
        if name.upper() in getattr(dist.Backend, "_plugins", {}):
            continue
        if _TORCH2:
            dist.Backend.register_backend(name, creator, devices=devices)
        else:
            dist.Backend.register_backend(name, creator)


def _checked_backend(name: str) -> str:
    """The checked backend standing in for a group of backend ``name``: BACKEND_NCCL for an
    nccl name (refused, naming why, where this torch has no nccl), BACKEND for gloo, and a
    refusal for other accelerator libraries (hccl)."""
    lowered = str(name).lower()
    if "hccl" in lowered:
        raise _from_core("comm_usage", f"checked mode wraps gloo and nccl groups, not {name!r}")
    if "nccl" in lowered:
        if not dist.is_nccl_available():
            raise _from_core("comm_usage", f"a checked {name!r} group needs nccl, and this torch "
                                           f"({__import__('torch').__version__}) was built without it")
        return BACKEND_NCCL
    return BACKEND


def comm_of(group: Any) -> CheckedComm:
    """The CheckedComm serving a checked process group (for its ``last_launches()``)."""
    if not isinstance(group, HprefProcessGroup) or not isinstance(group._comm, CheckedComm):
        raise _from_core("invalid_argument", f"{group!r} is not a process group of the hpref_checked backends")
    return group._comm


def checked(group: Any = None, *, ranks: Optional[Sequence[int]] = None, timeout_s: Optional[float] = None,
            log_dir: Optional[str] = None, check_buffers: Optional[Union[bool, str]] = None,
            backend: Optional[str] = None) -> Any:
    """A checked twin of ``group``: ``new_group`` over the same ranks with the
    ``hpref_checked`` backend (real gloo underneath; ``hpref_checked_nccl``, real nccl and
    CUDA tensors, for an nccl group), every operation's signature agreed first. Like
    ``new_group`` it is a call every rank of the world makes, in the same order; a rank
    outside ``group`` passes ``ranks=`` (the group's global ranks) and gets torch's
    non-member handle. ``group=None`` (and no ``ranks``): the whole world. ``backend``: the
    library of ``group`` ("gloo" or "nccl"; default: asked of ``group``, or of the world
    where this rank is outside it). The keyword options override :func:`configure`'s for
    this group."""
    outside = group is _c10d.GroupMember.NON_GROUP_MEMBER
    if ranks is None and group is not None:
        if outside:
            raise _from_core("invalid_argument", "checked(group) on a rank outside the group needs ranks= "
                                                 "(the group's global ranks): it is a new_group every rank makes")
        ranks = _group_names(group)[1]
    if backend is None:
        backend = str(dist.get_backend(None if group is None or outside else group))
    inner = _checked_backend(backend)
    saved = dict(_OPTIONS)
    if timeout_s is not None:
        configure(timeout_s=timeout_s, log_dir=saved["log_dir"], check_buffers=saved["check_buffers"])
    if log_dir is not None:
        _OPTIONS["log_dir"] = log_dir
    if check_buffers is not None:
        _OPTIONS["check_buffers"] = check_buffers
    try:
        kwargs: Dict[str, Any] = {"backend": inner}
        if timeout_s is not None:
            kwargs["timeout"] = timedelta(seconds=float(timeout_s))
        return dist.new_group(ranks=None if ranks is None else sorted(int(r) for r in ranks), **kwargs)
    finally:
        _OPTIONS.clear()
        _OPTIONS.update(saved)


_ENABLED: Dict[str, Any] = {}


def _agree_new_group(ranks: Sequence[int], backend: str) -> None:
    """new_group as a world collective of the checked world order (SPEC 9.1): when the
    default group is a checked one, every world rank agrees the request (member ranks, the
    backend name the code asked for) over it before torch makes the group — torch calls its
    group helper on every world rank, members or not (docs/python.md). A rank that skipped
    this new_group meets it with its next world operation or new_group: ``CommMismatch`` on
    every rank instead of a hang. The default group's own creation (no world yet) is not
    agreed."""
    world = _c10d.GroupMember.WORLD
    if not isinstance(world, HprefProcessGroup) or not isinstance(world._comm, CheckedComm):
        return
    comm = world._comm
    members = list(ranks) if ranks else list(range(comm.size()))
    comm.agree_new_group(members, backend)


def enable(backends: Sequence[str] = ("gloo",), *, timeout_s: Optional[float] = None,
           log_dir: Optional[str] = None, check_buffers: Optional[Union[bool, str]] = None) -> None:
    """Checks the code's own groups, unmodified: from now on every process group made with
    one of ``backends`` (``init_process_group("gloo")``, ``new_group(..., backend="gloo")``,
    torch's default ``None`` when it resolves to a listed name) is an ``hpref_checked``
    group (``hpref_checked_nccl`` for nccl: real nccl underneath, CUDA tensors), while ``dist.get_backend(group)`` still answers the name the code asked for.
    Wraps torch's group helper (``distributed_c10d._new_process_group_helper``, torch 1.13
    and 2.x); :func:`disable` undoes it. Options as :func:`configure`. Once the default
    group is checked, every later ``new_group`` (any backend) is also an operation of the
    checked world order: its member ranks and backend are agreed over the world group
    first, so a rank that skipped one is ``CommMismatch`` on every rank, not a hang. gloo
    and nccl are wrapped; hccl, or nccl on a torch built without it, is refused at once."""
    names = {str(b).lower() for b in backends}
    for n in sorted(names):
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
        _agree_new_group(ranks, name)
        if name.lower() not in _ENABLED.get("names", ()):
            return original(group_size, group_rank, ranks, backend, store, *args, **kwargs)
        result = original(group_size, group_rank, ranks, _checked_backend(name), store, *args, **kwargs)
        pg = result[0] if _TORCH2 else result
        if pg is not _c10d.GroupMember.NON_GROUP_MEMBER:
            _relabel(pg, name)
        return result

    _ENABLED.update(original=original, names=names)
    _c10d._new_process_group_helper = helper


def disable() -> None:
    """Undoes :func:`enable` (groups made meanwhile stay checked) and resets
    :func:`configure`'s options."""
    original = _ENABLED.pop("original", None)
    _ENABLED.clear()
    if original is not None:
        _c10d._new_process_group_helper = original
    configure()


_register()
