"""SPEC 9.2's checked mode over any Python communicator (issue 13; docs/backends.md, "From
Python: hpref.torch's checked process groups").

:class:`CheckedComm` wraps an object with the Communicator seam's Python interface (a
:class:`hpref._torch_comm.GlooComm` over real gloo) and, before each operation:

1. numbers it (a sequence number per group, the same on every member when the code is
   right) and records it as this rank's last launch — in the job's store (so a rank whose
   wait times out can say what every rank last launched) and, with ``log_dir``, as one JSON
   line of ``<log_dir>/rank<R>.jsonl`` (what ``hpref verify`` reads);
2. makes its SPEC 9.2 signature with the C++ checked mode's code (``_core.op_signature``:
   kind, root, reduce op, dtype, byte counts, and for all_to_all_v the bytes to and from
   every member) and all-gathers it over the group;
3. raises ``CommMismatch`` on every member, with the C++ message
   (``_core.check_signatures``: ``all_to_all_v counts disagree on group 1 seq 3: rank 1
   sends 96 bytes to rank 3, which expects 64``), instead of running a mismatched
   collective;
4. takes the send buffer's checksum (``_core.buffer_checksum``), runs the operation, and at
   ``wait()`` compares it again: a change is ``BufferMutated``.

Every wait has a deadline (``timeout_s``): past it, ``CommTimeout`` names what each member
last launched on the group, and where a member's latest launch is on another group, that one
too ("rank 1: nothing (latest launch: all_reduce on group 2 seq 0)": it may wait there), and
what a member's last wait raised where none completed since (", whose last wait raised
comm_timeout at ...": it gave up or left). A peer
that went away is ``PeerFailed``, naming the same. Messages name groups and ranks as the
code knows them (``names``: torch's group id and global ranks).
"""
from __future__ import annotations

import contextlib
import json
import os
import struct
import threading
import time
import weakref
import zlib
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from . import _core
from ._torch_comm import OnceWork, _park, _settled
from .errors import _from_core

__all__ = ["CheckedComm", "CheckedWork", "LAST_KEY", "LATEST_KEY", "NEW_GROUP_KIND", "check_signatures",
           "peer_went_away"]

# The store key each member sets at every launch: LAST_KEY + str(group index), in its group's store.
LAST_KEY = "hpref_checked/last/"
# And LATEST_KEY + str(world rank), in the store every group of the job shares (``latest_store``):
# where a rank that a group waits for launched last, whichever group that is.
LATEST_KEY = "hpref_checked/latest/"


# The errors _raise made, noted in the rank's record already (an error's identity: nothing
# added to the error, which pickles with its attributes).
_NOTED: "weakref.WeakSet[BaseException]" = weakref.WeakSet()


# compare_set's expected value that no key of checked mode ever holds: asked for a key it
# answers the key's value, or this where the key is absent, and sets nothing.
_ABSENT = "\x00hpref: no such key\x00"


def store_has(store: Any, key: str, wait_s: float = 0.5) -> bool:
    """Whether ``store`` holds ``key``, without waiting for it: ``check`` where the store has
    it (torch 2.x), else ``compare_set`` against a value no key holds (torch 1.13's stores:
    it answers at once and sets nothing), else a wait of ``wait_s`` given to that one call
    (a Python ``Store`` subclass without either; the store's own timeout is torch's, shared
    with every later get and barrier of the job, and stays as it is). Not a timed wait on
    1.13's TCPStore: its server answers a wait that timed out once the key is set, and the
    client reads that answer as the reply to its next call ("Socket Timeout", or another
    key's value). A store that fails otherwise (gone with its server: "Broken pipe")
    raises."""
    for method in ("check", "compare_set"):
        call = getattr(store, method, None)
        if call is None:
            continue
        try:
            if method == "check":
                return bool(call([key]))
            return bytes(call(key, _ABSENT, _ABSENT + "?")) != _ABSENT.encode()
        except RuntimeError as e:
            text = str(e).lower()
            if not any(s in text for s in ("pure virtual", "not implemented", "internal assert failed")):
                raise  # c10d's base Store has both but no body; a subclass may not implement them
                # (torch 1.13's binding then fails an internal assert: "fn INTERNAL ASSERT FAILED")
    from datetime import timedelta
    try:
        store.wait([key], timedelta(seconds=wait_s))
        return True
    except Exception as e:  # noqa: BLE001 - absent: the wait timed out; anything else is raised
        text = str(e).lower()
        if "timeout" in text or "timed out" in text:
            return False
        raise


