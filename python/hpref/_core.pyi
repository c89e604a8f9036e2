from typing import Any, Callable, List, Optional, Tuple

class Error(Exception):
    """An hpref refusal: ``args == (kind, message)``; ``kind`` as in the CLI's JSON."""

def decode(buffer: bytes, strict: bool = False, key_class: Optional[str] = None, *,
           tensor_type: Callable[[str, Tuple[int, ...], Any], Any]) -> List[Tuple[Any, Any]]: ...
def dtype_names() -> List[str]: ...
