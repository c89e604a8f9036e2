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
from typing import Any, Iterable, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

from . import _core
from ._tensors import to_raw
from .errors import Error, _checked_int, _from_core, _is_utf8

__all__ = ["Topology", "topology", "GroupCreation", "GroupPlan", "group_plan", "Field",
           "BatchLayout", "batch_layout", "batch_header", "header_status", "batch_shapes",
           "END_OF_DATA", "BATCH", "BATCH_FAILED"]

#: Header statuses (SPEC 6.2).
BATCH_FAILED, END_OF_DATA, BATCH = -1, 0, 1


def _ints(values: Iterable[Any]) -> Tuple[int, ...]:
    return tuple(int(v) for v in values)


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
    ``topology_dp_names``, checked in that order."""
    d = _core.topology(list(mesh_shape), list(mesh_dim_names), list(rank_list), global_rank,
                       None if dp_dim_names is None else list(dp_dim_names))
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


def _device(device: Any) -> Optional[str]:
    return None if device is None else str(device)


def group_plan(topology: Topology, reader_ranks: Iterable[int], planner_rank: int, *,
               cpu_backend: str, payload_backend: Optional[str] = None,
               communication_device: Any = None, enable_payload_exchange: bool = True,
               model_device: Any = None, distributed: bool = True,
               world_size: Optional[int] = None, rank: Optional[int] = None,
               world_backend: Optional[str] = None) -> GroupPlan:
    """SPEC 3.2: the process groups of the data plane for ``topology`` (from
    :func:`topology`, or any object with its input fields), the ranks that read the dataset
    and the planner: a pure function, the same creations on every rank.

    The keyword arguments are the loader's options (devices as "cpu", "cuda[:N]",
    "npu[:N]" or ``torch.device``); ``distributed``, ``world_size`` (default: the mesh's
    rank count), ``rank`` (default: the topology's ``global_rank``) and ``world_backend``
    (default: ``cpu_backend``) stand for torch.distributed's state. Errors, in the SPEC's
    order: ``group_planner``, ``group_not_distributed``, ``group_mesh_world``,
    ``group_rank``, ``group_cpu_backend``, ``group_payload_backend``, ``group_device``,
    ``group_payload_device`` (and the ``topology_*`` kinds)."""
    t = topology
    d = _core.group_plan(
        list(t.mesh_shape), list(t.mesh_dim_names), list(t.rank_list), t.global_rank,
        list(t.dp_dim_names), list(reader_ranks), planner_rank, cpu_backend, payload_backend,
        _device(communication_device), enable_payload_exchange, _device(model_device), distributed,
        len(t.rank_list) if world_size is None else world_size,
        t.global_rank if rank is None else rank,
        cpu_backend if world_backend is None else world_backend)
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
        dims = [d if isinstance(d, str) else
                _checked_int(f"batch field {f.name!r} dim {i}", d, "batch_spec", -1 << 63, 1 << 63)
                for i, d in enumerate(f.dims)]
        out.append((f.name, "torch." + _dtype_name(f.dtype), f.placement, dims))
    return out


def _int64s(what: str, values: Any, kind: str) -> list:
    """`values` as a list of int64 (ints, numpy or torch integer scalars), or the error
    `kind` naming the first that is not one."""
    return [_checked_int(f"{what}[{i}]", v, kind, -1 << 63, 1 << 63) for i, v in enumerate(values)]


def batch_layout(fields: Iterable[Any]) -> BatchLayout:
    """SPEC 6.1: the layout of a declaration (:class:`Field` objects or tuples
    ``(name, dtype, placement, dims)``). Errors ``batch_spec`` for an empty or repeated
    name, a negative fixed dim, an empty symbol or a placement other than cpu/accelerator,
    ``unsupported_dtype`` for an unknown dtype."""
    specs = _field_tuples(list(fields))
    d = _core.batch_layout(specs)
    return BatchLayout(fields=tuple(Field(n, t[len("torch."):], p, tuple(dims)) for n, t, p, dims in specs),
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
    if status not in (None, BATCH):
        raise ValueError(f"a header of a batch has status 1, got status={status!r}")
    entries = []
    declared = {spec[0] for spec in specs}
    unknown = []  # names not declared, in the batch's order: checked last, the first named
    for name, value in batch.items():
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
