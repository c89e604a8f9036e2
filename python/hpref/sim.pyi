from dataclasses import dataclass
import os
from typing import Any, Callable, Iterable, List, Optional, SupportsIndex, Union

__all__ = [
    "run", "Result", "RankResult", "communicator", "rank",
]

def communicator() -> Any: ...
def rank() -> int: ...

@dataclass
class RankResult:
    rank: int
    status: str
    value: Any = ...
    error_type: Optional[str] = ...
    message: str = ...
    kind: Optional[str] = ...
    def exception(self) -> Optional[BaseException]: ...
    def is_peer_failure(self) -> bool: ...

@dataclass
class Result:
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
    def ok(self) -> bool: ...
    def values(self) -> List[Any]: ...
    def first_failure(self) -> Optional[RankResult]: ...

def run(world_size: int, fn: Callable[..., Any], *args: Any, seed: SupportsIndex = ...,
        faults: Iterable[str] = ..., timeout_s: float = ...,
        trace: Union[None, bool, str, os.PathLike[str]] = ...,
        torch_distributed: bool = ...) -> Result: ...
