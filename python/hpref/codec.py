"""The HPB1 payload segment (SPEC 2) from Python: decode a segment into the Python objects
the original's ``pickle.loads`` gives (int, float, bool, None, str, bytes, bytearray, tuple,
list, dict), tensors as torch tensors (or numpy arrays, or :class:`RawTensor`) that view the
decoded buffer without copying it."""
from __future__ import annotations

from typing import Any, List, Literal, NamedTuple, Optional, Tuple

from . import _core


class RawTensor(NamedTuple):
    """A tensor as it crossed the wire: SPEC 1.3 dtype name, shape, and its bytes (a
    read-only 1-d uint8 array viewing the decoded segment)."""

    dtype: str
    shape: Tuple[int, ...]
    data: Any


_NUMPY = {"float64": "<f8", "float32": "<f4", "float16": "<f2", "complex64": "<c8",
          "complex128": "<c16", "int64": "<i8", "int32": "<i4", "int16": "<i2", "int8": "i1",
          "uint8": "u1", "uint16": "<u2", "uint32": "<u4", "uint64": "<u8", "bool": "?"}


def _torch_tensor(raw: RawTensor):
    import torch

    dtype = getattr(torch, raw.dtype)
    flat = torch.from_dlpack(raw.data) if raw.data.size else torch.empty(0, dtype=torch.uint8)
    return flat.view(dtype).reshape(raw.shape)


def _numpy_array(raw: RawTensor):
    import numpy as np

    if raw.dtype not in _NUMPY:
        raise _core.Error("unsupported_dtype", f"numpy has no dtype for torch.{raw.dtype}")
    return np.asarray(raw.data).view(np.dtype(_NUMPY[raw.dtype])).reshape(raw.shape)


def encode(items, *, key_class: Optional[str] = None) -> bytes:
    """Encodes ``[(key, value), ...]`` as one payload segment (SPEC 2.1-2.2): values are
    None, bool, int (64-bit), float, str, bytes, bytearray, tuple, list, dict and
    :class:`RawTensor`; ``key_class`` writes ``(sample_id, position)`` keys as that class's
    pickle pattern (SPEC 1.4). Raises :class:`hpref.Error` naming the kind."""
    return _core.encode(list(items), key_class=key_class, tensor_type=RawTensor)


def decode(buffer: bytes, *, strict: bool = False, key_class: Optional[str] = None,
           tensors: Literal["torch", "numpy", "raw"] = "torch") -> List[Tuple[Any, Any]]:
    """Decodes one payload segment (SPEC 2.1-2.4) into ``[(key, value), ...]``.

    ``strict`` refuses any binary layout the encoder would not write (SPEC 2.4);
    ``key_class`` is the dotted name of the key class whose pickle pattern decodes as a
    ``(sample_id, position)`` key (SPEC 1.4). Raises :class:`hpref.Error` naming the kind."""
    if tensors == "raw":
        make = RawTensor
    elif tensors == "torch":
        make = lambda d, s, b: _torch_tensor(RawTensor(d, s, b))  # noqa: E731
    elif tensors == "numpy":
        make = lambda d, s, b: _numpy_array(RawTensor(d, s, b))  # noqa: E731
    else:
        raise ValueError(f"tensors must be 'torch', 'numpy' or 'raw', got {tensors!r}")
    return _core.decode(bytes(buffer), strict=strict, key_class=key_class, tensor_type=make)
