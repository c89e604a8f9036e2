"""An hpref-communicator view of an existing torch process group (docs/python.md, "torch.distributed
on an hpref communicator").

:class:`TorchComm` offers the Python interface of hpref's Communicator seam (SPEC 9.1, the
object :func:`hpref.sim.communicator` returns inside a simulated rank) over a real torch
process group — gloo on host memory, or nccl on a CUDA device's memory: ``rank()``,
``size()``, ``world()``, ``world_backend()``, ``new_group(ranks, backend)`` and the
operations ``all_gather``, ``broadcast``, ``all_reduce``, ``all_to_all_v`` and ``barrier``
on ``(address, bytes)`` buffers, each launching the group's collective on uint8 (or, for
all_reduce, typed) views of those bytes and returning a Work whose ``wait()`` completes it.
``hpref._torch_pg.install(TorchComm(...))`` then serves ``torch.distributed`` code from it;
a checked mode (SPEC 9.2, :mod:`hpref._checked`) can wrap it. ``GlooComm`` is its earlier
name.

:class:`CommGroup` is the group handle it returns, with the fields of the simulator's Group.
"""
from __future__ import annotations

import atexit
import collections
import ctypes
import dataclasses
import os
import threading
from datetime import timedelta
from typing import Any, Callable, Deque, Dict, Optional, Sequence, Tuple

from .errors import _from_core

__all__ = ["CommGroup", "GlooComm", "OnceWork", "TorchComm", "is_accelerator_backend_name"]


def is_accelerator_backend_name(backend: str) -> bool:
    """True for backend names containing "nccl" or "hccl" (any case): groups whose
    operations take accelerator buffers (the C++ ``is_accelerator_backend_name``)."""
    name = str(backend).lower()
    return "nccl" in name or "hccl" in name


@dataclasses.dataclass(frozen=True)
class CommGroup:
    """A process group as one rank sees it (SPEC 9.1): ``id`` (creation order, 0 = world),
    ``ranks`` (sorted world ranks), ``index`` (this rank's position, -1 on a non-member),
    ``backend`` (the name it was created with) and ``memory`` ("host", or "accelerator"
    for nccl/hccl names)."""

    id: int
    ranks: Tuple[int, ...]
    index: int
    backend: str
    memory: str = "host"

    @property
    def size(self) -> int:
        """The number of members."""
        return len(self.ranks)

    @property
    def is_member(self) -> bool:
        """Whether this rank is a member (non-members hold an empty handle)."""
        return self.index >= 0

    def index_of(self, world_rank: int) -> int:
        """``world_rank``'s position in the group, or -1 when it is not a member."""
        try:
            return self.ranks.index(world_rank)
        except ValueError:
            return -1


def _usage(message: str) -> Exception:
    return _from_core("comm_usage", message)


def _torch():
    import torch
    import torch.distributed as dist
    return torch, dist


class _DeviceMemory:
    """``nbytes`` bytes of device memory at ``addr`` as the CUDA array interface (version 2)
    describes them: what ``torch.as_tensor`` turns into a tensor over that memory, no copy."""

    def __init__(self, addr: int, nbytes: int):
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (addr, False),
                                         "strides": None, "version": 2}


def _bytes_view(addr: int, nbytes: int, dtype: Any = None, device: Any = None):
    """A torch tensor over ``nbytes`` bytes at ``addr`` (uint8, or ``dtype``): host memory,
    or with a CUDA ``device`` that device's memory; the caller keeps the memory alive."""
    torch, _ = _torch()
    dtype = torch.uint8 if dtype is None else dtype
    on_host = device is None or torch.device(device).type == "cpu"
    if nbytes == 0:
        return torch.empty(0, dtype=dtype, device=None if on_host else device)
    if on_host:
        return torch.frombuffer((ctypes.c_uint8 * nbytes).from_address(addr), dtype=dtype)
    return torch.as_tensor(_DeviceMemory(addr, nbytes), device=device).view(dtype)


_TORCH_DTYPES = {"int32": "int32", "int64": "int64", "float32": "float32", "float64": "float64"}
_REDUCE_OPS = {"sum": "SUM", "min": "MIN", "max": "MAX"}


class _WaitLock:
    """A work's wait lock (``_one_waiter``) and the process that made it."""

    __slots__ = ("lock", "pid")

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.pid = os.getpid()


