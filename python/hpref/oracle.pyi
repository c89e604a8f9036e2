from typing import Any, Iterable, List, Literal, Optional, SupportsIndex

__all__ = [
    "dispatch_forward", "dispatch_backward",
]

def dispatch_forward(bank: Any, routes: Iterable[Any], dim: SupportsIndex = 0, *,
                     tensors: Optional[Literal["torch", "numpy"]] = None) -> List[Any]: ...
# Bitwise the original's backward, except the bit pattern of a NaN (still a NaN).
def dispatch_backward(output_grads: Iterable[Any], routes: Iterable[Any], dim: SupportsIndex = 0, *,
                      tensors: Optional[Literal["torch", "numpy"]] = None) -> List[Any]: ...
