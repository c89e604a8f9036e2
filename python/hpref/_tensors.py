"""Tensors across the C++ boundary: every torch tensor or numpy array crosses as a
:class:`RawTensor` (SPEC 1.3 dtype name, shape, and a 1-d uint8 array of its C-contiguous
little-endian bytes) that views the original memory where it can, and comes back as a torch
tensor, a numpy array or the RawTensor itself.

The dtype table per torch version (SPEC 1.3, issue 11): the original resolves a wire dtype
with ``getattr(torch, name)``, so a dtype that the peer's torch release lacks is refused
there. :func:`torch_dtypes` gives the SPEC 1.3 names a given release has."""
from __future__ import annotations

import functools
import re
import sys
from typing import Any, FrozenSet, NamedTuple, Optional, Tuple

from . import _core
from .errors import Error, _from_core


class RawTensor(NamedTuple):
    """A tensor as it crosses the wire: SPEC 1.3 dtype name without ``torch.`` (``"float32"``),
    shape, and ``data``: the element bytes, C-contiguous little-endian. Decoded ones hold a
    writable ``memoryview`` of the segment; going in, any C-contiguous buffer is read."""

    dtype: str
    shape: Tuple[int, ...]
    data: Any


# numpy's little-endian equivalents of the SPEC 1.3 dtypes it has.
_NUMPY = {"float64": "<f8", "float32": "<f4", "float16": "<f2", "complex64": "<c8",
          "complex128": "<c16", "int64": "<i8", "int32": "<i4", "int16": "<i2", "int8": "i1",
          "uint8": "u1", "uint16": "<u2", "uint32": "<u4", "uint64": "<u8", "bool": "?"}
_FROM_NUMPY = {(k if k != "?" else "b1"): v for v, k in
               ((name, code.lstrip("<")) for name, code in _NUMPY.items())}

# PyTorch's quantized dtypes: their tensors carry a scale and zero point the wire has not.
_QUANTIZED = frozenset(_core.quantized_dtype_names())

# The release that added each SPEC 1.3 dtype beyond those every supported torch (>= 1.13)
# has. Checked against the importable torch by tests/python/test_tensors.py (1.13 and 2.13
# in CI); the others are from PyTorch's release notes.
_ADDED_IN = {"float8_e4m3fn": (2, 1), "float8_e5m2": (2, 1), "bits8": (2, 1), "bits16": (2, 1),
             "float8_e4m3fnuz": (2, 2), "float8_e5m2fnuz": (2, 2), "uint16": (2, 3),
             "uint32": (2, 3), "uint64": (2, 3), "float8_e8m0fnu": (2, 7)}


def _version_tuple(version: str) -> Tuple[int, int]:
    """(major, minor) of a torch version: "2.13", "1.13.1+cu117", "2.1.0a0", "2.1rc1" (the
    minor's digits up to the first other character: "2.1rc1" is 2.1, not 2.11)."""
    if not isinstance(version, str):
        raise TypeError(f"torch_version must be a str such as '2.13' or '1.13.0', got {version!r}")
    m = re.match(r"(\d+)\.(\d+)", version)
    if m is None:
        raise ValueError(f"torch_version must look like '2.13' or '1.13.0', got {version!r}")
    return int(m.group(1)), int(m.group(2))


def torch_dtypes(torch_version: Optional[str] = None) -> FrozenSet[str]:
    """The SPEC 1.3 dtype names that torch release ``torch_version`` ("1.13", "2.13.0", ...)
    resolves, so a segment with any other dtype is refused as that release's original would
    refuse it. ``None``: the importable torch's version (all 28 names when torch is absent)."""
    if torch_version is None:
        torch = sys.modules.get("torch") or _import_torch()
        if torch is None:
            return frozenset(_core.dtype_names())
        torch_version = torch.__version__
    elif not isinstance(torch_version, str):
        _version_tuple(torch_version)  # raises TypeError naming it
    return _dtypes_of(torch_version)


@functools.lru_cache(maxsize=None)
def _dtypes_of(torch_version: str) -> FrozenSet[str]:
    """torch_dtypes of an explicit version, computed once (decode asks at every call)."""
    v = _version_tuple(torch_version)
    return frozenset(n for n in _core.dtype_names() if _ADDED_IN.get(n, (0, 0)) <= v)


