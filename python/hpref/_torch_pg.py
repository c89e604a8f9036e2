"""torch.distributed on an hpref communicator (issue 12; docs/python.md, "torch.distributed on an
hpref communicator").

:func:`install` makes every process group this process creates — ``init_process_group``
and ``new_group`` with any backend name (gloo, nccl, hccl, the default) — a
:class:`HprefProcessGroup` served by one communicator ``comm`` (the simulator's, inside
:func:`hpref.sim.run`, or any object with the Communicator seam's Python interface, e.g.
:class:`hpref._torch_comm.GlooComm`), while ``dist.get_backend(group)`` answers the name the
code asked for. :class:`HprefProcessGroup` is a Python ``torch.distributed.ProcessGroup``
subclass registered under the backend name ``"hpref"`` with
``torch.distributed.Backend.register_backend``; it runs on torch 1.13 and 2.x (tested:
Debian's 1.13 and PyPI's 2.13).

Supported: all_reduce (sum, min, max over int32, int64, float32, float64), broadcast,
all_gather (list and into one tensor, and its coalesced form: one per pair, what torch 2.x's
functional all_gather_tensor calls), all_to_all_single (with and without splits),
all_to_all (lists), barrier, and what torch builds on them (all_gather_object,
broadcast_object_list), synchronous or ``async_op=True``. Every other operation raises
``CommUsageError`` at once, naming it; so do a sparse tensor (naming its layout) and an
output of another dtype than the input (naming both). On torch 2.x ``group_name`` answers
torch's name for the group, so device meshes and functional collectives find it, and
DistributedDataParallel runs; on 1.13 DDP is refused (its C++ would wait forever).
"""
from __future__ import annotations

import collections
import functools
import itertools
import sys
import time
import warnings
import weakref
from datetime import timedelta
from typing import Any, Callable, Deque, Dict, List, Optional, Sequence, Tuple, Union

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as _c10d

from ._torch_comm import OnceWork, _one_waiter, _park, _prune, _settled, _WaitLock, is_accelerator_backend_name
from . import _core
from .errors import _from_core

__all__ = ["BACKEND", "HprefProcessGroup", "HprefWork", "install", "uninstall", "installed"]

BACKEND = "hpref"

# torch 2.x keeps its group tables in _world and returns (pg, store) from
# _new_process_group_helper; 1.13 keeps module-level dicts and returns pg.
_TORCH2 = hasattr(_c10d, "_world") and hasattr(_c10d._world, "pg_map")

_REDUCE_DTYPES = {torch.int32: "int32", torch.int64: "int64",
                  torch.float32: "float32", torch.float64: "float64"}
_REDUCE_OPS = {"SUM": "sum", "MIN": "min", "MAX": "max"}

# ProcessGroup methods torch.distributed may call that the communicator does not offer:
# method name -> the torch.distributed functions that reach it.
_UNSUPPORTED = {
    "send": "send/isend", "recv": "recv/irecv", "recv_anysource": "recv/irecv without src",
    "reduce": "reduce", "gather": "gather (and gather_object)",
    "scatter": "scatter (and scatter_object_list)", "reduce_scatter": "reduce_scatter",
    "_reduce_scatter_base": "reduce_scatter_tensor", "reduce_scatter_single": "reduce_scatter_tensor",
    "reduce_scatter_single_coalesced": "reduce_scatter_tensor (coalesced)",
    "reduce_scatter_tensor_coalesced": "reduce_scatter_tensor (coalesced)",
    "allgather_coalesced": "all_gather_coalesced",
    "allreduce_coalesced": "all_reduce_coalesced", "monitored_barrier": "monitored_barrier",
    "_start_coalescing": "coalescing (_coalescing_manager, batch_isend_irecv)",
    "_end_coalescing": "coalescing (_coalescing_manager, batch_isend_irecv)",
}
_WHY = ("hpref's process group offers the communicator's operations only (SPEC 9.1: all_reduce, "
        "broadcast, all_gather, all_to_all, barrier); point-to-point and the other collectives "
        "are not simulated")


def _usage(message: str) -> Exception:
    return _from_core("comm_usage", message)


if hasattr(torch.Tensor, "nbytes"):  # torch 2.x: one attribute read (1.13 has none)
    def _nbytes(t: torch.Tensor) -> int:
        return t.nbytes
else:
    def _nbytes(t: torch.Tensor) -> int:
        return t.numel() * t.element_size()


def _bits(t: torch.Tensor) -> torch.Tensor:
    """t's bytes as a 1-d uint8 tensor (a view when t is contiguous)."""
    return t.contiguous().reshape(-1).view(torch.uint8)


def _write_bytes(dst: torch.Tensor, src: torch.Tensor) -> None:
    """Copies the uint8 bytes ``src`` into ``dst`` (any dtype, any strides)."""
    if dst.is_contiguous():
        dst.reshape(-1).view(torch.uint8).copy_(src)
    else:
        dst.copy_(src.view(dst.dtype).reshape(dst.shape))


def _device_of(tensors: Sequence[torch.Tensor]) -> Any:
    return tensors[0].device if tensors else None


def _overlaps(t: torch.Tensor) -> bool:
    """Whether elements of ``t`` share memory (an expand()ed or stride-0 view): no backend
    can write such a tensor element by element."""
    if t.is_contiguous():  # its own location for each element
        return False
    check = getattr(torch, "_debug_has_internal_overlap", None)
    if check is not None:
        return check(t) == 1  # 1: yes; 2: too hard to tell (not refused)
    return any(stride == 0 and size > 1 for size, stride in zip(t.shape, t.stride()))


def _extent(t: torch.Tensor) -> Tuple[int, int]:
    """The bytes ``t``'s elements span in memory, [start, end) (empty for no elements)."""
    if t.numel() == 0:
        return 0, 0
    start = t.data_ptr()
    if t.is_contiguous():
        return start, start + _nbytes(t)
    last = sum((size - 1) * stride for size, stride in zip(t.shape, t.stride()))
    return start, start + (last + 1) * t.element_size()


def _adjacent(tensors: Sequence[torch.Tensor], counts: Sequence[int]) -> Optional[Tuple[int, int]]:
    """[start, end) of the memory the tensors (of ``counts`` bytes each) fill one after
    another when each is contiguous and each starts where the one before ends (pieces of one
    buffer, as ``list(t.chunk(n))`` or all_gather_object's outputs are): the operation can
    read or write them there, as one buffer. None otherwise, or for no tensors."""
    if not tensors:
        return None
    start = end = tensors[0].data_ptr()
    for t, n in zip(tensors, counts):
        if n and (t.data_ptr() != end or not t.is_contiguous()):
            return None
        end += n
    return start, end


def _within(t: torch.Tensor, region: Tuple[int, int]) -> bool:
    """Whether the memory ``t`` spans overlaps ``region`` ([start, end) in its device's
    memory)."""
    start, end = _extent(t)
    return start < region[1] and region[0] < end


