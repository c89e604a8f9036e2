"""The pure planners of the data plane from Python: the data topology (SPEC 3.1), the group
plan (SPEC 3.2) and the model-batch layout (SPEC 6.1-6.3). Each is a function of plain
values that returns a frozen dataclass of plain fields (ints, strs, tuples), the same on
every rank that gives it the same inputs, so a test can check what a distributed loader
creates and broadcasts without starting one.

    >>> from hpref import planning
    >>> topo = planning.topology((2, 4), ("dp", "cp"), range(8), global_rank=5)
    >>> topo.data_rank, topo.constructor_ranks, topo.model_parallel_ranks
    (1, (0, 4), (4, 5, 6, 7))
    >>> plan = planning.group_plan(topo, reader_ranks=(0, 1), planner_rank=0, cpu_backend="gloo")
    >>> [(c.role, c.ranks) for c in plan.creations]
    [('control', (0, 1, 4)), ('model_parallel_host', (0, 1, 2, 3)), ('model_parallel_host', (4, 5, 6, 7))]
    >>> plan.model_parallel, plan.control is None
    (2, True)

Refusals raise :class:`hpref.Error` with one kind per check: ``topology_*``, ``group_*``,
``batch_*`` (as in SPEC 3 and 6).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

from . import _core
from ._tensors import _import_torch, to_raw
from .errors import Error, _checked_int, _from_core, _is_utf8, _iterable

__all__ = ["Topology", "topology", "GroupCreation", "GroupPlan", "group_plan", "Field",
           "BatchLayout", "batch_layout", "batch_header", "header_status", "batch_shapes",
           "END_OF_DATA", "BATCH", "BATCH_FAILED"]

#: Header statuses (SPEC 6.2).
BATCH_FAILED, END_OF_DATA, BATCH = -1, 0, 1


def _ints(values: Iterable[Any]) -> Tuple[int, ...]:
    return tuple(int(v) for v in values)


def _int_arg(what: str, value: Any, kind: str, bits: int) -> int:
    """``value`` as an int of the C++ type it becomes (int64 or int32): an int, or a numpy or
    torch integer; not a bool (numpy's and torch's included), a float or a str. Else the
    error ``kind`` naming ``what`` and the value (nanobind's int casters truncated 5.9 and
    tensor(5.5) to 5, read '5' as 5, and refused the rest naming no value)."""
    return _checked_int(what, value, kind, -1 << (bits - 1), 1 << (bits - 1))


def _int_args(what: str, values: Any, kind: str, bits: int) -> List[int]:
    """Each of ``values`` as by :func:`_int_arg`, named ``what[i]``."""
    try:
        items = list(values)
    except TypeError:
        raise _from_core(kind, f"{what} must be a sequence of ints, got {values!r}") from None
    return [_int_arg(f"{what}[{i}]", v, kind, bits) for i, v in enumerate(items)]


def _name_args(what: str, values: Any, kind: str) -> List[str]:
    """``values`` as a list of names: strs that UTF-8 can write (no lone surrogate), not one
    str read letter by letter; else the error ``kind`` naming ``what`` and the value."""
    if isinstance(values, str):
        raise _from_core(kind, f"{what} must be a sequence of names, got the str {values!r}")
    try:
        items = list(values)
    except TypeError:
        raise _from_core(kind, f"{what} must be a sequence of names, got {values!r}") from None
    for i, name in enumerate(items):
        if not isinstance(name, str) or not _is_utf8(name):
            raise _from_core(kind, f"{what}[{i}] must be a str of valid UTF-8, got {name!r}")
    return items


def _topology_args(mesh_shape: Any, mesh_dim_names: Any, rank_list: Any, global_rank: Any,
                   dp_dim_names: Any) -> tuple:
    """SPEC 3.1's inputs checked for type, each refusal the kind of its argument: mesh
    sizes int64, ranks int32 (the C++ types), names strs."""
    return (_int_args("mesh_shape", mesh_shape, "topology_shape", 64),
            _name_args("mesh_dim_names", mesh_dim_names, "topology_names"),
            _int_args("rank_list", rank_list, "topology_rank_list", 32),
            _int_arg("global_rank", global_rank, "topology_global_rank", 32),
            None if dp_dim_names is None else
            _name_args("dp_dim_names", dp_dim_names, "topology_dp_names"))


@dataclass(frozen=True)
class Topology:
    """SPEC 3.1: a named device mesh seen from one rank (inputs, then what derives from
    them)."""

    mesh_shape: Tuple[int, ...]
    mesh_dim_names: Tuple[str, ...]
    rank_list: Tuple[int, ...]
    global_rank: int
    dp_dim_names: Tuple[str, ...]
    coordinate: Tuple[int, ...]  # this rank's mesh coordinate
    data_parallel_size: int  # product of the DP dims (1 if none)
    data_rank: int  # this rank's row-major coordinate over the DP dims
    constructor_ranks: Tuple[int, ...]  # per DP coordinate: its rank with every other coordinate 0
    model_parallel_rank_groups: Tuple[Tuple[int, ...], ...]  # per DP coordinate, rank_list order
    constructor_rank: int
    model_parallel_ranks: Tuple[int, ...]
    fingerprint: str  # SHA-256 hex of canonical_text: equal on ranks that agree on the mesh
    canonical_text: str


def topology(mesh_shape: Sequence[int], mesh_dim_names: Sequence[str], rank_list: Iterable[int],
             global_rank: int, dp_dim_names: Optional[Sequence[str]] = None) -> Topology:
    """SPEC 3.1: the data topology of ``global_rank`` in a mesh of ``mesh_shape`` (positive)
    named ``mesh_dim_names`` (unique) whose ranks ``rank_list`` fill it row-major.

    ``dp_dim_names`` (default: whichever of ``dp_replicate``, ``dp_shard``, ``dp`` are mesh
    dims, in mesh order) are the data-parallel dims. Errors ``topology_shape``,
    ``topology_names``, ``topology_rank_list``, ``topology_global_rank``,
    ``topology_dp_names``, checked in that order; each also for a value of the wrong type,
    naming it (sizes and ranks are ints or numpy/torch integers, not bools or floats; names
    are strs without lone surrogates)."""
    d = _core.topology(*_topology_args(mesh_shape, mesh_dim_names, rank_list, global_rank,
                                       dp_dim_names))
    return Topology(
        mesh_shape=_ints(d["mesh_shape"]), mesh_dim_names=tuple(d["mesh_dim_names"]),
        rank_list=_ints(d["rank_list"]), global_rank=d["global_rank"],
        dp_dim_names=tuple(d["dp_dim_names"]), coordinate=_ints(d["coordinate"]),
        data_parallel_size=d["data_parallel_size"], data_rank=d["data_rank"],
        constructor_ranks=_ints(d["constructor_ranks"]),
        model_parallel_rank_groups=tuple(_ints(g) for g in d["model_parallel_rank_groups"]),
        constructor_rank=d["constructor_rank"], model_parallel_ranks=_ints(d["model_parallel_ranks"]),
        fingerprint=d["fingerprint"], canonical_text=d["canonical_text"])


class GroupCreation(NamedTuple):
    """One process group every rank creates (members and non-members alike): ``role`` is
    "control", "payload", "model_parallel_host" or "model_parallel_tensor"."""

    role: str
    ranks: Tuple[int, ...]  # sorted world ranks
    backend: str


@dataclass(frozen=True)
class GroupPlan:
    """SPEC 3.2: which groups are created, in order, and which of them this rank keeps
    (``control``, ``payload``, ``model_parallel``, ``model_parallel_tensor``: indices into
    ``creations``, None where this rank is no member or there is no such group; a payload
    group that reuses the control group has the control group's index)."""

    data_plane_ranks: Tuple[int, ...]
    planner_rank: int
    distributed: bool
    payload_backend: Optional[str]
    payload_reuses_control: bool
    tensor_backend: Optional[str]
    creations: Tuple[GroupCreation, ...]
    control: Optional[int]
    payload: Optional[int]
    model_parallel: Optional[int]
    model_parallel_tensor: Optional[int]


def _device(what: str, device: Any) -> Tuple[Optional[str], Optional[Error]]:
    """(the device as the C++ planner reads it, or None; the refusal, or None). The original
    reads its devices with ``torch.device``, so torch decides what is one ("cpu:0", "xpu",
    "meta", a ``torch.device``, and, on torch 1.13, an int index), refusing with its own
    message; without torch, a str goes to the C++ parser, which knows torch's types."""
    if device is None:
        return None, None
    torch = _import_torch()
    if torch is None:
        if isinstance(device, str) and _is_utf8(device):
            return device, None
        return None, _from_core("group_device", f"{what} {device!r} is not a device string "
                                "(torch is not importable to read anything else)")
    try:
        d = torch.device(device)
    except (RuntimeError, TypeError, ValueError) as e:
        why = (str(e).splitlines() or [type(e).__name__])[0]
        return None, _from_core("group_device", f"{what} {device!r} is not a device: "
                                f"torch.device refused it ({why})")
    # torch's DeviceIndex is int8: "cuda:128" reads as index -128; only the type matters here.
    return (d.type if d.index is None or d.index < 0 else f"{d.type}:{d.index}"), None


# Where each kind's check sits in SPEC 3.2's order (the topology's kinds come first).
_GROUP_STEP = {"group_planner": 1, "group_not_distributed": 2, "group_mesh_world": 3,
               "group_rank": 3, "group_cpu_backend": 4, "group_payload_backend": 4.1,
               "group_device": 5, "group_payload_device": 5.1}


def _plan_deferring(call: Any, deferred: List[Tuple[float, Error]]) -> dict:
    """``call()``'s plan, where ``deferred`` holds refusals of arguments the call was given a
    valid stand-in for, each at its step of SPEC 3.2's order: the original checks them only
    there (a device when torch.device reads it, cpu_backend after the rank checks) and not
    at all without torch.distributed. So a check before the first of them still raises its
    own error, and a plan that is not distributed needs none of them."""
    if not deferred:
        return call()
    step, refusal = min(deferred, key=lambda d: d[0])
    try:
        d = call()
    except Error as e:
        if _GROUP_STEP.get(e.kind, 0) < step:
            raise
        raise refusal from None
    if not d["distributed"]:
        return d
    raise refusal


def group_plan(topology: Topology, reader_ranks: Iterable[int], planner_rank: int, *,
               cpu_backend: str, payload_backend: Optional[str] = None,
               communication_device: Any = None, enable_payload_exchange: bool = True,
               model_device: Any = None, distributed: bool = True,
               world_size: Optional[int] = None, rank: Optional[int] = None,
               world_backend: Optional[str] = None) -> GroupPlan:
    """SPEC 3.2: the process groups of the data plane for ``topology`` (from
    :func:`topology`, or any object with its input fields), the ranks that read the dataset
    and the planner: a pure function, the same creations on every rank.

    The keyword arguments are the loader's options (devices as ``torch.device`` reads
    them: "cpu", "cpu:0", "cuda:1", "xpu", "meta", "npu:0" with torch_npu, or a
    ``torch.device``); ``distributed``, ``world_size`` (default: the mesh's
    rank count), ``rank`` (default: the topology's ``global_rank``) and ``world_backend``
    (default: ``cpu_backend``) stand for torch.distributed's state. Errors, in the SPEC's
    order: ``group_planner``, ``group_not_distributed``, ``group_mesh_world``,
    ``group_rank``, ``group_cpu_backend``, ``group_payload_backend``, ``group_device``,
    ``group_payload_device`` (and the ``topology_*`` kinds).

    Every argument is checked for its type, the refusal naming it and the value: ranks
    ``group_planner`` (``reader_ranks``, ``planner_rank``: ints or numpy/torch integers,
    not bools or floats), ``world_size`` ``group_mesh_world``, ``rank`` ``group_rank``,
    ``distributed`` (a bool) ``group_not_distributed``, ``world_backend`` (a str)
    ``group_payload_backend``. As in the original, ``cpu_backend`` (a str),
    ``payload_backend`` (a str or None), ``enable_payload_exchange`` (a bool: the original's
    "must be boolean", ``group_payload_backend``) and the devices (``torch.device`` refuses
    them: ``group_device``) are refused at their step of the order above, and not at all
    when ``distributed`` is false."""
    t = topology
    topo = _topology_args(t.mesh_shape, t.mesh_dim_names, t.rank_list, t.global_rank,
                          t.dp_dim_names)
    readers = _int_args("reader_ranks", reader_ranks, "group_planner", 32)
    planner = _int_arg("planner_rank", planner_rank, "group_planner", 32)
    if not isinstance(distributed, bool):
        raise _from_core("group_not_distributed", f"distributed must be a bool, got {distributed!r}")
    world = len(topo[2]) if world_size is None else \
        _int_arg("world_size", world_size, "group_mesh_world", 32)
    me = topo[3] if rank is None else _int_arg("rank", rank, "group_rank", 32)
    if world_backend is not None and not (isinstance(world_backend, str) and _is_utf8(world_backend)):
        raise _from_core("group_payload_backend",
                         f"world_backend must be a str of valid UTF-8, got {world_backend!r}")
    deferred: List[Tuple[float, Error]] = []
    cpu = cpu_backend
    if not (isinstance(cpu_backend, str) and _is_utf8(cpu_backend)):
        cpu = "gloo"
        deferred.append((4, _from_core("group_cpu_backend", "cpu_backend must be a non-empty "
                                       f"backend name (a str of valid UTF-8), got {cpu_backend!r}")))
    payload = payload_backend
    if payload_backend is not None and not (isinstance(payload_backend, str)
                                            and _is_utf8(payload_backend)):
        payload = None
        deferred.append((4.1, _from_core("group_payload_backend", "payload_backend must be a "
                                         f"non-empty backend name or None, got {payload_backend!r}")))
    exchange = enable_payload_exchange
    if not isinstance(enable_payload_exchange, bool):
        exchange = False
        deferred.append((4.2, _from_core("group_payload_backend", "enable_payload_exchange "
                                         f"must be a bool, got {enable_payload_exchange!r}")))
    comm, refusal = _device("communication_device", communication_device)
    if refusal is not None:
        deferred.append((5, refusal))
    model, refusal = _device("model_device", model_device)
    if refusal is not None:
        deferred.append((5.2, refusal))
    d = _plan_deferring(lambda: _core.group_plan(
        *topo, readers, planner, cpu, payload, comm, exchange, model, distributed, world, me,
        cpu if world_backend is None else world_backend), deferred)
    return GroupPlan(
        data_plane_ranks=_ints(d["data_plane_ranks"]), planner_rank=d["planner_rank"],
        distributed=d["distributed"], payload_backend=d["payload_backend"],
        payload_reuses_control=d["payload_reuses_control"], tensor_backend=d["tensor_backend"],
        creations=tuple(GroupCreation(role, _ints(ranks), backend) for role, ranks, backend in d["creations"]),
        control=d["control"], payload=d["payload"], model_parallel=d["model_parallel"],
        model_parallel_tensor=d["model_parallel_tensor"])


class Field(NamedTuple):
    """One field of a model-batch declaration (SPEC 6.1): ``dtype`` a SPEC 1.3 name
    ("float32", "torch.float32") or a ``torch.dtype``; ``placement`` "cpu" or
    "accelerator"; ``dims`` fixed sizes (ints >= 0) or named dynamic symbols (strs)."""

    name: str
    dtype: Any
    placement: str = "cpu"
    dims: Tuple[Union[int, str], ...] = ()


@dataclass(frozen=True)
class BatchLayout:
    """SPEC 6.1: a model-batch declaration, its symbols (numbered by first appearance,
    fields then dims in order), canonical text and fingerprint (SHA-256 hex: every rank of
    a model-parallel group must hold the same)."""

    fields: Tuple[Field, ...]
    symbols: Tuple[str, ...]
    canonical_text: str
    fingerprint: str


def _dtype_name(dtype: Any) -> str:
    name = str(dtype)
    return name[len("torch."):] if name.startswith("torch.") else name


def _field_tuples(layout: Union[BatchLayout, Sequence[Any]]):
    fields = layout.fields if isinstance(layout, BatchLayout) else layout
    if not _iterable(fields):
        raise _from_core("batch_spec", "a layout is a BatchLayout or a sequence of Field(name, dtype, "
                                       f"placement, dims), got {fields!r:.80}")
    out = []
    for f in fields:
        f = Field(*f)
        # Each part checked here, named: a str for dims would be read letter by letter as
        # symbols, and nanobind's refusal of a float or a dim past int64 names no value.
        if not isinstance(f.name, str) or not isinstance(f.placement, str):
            raise _from_core("batch_spec", f"batch field {f.name!r}: the name and placement must "
                             f"be strs, got {f.name!r} and {f.placement!r}")
        for what, text in (("name", f.name), ("placement", f.placement)):
            if not _is_utf8(text):
                raise _from_core("batch_spec", f"batch field {f.name!r}: the {what} is not "
                                 "valid UTF-8 (a lone surrogate)")
        if isinstance(f.dims, str):
            raise _from_core("batch_spec", f"batch field {f.name!r} has dims given as the str "
                             f"{f.dims!r}: give a tuple of ints and symbol names")
        if not hasattr(f.dims, "__iter__"):  # a range or a numpy array of dims is taken
            raise _from_core("batch_spec", f"batch field {f.name!r}: dims must be a tuple of ints and "
                             f"symbol names, got {f.dims!r:.80}")
        for i, d in enumerate(f.dims):
            if isinstance(d, str) and not _is_utf8(d):
                raise _from_core("batch_spec", f"batch field {f.name!r} dim {i}: the symbol "
                                 f"{d!r} is not valid UTF-8 (a lone surrogate)")
        dims = [d if isinstance(d, str) else
                _checked_int(f"batch field {f.name!r} dim {i}", d, "batch_spec", -1 << 63, 1 << 63)
                for i, d in enumerate(f.dims)]
        out.append((f.name, "torch." + _dtype_name(f.dtype), f.placement, dims))
    return out


def _int64s(what: str, values: Any, kind: str) -> list:
    """`values` as a list of int64 (ints, numpy or torch integer scalars), or the error
    `kind` naming the first that is not one."""
    if not _iterable(values):
        raise _from_core(kind, f"{what} must be a sequence of int64, got {values!r:.80}")
    return [_checked_int(f"{what}[{i}]", v, kind, -1 << 63, 1 << 63) for i, v in enumerate(values)]


def batch_layout(fields: Iterable[Any]) -> BatchLayout:
    """SPEC 6.1: the layout of a declaration (:class:`Field` objects or tuples
    ``(name, dtype, placement, dims)``). Errors ``batch_spec`` for an empty or repeated
    name, a negative fixed dim, an empty symbol or a placement other than cpu/accelerator,
    ``unsupported_dtype`` for an unknown dtype."""
    specs = _field_tuples(fields)
    d = _core.batch_layout(specs)
    # Each dtype by its canonical name, as the canonical text writes it (SPEC 1.3: "half"
    # is float16).
    return BatchLayout(fields=tuple(Field(n, dtype, p, tuple(dims))
                                    for (n, _, p, dims), dtype in zip(specs, d["dtypes"])),
                       symbols=tuple(d["symbols"]), canonical_text=d["canonical_text"],
                       fingerprint=d["fingerprint"])


def batch_header(layout: Union[BatchLayout, Sequence[Any]], batch: Optional[Mapping[str, Any]] = None,
                 *, status: Optional[int] = None) -> Tuple[int, ...]:
    """SPEC 6.2: the int64 header a constructor broadcasts: ``(1, symbol values...)`` for
    ``batch`` (field name -> torch tensor or numpy array), or ``(status, 0, ...)`` for
    ``status`` :data:`END_OF_DATA` or :data:`BATCH_FAILED` without a batch.

    Checks per field in order: presence (``batch_missing_field``), a tensor of the dtype
    (``batch_dtype``, naming the Python type of a value that is not a tensor), rank (``batch_rank``),
    fixed dims (``batch_dim``), one value per symbol (``batch_symbol``); then a name not in
    the declaration (``batch_unknown_field``, naming the batch's first). A value that has no wire form at all (a
    masked array, an unsupported dtype) is refused as it is read, before those checks."""
    specs = _field_tuples(layout)
    if batch is None:
        if status is None:
            raise ValueError("batch_header needs a batch or a status")
        status = _checked_int("status", status, "batch_header", -1 << 63, 1 << 63)
        return tuple(_core.batch_header(specs, None, status))
    if status is not None and (isinstance(status, bool) or status != BATCH):  # True == 1 was taken
        raise ValueError(f"a header of a batch has status 1, got status={status!r}")
    items = getattr(batch, "items", None)
    if not callable(items):
        raise _from_core("batch_spec", "batch must be a mapping of field name -> tensor, got a "
                         f"{type(batch).__name__}")
    entries = []
    declared = {spec[0] for spec in specs}
    unknown = []  # names not declared, in the batch's order: checked last, the first named
    for name, value in items():
        if not isinstance(name, str) or name not in declared:
            unknown.append(name)
        if not isinstance(name, str) or not _is_utf8(name):
            continue  # no C++ str: no declared name can be it
        # A value that is not a tensor crosses as None, with itself for batch_dtype to name.
        entries.append((name, to_raw(value), value))
    try:
        header = tuple(_core.batch_header(specs, entries, BATCH))
    except Error as e:
        if e.kind != "batch_unknown_field" or not unknown:
            raise
        header = None  # the core names its first str one; the batch's first is named below
    if unknown:
        raise _from_core("batch_unknown_field", f"batch field {unknown[0]!r} is not in the spec")
    return header


def header_status(layout: Union[BatchLayout, Sequence[Any]], header: Sequence[int]) -> int:
    """SPEC 6.3: the status (-1, 0 or 1) of a received header; ``batch_header`` if its
    length is not 1 + the number of symbols or the status is another value."""
    return _core.batch_header_status(_field_tuples(layout), _int64s("header", header, "batch_header"))


def batch_shapes(layout: Union[BatchLayout, Sequence[Any]], header: Sequence[int], *,
                 max_message_bytes: int = 1 << 30) -> Tuple[Tuple[int, ...], ...]:
    """SPEC 6.3: every field's shape from a status-1 header, in field order, checked before
    anything is allocated: each symbol value >= 0 (``batch_header``) and each field's byte
    size <= ``max_message_bytes`` (``batch_size_limit``)."""
    limit = _checked_int("max_message_bytes", max_message_bytes, "invalid_argument", 0, 1 << 64)
    shapes = _core.batch_shapes(_field_tuples(layout), _int64s("header", header, "batch_header"),
                                limit)
    return tuple(tuple(s) for s in shapes)
