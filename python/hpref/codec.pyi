from typing import Any, Dict, FrozenSet, Iterable, List, Literal, NamedTuple, Optional, Sequence, SupportsIndex, Tuple, Union, overload

from ._tensors import RawTensor as RawTensor, torch_dtypes as torch_dtypes

__all__ = [
    "Key", "KeyClass", "RawTensor", "decode", "decode_received", "encode", "inspect",
    "torch_dtypes", "DEFAULT_KEY_CLASS",
]

DEFAULT_KEY_CLASS: str

class Key(NamedTuple):
    sample_id: Union[int, str]
    position: int

class KeyClass:
    module: str
    qualname: str
    fields: Tuple[str, ...]
    state: str
    def __init__(self, module: str, qualname: str, fields: Sequence[str] = ...,
                 state: str = ..., type: Optional[type] = ...) -> None: ...
    @classmethod
    def from_type(cls, key_type: type) -> KeyClass: ...
    @overload
    @classmethod
    def coerce(cls, key_class: None) -> None: ...
    @overload
    @classmethod
    def coerce(cls, key_class: Union[str, type, KeyClass]) -> KeyClass: ...
    @property
    def name(self) -> str: ...
    @property
    def type(self) -> type: ...
    def make(self, *values: Any) -> Any: ...
    def values(self, key: Any) -> Optional[tuple]: ...

KeyClassLike = Union[None, str, type, KeyClass]

def decode(buffer: Any, *, strict: bool = ..., key_class: KeyClassLike = ...,
           tensors: Optional[Literal["torch", "numpy", "raw"]] = ..., torch_version: Optional[str] = ...,
           copy: bool = ...) -> List[Tuple[Any, Any]]: ...
def decode_received(buffer: Any, splits: Iterable[SupportsIndex], *, strict: bool = ...,
                    key_class: KeyClassLike = ..., tensors: Optional[Literal["torch", "numpy", "raw"]] = ...,
                    torch_version: Optional[str] = ..., copy: bool = ...) -> Dict[Any, Any]: ...
def encode(items: Any, *, key_class: KeyClassLike = ...) -> bytes: ...
def inspect(buffer: Any, *, strict: bool = ..., key_class: KeyClassLike = ...,
            max_output_bytes: SupportsIndex = ...) -> str: ...