def _share_memory(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether the memory ``a`` and ``b`` span overlaps (the same tensor, views of one
    another, or interleaved: an extra copy, never a wrong answer)."""
    return ((a.is_cpu and b.is_cpu) or a.device == b.device) and _within(a, _extent(b))


def _where_text(label: Tuple[int, Tuple[int, ...]], asked: str, seq: Optional[int] = None) -> str:
    """A group as messages name it: id, sequence number when known, world ranks, and the
    backend name the code asked for."""
    gid, ranks = label
    return f"group {gid}{'' if seq is None else f' seq {seq}'} {list(ranks)} ({asked})"


# A group for messages, formatted only when a message needs it: the text, or _where_text's
# arguments (the group's label, the backend name asked for, the sequence number).
_WhereArgs = Tuple[Tuple[int, Tuple[int, ...]], str, Optional[int]]
_Where = Union[str, _WhereArgs]


def _seconds(timeout: Any) -> Optional[float]:
    """A wait's timeout in seconds (a timedelta or a number), or None for none (torch's
    default, a zero timedelta, means none)."""
    if timeout is None:
        return None
    seconds = timeout.total_seconds() if hasattr(timeout, "total_seconds") else float(timeout)
    return seconds if seconds > 0 else None


class _Staging:
    """Buffers of one operation: the memory handed to the communicator (the tensor itself
    when contiguous, else a contiguous copy), kept alive until wait(); staged send buffers
    are compared with the caller's tensor at wait() (a change is a mutated send buffer, as
    the communicator reports for the memory it was given) where ``check`` says so — the
    communicator's ``check_buffers``: True compares CPU tensors, ``"all"`` every tensor,
    False none; staged receive buffers are copied back. Contiguous CPU tensors are staged,
    compared and copied back by memcpy/memcmp in one call for all of them (``_core``), the
    others by torch."""

    def __init__(self, check: Any = True) -> None:
        self.keep: List[torch.Tensor] = []
        self.checks: List[Tuple[int, torch.Tensor, torch.Tensor]] = []
        self.copies: List[Tuple[torch.Tensor, torch.Tensor]] = []
        # Host pieces: (index, the caller's address, the staged copy's, bytes) compared at
        # wait(); (the caller's tensor, the staged buffer's address, bytes) copied back - the
        # tensor itself held, as a torch copy holds it: a dropped work completed later writes
        # it then (a freed tensor's address was written into, a crash, until 2026-12-03).
        self.host_checks: List[Tuple[int, int, int, int]] = []
        self.host_copies: List[Tuple[torch.Tensor, int, int]] = []
        self.check = check

    def _checked(self, t: torch.Tensor) -> bool:
        return self.check == "all" or (bool(self.check) and t.device.type == "cpu")

    def pending(self) -> bool:
        """Whether wait() has checks or copies to make."""
        return bool(self.checks or self.copies or self.host_checks or self.host_copies)

    def changed(self) -> Optional[int]:
        """The index of the first staged send tensor the caller changed since launch, or None."""
        changed = [index for index, mine, staged in self.checks
                   if not torch.equal(_bits(mine), staged.reshape(-1).view(torch.uint8))]
        if self.host_checks:
            indices, mine, staged, counts = zip(*self.host_checks)
            first = _core.first_different_piece(mine, staged, counts)
            if first >= 0:
                changed.append(indices[first])
        return min(changed) if changed else None

    @torch.no_grad()
    def copy_out(self) -> None:
        """The staged outputs copied into the caller's tensors (outside autograd, as a
        backend writes them)."""
        for dst, src in self.copies:
            _write_bytes(dst, src.reshape(-1).view(torch.uint8))
        if self.host_copies:
            dsts = [t for t, _, _ in self.host_copies]
            # Marked written (autograd's version) by the work, for the operations gloo marks
            # (HprefProcessGroup._work), not here.
            _core.copy_pieces([t.data_ptr() for t in dsts], [a for _, a, _ in self.host_copies],
                              [n for _, _, n in self.host_copies])

    def send(self, t: torch.Tensor, index: int = 0) -> torch.Tensor:
        if t.is_contiguous():
            self.keep.append(t)
            return t
        staged = t.detach().contiguous()  # outside autograd, as a backend reads it
        self.keep.append(staged)
        if self._checked(t):
            self.checks.append((index, t, staged))
        return staged

    def receive(self, t: torch.Tensor, inout: bool = False, apart: Sequence[torch.Tensor] = ()) -> torch.Tensor:
        """``apart``: send tensors of the same operation; an output whose memory overlaps
        one of them (``all_to_all_single(t, t)``) is received into a buffer of its own and
        copied in at wait(), after the send-buffer check, as the C++ MPI backend does: the
        library must not write what it still reads, and the check would take the received
        bytes for a change."""
        if t.is_contiguous() and not any(_share_memory(t, a) for a in apart):
            self.keep.append(t)
            return t
        staged = t.detach().contiguous() if inout else torch.empty(t.shape, dtype=t.dtype, device=t.device)
        self.keep.append(staged)
        if inout and self._checked(t):
            self.checks.append((0, t, staged.clone()))
        if _host(t, staged):  # contiguous, received apart from the operation's input
            self.host_copies.append((t, staged.data_ptr(), _nbytes(t)))
        else:
            self.copies.append((t, staged))
        return staged

    def packed(self, tensors: Sequence[torch.Tensor]) -> Tuple[int, List[int]]:
        """The address of the tensors' bytes in one buffer, and each one's byte count: where
        they are when they lie one after another (_adjacent), else a staged copy, each
        checked at wait()."""
        counts = [_nbytes(t) for t in tensors]
        region = _adjacent(tensors, counts)
        if region is not None:
            self.keep.extend(tensors)
            return region[0], counts
        buf = torch.empty(sum(counts), dtype=torch.uint8, device=_device_of(tensors))
        base, offset = buf.data_ptr(), 0
        to: List[int] = []
        mine: List[int] = []
        sizes: List[int] = []
        for i, (t, n) in enumerate(zip(tensors, counts)):
            if _host(t, buf):
                to.append(base + offset)
                mine.append(t.data_ptr())
                sizes.append(n)
                if self.check:
                    self.keep.append(t)  # compared at wait(): its memory stays the caller's
                    self.host_checks.append((i, mine[-1], to[-1], n))
            else:
                buf[offset:offset + n].copy_(_bits(t.detach()))
                if self._checked(t):
                    self.checks.append((i, t, buf[offset:offset + n]))
            offset += n
        if sizes:
            _core.copy_pieces(to, mine, sizes)
        self.keep.append(buf)
        return base, counts

    def unpacked(self, tensors: Sequence[torch.Tensor],
                 apart: Sequence[torch.Tensor] = ()) -> Tuple[int, List[int]]:
        """The address of one buffer for the tensors' bytes, and each one's byte count: the
        tensors themselves when they lie one after another (_adjacent) and no tensor of
        ``apart`` (the operation's send tensors) shares that memory, else a staged buffer
        whose pieces are copied into the tensors after wait()."""
        counts = [_nbytes(t) for t in tensors]
        region = _adjacent(tensors, counts)
        if region is not None and not any(_within(a, region) for a in apart):
            self.keep.extend(tensors)
            return region[0], counts
        buf = torch.empty(sum(counts), dtype=torch.uint8, device=_device_of(tensors))
        base, offset = buf.data_ptr(), 0
        for t, n in zip(tensors, counts):
            if _host(t, buf):
                self.host_copies.append((t, base + offset, n))
            else:
                self.copies.append((t, buf[offset:offset + n]))
            offset += n
        self.keep.append(buf)
        return base, counts


def _host(t: torch.Tensor, staged: torch.Tensor) -> bool:
    """Whether ``t`` and its staged buffer are contiguous host memory (staged, compared and
    copied back by ``_core``'s memcpy/memcmp), on a torch that can mark a tensor written
    (torch 1.13 cannot: its pieces keep torch's copies, which mark them)."""
    return _increment_version is not None and t.is_cpu and staged.is_cpu and t.is_contiguous()


# torch.autograd.graph.increment_version (torch 2.x): marks tensors written in place.
_increment_version = getattr(getattr(torch.autograd, "graph", None), "increment_version", None)


# The simulator's works dropped unwaited (HprefWork.__del__): (launch number, "op on group
# ...") each, reported by the rank's next operation in launch order (a list is freed from its
# end). Appended from __del__ (a deque's append is atomic).
_DROPPED: Deque[Tuple[int, str]] = collections.deque()
_LAUNCHES = itertools.count()  # this process's works, numbered as they are made
_DROPPED_NAMED = 4  # how many a message names


def _report_dropped(found: str = "at this rank's next operation") -> None:
    """Raises CommUsageError naming the simulator's works this rank dropped unwaited
    (``found``: when, for the message)."""
    if not _DROPPED:
        return
    dropped = []
    while _DROPPED:
        dropped.append(_DROPPED.popleft())
    # A list of works dropped at once (a function returning with thousands unwaited) is named
    # by its first few and counted: the message stays a line, not megabytes.
    dropped.sort(key=lambda d: d[0])
    named = "; ".join(text for _, text in dropped[:_DROPPED_NAMED])
    if len(dropped) > _DROPPED_NAMED:
        named += f"; and {len(dropped) - _DROPPED_NAMED} more ({len(dropped)} works)"
    raise _usage(f"{named}: dropped unwaited (async_op=True, no wait()): the simulator completes an "
                 "operation in wait() only, so its outputs were never written, where real gloo completes it in the "
                 f"background; wait() on every work (found {found})")


def _pollable(comm_work: Any) -> bool:
    """Whether a communicator's work says when it has finished (hpref.torch's checked works,
    over a library that moves bytes in the background); the simulator's does not: it moves
    bytes inside wait() only."""
    if isinstance(comm_work, _AllOf):
        return all(_pollable(work._comm_work) for work in comm_work._works)
    return hasattr(comm_work, "_settled") or hasattr(comm_work, "is_completed")


def _finish_dropped(comm_work: Any, staging: _Staging) -> None:
    """Completes a dropped work whose operation has settled: its error is dropped with it,
    else the staged outputs are copied into the caller's tensors."""
    comm_work.wait()
    staging.copy_out()


class HprefWork(dist.distributed_c10d.Work):
    """What an operation of :class:`HprefProcessGroup` returns (``async_op=True`` hands it to
    the caller; a synchronous call waits on it). ``wait()`` completes the communicator's
    operation — raising its ``hpref.CommError`` (CommMismatch, CommDeadlock, PeerFailed,
    BufferMutated, ...) — then copies staged outputs into the caller's tensors."""

    def __init__(self, op: str, where: _Where, comm_work: Any, staging: _Staging,
                 result: Sequence[torch.Tensor], rank: Optional[int] = None):
        """``op``: the torch.distributed name; ``where``: the group, for messages (a text, or
        the arguments of ``_where_text``, formatted when a message needs it); ``rank``: this
        rank's world rank, for messages."""
        super().__init__()
        self._op, self._where_of, self._rank = op, where, rank
        self._launch = next(_LAUNCHES)
        self._written = False  # mark the outputs written at completion (HprefProcessGroup._work)
        self._comm_work = comm_work
        self._staging: Optional[_Staging] = staging
        self._result = list(result)
        self._done = False
        self._error: Optional[BaseException] = None
        self._wait_lock = _WaitLock()  # two threads waiting: one completes it (_one_waiter)

    @property
    def _where(self) -> str:
        """The group, for messages."""
        return self._where_of if isinstance(self._where_of, str) else _where_text(*self._where_of)

    def __del__(self) -> None:
        """A work dropped unwaited: its staged memory (and the caller's tensors it holds)
        stays alive until the operation underneath has finished writing it, then the
        operation is completed — its copies into the caller's tensors made, its error
        dropped — at this process's next operation or wait (hpref._torch_comm._park): the
        library (gloo, nccl) writes that memory until then, as a dropped gloo work still
        does. Parking only appends to a list: garbage collection may run this anywhere,
        in any thread, so nothing here waits or calls into the library."""
        staging = getattr(self, "_staging", None)
        if staging is None or getattr(self, "_done", True) or getattr(self, "_error", None) is not None:
            return
        comm_work = self._comm_work
        if not _pollable(comm_work):
            # The simulator's: it moves bytes inside wait() only, so the outputs are never
            # written; said at this rank's next operation (_report_dropped).
            try:
                _DROPPED.append((self._launch, f"{self._op} on {self._where}"))
            except Exception:  # noqa: BLE001 - interpreter teardown: the module is gone
                pass
            return
        try:
            _park(comm_work, staging, functools.partial(_finish_dropped, comm_work, staging), poll=False)
        except Exception:  # noqa: BLE001 - interpreter teardown: the module is gone
            pass

    def wait(self, timeout: Any = None) -> bool:
        """Completes the operation (at once when it already has) and returns True, or raises
        its error — the same error on every later call. ``timeout`` (a timedelta or seconds;
        torch's default zero: none): where the communicator's work takes one (hpref.torch's
        checked groups), a wait not complete within it raises CommTimeout and the operation
        stays failed; the simulator ignores it (it finds deadlocks and dead peers without
        one)."""
        if self._error is not None:
            raise self._error
        if self._done:
            return True
        seconds = _seconds(timeout)
        # A second thread waits for the first's completion (its copies made once); bounded by
        # its timeout where the communicator's work takes one.
        limited = seconds is not None and isinstance(self._comm_work, OnceWork)
        # (The group's text is formatted only where a timeout may be said: not per wait.)
        what = f"{self._op} on {self._where}" if limited else ""
        with _one_waiter(self._wait_lock, seconds if limited else None, what):
            if self._error is not None:
                raise self._error
            if self._done:
                return True
            staging = self._staging
            try:
                if limited:
                    self._comm_work.wait(seconds)
                else:
                    self._comm_work.wait()
                # A backend writes the caller's tensors outside autograd (a view of a
                # parameter included), as gloo does.
                if staging.pending():
                    self._finish(staging)
                if self._written:
                    _increment_version(self._result)
            except BaseException as e:
                self._error = e
                # A timeout given to wait() leaves the library moving the bytes: the staged
                # memory stays alive until it has finished.
                _park(self._comm_work, staging)
                raise
            finally:
                self._staging = None
            self._done = True
        _prune()
        return True

    def _finish(self, staging: _Staging) -> None:
        """The send-buffer checks, then the staged outputs copied into the caller's tensors."""
        index = staging.changed()
        if index is not None:
            who = "" if self._rank is None else f"rank {self._rank} changed "
            raise _from_core("comm_buffer_mutated",
                             f"{self._op} on {self._where}: {who}input tensor {index}"
                             f"{'' if who else ' changed'} between launch and wait() (a real backend "
                             "may read it at any time before wait)")
        staging.copy_out()

    def is_completed(self) -> bool:
        """Whether it has completed: wait() returned or raised, or the communicator's work
        says it finished (hpref.torch's checked groups: the inner gloo or nccl work), in
        which case it is completed here — the send-buffer check and the copies into the
        caller's tensors — so that a polling loop ends, as on gloo; an error is kept for
        wait() to raise. A communicator's work that cannot be polled (the simulator's: it
        completes an operation in wait() only, and a poll is no scheduling point, so a
        ``while not work.is_completed()`` loop would never end) is waited for here — the
        scheduling point wait() is — and True returned."""
        if self._done or self._error is not None:
            return True
        poll = getattr(self._comm_work, "is_completed", None)
        if poll is not None and not poll():
            return False
        try:
            self.wait()
        except Exception:  # noqa: BLE001 - kept in self._error: wait() raises it again
            pass
        return True

    def is_success(self) -> bool:
        """Whether it completed without an error."""
        return self._done

    def exception(self) -> Optional[BaseException]:
        """The error wait() raised, or None."""
        return self._error

    def result(self) -> List[torch.Tensor]:
        """The output tensors (valid after wait())."""
        return list(self._result)

    def synchronize(self) -> None:
        """Same as wait() (host memory: nothing more to order)."""
        self.wait()

    def get_future(self) -> "torch.futures.Future":
        """Waits for the operation, then returns a completed future holding result()."""
        self.wait()
        fut: torch.futures.Future = torch.futures.Future()
        fut.set_result(self.result())
        return fut

    def source_rank(self) -> int:
        """Refused: only recv from any source has one, and point-to-point is not simulated."""
        raise _usage(f"{self._op}: source_rank() exists only for recv without src, which hpref does not offer")

    _source_rank = source_rank


class HprefProcessGroup(dist.ProcessGroup):
    """A torch.distributed process group served by an hpref communicator ``comm`` on one of
    its groups ``group`` (``group.index`` and ``group.size`` are this group's rank and size).
    ``backend`` is the name the code asked for (what ``getBackendName()`` answers).
    ``device_tensors``: what an accelerator-memory group (nccl, hccl) takes — ``"cpu"``: CPU
    tensors stand in for device tensors (the simulator), passed as accelerator buffers;
    ``"cuda"``: CUDA tensors, passed as the device addresses they are (a real nccl group
    underneath, hpref.torch's checked nccl groups); None: refused."""

    def __init__(self, comm: Any, group: Any, backend: str, device_tensors: Optional[str] = "cpu"):
        """See the class docstring."""
        super().__init__(group.index, group.size)
        self._comm = comm
        self._group = group
        self._backend_name = str(backend)
        self._asked = str(backend)  # the name the code asked for (_relabel), for messages
        self._device_tensors = device_tensors
        self._check_buffers = getattr(comm, "check_buffers", True)
        self._ops = 0
        # The group's id and world ranks when the communicator does not name groups itself
        # (the simulator's: they never change); else asked for at each use (_label).
        self._fixed_label = None if hasattr(comm, "_label") else (group.id, tuple(group.ranks))
        self._size = group.size
        self._accelerator = group.memory == "accelerator"  # a group's memory space never changes

    # ---- identity ---------------------------------------------------------------------

    def getBackendName(self) -> str:
        """The backend name the code asked for ("gloo", "nccl", ...); "hpref" to DDP's
        construction logger (see _ddp_logger)."""
        if _STATE is not None and _STATE.ddp_logging:
            return BACKEND
        return self._backend_name

    def name(self) -> str:
        """Same as getBackendName()."""
        return self._backend_name

    @property
    def group_name(self) -> str:
        """The name torch registered this group under (as torch's own Python process groups
        answer it: the C++ one reads it from a backend, and this group has none)."""
        names = _c10d._world.pg_names if _TORCH2 else _c10d._pg_names
        if self not in names:
            raise _usage(f"{self._where()} has no group name: torch has not registered it (or destroyed it)")
        return names[self]

    @property
    def hpref_group(self) -> Any:
        """The communicator's group serving this process group."""
        return self._group

    def _set_sequence_number_for_group(self) -> None:
        """No-op: the communicator numbers each group's operations itself."""

    def _get_sequence_number_for_group(self) -> int:
        """The number of operations launched on this group from this rank."""
        return self._ops

    def shutdown(self) -> None:
        """No-op: the communicator outlives the process group."""

    def abort(self) -> None:
        """No-op (see shutdown)."""

    def __repr__(self) -> str:
        """The group id, ranks and the backend name it stands for."""
        gid, ranks = self._label()
        return f"HprefProcessGroup(group={gid}, ranks={list(ranks)}, backend={self._backend_name!r})"

    # ---- helpers ----------------------------------------------------------------------

    def _label(self) -> Tuple[int, Tuple[int, ...]]:
        """The group's id and world ranks as the code knows them: the communicator's own
        (the simulator's), or those its checked mode names it by (hpref.torch: torch's group
        id and global ranks, not those of the inner group)."""
        if self._fixed_label is not None:
            return self._fixed_label
        return self._comm._label(self._group)

    def _where(self, seq: Optional[int] = None) -> str:
        return _where_text(self._label(), self._asked, seq)

    def _rank(self, label: Optional[Tuple[int, Tuple[int, ...]]] = None) -> int:
        """This rank's world rank (as _label names the group's ranks; ``label``: _label()'s
        answer when the caller has it)."""
        ranks = (label or self._label())[1]
        return ranks[self._group.index] if 0 <= self._group.index < len(ranks) else self._group.index

    def _staging(self) -> "_Staging":
        return _Staging(self._check_buffers)

    def _written(self, op: str, tensors: Sequence[torch.Tensor], what: str = "output") -> None:
        """Refuses, before anything moves, a tensor the operation writes whose elements share
        memory (an expand()ed view): copying the result into it would fail with torch's bare
        RuntimeError after the collective ran."""
        for i, t in enumerate(tensors):
            if _overlaps(t):
                which = f"the {what} tensor" if len(tensors) == 1 else f"{what} tensor {i}"
                raise _usage(f"{op} on {self._where()}: {which} (shape {list(t.shape)}, strides {list(t.stride())}) "
                             "has elements sharing one memory location (an expand()ed view), and the operation "
                             "writes every element: pass a tensor of its own memory (.clone())")

    def _space(self, op: str, tensors: Sequence[torch.Tensor]) -> str:
        accelerator = self._accelerator
        if not accelerator:
            for t in tensors:
                if not t.is_cpu:
                    break
            else:
                return "host"
        device = self._device_tensors if accelerator else "cpu"
        for t in tensors:
            if t.device.type != "cpu" and t.device.type != device:
                raise _from_core("comm_memory_space",
                                 f"{op} on {self._where()}: a {t.device} tensor; hpref's process group "
                                 "moves CPU tensors (install(..., device_tensors=\"cpu\") lets them stand "
                                 "in for device tensors)")
            if t.device.type == "cpu" and accelerator and device != "cpu":
                raise _from_core("comm_memory_space",
                                 f"{op} on {self._where()}: an accelerator group takes device tensors, got "
                                 "a cpu tensor" + ("" if device else " (install(..., device_tensors=\"cpu\") "
                                                                      "lets CPU tensors stand in for them)"))
        return "accelerator" if accelerator else "host"

    def _strided(self, op: str, tensors: Sequence[torch.Tensor]) -> None:
        """Refuses a sparse (or any non-strided) tensor before anything moves: the
        communicator moves a tensor's bytes, and such a tensor has no one buffer of them."""
        for t in tensors:
            if t.layout != torch.strided:
                raise _usage(f"{op} on {self._where()}: a {t.layout} tensor; hpref's process group moves "
                             "strided (dense) tensors only (.to_dense() first)")

    def _same_dtype(self, op: str, input: torch.Tensor, tensors: Sequence[torch.Tensor], what: str,
                    ref: str = "the input tensor") -> None:
        """Refuses tensors of another dtype than ``input`` (named ``ref``) before anything
        moves: their bytes would be read as the wrong type (gloo refuses them too)."""
        for i, t in enumerate(tensors):
            if t.dtype != input.dtype:
                which = f"the {what} tensor" if len(tensors) == 1 else f"{what} tensor {i}"
                raise _usage(f"{op} on {self._where()}: {which} is {t.dtype} but {ref} is {input.dtype}; "
                             "the dtypes must be the same")

    def _one(self, op: str, tensors: Sequence[torch.Tensor]) -> torch.Tensor:
        if len(tensors) != 1:
            raise _usage(f"{op} on {self._where()}: one tensor per call, got {len(tensors)}")
        return tensors[0]

    def _work(self, op: str, comm_work: Any, staging: _Staging, result: Sequence[torch.Tensor],
              written: bool = False) -> HprefWork:
        """The work of a launched operation; ``written``: its outputs are marked written in
        place when it completes (autograd's version counter), as gloo's copies into them mark
        them - all_gather's and all_to_all's lists and all_gather_into_tensor's output (gloo
        2.13, 1 and 2 ranks; not all_reduce, broadcast or all_to_all_single, which it writes
        directly)."""
        self._ops += 1
        _prune()  # dropped works that have finished meanwhile
        # Messages name the operation's sequence number on the group: a checked operation
        # knows it; the simulator numbers a group's operations as this rank launches them.
        # Messages are formatted when one is needed (most operations need none).
        seq = getattr(comm_work, "seq", None)
        label = self._label()
        work = HprefWork(op, (label, self._asked, self._ops - 1 if seq is None else seq), comm_work, staging,
                         result, rank=self._rank(label))
        work._written = written and _increment_version is not None
        return work

    def _row_counts(self, op: str, what: str, t: torch.Tensor, splits: Sequence[int]) -> List[int]:
        n = self._size
        if t.dim() == 0:
            raise _usage(f"{op} on {self._where()}: the {what} tensor must have a first dimension")
        rows = t.shape[0]
        if not splits:
            if rows % n:
                raise _usage(f"{op} on {self._where()}: {rows} {what} rows do not split evenly over {n} ranks")
            return [_nbytes(t) // n] * n  # even splits: every peer the same byte count
        row_bytes = (_nbytes(t) // rows) if rows else t[0:1].numel() * t.element_size()
        splits = [int(s) for s in splits]
        if len(splits) != n or sum(splits) != rows or min(splits) < 0:
            raise _usage(f"{op} on {self._where()}: {what} split sizes {splits} must be {n} "
                         f"non-negative row counts summing to {rows}")
        return [s * row_bytes for s in splits]

    # ---- operations -------------------------------------------------------------------

    def allreduce(self, tensors: List[torch.Tensor], opts: Any = None) -> HprefWork:
        """all_reduce in place: sum, min or max over int32, int64, float32 or float64 (others
        refused at once, naming op and dtype)."""
        _report_dropped()
        t = self._one("all_reduce", tensors)
        self._strided("all_reduce", [t])
        red = opts.reduceOp if opts is not None else dist.ReduceOp.SUM
        red = getattr(red, "op", red)
        red_name = getattr(red, "name", None) or str(red).rsplit(".", 1)[-1]
        if red_name not in _REDUCE_OPS or t.dtype not in _REDUCE_DTYPES:
            raise _usage(f"all_reduce {red_name} over {t.dtype} on {self._where()}: hpref's communicator "
                         "reduces with SUM, MIN or MAX over int32, int64, float32 or float64")
        self._written("all_reduce", [t], "reduced")
        space = self._space("all_reduce", [t])
        staging = self._staging()
        buf = staging.receive(t, inout=True)
        work = self._comm.all_reduce(self._group, buf.data_ptr(), _nbytes(buf), _REDUCE_DTYPES[t.dtype],
                                     _REDUCE_OPS[red_name], space)
        return self._work("all_reduce", work, staging, [t])

    def broadcast(self, tensors: List[torch.Tensor], opts: Any = None) -> HprefWork:
        """broadcast from group rank ``opts.rootRank``: the root's bytes to every member."""
        _report_dropped()
        t = self._one("broadcast", tensors)
        self._strided("broadcast", [t])
        root = opts.rootRank if opts is not None else 0
        if getattr(opts, "rootTensor", 0) != 0 or not 0 <= root < self._group.size:
            raise _usage(f"broadcast on {self._where()}: root rank {root} (tensor "
                         f"{getattr(opts, 'rootTensor', 0)}) is not a group rank")
        if root != self._group.index:
            self._written("broadcast", [t], "receiving")
        space = self._space("broadcast", [t])
        staging = self._staging()
        buf = staging.send(t) if root == self._group.index else staging.receive(t)
        work = self._comm.broadcast(self._group, buf.data_ptr(), _nbytes(buf), self._group.ranks[root], space)
        return self._work("broadcast", work, staging, [t])

    def allgather(self, output_tensors: List[List[torch.Tensor]], input_tensors: List[torch.Tensor],
                  opts: Any = None) -> HprefWork:
        """all_gather into a list: member i's tensor into ``output_tensors[0][i]`` (equal
        byte sizes)."""
        _report_dropped()
        t = self._one("all_gather", input_tensors)
        outs = self._one("all_gather", output_tensors)
        self._strided("all_gather", [t, *outs])
        self._same_dtype("all_gather", t, outs, "output")
        n, size = self._group.size, _nbytes(t)
        if len(outs) != n or any(_nbytes(o) != size for o in outs):
            raise _usage(f"all_gather on {self._where()}: {n} output tensors of {size} bytes each expected, "
                         f"got sizes {[_nbytes(o) for o in outs]}")
        self._written("all_gather", outs)
        space = self._space("all_gather", [t, *outs])
        _zero_object_padding(t)
        staging = self._staging()
        src = staging.send(t)
        out, _ = staging.unpacked(outs, apart=[t])
        work = self._comm.all_gather(self._group, src.data_ptr(), size, out, n * size, space)
        return self._work("all_gather", work, staging, outs, written=True)

    def _check_gather_into(self, op: str, output: torch.Tensor, input: torch.Tensor) -> str:
        """Refuses what all_gather_into_tensor cannot do, before anything moves; its memory
        space."""
        self._strided(op, [input, output])
        self._same_dtype(op, input, [output], "output")
        n, size = self._group.size, _nbytes(input)
        if _nbytes(output) != n * size:
            raise _usage(f"{op} on {self._where()}: the output tensor has {_nbytes(output)} bytes, "
                         f"expected {n} x {size}")
        self._written(op, [output])
        return self._space(op, [input, output])

    def _gather_into(self, op: str, output: torch.Tensor, input: torch.Tensor) -> HprefWork:
        _report_dropped()
        space = self._check_gather_into(op, output, input)
        n, size = self._group.size, _nbytes(input)
        staging = self._staging()
        src = staging.send(input)
        out = staging.receive(output, apart=[input])  # the in-place idiom: input is a piece of output
        work = self._comm.all_gather(self._group, src.data_ptr(), size, out.data_ptr(), n * size, space)
        return self._work(op, work, staging, [output], written=True)

    def _allgather_base(self, output: torch.Tensor, input: torch.Tensor, opts: Any = None) -> HprefWork:
        """all_gather_into_tensor (torch 1.13's name)."""
        return self._gather_into("all_gather_into_tensor", output, input)

    def all_gather_single(self, output: torch.Tensor, input: torch.Tensor, opts: Any = None) -> HprefWork:
        """all_gather_into_tensor (torch 2.x's name)."""
        return self._gather_into("all_gather_into_tensor", output, input)

    def allgather_into_tensor_coalesced(self, outputs: List[torch.Tensor], inputs: List[torch.Tensor],
                                        opts: Any = None) -> HprefWork:
        """all_gather_into_tensor of each pair, in order, completed together (what torch
        2.x's functional all_gather_tensor and _coalescing_manager call): every pair is
        checked before the first is launched."""
        op = "all_gather_into_tensor (coalesced)"
        if len(outputs) != len(inputs):
            raise _usage(f"{op} on {self._where()}: {len(outputs)} output and {len(inputs)} input tensors; "
                         "one output per input")
        for output, input in zip(outputs, inputs):
            self._check_gather_into(op, output, input)
        works = [self._gather_into(op, output, input) for output, input in zip(outputs, inputs)]
        return HprefWork(op, self._where(), _AllOf(works), self._staging(), outputs, rank=self._rank())

    def all_gather_single_coalesced(self, outputs: List[torch.Tensor], inputs: List[torch.Tensor],
                                    opts: Any = None) -> HprefWork:
        """The coalesced all_gather_into_tensor (torch 2.x's name; see
        allgather_into_tensor_coalesced)."""
        return self.allgather_into_tensor_coalesced(outputs, inputs, opts)

    def alltoall_base(self, output: torch.Tensor, input: torch.Tensor, output_split_sizes: List[int],
                      input_split_sizes: List[int], opts: Any = None) -> HprefWork:
        """all_to_all_single: rows of ``input`` (split by ``input_split_sizes``, or evenly) to
        each member, rows from each into ``output``."""
        _report_dropped()
        op = "all_to_all_single"
        self._strided(op, [input, output])
        self._same_dtype(op, input, [output], "output")
        in_counts = self._row_counts(op, "input", input, input_split_sizes)
        out_counts = self._row_counts(op, "output", output, output_split_sizes)
        self._written(op, [output])
        space = self._space(op, [input, output])
        staging = self._staging()
        src = staging.send(input)
        out = staging.receive(output, apart=[input])
        work = self._comm.all_to_all_v(self._group, src.data_ptr(), in_counts, out.data_ptr(), out_counts, space)
        return self._work(op, work, staging, [output])

    def all_to_all_single(self, output: torch.Tensor, input: torch.Tensor, output_split_sizes: List[int],
                          input_split_sizes: List[int], opts: Any = None) -> HprefWork:
        """all_to_all_single (torch 2.x's name; see alltoall_base)."""
        return self.alltoall_base(output, input, output_split_sizes, input_split_sizes, opts)

    def alltoall(self, output_tensors: List[torch.Tensor], input_tensors: List[torch.Tensor],
                 opts: Any = None) -> HprefWork:
        """all_to_all on lists: ``input_tensors[i]`` to member i, member i's into
        ``output_tensors[i]``."""
        _report_dropped()
        op, n = "all_to_all", self._group.size
        if len(input_tensors) != n or len(output_tensors) != n:
            raise _usage(f"{op} on {self._where()}: {n} input and output tensors expected, got "
                         f"{len(input_tensors)} and {len(output_tensors)}")
        self._strided(op, [*input_tensors, *output_tensors])
        self._same_dtype(op, input_tensors[0], input_tensors, "input", "input tensor 0")
        self._same_dtype(op, input_tensors[0], output_tensors, "output", "input tensor 0")
        self._written(op, output_tensors)
        space = self._space(op, [*input_tensors, *output_tensors])
        staging = self._staging()
        src, in_counts = staging.packed(input_tensors)
        out, out_counts = staging.unpacked(output_tensors, apart=input_tensors)
        work = self._comm.all_to_all_v(self._group, src, in_counts, out, out_counts, space)
        return self._work(op, work, staging, output_tensors, written=True)

    def barrier(self, opts: Any = None) -> HprefWork:
        """barrier: completes when every member has launched it."""
        _report_dropped()
        return self._work("barrier", self._comm.barrier(self._group), _Staging(), [])


class _AllOf(OnceWork):
    """The works of a coalesced call, completed in order (the first error is raised); done
    when every one is."""

    _what = "a coalesced operation"

    def __init__(self, works: Sequence[HprefWork]):
        super().__init__()
        self._works = list(works)

    def _complete(self, timeout_s: Optional[float]) -> None:
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        for work in self._works:
            work.wait(None if deadline is None else max(deadline - time.monotonic(), 1e-3))

    def _finished(self) -> bool:
        return all(work.is_completed() for work in self._works)

    def _settled(self) -> bool:
        return all(_settled(work._comm_work) for work in self._works)


def _refusal(method: str, what: str) -> Callable[..., Any]:
    def refuse(self: HprefProcessGroup, *args: Any, **kwargs: Any) -> Any:
        raise _usage(f"{what} on {self._where()} is not supported: {_WHY}")
    refuse.__name__ = method
    refuse.__doc__ = f"Refused at once with CommUsageError: {what} is not a communicator operation."
    return refuse


for _method, _what in _UNSUPPORTED.items():
    setattr(HprefProcessGroup, _method, _refusal(_method, _what))


# ---- interception ------------------------------------------------------------------------


def _zero_object_padding(t: torch.Tensor) -> None:
    """all_gather_object pickles the object into a byte tensor, all_gathers the sizes, then
    grows that tensor to the largest with resize_(), whose new bytes are uninitialised
    memory, and all_gathers it: the receivers ignore those bytes, but the simulator hashes
    every byte sent. Zeroing them keeps the trace the same from run to run."""
    st = _STATE
    pending = None if st is None else st.object_tensor
    if pending is not None and pending[0]() is t:
        st.object_tensor = None
        if t.numel() > pending[1]:
            t[pending[1]:].zero_()


class _State:
    def __init__(self, comm: Any, device_tensors: Optional[str]):
        self.comm = comm
        self.device_tensors = device_tensors
        self.pending: Optional[Tuple[Any, str]] = None
        self.implicit_world: Any = None
        self.object_tensor: Optional[Tuple[Any, int]] = None  # (weakref, pickled length)
        self.saved: List[Tuple[Any, str, Any]] = []
        self.ddp_logging = False  # inside DDP's set_construction_data_and_log


_STATE: Optional[_State] = None


def installed() -> Any:
    """The communicator :func:`install` put in place in this process, or None."""
    return None if _STATE is None else _STATE.comm


def _create(store: Any, rank: int, size: int, timeout: Any) -> HprefProcessGroup:
    """The creator registered for "hpref" (torch's four-argument form): the group the
    interception just made on the communicator."""
    st = _STATE
    if st is None or st.pending is None:
        raise _usage("the hpref backend serves process groups only where hpref installed it "
                     "(inside hpref.sim.run, or after hpref._torch_pg.install(comm))")
    group, name = st.pending
    if (rank, size) != (group.index, group.size):
        raise _usage(f"process group rank {rank} of {size} does not match the communicator's "
                     f"group {group.id} (index {group.index} of {group.size})")
    return HprefProcessGroup(st.comm, group, name, st.device_tensors)


def _register() -> None:
    if BACKEND.upper() not in dist.Backend._plugins:
        if _TORCH2:
            dist.Backend.register_backend(BACKEND, _create, devices=["cpu"])
        else:
            dist.Backend.register_backend(BACKEND, _create)
    if not _TORCH2 and not hasattr(dist.Backend, "HCCL"):
        # torch 1.13's Backend() refuses names it does not know; Ascend's torch_npu
        # registers hccl, so code written for it names it. Served by the same creator
        # (our interception never lets torch reach it).
        dist.Backend.register_backend("hccl", _create)


def _backend_config(name: str) -> str:
    try:
        with warnings.catch_warnings():  # "device capability of hccl unknown"
            warnings.simplefilter("ignore")
            return str(_c10d.BackendConfig(dist.Backend(name)))
    except Exception:  # noqa: BLE001 - a name torch has no device map for
        return f"cpu:{name}"


def _relabel(pg: Any, name: str) -> None:
    """Records the name the code asked for where get_backend() reads it (and where an
    hpref group's messages name it)."""
    if isinstance(pg, HprefProcessGroup):
        pg._asked = name
    if _TORCH2:
        world = _c10d._world
        world.pg_map[pg] = (name, world.pg_map[pg][1])
        world.pg_backend_config[pg] = _backend_config(name)
    else:
        _c10d._pg_map[pg] = (name, _c10d._pg_map[pg][1])


def _new_process_group_helper(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def helper(group_size: int, group_rank: Any, global_ranks_in_group: Sequence[int], backend: Any,
               store: Any, *args: Any, **kwargs: Any) -> Any:
        st = _STATE
        if st is None:
            return original(group_size, group_rank, global_ranks_in_group, backend, store, *args, **kwargs)
        comm, name = st.comm, str(backend)
        ranks = [int(r) for r in global_ranks_in_group]
        if not ranks:  # the default group: the world
            if group_size not in (-1, comm.size()) or group_rank not in (-1, comm.rank()):
                raise _usage(f"init_process_group(rank={group_rank}, world_size={group_size}) in simulated "
                             f"rank {comm.rank()} of {comm.size()}")
            group_size, group_rank = comm.size(), comm.rank()
            if is_accelerator_backend_name(name):  # every rank initialises: a world collective
                group = comm.new_group(list(range(comm.size())), name)
            else:
                group = comm.world()
        else:  # every world rank calls this (torch does, members or not): SPEC 9.1
            group = comm.new_group(ranks, name)
            if not group.is_member:
                return (_c10d.GroupMember.NON_GROUP_MEMBER, None) if _TORCH2 else _c10d.GroupMember.NON_GROUP_MEMBER
        if store is None:  # torch 1.13's MPI path passes none
            store = dist.HashStore()
        st.pending = (group, name)
        try:
            result = original(group_size, group_rank, ranks, BACKEND, store, *args, **kwargs)
        finally:
            st.pending = None
        _relabel(result[0] if _TORCH2 else result, name)
        return result
    return helper


def _store_based_barrier(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def barrier(*args: Any, **kwargs: Any) -> None:
        # The communicator's new_group already is the world collective this barrier stands
        # for, and the store is this process's own: waiting on it would never end.
        if _STATE is None:
            return original(*args, **kwargs)
        return None
    return barrier


def _rendezvous(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def rendezvous(url: str, rank: int = -1, world_size: int = -1, **kwargs: Any) -> Any:
        st = _STATE
        if st is None:
            return original(url, rank, world_size, **kwargs)
        comm = st.comm
        if rank not in (-1, comm.rank()) or world_size not in (-1, comm.size()):
            raise _usage(f"init_process_group(init_method={url!r}, rank={rank}, world_size={world_size}) "
                         f"in simulated rank {comm.rank()} of {comm.size()}")
        return iter([(dist.HashStore(), comm.rank(), comm.size())])
    return rendezvous


def _init_process_group(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def init_process_group(*args: Any, **kwargs: Any) -> Any:
        st = _STATE
        if (st is not None and st.implicit_world is not None and dist.is_initialized()
                and _c10d.GroupMember.WORLD is st.implicit_world and len(_groups()) == 1):
            # The code initialises torch.distributed itself: it replaces the default group
            # install() made, with the backend it names.
            dist.destroy_process_group()
            st.implicit_world = None
        return original(*args, **kwargs)
    return init_process_group


def _new_group_with_tag(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def new_group_with_tag(*args: Any, **kwargs: Any) -> Any:
        if _STATE is not None and kwargs.get("use_local_synchronization"):
            raise _usage("new_group(use_local_synchronization=True) lets non-members skip the call; "
                         "hpref's new_group is a world collective every rank makes (SPEC 9.1)")
        return original(*args, **kwargs)
    return new_group_with_tag


def _get_msg_dict(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def get_msg_dict(func_name: str, *args: Any, **kwargs: Any) -> Dict[str, Any]:
        # torch 2.x logs a failed collective through this, asking torch.cuda.nccl for its
        # version when the group's backend is named nccl: on a build without NCCL that
        # raises AttributeError, which would replace the collective's own error.
        try:
            return original(func_name, *args, **kwargs)
        except Exception:  # noqa: BLE001 - logging must not hide the error being logged
            return {"func_name": func_name}
    return get_msg_dict


def _default_timeout(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def get_default_timeout(backend: Any) -> Any:
        # A torch built without NCCL warns, at every nccl group's making, that it has no
        # nccl default timeout, then gives the default of other backends. Here an nccl
        # group is the communicator's, and the warning would be noise (an error where tests
        # run with -W error): the same value, without it.
        if backend == dist.Backend.NCCL and not isinstance(getattr(_c10d, "default_pg_nccl_timeout", None),
                                                           timedelta):
            return _c10d.default_pg_timeout
        return original(backend)
    return get_default_timeout


def _object_to_tensor(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def object_to_tensor(obj: Any, device: Any, *args: Any, **kwargs: Any) -> Any:
        byte_tensor, local_size = original(obj, device, *args, **kwargs)
        if _STATE is not None:  # see _zero_object_padding
            _STATE.object_tensor = (weakref.ref(byte_tensor), byte_tensor.numel())
        return byte_tensor, local_size
    return object_to_tensor


def _ddp_logger(original: Any) -> Any:
    class Logger(original):  # type: ignore[misc, valid-type]
        """DDP's C++ logger (torch.distributed.Logger). Recording DDP's construction, it
        reads a group named "gloo" as a ProcessGroupGloo (its thread count, a static_cast):
        an hpref group is none, so it answers the name "hpref" there."""

        def set_construction_data_and_log(self, *args: Any, **kwargs: Any) -> Any:
            st = _STATE
            if st is None:
                return super().set_construction_data_and_log(*args, **kwargs)
            st.ddp_logging = True
            try:
                return super().set_construction_data_and_log(*args, **kwargs)
            finally:
                st.ddp_logging = False

    Logger.__qualname__ = Logger.__name__ = original.__name__
    Logger.__module__ = original.__module__
    return Logger


def _refused_on_torch1(what: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def wrap(original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def refuse(process_group: Any, *args: Any, **kwargs: Any) -> Any:
            if isinstance(process_group, HprefProcessGroup):
                # torch 1.13's C++ waits on the group's work in C++, where a Python process
                # group's wait() is never called: it would hang, not fail.
                raise _usage(f"{what} on {process_group._where()} needs torch 2.x: torch 1.13's C++ "
                             "waits on a Python process group's work where it never completes")
            return original(process_group, *args, **kwargs)
        refuse._hpref_refuses = True  # type: ignore[attr-defined]
        return refuse
    return wrap


# What DistributedDataParallel's construction calls on torch 1.13, in C++ that waits on the
# group's work where an HprefProcessGroup's never completes.
_DDP_TORCH1 = ("_verify_params_across_processes", "_broadcast_coalesced")


def _refuse_ddp_on_torch1() -> None:
    """On torch 1.13, refuses DistributedDataParallel on an HprefProcessGroup at once
    (CommUsageError) instead of hanging: for every HprefProcessGroup of this process —
    install()'s and hpref.torch's checked groups alike (each calls this) — from then on,
    uninstall() included. Other groups are untouched."""
    if _TORCH2:
        return
    for attr in _DDP_TORCH1:
        original = getattr(dist, attr, None)
        if original is not None and not getattr(original, "_hpref_refuses", False):
            setattr(dist, attr, _refused_on_torch1(f"DistributedDataParallel ({attr})")(original))


def _groups() -> Dict[Any, Any]:
    return _c10d._world.pg_map if _TORCH2 else _c10d._pg_map


def _patch(st: _State, owner: Any, attr: str, wrap: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
    original = getattr(owner, attr)
    st.saved.append((owner, attr, original))
    setattr(owner, attr, wrap(original))


def install(comm: Any, *, device_tensors: Optional[str] = "cpu", backend: Optional[str] = "gloo") -> None:
    """Serves every torch.distributed process group of this process from ``comm``.

    ``comm``: an object with the Communicator seam's Python interface (the simulator's
    communicator in a rank of :func:`hpref.sim.run`; a :class:`hpref._torch_comm.GlooComm`).
    After the call, ``init_process_group`` and ``new_group`` with any backend name make an
    :class:`HprefProcessGroup` on ``comm`` (the default group on ``comm.world()``, a group of
    an nccl/hccl name on an accelerator-memory group; a subgroup by ``comm.new_group``, which
    every world rank reaches, as torch calls its group helper on members and non-members
    alike), ``dist.get_backend`` answers the asked name, and no rendezvous or store barrier
    runs. ``device_tensors="cpu"``: CPU tensors stand in for device tensors on accelerator
    groups (None: such groups refuse them). ``backend``: the default group is initialised at
    once as ``init_process_group(backend)`` would (None: left to the code); a later
    ``init_process_group`` by the code replaces it while it is the only group.

    Refused (CommUsageError): a second install, and an already initialised torch.distributed.
    """
    global _STATE
    if _STATE is not None:
        raise _usage("hpref._torch_pg.install() already ran in this process (uninstall() first)")
    if dist.is_initialized():
        raise _usage("torch.distributed is already initialised in this process; install() must come first")
    if device_tensors not in ("cpu", None):
        raise _from_core("invalid_argument", f"device_tensors must be \"cpu\" or None, got {device_tensors!r}")
    _register()
    _DROPPED.clear()  # another communicator's
    st = _State(comm, device_tensors)
    _patch(st, _c10d, "_new_process_group_helper", _new_process_group_helper)
    _patch(st, _c10d, "_store_based_barrier", _store_based_barrier)
    _patch(st, _c10d, "rendezvous", _rendezvous)
    _patch(st, _c10d, "init_process_group", _init_process_group)
    _patch(st, dist, "init_process_group", _init_process_group)
    if hasattr(_c10d, "_new_group_with_tag"):
        _patch(st, _c10d, "_new_group_with_tag", _new_group_with_tag)
    _patch(st, _c10d, "_object_to_tensor", _object_to_tensor)
    if hasattr(_c10d, "_get_default_timeout"):  # torch 2.x
        _patch(st, _c10d, "_get_default_timeout", _default_timeout)
    if hasattr(dist, "Logger"):
        _patch(st, dist, "Logger", _ddp_logger)
    _refuse_ddp_on_torch1()  # what DistributedDataParallel's construction calls
    logger = sys.modules.get("torch.distributed.c10d_logger")
    if logger is not None and hasattr(logger, "_get_msg_dict"):
        _patch(st, logger, "_get_msg_dict", _get_msg_dict)
    _STATE = st
    if backend is not None:
        try:
            dist.init_process_group(backend, store=dist.HashStore(), rank=comm.rank(), world_size=comm.size())
        except BaseException:
            uninstall()
            raise
        st.implicit_world = _c10d.GroupMember.WORLD


def uninstall() -> None:
    """Destroys the process groups (when initialised) and undoes :func:`install`."""
    global _STATE
    st = _STATE
    if st is None:
        return
    try:
        if dist.is_initialized():
            dist.destroy_process_group()
    finally:
        for owner, attr, original in reversed(st.saved):
            setattr(owner, attr, original)
        _STATE = None
        _DROPPED.clear()