def _import_torch():
    """torch, or None where it is not installed (oracle and planning ask, to answer in torch
    tensors and to read devices as torch does)."""
    try:
        import torch
    except ImportError:
        return None
    return torch


def to_raw(x: Any) -> Optional[RawTensor]:
    """``x`` as a RawTensor without copying where its memory is already C-contiguous on the
    host (torch tensors: detached; accelerator tensors copied to the host first, SPEC 2.2);
    None when ``x`` is neither a torch tensor, a numpy array nor a RawTensor."""
    if isinstance(x, RawTensor):
        return x
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        # A subclass: a MaskedTensor's mask has no wire form; other wrapper subclasses (no
        # storage of their own) say through torch whether they have dense bytes.
        masked = getattr(getattr(torch, "masked", None), "MaskedTensor", None)
        if type(x) is not torch.Tensor and masked is not None and isinstance(x, masked):
            raise _from_core("invalid_tensor", "a torch MaskedTensor cannot be encoded: the wire "
                             "has no mask (encode .get_data() or a filled tensor)")
        try:
            return _torch_raw(torch, x)
        except Error:
            raise
        except Exception as e:  # torch's own refusal (a ZeroTensor, a subclass without bytes)
            what = ("torch.Tensor" if type(x) is torch.Tensor
                    else f"{type(x).__qualname__} (a torch.Tensor subclass)")
            raise _from_core("invalid_tensor", f"a {what} has no dense bytes to encode: "
                             f"{type(e).__name__}: {e}") from e
    np = sys.modules.get("numpy")
    if np is not None and isinstance(x, np.ndarray):
        if type(x) is not np.ndarray and isinstance(x, np.ma.MaskedArray):
            raise _from_core("invalid_tensor",
                             f"a numpy masked array of {x.dtype} cannot be encoded: the wire has "
                             "no mask (encode .filled(value) or .data)")
        code = x.dtype.str.lstrip("<|")
        name = _FROM_NUMPY.get(code)
        if name is None or x.dtype.byteorder == ">":
            raise _from_core("unsupported_dtype",
                             f"numpy dtype {x.dtype.str!r} has no little-endian SPEC 1.3 "
                             "equivalent (convert it to a torch dtype's numpy form first)")
        # Not np.ascontiguousarray: it makes a 0-d array 1-d (shape (1,) on the wire).
        # Subclasses (np.matrix reshapes to 2-d) are read as the plain array they hold.
        a = x if type(x) is np.ndarray else x.view(np.ndarray)
        a = a if a.flags.c_contiguous else a.copy(order="C")
        return RawTensor(name, tuple(int(d) for d in x.shape), a.reshape(-1).view(np.uint8))
    return None


def _torch_raw(torch: Any, x: Any) -> RawTensor:
    """A torch tensor's RawTensor: detached, on the host, its conj and neg bits applied,
    C-contiguous; read in place where it already is all of these."""
    t = x.detach()
    kind = ("nested" if getattr(t, "is_nested", False) else
            "meta-device" if t.device.type == "meta" else
            str(t.layout)[len("torch."):] if t.layout != torch.strided else None)
    if kind is not None:
        raise _from_core("invalid_tensor",
                         f"a {kind} tensor of {t.dtype} cannot be encoded: SPEC 1.2 tensors "
                         "are dense and strided, with their bytes (.to_dense(), or real data, "
                         "first)")
    if t.device.type != "cpu":
        t = t.cpu()
    if t.is_conj():
        t = t.resolve_conj()
    if t.is_neg():
        t = t.resolve_neg()
    t = t.contiguous()
    flat = t.reshape(-1)
    if flat.stride(0) != 1:
        # contiguous() keeps a size-1 dim's stride (the imag of a conj view: (1,) with
        # stride 2), and an empty tensor's any stride, which view() below refuses.
        flat = flat.clone(memory_format=torch.contiguous_format)
    if flat.dtype != torch.uint8:
        flat = flat.view(torch.uint8)
    return RawTensor(str(t.dtype)[len("torch."):], tuple(t.shape), flat.numpy())


