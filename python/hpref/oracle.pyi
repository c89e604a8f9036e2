from typing import Any, List, Literal, Optional, Sequence

__all__ = [
    "dispatch_forward", "dispatch_backward",
]

def dispatch_forward(bank: Any, routes: Sequence[Any], dim: int = 0, *,
                     tensors: Optional[Literal["torch", "numpy"]] = None) -> List[Any]: ...
# Bitwise the original's backward, except the bit pattern of a NaN (still a NaN).
def dispatch_backward(output_grads: Sequence[Any], routes: Sequence[Any], dim: int = 0, *,
                      tensors: Optional[Literal["torch", "numpy"]] = None) -> List[Any]: ...