class _one_waiter:
    """Holds a work's lock while a wait() completes it, so that the work completes once when
    two threads wait on it: the second waits for the first, then returns or raises what the
    first did (its checks and copies were made twice, and it could find them half
    released). ``timeout_s`` (None: no limit; longer than threading.TIMEOUT_MAX: none
    either) bounds that wait too: past it ``CommTimeout`` naming ``what``, and the work is
    left to the first thread. In a process forked from the one that made the lock it is
    not taken: the fork may have copied it held by a thread the child does not have (its
    wait would block forever; the work's own wait refuses or fails there). A class, not a
    generator context manager: it is entered at every wait (1 us less a wait)."""

    __slots__ = ("_wait_lock", "_timeout_s", "_what", "_held")

    def __init__(self, wait_lock: _WaitLock, timeout_s: Optional[float], what: str) -> None:
        self._wait_lock, self._timeout_s, self._what = wait_lock, timeout_s, what
        self._held: Any = None

    def __enter__(self) -> None:
        wait_lock, timeout_s = self._wait_lock, self._timeout_s
        if wait_lock.pid != os.getpid():
            return
        limit = -1 if timeout_s is None or timeout_s >= threading.TIMEOUT_MAX else max(timeout_s, 0.0)
        if not wait_lock.lock.acquire(timeout=limit):
            raise _from_core("comm_timeout", f"{self._what}: not complete within the {timeout_s:g} s given to "
                                             "wait() (another thread is waiting for it)")
        self._held = wait_lock.lock

    def __exit__(self, *exc: Any) -> None:
        if self._held is not None:
            self._held.release()
            self._held = None


class OnceWork:
    """The shape every Python Work here shares (SPEC 9.1: a Work completes once): ``wait()``
    runs ``_complete()`` the first time, then returns at once — or raises the error the
    first call raised, the same one on every call — and ``_release()`` runs either way.
    Two threads waiting: one completes it, the other waits for that (``_one_waiter``)."""

    _done = False
    _error: Optional[BaseException] = None
    _what = "the operation"  # named in messages

    def __init__(self) -> None:
        self._wait_lock = _WaitLock()

    def wait(self, timeout_s: Optional[float] = None) -> None:
        """Completes the operation or raises its error (the same one on every call).
        ``timeout_s``: how long this call waits at most (None: the operation's own deadline);
        past it ``CommTimeout``, and the operation stays failed (SPEC 9.2: a timeout ends the
        group's use)."""
        if self._error is not None:
            raise self._error
        if self._done:
            return
        with _one_waiter(self._wait_lock, timeout_s, self._what):
            if self._error is not None:
                raise self._error
            if self._done:
                return
            try:
                self._complete(timeout_s)
            except BaseException as e:
                self._error = e
                raise
            finally:
                self._release()
            self._done = True

    def is_completed(self) -> bool:
        """Whether wait() would return or raise at once: completed, failed, or finished
        underneath (a polling loop ends, as torch's works do)."""
        return self._done or self._error is not None or self._finished()

    def _complete(self, timeout_s: Optional[float]) -> None:
        raise NotImplementedError

    def _finished(self) -> bool:
        """Whether the operation underneath has finished (wait() would not block)."""
        return False

    def _release(self) -> None:
        """Drops what the operation kept alive until wait()."""

    def _settled(self) -> bool:
        """Whether the operation underneath no longer touches its buffers: done, or finished
        underneath. A failed wait (a timeout given to wait()) is not settled while the
        library still moves the bytes."""
        return self._done or self._finished()


def _settled(work: Any) -> bool:
    """Whether ``work``'s operation no longer reads or writes its memory: its ``_settled()``
    (the OnceWorks here, down to torch's own work), else its ``is_completed()``; a work
    with neither (the simulator's, which moves bytes only inside wait()) is settled."""
    settled = getattr(work, "_settled", None)
    if settled is not None:
        return bool(settled())
    poll = getattr(work, "is_completed", None)
    return True if poll is None else bool(poll())


# Works whose operation may still write memory that only this list keeps alive: a work
# dropped unwaited, or whose wait() raised (a timeout given to wait()) while the library
# still moves its bytes. Each entry: (work, keep, finish): ``keep`` holds the memory;
# ``finish()``, when given, completes the operation once settled (a dropped work's copies
# into the caller's tensors, as gloo writes them). Appended from __del__ (garbage
# collection, any thread: a deque's append is atomic and takes no lock; nothing there
# blocks), pruned by _prune() at the next operation and wait of this process.
_IN_FLIGHT: Deque[Tuple[Any, Any, Optional[Callable[[], None]]]] = collections.deque()


def _park(work: Any, keep: Any, finish: Optional[Callable[[], None]] = None, poll: bool = True) -> None:
    """Keeps ``keep`` alive until ``work`` is settled (at once dropped when it already is,
    unless ``poll`` is False: from __del__, which calls nothing)."""
    try:
        settled = poll and _settled(work)
    except Exception:  # noqa: BLE001 - a work that cannot say: kept (and the error being raised stays)
        settled = False
    if settled:
        if finish is not None:
            finish()
        return
    _IN_FLIGHT.append((work, keep, finish))