class _RankRecord:
    """This process's rank as every checked group of one run keeps it in the job's store
    (LATEST_KEY): its latest launch on any group (rank, run, group, seq, kind), the error its
    last launch or wait to end raised (cleared when a wait completes), and why a call to the
    store failed, once one has (no call is made after: each failed one printed a page of
    torch's C++ stack trace). Shared by the groups of a run through the same ``latest_store``."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.launch: Optional[Dict[str, Any]] = None
        self.raised: Optional[str] = None
        self.gone: Optional[str] = None


_RECORDS: Dict[Tuple[int, Any], _RankRecord] = {}  # (run, latest_store) -> the record
_RECORDS_LOCK = threading.Lock()


def _shared_record(run: int, latest_store: Any) -> _RankRecord:
    with _RECORDS_LOCK:
        return _RECORDS.setdefault((run, latest_store), _RankRecord())


def _forget_records() -> None:
    """A forked rank starts with no record (and a lock no thread holds)."""
    global _RECORDS_LOCK
    _RECORDS.clear()
    _RECORDS_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_records)


def peer_went_away(text: str) -> bool:
    """Whether a gloo or NCCL error's text says a peer's connection went (closed, reset, a
    broken pipe, a named peer): raised as PeerFailed, at a wait or a group's creation."""
    lowered = text.lower()
    return any(s in lowered for s in ("connection closed", "connection reset", "broken pipe", "peer"))

# new_group's signature on the world group. hpref/op_signature.hpp has no new_group kind
# (OpKind: all_gather .. barrier; C++ agrees new_group with group_request words, outside
# the signature sequence), so the wire form is reused with this kind word, which
# _core.check_signatures would refuse as "not one": signatures holding it are unpacked here
# and compared by _core.check_new_group (hpref::new_group_mismatch, which hpref verify uses
# too), every other one by _core.check_signatures.
# Words: magic, kind, root -1, op 0, dtype 0, crc32(backend); counts_in: a member flag per
# world rank; counts_out: the backend's name, zero-padded.
NEW_GROUP_KIND = 5


def _words(sig: bytes) -> Tuple[int, ...]:
    return struct.unpack(f"<{len(sig) // 8}Q", sig)


def _new_group_signature(members: int, ranks: Sequence[int], backend: str) -> bytes:
    words = list(_words(_core.op_signature("barrier", members)))
    name = backend.encode()[: 8 * members].ljust(8 * members, b"\0")
    words[1] = NEW_GROUP_KIND
    words[5] = zlib.crc32(backend.encode())
    for r in ranks:
        words[6 + int(r)] = 1
    words[6 + members:] = struct.unpack(f"<{members}Q", name)
    return struct.pack(f"<{len(words)}Q", *words)


def _is_new_group(sig: bytes) -> bool:
    return len(sig) >= 16 and _words(sig[:16])[1] == NEW_GROUP_KIND


def _new_group_request(sig: bytes, members: int) -> Tuple[Tuple[int, ...], int, str]:
    words = _words(sig)
    ranks = tuple(r for r in range(members) if words[6 + r])
    name = sig[8 * (6 + members):].rstrip(b"\0").decode(errors="replace")
    return ranks, words[5], name


