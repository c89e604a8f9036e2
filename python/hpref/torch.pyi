import os
from datetime import timedelta
from typing import Any, Dict, Literal, Optional, Sequence, Union

from ._checked import CheckedComm

__all__ = [
    "BACKEND", "BACKEND_NCCL", "checked", "configure", "options", "comm_of", "enable",
    "disable",
]

BACKEND: str
BACKEND_NCCL: str

def configure(*, timeout_s: Optional[float] = ..., log_dir: Optional[Union[str, os.PathLike[str]]] = ...,
              check_buffers: Optional[Union[bool, Literal["all"]]] = ...) -> None: ...
def options(torch_timeout: Optional[timedelta] = ...) -> Dict[str, Any]: ...
def comm_of(group: Any) -> CheckedComm: ...
def checked(group: Any = ..., *, ranks: Optional[Sequence[int]] = ..., timeout_s: Optional[float] = ...,
            log_dir: Optional[Union[str, os.PathLike[str]]] = ..., check_buffers: Optional[Union[bool, Literal["all"]]] = ...,
            backend: Optional[str] = ...) -> Any: ...
def enable(backends: Union[str, Sequence[str]] = ..., *, timeout_s: Optional[float] = ...,
           log_dir: Optional[Union[str, os.PathLike[str]]] = ...,
           check_buffers: Optional[Union[bool, Literal["all"]]] = ...) -> None: ...
def disable() -> None: ...