def _prune() -> None:
    """Releases the parked works that have settled, finishing those that say how."""
    for _ in range(len(_IN_FLIGHT)):
        try:
            entry = _IN_FLIGHT.popleft()
        except IndexError:
            return
        try:
            settled = _settled(entry[0])
        except Exception:  # noqa: BLE001 - a work that cannot say: kept
            settled = False
        if not settled:
            _IN_FLIGHT.append(entry)
        elif entry[2] is not None:
            try:
                entry[2]()
            except Exception:  # noqa: BLE001 - a dropped work's error is dropped with it
                pass


@atexit.register
def _pin_in_flight() -> None:
    """At exit, what is still in flight is never freed (the library's threads may write it
    until the process ends): the interpreter's teardown would free it under them."""
    _prune()
    if _IN_FLIGHT:
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(_IN_FLIGHT))


class _GlooWork(OnceWork):
    """A launched collective of the inner group: ``wait()`` completes it (again: returns at
    once) or raises ``CommBackendError`` naming the operation, group and the library's
    message (``CommTimeout`` past a ``timeout_s`` given to wait()). ``library``: the
    library running it ("gloo" or "nccl"), for that message."""

    def __init__(self, work: Any, what: str, keep: Tuple[Any, ...] = (), library: str = "gloo"):
        super().__init__()
        self._work = work
        self._what = what
        self._keep = keep  # the views the work reads and writes
        self._library = library

    def _complete(self, timeout_s: Optional[float]) -> None:
        if self._work is None:
            return
        try:
            if timeout_s is None:
                self._work.wait()
            else:  # torch's Work.wait(timeout): "Operation timed out!" past it (torch 1.13 and 2.x)
                self._work.wait(timedelta(seconds=timeout_s))
        except RuntimeError as e:
            if timeout_s is not None and "timed out" in str(e).lower():
                raise _from_core("comm_timeout", f"{self._what}: not complete within the {timeout_s:g} s "
                                                 f"given to wait() ({e})") from e
            raise _from_core("comm_backend", f"{self._what} failed in {self._library}: {e}") from e

    def _finished(self) -> bool:
        return self._work is None or bool(self._work.is_completed())

    def _settled(self) -> bool:
        # torch's work: a wait(timeout) that raised leaves it running, not completed.
        return self._finished()

    def _release(self) -> None:
        if self._settled():  # else the library still moves them (a timeout given to wait())
            self._keep = ()


