from typing import Any, List, Literal, NamedTuple, Optional, Tuple

class RawTensor(NamedTuple):
    dtype: str
    shape: Tuple[int, ...]
    data: Any

def decode(buffer: bytes, *, strict: bool = False, key_class: Optional[str] = None,
           tensors: Literal["torch", "numpy", "raw"] = "torch") -> List[Tuple[Any, Any]]: ...
def encode(items: Any, *, key_class: Optional[str] = None) -> bytes: ...