def check_signatures(gathered: bytes, gid: int, ranks: Sequence[int], seq: int) -> None:
    """``_core.check_signatures`` (the C++ checked mode's comparison and messages), and for
    signatures holding a new_group request ``_core.check_new_group`` (hpref::new_group_mismatch,
    the words ``hpref verify`` prints too): a new_group against another call is "collective
    mismatch on group G seq S: rank A launched new_group([0, 1] on gloo) but rank B launched
    all_to_all_v" (member 0 against the first member that differs), two new_groups asking for
    other ranks or another backend "new_group mismatch on group G seq S: rank A asked for [..]
    on gloo but rank B asked for [..] on gloo"."""
    n = len(ranks)
    one = len(gathered) // n if n else 0
    sigs = [gathered[i * one:(i + 1) * one] for i in range(n)]
    if not any(_is_new_group(s) for s in sigs):
        _core.check_signatures(gathered, gid, list(ranks), seq)
        return

    def side(sig: bytes) -> Tuple[Optional[List[int]], str, bytes]:
        if not _is_new_group(sig):
            return None, "", sig
        members, crc, name = _new_group_request(sig, n)
        if len(name.encode()) >= 8 * n:  # cut to the signature's room: the crc tells them apart
            name = f"{name}... (crc32 {crc:08x})"
        return list(members), name, b""

    for i in range(1, n):
        _core.check_new_group(gid, seq, n, ranks[0], *side(sigs[0]), ranks[i], *side(sigs[i]))


def _u8(nbytes: int, device: Any = None):
    import torch
    return torch.empty(nbytes, dtype=torch.uint8, device=device)


# Said when a signature exchange times out: plain gloo would have queued the operation and
# returned, so a program whose ranks reach two groups' operations in different orders runs
# there and waits here (a checked-mode audit).
_LAUNCH_HINT = (" (a checked launch, async_op=True too, returns only once every member has "
                "launched the operation: a member that reaches it only after an operation of "
                "another group, which this rank has not launched yet, is still on its way)")


class CheckedWork(OnceWork):
    """A checked operation: ``wait()`` completes the inner operation within the deadline
    (``CommTimeout``/``PeerFailed`` otherwise), then compares the send buffer with its
    checksum at launch (``BufferMutated``); ``is_completed()`` polls the inner operation.
    ``seq``: its sequence number on its group."""

    seq: Optional[int] = None

    def __init__(self, comm: "CheckedComm", inner: Any, what: str, send: Optional[Tuple[int, int, str, int]],
                 launched: Optional[float] = None):
        """``send``: (address, bytes, memory space, checksum at launch), or None when nothing
        is checked; ``launched``: time.monotonic() at the launch (default: now), where the
        deadline counts from."""
        super().__init__()
        self._comm = comm
        self._inner = inner
        self._what = what
        self._send = send
        self._launched = time.monotonic() if launched is None else launched

    def _complete(self, timeout_s: Optional[float]) -> None:
        # The send buffer is compared once the backend has finished with it, as the C++
        # checked mode does (device/src/core/communicator.cpp): a change made while wait()
        # runs - by a later in-place operation of this rank or by another thread - may be
        # read by the backend too, and was missed when compared before the inner wait.
        self._comm._wait(self._inner, self._what, self._launched, timeout_s)
        if self._send is not None and self._comm._checksum(*self._send[:3]) != self._send[3]:
            self._comm._raise("comm_buffer_mutated", self._what,
                              f"rank {self._comm._world_rank()} changed its send buffer of "
                              f"{self._send[1]} bytes between launch and wait() (the backend may read it at any "
                              "time before wait() returns)")

    def _finished(self) -> bool:
        poll = getattr(self._inner, "is_completed", None)
        return poll is not None and bool(poll())

    def _settled(self) -> bool:
        # Not is_completed(): a failed wait (a timeout given to wait()) is completed, while
        # the library underneath may still move the bytes.
        return _settled(self._inner)

    def _release(self) -> None:
        self._send = None