class TorchComm:
    """An hpref-communicator view of an existing torch process group.

    ``inner_group``: a process group that every rank of this communicator's world holds —
    a ``torch.distributed`` group (e.g. ``dist.group.WORLD``) or a ``ProcessGroupGloo`` /
    ``ProcessGroupNCCL`` made directly from a store. World ranks are its group ranks.
    ``store``: a store all those ranks share, used to make the gloo groups of
    :meth:`new_group` (default: the store torch keeps for ``inner_group``).
    ``timeout``: the gloo timeout of those groups. ``names``: ``names(group) -> (group id,
    world ranks)``, the ids and ranks the code knows a group by, for the messages (default,
    or where it raises KeyError: the group's own; hpref.torch passes torch's group name and
    global ranks, as for its CheckedComm). ``device``: where the buffers live —
    ``"cpu"`` (a gloo group: host memory, the world group's memory is ``"host"``) or a CUDA
    device (an nccl group: the addresses are device memory, viewed through the CUDA array
    interface; the world group's memory is ``"accelerator"``).

    The operations run the inner group's collectives on views of the caller's bytes;
    nothing is checked beyond each call's own arguments (no cross-rank agreement: that is
    SPEC 9.2's checked mode), and the all_reduce order is the library's, not SPEC 9.1's
    group order.
    """

    def __init__(self, inner_group: Any, *, store: Any = None,
                 timeout: timedelta = timedelta(minutes=30), device: Any = "cpu",
                 names: Optional[Callable[[CommGroup], Tuple[int, Sequence[int]]]] = None):
        """Wraps ``inner_group`` (see the class docstring)."""
        torch, _ = _torch()
        self._inner = inner_group
        self._rank = int(inner_group.rank())
        self._size = int(inner_group.size())
        self._store = store if store is not None else self._torch_store(inner_group)
        self._timeout = timeout
        self._device = torch.device(device)
        self._on_host = self._device.type == "cpu"
        self._backend = "gloo" if self._on_host else "nccl"
        self._world = CommGroup(0, tuple(range(self._size)), self._rank, self._backend,
                                "host" if self._on_host else "accelerator")
        self._members: Dict[int, Any] = {0: inner_group}
        self._next_id = 1
        self._names = names

    def _label(self, group: CommGroup) -> Tuple[int, Tuple[int, ...]]:
        """The id and world ranks the messages give ``group`` (see ``names``)."""
        try:
            gid, ranks = self._names(group) if self._names is not None else (group.id, group.ranks)
        except KeyError:  # names() does not know the group (yet)
            return group.id, tuple(group.ranks)
        ranks = tuple(int(r) for r in ranks)
        return int(gid), ranks if len(ranks) == group.size else tuple(group.ranks)

    def _name(self, group: CommGroup) -> str:
        gid, ranks = self._label(group)
        return f"group {gid} {list(ranks)}"

    def _me(self) -> int:
        """This rank as the messages name it (its world rank)."""
        return self._label(self._world)[1][self._world.index]

    @property
    def device(self) -> Any:
        """The torch device of the buffers (cpu, or the CUDA device of an nccl group)."""
        return self._device

    def _view(self, addr: int, nbytes: int, dtype: Any = None) -> Any:
        return _bytes_view(addr, nbytes, dtype, None if self._on_host else self._device)

    def to_host(self, addr: int, nbytes: int) -> Any:
        """A host copy of ``nbytes`` bytes at ``addr`` (device memory: waits for the device's
        current stream); host memory is returned as a view, uncopied."""
        view = self._view(addr, nbytes)
        return view if self._on_host else view.cpu()

    @staticmethod
    def _torch_store(inner_group: Any) -> Any:
        _, dist = _torch()
        dc = dist.distributed_c10d
        world = getattr(dc, "_world", None)
        pg_map = world.pg_map if world is not None and hasattr(world, "pg_map") else getattr(dc, "_pg_map", {})
        entry = pg_map.get(inner_group)
        return None if entry is None else entry[1]

    # ---- the Communicator seam ---------------------------------------------------------

    def rank(self) -> int:
        """This rank's world rank (its rank in the inner group)."""
        return self._rank

    def size(self) -> int:
        """The number of world ranks (the inner group's size)."""
        return self._size

    def world_backend(self) -> str:
        """``"gloo"`` or ``"nccl"``: the communication library underneath."""
        return self._backend

    def world(self) -> CommGroup:
        """The group of all world ranks (id 0), served by the inner group."""
        return self._world

    def new_group(self, ranks: Sequence[int], backend: str) -> CommGroup:
        """A world collective (SPEC 9.1): every world rank calls it, in the same order, with
        the same ranks; members make a gloo group over ``store`` and get a handle, the others
        an empty one (``is_member`` False). ``backend`` names the group (an nccl/hccl name
        makes an accelerator-memory group; gloo still moves the bytes)."""
        if self._device.type != "cpu":
            raise _usage(f"new_group({list(ranks)}, {backend!r}) on a {self._device} communicator: its groups "
                         "are made by torch.distributed (hpref.torch serves one torch group per communicator)")
        ranks = [int(r) for r in ranks]
        if not ranks or len(set(ranks)) != len(ranks) or any(r < 0 or r >= self._size for r in ranks):
            raise _usage(f"new_group ranks {ranks} must be distinct world ranks in [0, {self._size})")
        ranks = sorted(ranks)
        gid = self._next_id
        self._next_id += 1
        memory = "accelerator" if is_accelerator_backend_name(backend) else "host"
        index = ranks.index(self._rank) if self._rank in ranks else -1
        group = CommGroup(gid, tuple(ranks), index, str(backend), memory)
        if index < 0:
            return group
        if self._store is None:
            raise _usage("GlooComm.new_group needs a store shared by every rank: pass store= "
                         "(the inner group is not one torch.distributed keeps a store for)")
        _, dist = _torch()
        prefix = dist.PrefixStore(f"hpref_gloo_comm/{gid}/", self._store)
        self._members[gid] = dist.ProcessGroupGloo(prefix, index, len(ranks), self._timeout)
        return group

    def all_gather(self, group: CommGroup, in_addr: int, in_bytes: int, out_addr: int,
                   out_bytes: int, space: str = "host") -> _GlooWork:
        """Member i's ``in_bytes`` land at ``out[i * in_bytes]``; ``out_bytes`` must be
        ``group.size * in_bytes``."""
        pg = self._check(group, "all_gather", space)
        if out_bytes != group.size * in_bytes:
            raise _usage(f"all_gather on {self._name(group)}: out_bytes {out_bytes} != group size "
                         f"{group.size} x in_bytes {in_bytes}")
        src = self._view(in_addr, in_bytes)
        out = self._view(out_addr, out_bytes)
        chunks = list(out.split(in_bytes)) if in_bytes else [out[:0] for _ in range(group.size)]
        work = pg.allgather([chunks], [src])
        return _GlooWork(work, f"all_gather on {self._name(group)}", (src, out, chunks), self._backend)

    def broadcast(self, group: CommGroup, addr: int, nbytes: int, root: int,
                  space: str = "host") -> _GlooWork:
        """The ``nbytes`` at ``addr`` on world rank ``root`` (a member) to every member."""
        pg = self._check(group, "broadcast", space)
        root_index = group.index_of(int(root))
        if root_index < 0:
            raise _usage(f"broadcast on {self._name(group)}: root {root} (a rank of the communicator's world) "
                         "is not a member")
        _, dist = _torch()
        opts = dist.BroadcastOptions()
        opts.rootRank = root_index
        opts.rootTensor = 0
        buf = self._view(addr, nbytes)
        return _GlooWork(pg.broadcast([buf], opts), f"broadcast on {self._name(group)}", (buf,), self._backend)

    def all_reduce(self, group: CommGroup, addr: int, nbytes: int, dtype: str, op: str,
                   space: str = "host") -> _GlooWork:
        """In place over ``nbytes`` of ``dtype`` (int32, int64, float32, float64) with ``op``
        (sum, min, max)."""
        pg = self._check(group, "all_reduce", space)
        torch, dist = _torch()
        if dtype not in _TORCH_DTYPES or op not in _REDUCE_OPS:
            raise _usage(f"all_reduce {op} over {dtype}: only sum, min and max over int32, int64, "
                         "float32 and float64 are communicator operations")
        tdtype = getattr(torch, _TORCH_DTYPES[dtype])
        item = torch.empty(0, dtype=tdtype).element_size()
        if nbytes % item:
            raise _usage(f"all_reduce on {self._name(group)}: {nbytes} bytes is not a whole number of {dtype}")
        opts = dist.AllreduceOptions()
        opts.reduceOp = getattr(dist.ReduceOp, _REDUCE_OPS[op])
        buf = self._view(addr, nbytes, tdtype)
        return _GlooWork(pg.allreduce([buf], opts), f"all_reduce on {self._name(group)}", (buf,), self._backend)

    def all_to_all_v(self, group: CommGroup, in_addr: int, in_counts: Sequence[int], out_addr: int,
                     out_counts: Sequence[int], space: str = "host") -> _GlooWork:
        """``in_counts[i]`` bytes (consecutive, in member order) to member i; ``out_counts[i]``
        bytes from member i land consecutively at ``out_addr``."""
        pg = self._check(group, "all_to_all_v", space)
        in_counts, out_counts = [int(c) for c in in_counts], [int(c) for c in out_counts]
        if len(in_counts) != group.size or len(out_counts) != group.size or min(in_counts + out_counts) < 0:
            raise _usage(f"all_to_all_v on {self._name(group)}: counts {in_counts} / {out_counts} must be "
                         f"{group.size} non-negative byte counts each")
        _, dist = _torch()
        src = self._view(in_addr, sum(in_counts))
        out = self._view(out_addr, sum(out_counts))
        work = pg.alltoall_base(out, src, out_counts, in_counts, dist.AllToAllOptions())
        return _GlooWork(work, f"all_to_all_v on {self._name(group)}", (src, out), self._backend)

    def barrier(self, group: CommGroup) -> _GlooWork:
        """Completes when every member has launched it."""
        pg = self._check(group, "barrier", None)
        _, dist = _torch()
        return _GlooWork(pg.barrier(dist.BarrierOptions()), f"barrier on {self._name(group)}", (), self._backend)

    # ---- checks -------------------------------------------------------------------------

    def _check(self, group: CommGroup, op: str, space: Optional[str]) -> Any:
        if not isinstance(group, CommGroup):
            raise _usage(f"{op}: {group!r} is not a group of this communicator")
        if not group.is_member:
            raise _usage(f"{op} on {self._name(group)}: rank {self._me()} is not a member")
        pg = self._members.get(group.id)
        if pg is None:
            raise _usage(f"{op}: group {group.id} was not made by this communicator")
        if space is not None and space != group.memory:
            raise _from_core("comm_memory_space",
                             f"{op} on {self._name(group)} ({group.backend}) takes {group.memory} buffers, "
                             f"got a {space} buffer")
        return pg


# The name of issue 12's gloo-only version, kept for code that uses it.
GlooComm = TorchComm
