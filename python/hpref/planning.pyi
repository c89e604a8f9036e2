from dataclasses import dataclass
from typing import Any, Iterable, Mapping, NamedTuple, Optional, Sequence, SupportsIndex, Tuple, Union

__all__ = [
    "Topology", "topology", "GroupCreation", "GroupPlan", "group_plan", "Field", "BatchLayout",
    "batch_layout", "batch_header", "header_status", "batch_shapes", "END_OF_DATA", "BATCH",
    "BATCH_FAILED",
]

BATCH_FAILED: int
END_OF_DATA: int
BATCH: int

@dataclass(frozen=True)
class Topology:
    mesh_shape: Tuple[int, ...]
    mesh_dim_names: Tuple[str, ...]
    rank_list: Tuple[int, ...]
    global_rank: int
    dp_dim_names: Tuple[str, ...]
    coordinate: Tuple[int, ...]
    data_parallel_size: int
    data_rank: int
    constructor_ranks: Tuple[int, ...]
    model_parallel_rank_groups: Tuple[Tuple[int, ...], ...]
    constructor_rank: int
    model_parallel_ranks: Tuple[int, ...]
    fingerprint: str
    canonical_text: str

def topology(mesh_shape: Iterable[SupportsIndex], mesh_dim_names: Iterable[str],
             rank_list: Iterable[SupportsIndex], global_rank: SupportsIndex,
             dp_dim_names: Optional[Iterable[str]] = None) -> Topology: ...

class GroupCreation(NamedTuple):
    role: str
    ranks: Tuple[int, ...]
    backend: str

@dataclass(frozen=True)
class GroupPlan:
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

def group_plan(topology: Topology, reader_ranks: Iterable[SupportsIndex], planner_rank: SupportsIndex, *,
               cpu_backend: str, payload_backend: Optional[str] = None,
               communication_device: Any = None, enable_payload_exchange: bool = True,
               model_device: Any = None, distributed: bool = True,
               world_size: Optional[SupportsIndex] = None, rank: Optional[SupportsIndex] = None,
               world_backend: Optional[str] = None) -> GroupPlan: ...

class Field(NamedTuple):
    name: str
    dtype: Any
    placement: str = "cpu"
    dims: Tuple[Union[int, str], ...] = ()

@dataclass(frozen=True)
class BatchLayout:
    fields: Tuple[Field, ...]
    symbols: Tuple[str, ...]
    canonical_text: str
    fingerprint: str

def batch_layout(fields: Iterable[Any]) -> BatchLayout: ...
def batch_header(layout: Union[BatchLayout, Sequence[Any]], batch: Optional[Mapping[str, Any]] = None,
                 *, status: Optional[SupportsIndex] = None) -> Tuple[int, ...]: ...
def header_status(layout: Union[BatchLayout, Sequence[Any]], header: Iterable[SupportsIndex]) -> int: ...
def batch_shapes(layout: Union[BatchLayout, Sequence[Any]], header: Iterable[SupportsIndex], *,
                 max_message_bytes: SupportsIndex = ...) -> Tuple[Tuple[int, ...], ...]: ...