class CheckedComm:
    """SPEC 9.2's checked mode around ``inner`` (an object with the Communicator seam's
    Python interface).

    ``names``: ``names(group) -> (group id, world ranks)`` for the messages — the ids and
    ranks the code knows the group by (torch's group name and global ranks), kept from the
    group's first operation; a KeyError means not known yet (the group's own are used).
    ``store``: a store every member shares (each member's last launch is kept there, read
    when a wait times out); None: not kept. ``timeout_s``: the deadline of every wait,
    counted from the launch (the inner communicator must enforce it too: gloo groups are
    made with it; a shorter timeout given to a work's wait() ends that wait sooner). ``log_dir``: one JSON line per operation per rank, or None.
    ``check_buffers``: compare send buffers at wait(): True checks host buffers; an
    accelerator buffer costs a device sync and a copy to the host at launch and at wait, so
    it is checked only with ``"all"``. ``run``: which default process group of the job the
    group belongs to (0, 1, ... for a job that destroys its default group and makes it again:
    torch restarts group ids and seqs); logged as ``"run"`` when > 0. ``latest_store``: a
    function returning the store every group of the job shares (torch's default store), or
    None while there is none: each launch is also kept there under the rank's world rank, so
    that a timeout on one group names a member's latest launch on another; None: not kept.
    """

    def __init__(self, inner: Any, *, names: Optional[Callable[[Any], Tuple[int, Sequence[int]]]] = None,
                 store: Any = None, timeout_s: float = 1800.0, log_dir: Optional[str] = None,
                 check_buffers: Any = True, run: int = 0, latest_store: Optional[Callable[[], Any]] = None):
        """See the class docstring."""
        self._inner = inner
        if isinstance(run, bool) or not isinstance(run, int) or not 0 <= run <= 0x7FFFFFFF:
            raise _from_core("invalid_argument", f"run must be an int in [0, 2^31), got {run!r}")
        self._run = run
        self._names = names
        self._store = store
        self._find_latest_store = latest_store
        self._latest_store: Any = None  # found at the first launch after the job's store exists
        # The rank's latest launch, last error and the store's state, shared with the run's
        # other groups (the same latest_store), else this group's own.
        self._rec = _shared_record(run, latest_store) if latest_store is not None else _RankRecord()
        self._timeout_s = float(timeout_s)
        if check_buffers not in (True, False, "all"):
            raise _from_core("invalid_argument", f"check_buffers must be True, False or 'all', got {check_buffers!r}")
        self._check_buffers = check_buffers
        # Where the signatures are exchanged: the inner communicator's device (an nccl group
        # moves device memory only).
        self._device = getattr(inner, "device", None)
        self._to_host = getattr(inner, "to_host", None)  # accelerator memory to a host copy
        self._seq: Dict[int, int] = {}
        self._labels: Dict[int, Tuple[int, Tuple[int, ...]]] = {}
        self._log = None
        self._log_dir = log_dir
        self._me = inner.rank()  # the inner communicator's world rank (roots are given in it)
        # group id -> (thread id, thread name, operation) of a launch in progress (_alone).
        self._launching: Dict[int, Tuple[int, str, str]] = {}
        self._launching_lock = threading.Lock()

    @property
    def check_buffers(self) -> Any:
        """Which send buffers are compared at wait(): True (host), ``"all"`` or False."""
        return self._check_buffers

    # ---- the Communicator seam ---------------------------------------------------------

    def rank(self) -> int:
        """The inner communicator's world rank."""
        return self._inner.rank()

    def size(self) -> int:
        """The inner communicator's world size."""
        return self._inner.size()

    def world(self) -> Any:
        """The inner communicator's world group."""
        return self._inner.world()

    def world_backend(self) -> str:
        """The inner communicator's backend name."""
        return self._inner.world_backend()

    def new_group(self, ranks: Sequence[int], backend: str) -> Any:
        """The inner communicator's new_group (it checks its own agreement, SPEC 9.1)."""
        return self._inner.new_group(ranks, backend)

    def agree_new_group(self, ranks: Sequence[int], backend: str) -> None:
        """SPEC 9.1's new_group as an operation of the checked world order: every world rank
        calls it, members or not, before the group is made (hpref.torch's wrapped group
        helper). The request (sorted world ranks, backend name) is numbered on the world
        group like any world operation, recorded as this rank's last launch and in the log
        (``"kind": "new_group"`` with ``members`` and ``backend``, which ``hpref verify``
        compares in the same words) and agreed: a rank that
        launched something else, or asked for other ranks, is ``CommMismatch`` on every
        rank ("collective mismatch on group 0 seq 4: rank 0 launched new_group([0, 1] on
        gloo) but rank 3 launched all_to_all_v")."""
        group = self._inner.world()
        members = sorted({int(r) for r in ranks})
        sig = _new_group_signature(group.size, members, str(backend))
        with self._alone(group, "new_group"):
            self._agree(group, "new_group", dict(members=members, backend=str(backend)), sig, "host")

    def all_gather(self, group: Any, in_addr: int, in_bytes: int, out_addr: int, out_bytes: int,
                   space: str = "host") -> CheckedWork:
        """Checked all_gather (signature: the bytes each member sends)."""
        return self._launch(group, "all_gather", dict(bytes=in_bytes), (in_addr, in_bytes), space,
                            lambda: self._inner.all_gather(group, in_addr, in_bytes, out_addr, out_bytes, space))

    def broadcast(self, group: Any, addr: int, nbytes: int, root: int, space: str = "host") -> CheckedWork:
        """Checked broadcast (signature: root as a world rank of the messages, bytes); the
        root's buffer is its send buffer."""
        _, ranks = self._label(group)
        index = group.index_of(int(root))
        label_root = ranks[index] if 0 <= index < len(ranks) else int(root)
        send = (addr, nbytes) if int(root) == self._me else None
        return self._launch(group, "broadcast", dict(root=label_root, bytes=nbytes), send, space,
                            lambda: self._inner.broadcast(group, addr, nbytes, root, space))

    def all_reduce(self, group: Any, addr: int, nbytes: int, dtype: str, op: str,
                   space: str = "host") -> CheckedWork:
        """Checked all_reduce (signature: op, dtype, bytes); in place, so no send-buffer
        check (the backend itself writes the buffer)."""
        return self._launch(group, "all_reduce", dict(op=op, dtype=dtype, bytes=nbytes), None, space,
                            lambda: self._inner.all_reduce(group, addr, nbytes, dtype, op, space))

    def all_to_all_v(self, group: Any, in_addr: int, in_counts: Sequence[int], out_addr: int,
                     out_counts: Sequence[int], space: str = "host") -> CheckedWork:
        """Checked all_to_all_v: the signature holds the bytes to and from every member, so
        every member sees the whole count matrix and the first pair i -> j where i sends
        another count than j expects."""
        ins, outs = [int(c) for c in in_counts], [int(c) for c in out_counts]
        sent = sum(ins)
        return self._launch(group, "all_to_all_v", dict(bytes=sent, counts_in=ins, counts_out=outs),
                            (in_addr, sent), space,
                            lambda: self._inner.all_to_all_v(group, in_addr, ins, out_addr, outs, space))

    def barrier(self, group: Any) -> CheckedWork:
        """Checked barrier."""
        return self._launch(group, "barrier", {}, None, getattr(group, "memory", "host"),
                            lambda: self._inner.barrier(group))

    # ---- checked mode -------------------------------------------------------------------

    def _label(self, group: Any) -> Tuple[int, Tuple[int, ...]]:
        """The id and world ranks the messages give ``group`` (``names``), kept from its first
        use."""
        label = self._labels.get(group.id)
        if label is None:
            try:
                gid, ranks = self._names(group) if self._names is not None else (group.id, group.ranks)
            except KeyError:  # names() does not know the group yet: its own, not kept
                return group.id, tuple(group.ranks)
            label = (int(gid), tuple(int(r) for r in ranks))
            self._labels[group.id] = label
        return label

    def _world_rank(self) -> int:
        """This rank as the messages name it: its world rank (``names``), not its rank in the
        inner communicator, which for a subgroup's checked group is its group rank."""
        world = self._inner.world()
        ranks = self._label(world)[1]
        return ranks[world.index] if 0 <= world.index < len(ranks) else self._me

    @contextlib.contextmanager
    def _alone(self, group: Any, kind: str):
        """Marks a launch on ``group`` as in progress; a second thread launching on the same
        group meanwhile is ``comm_usage`` at once, naming both threads. A checked operation
        is two operations of the library underneath (the signatures, then the operation),
        which two threads on one group interleave differently on each rank: plain gloo runs
        such a program, and here every rank waited out its deadline (SPEC 9.1: a
        Communicator is driven by one thread at a time; a checked group is one)."""
        mine = (threading.get_ident(), threading.current_thread().name, kind)  # its identity marks it
        try:  # entered first: whatever interrupts, only this launch's own marker is removed
            with self._launching_lock:
                other = self._launching.setdefault(group.id, mine)
            if other is not mine:
                gid, _ = self._label(group)
                who = ("while launching" if other[0] == mine[0]  # a launch inside a launch
                       else f"while thread {other[1]!r} is launching")
                raise _from_core("comm_usage",
                                 f"{kind} on group {gid}: launched by thread {mine[1]!r} {who} {other[2]} on "
                                 "the same group; a Communicator, here the group's, is driven by one thread at "
                                 "a time (SPEC 9.1): each checked operation is two operations of the library "
                                 "underneath, which two threads interleave differently on each rank")
            yield
        finally:
            with self._launching_lock:
                if self._launching.get(group.id) is mine:
                    del self._launching[group.id]

    def _agree(self, group: Any, kind: str, fields: Dict[str, Any], sig: bytes, space: str,
               log: bool = True, meanwhile: Optional[Callable[[], Any]] = None) -> Tuple[str, Any]:
        """Numbers, records and agrees one operation's signature over ``group``; returns the
        operation's name for messages and what ``meanwhile()`` returned — it runs while the
        signatures are in flight (the send-buffer checksum: hidden behind the exchange's
        latency where the host has a core for it)."""
        gid, ranks = self._label(group)
        seq = self._seq.get(group.id, 0)
        self._seq[group.id] = seq + 1
        what = f"{kind} on group {gid} seq {seq} {list(ranks)}"
        me = ranks[group.index] if 0 <= group.index < len(ranks) else self._world_rank()
        try:  # recorded as launched here: if the launch raises, a peer's message says what
            self._record(group, gid, ranks, me, seq, kind, fields, log)
            n = len(sig)
            # One all-gather of the signatures, made as an all-to-all of this member's signature
            # to every member: gloo's all-to-all is one round of messages where its all-gather
            # is a ring of size - 1 (1.4 against 2.7 ms at 4 ranks on this 2-core host).
            src = _u8(n * group.size)
            src.numpy()[:] = memoryview(sig * group.size)
            out = _u8(n * group.size)
            if space != "host" and self._device is not None:
                src, out = src.to(self._device), out.to(self._device)
            counts = [n] * group.size
            launched = time.monotonic()
            work = self._inner.all_to_all_v(group, src.data_ptr(), counts, out.data_ptr(), counts, space)
            try:
                extra = meanwhile() if meanwhile is not None else None
                # A hang here is a hang of the group: it times out like any wait.
                self._wait(work, f"the signature exchange of {what}", launched, hint=_LAUNCH_HINT)
            except BaseException:
                _park(work, (src, out))  # kept while the library may still write them
                raise
            check_signatures(out.cpu().numpy().tobytes(), gid, list(ranks), seq)
            return what, extra
        except BaseException as e:
            self._note_error(e, what)
            raise

    def _launch(self, group: Any, kind: str, fields: Dict[str, Any], send: Optional[Tuple[int, int]],
                space: str, run: Callable[[], Any]) -> CheckedWork:
        sig = _core.op_signature(kind, group.size, **fields)
        checksum = None
        if send is not None and (self._check_buffers == "all" or (self._check_buffers and space == "host")):
            addr, nbytes = send
            checksum = lambda: (addr, nbytes, space, self._checksum(addr, nbytes, space))  # noqa: E731
        with self._alone(group, kind):
            what, checked = self._agree(group, kind, fields, sig, space, meanwhile=checksum)
            launched = time.monotonic()
            try:
                inner = run()
            except BaseException as e:  # agreed, but not launched here: a peer's message says so
                self._note_error(e, what)
                raise
            work = CheckedWork(self, inner, what, checked, launched)
            work.seq = self._seq[group.id] - 1
        return work

    def _checksum(self, addr: int, nbytes: int, space: str) -> int:
        """buffer_checksum of a send buffer; accelerator memory is first copied to the host
        (the inner communicator's to_host: a device sync)."""
        if space == "host" or self._to_host is None:  # no to_host: accelerator groups of host memory (simulator)
            return _core.buffer_checksum(addr, nbytes)
        host = self._to_host(addr, nbytes)  # kept alive while it is read: a temporary's
        return _core.buffer_checksum(host.data_ptr(), nbytes)  # memory was freed before the read

    def _wait(self, work: Any, what: str, launched: float, timeout_s: Optional[float] = None,
              hint: str = "") -> None:
        """Completes ``work`` (launched at ``launched``, time.monotonic()) within the deadline,
        or within ``timeout_s`` when the caller's wait() gave one that ends sooner; a timeout
        or a peer gone is raised naming what every member last launched."""
        left = self._timeout_s - (time.monotonic() - launched)
        mine = timeout_s is not None and timeout_s < left and isinstance(work, OnceWork)
        try:
            if mine:
                work.wait(timeout_s)
            else:  # the inner group enforces the deadline itself (gloo groups are made with it)
                work.wait()
        except Exception as e:  # noqa: BLE001 - translated into the comm error it is
            text = str(e)
            lowered = text.lower()
            if "timed out" in lowered or "timeout" in lowered:
                waited = time.monotonic() - launched
                limit = f"the {timeout_s:g} s given to wait()" if mine else f"the {self._timeout_s:g} s deadline"
                self._raise("comm_timeout", what,
                            f"rank {self._world_rank()} waited {waited:.1f} s since the launch, "
                            f"{limit}; last launches: {self.last_launches(what)}{hint}", e)
            if peer_went_away(text):
                self._raise("comm_peer_failed", what,
                            f"a peer went away ({text.strip()}); last launches: {self.last_launches(what)}", e)
            raise
        if self._rec.raised is not None:  # an operation completed since: the program went on
            with self._rec.lock:
                self._rec.raised = None
                self._keep_latest()

    def _record(self, group: Any, gid: int, ranks: Tuple[int, ...], me: int, seq: int, kind: str,
                fields: Dict[str, Any], log: bool = True) -> None:
        entry: Dict[str, Any] = {"rank": me}
        if self._run:  # absent for run 0: the logs of a job that makes one default group
            entry["run"] = self._run
        entry.update(group=gid, ranks=list(ranks), seq=seq, kind=kind)
        entry.update(fields)
        line = json.dumps(entry, separators=(",", ":"))
        if self._store is not None and self._rec.gone is None:
            try:
                self._store.set(f"{LAST_KEY}{group.index}", line)
            except Exception as e:  # noqa: BLE001 - a store gone with a peer: the operation says so
                self._lost(e)
            launch = {k: entry[k] for k in ("rank", "run", "group", "seq", "kind") if k in entry}
            with self._rec.lock:
                self._rec.launch = launch
                self._keep_latest()
        if self._log_dir is not None and log:
            if self._log is None:
                os.makedirs(self._log_dir, exist_ok=True)
                self._log = open(os.path.join(self._log_dir, f"rank{me}.jsonl"), "a", buffering=1)
            self._log.write(line + "\n")

    def _keep_latest(self) -> None:
        """Writes the rank's record (its latest launch on any group, the error its last wait
        raised) under its world rank in the store every group shares; the caller holds the
        record's lock, so that two groups' threads write in the order they changed it."""
        rec = self._rec
        if rec.launch is None or rec.gone is not None:
            return
        latest = self._latest()
        if latest is None:
            return
        entry = dict(rec.launch, raised=rec.raised) if rec.raised is not None else rec.launch
        try:
            latest.set(f"{LATEST_KEY}{entry['rank']}", json.dumps(entry, separators=(",", ":")))
        except Exception as e:  # noqa: BLE001 - a store gone with a peer: the operation says so
            self._lost(e)

    def _raise(self, kind: str, what: str, detail: str, cause: Optional[BaseException] = None) -> None:
        """Raises the comm error ``kind``, "``what``: ``detail``", after keeping "``kind`` at
        ``what``" beside this rank's latest launch until one of its operations completes: a
        member whose peer gave up (a timeout) or raised and left reads which rank raised
        what, where it read only "a peer went away" (the detail is in that rank's own
        message); a program that caught the error and went on reads as it is."""
        self._note_raised(f"{kind} at {what}")
        error = _from_core(kind, f"{what}: {detail}")
        _NOTED.add(error)
        raise error from cause

    def _note_error(self, error: BaseException, what: str) -> None:
        """Notes ``error``, raised by the launch of ``what`` before or while its operation
        was agreed or launched, as "<kind or type> at ``what``", unless _raise noted it."""
        if error not in _NOTED:
            self._note_raised(f"{getattr(error, 'kind', None) or type(error).__name__} at {what}")

    def _note_raised(self, text: str) -> None:
        """Keeps ``text`` ("comm_timeout at all_reduce on group 1 seq 3 [0, 1]") beside this
        rank's latest launch, as the error its last wait (or launch: the signature exchange is
        one) raised."""
        with self._rec.lock:
            self._rec.raised = text
            self._keep_latest()

    def _lost(self, error: BaseException) -> None:
        """Notes that a call to the job's store failed (the first reason is kept)."""
        if self._rec.gone is None:
            lines = str(error).strip().splitlines()
            text = lines[0] if lines else ""
            self._rec.gone = f"{type(error).__name__}: {text[:200]}" if text else type(error).__name__

    def _latest(self) -> Any:
        """The store every group shares (``latest_store``), once there is one."""
        if self._latest_store is None and self._find_latest_store is not None:
            self._latest_store = self._find_latest_store()
        return self._latest_store

    def last_launches(self, what: str = "") -> str:
        """What every member of this communicator's group (a checked process group's own
        members) last launched on it in this run, as its store keys say ("rank 0:
        all_to_all_v seq 3 (...); rank 2: nothing"), or why they cannot be read; where a
        member's latest launch of all is on another group (``latest_store``), that one follows
        ("rank 2: nothing (latest launch: barrier on group 2 seq 0)"): it may wait there, or
        have finished it and be computing; where the member's last wait to end raised and
        none completed since, what and where (", whose last wait raised comm_timeout at
        all_reduce on group 1 seq 3 [0, 1]"): the member gave up or left."""
        if self._store is None:
            return "unknown (no store)"
        group = self._inner.world()
        gid, ranks = self._label(group)
        parts: List[str] = []
        for index, rank in enumerate(ranks):
            entry = self._entry(self._store, f"{LAST_KEY}{index}")
            if entry is None:
                break
            if isinstance(entry, str):
                part = f"rank {rank}: {entry}"
            else:
                detail = ", ".join(f"{k} {v}" for k, v in entry.items()
                                   if k not in ("rank", "run", "group", "ranks", "seq", "kind", "raised"))
                part = f"rank {rank}: {entry['kind']} seq {entry['seq']}" + (f" ({detail})" if detail else "")
            latest = self._entry(self._latest(), f"{LATEST_KEY}{rank}") if self._latest() is not None else None
            if self._rec.gone is not None:
                break
            if isinstance(latest, dict) and latest.get("group") != gid:
                part += f" (latest launch: {latest['kind']} on group {latest.get('group')} seq {latest['seq']})"
            if isinstance(latest, dict) and latest.get("raised"):
                part += f", whose last wait raised {latest['raised']}"
            parts.append(part)
        if self._rec.gone is not None:  # nothing more is asked of it
            parts = [f"unknown: a call to the job's store failed ({self._rec.gone}), as when the process "
                     "serving it is gone (rank 0's with init_method env://)"]
        return "; ".join(parts)

    def _entry(self, store: Any, key: str) -> Any:
        """The launch kept under ``key`` in ``store`` in this run (a dict), or what to say
        instead: "nothing" (absent, or an earlier default group's on a reused store), or
        "unreadable (...)" (not a launch's JSON); None once a call to the store has failed
        (the store may have died with its host: the record's ``gone``)."""
        if self._rec.gone is not None:
            return None
        try:
            if not store_has(store, key):
                return "nothing"
            raw = bytes(store.get(key))
        except Exception as e:  # noqa: BLE001 - the store may have died with its host
            self._lost(e)
            return None
        try:
            entry = json.loads(raw.decode())
        except ValueError as e:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
            return f"unreadable ({type(e).__name__})"
        if not isinstance(entry, dict) or "kind" not in entry or "seq" not in entry:
            return "unreadable (not a launch)"
        if entry.get("run", 0) != self._run:  # an earlier default group's, on a reused store
            return "nothing"
        return entry

    def close(self) -> None:
        """Closes the log file."""
        if self._log is not None:
            self._log.close()
            self._log = None