@functools.lru_cache(maxsize=64)
def tensor_maker(tensors: str, dtypes: Optional[FrozenSet[str]] = None,
                 release: Optional[str] = None):
    """The callable that turns (dtype name, shape, data: a buffer of the element bytes,
    viewed, not copied) into the requested kind of tensor: "torch", "numpy" or "raw".
    ``dtypes``: the names accepted (others are refused with the ``unsupported_dtype``
    error, as the original on a torch release without them refuses); ``release``: the torch
    release they are of, as asked for (named by those refusals). Cached: one maker per
    (kind, dtypes, release), not one (with its dtype table) per decode call."""
    if tensors not in ("torch", "numpy", "raw"):
        raise ValueError(f"tensors must be 'torch', 'numpy' or 'raw', got {tensors!r}")
    not_asked = "is not a dtype of the torch release asked for" + (
        f", {release}" if release else "")

    def refuse(dtype: str, why: str):
        return _from_core("unsupported_dtype", f"torch.{dtype} {why} (SPEC 1.3)")

    def unmakeable(shape, kind: str, e: Exception):
        # errors.py's python_equivalent reads `kind` back from this message
        return _from_core("invalid_shape", f"tensor shape {tuple(shape)} cannot be made as "
                                           f"{kind}: {e}")

    if tensors == "raw":
        if dtypes is None:
            return RawTensor

        def make_raw(dtype, shape, data):
            if dtype not in dtypes:
                raise refuse(dtype, not_asked)
            return RawTensor(dtype, shape, data)
        return make_raw
    if tensors == "numpy":
        import numpy as np

        codes = {n: np.dtype(c) for n, c in _NUMPY.items() if dtypes is None or n in dtypes}

        def make_numpy(dtype, shape, data):
            code = codes.get(dtype)
            if code is None:
                raise refuse(dtype, "has no numpy dtype" if dtype not in _NUMPY else not_asked)
            try:
                return np.frombuffer(data, code).reshape(shape)
            except ValueError as e:
                # No elements, yet more bytes than numpy can address ((0, 2**63 - 1)), or
                # more than numpy's 64 dims.
                raise unmakeable(shape, "a numpy array", e) from None
        return make_numpy
    import torch

    kinds = {n: getattr(torch, n) for n in _core.dtype_names()
             if isinstance(getattr(torch, n, None), torch.dtype) and (dtypes is None or n in dtypes)}
    frombuffer, empty = torch.frombuffer, torch.empty

    def make_torch(dtype, shape, data):
        kind = kinds.get(dtype)
        if kind is None:
            # The release asked for lacks it, or else the importable torch does.
            asked = release is not None and dtypes is not None and dtype not in dtypes
            raise refuse(dtype, not_asked if asked
                         else f"is not a dtype of torch {torch.__version__}")
        if not len(data):
            try:
                return empty(shape, dtype=kind)
            except RuntimeError as e:
                # No elements, yet strides beyond int64 (a zero dim beside huge ones, e.g.
                # (0, 2, 0, 2**62)): torch.empty refuses, as in the original's decode.
                raise unmakeable(shape, "a torch tensor", e) from None
        if dtype in _QUANTIZED:
            # torch.frombuffer makes such a tensor without a quantizer (the wire has no scale
            # or zero point), and torch then crashes the process on its first use (reshape,
            # qscheme, repr: a segmentation fault in torch 2.13), as the original's decode does.
            raise refuse(dtype, f"tensor of {len(data)} bytes cannot be made as a torch tensor: the "
                                "wire format has no scale or zero point; decode with tensors='raw' "
                                "for its bytes")
        t = frombuffer(data, dtype=kind)
        if dtype == "complex128" and t.data_ptr() % 16:
            # torch crashes (SIGSEGV) on complex128 bytes that are not 16-byte aligned, as
            # python/src/codec.cpp says: an aligned private copy.
            t = empty(len(data) // 16, dtype=kind).view(torch.uint8).copy_(
                frombuffer(data, dtype=torch.uint8)).view(kind)
        return t if len(shape) == 1 else t.reshape(shape)
    # The decoder (python/src/codec.cpp) makes the tensors of known dtypes itself with these,
    # as make_torch does (no Python frame per tensor); empty ones and refusals come here.
    make_torch._hpref_torch = (frombuffer, kinds)  # type: ignore[attr-defined]
    return make_torch


def from_raw(raw: RawTensor, tensors: str = "torch") -> Any:
    """A RawTensor as a torch tensor, numpy array or itself (sharing its bytes)."""
    return tensor_maker(tensors)(raw.dtype, tuple(raw.shape), memoryview(raw.data).cast("B"))
