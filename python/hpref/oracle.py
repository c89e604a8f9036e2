"""The global oracle of sequence dispatch (SPEC 8) from Python: what every rank's
``async_sequence_dispatch`` must end with, computed from a global view instead of by
communication, so a test can compare a distributed run with it bit for bit.

- :func:`dispatch_forward`: rank ``r``'s output is rows ``[global_start, global_end)`` of
  the global bank along the sequence dim.
- :func:`dispatch_backward`: each owner's input gradient is its own block of its output
  gradient, then, for each peer in ascending rank, the rows that peer received from it
  added at their send offset: the original's summation order, so float32, float16 and
  bfloat16 results are bitwise those of its dispatch backward (float16 and bfloat16
  rounded after each add, as PyTorch does on CPU; ints wrap), except the bits of a NaN:
  where torch's sum is a NaN the oracle's is one too, but its sign and payload may differ
  (torch's vectorised bfloat16 add gives 0xffff, the oracle 0x7fc0; torch keeps a float16
  payload the oracle quiets), since they depend on torch's version and code path.

Tensors are torch tensors or numpy arrays of any dtype the original moves (float64,
float32, float16, bfloat16, complex, int and uint types, bool); results are independent
tensors (torch by default). Routes are :class:`hpref.routes.Route` objects or any with
their fields, such as the original's ``SequenceDispatchRoute``, one per rank (index =
rank), as :func:`hpref.routes.plan_all` gives them.

    >>> import torch
    >>> from hpref import oracle, routes
    >>> plan = routes.plan_all("sliding_window", (0, 5, 8), 2, 4, 2)
    >>> [t.tolist() for t in oracle.dispatch_forward(torch.arange(8), plan)]
    [[0, 1], [1, 2, 3], [3, 4, 5], [5, 6, 7]]
"""
from __future__ import annotations

import operator
import sys
from typing import Any, List, Optional, Sequence

from . import _core
from ._tensors import RawTensor, _import_torch, from_raw, to_raw
from .errors import _from_core, _iterable

__all__ = ["dispatch_forward", "dispatch_backward"]


def _output_kind(tensors: Optional[str]) -> str:
    if tensors is None:
        return "torch" if _import_torch() is not None else "numpy"
    if tensors not in ("torch", "numpy"):
        raise ValueError(f"tensors must be 'torch', 'numpy' or None, got {tensors!r}")
    return tensors


def _array(x: Any, what: str):
    """x as a torch tensor or numpy array (a RawTensor becomes one of them)."""
    if isinstance(x, RawTensor):
        # The caller's: checked as encode checks one (a dtype alias, a shape that does not
        # hold the bytes, data that is no buffer), then made by its canonical name.
        dtype, shape = _core.raw_tensor_checked(x)
        data = x.data
        if memoryview(data).readonly:  # torch warns of a tensor over read-only bytes: a copy
            data = bytearray(data)
        return from_raw(RawTensor(dtype, shape, data), "torch" if _import_torch() is not None else "numpy")
    if to_raw(x) is None:
        raise TypeError(f"{what} must be a torch tensor, a numpy array or a RawTensor, "
                        f"got a {type(x).__name__}")
    return x


def _axis(dim: int, ndim: int, what: str) -> int:
    """dim counted from the front, as the original's dispatch reads sequence_dim: an int or
    a numpy or torch integer (``operator.index``, as torch's movedim takes it), not a bool."""
    index = None
    if not (isinstance(dim, bool) or str(getattr(dim, "dtype", "")) in ("bool", "torch.bool")):
        try:
            index = operator.index(dim)
        except TypeError:
            pass
    if index is None:
        raise TypeError(f"dim must be an int, got {dim!r}")
    dim = index
    if not -ndim <= dim < ndim:
        raise _from_core("oracle_mismatch", f"dim {dim} is outside the {ndim} dimensions of {what}")
    return dim % ndim


def _to_axis0(x: Any, axis: int) -> RawTensor:
    """x with its sequence axis moved to the front, C-contiguous, as a RawTensor."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        return to_raw(x.movedim(axis, 0).contiguous())
    import numpy as np

    return to_raw(np.ascontiguousarray(np.moveaxis(x, axis, 0)))


def _from_axis0(raw: RawTensor, axis: int, kind: str):
    """A result moved back to the caller's layout, in memory of its own."""
    t = from_raw(raw, kind)
    if kind == "torch":
        return t.movedim(0, axis).clone(memory_format=sys.modules["torch"].contiguous_format)
    import numpy as np

    return np.moveaxis(t, 0, axis).copy(order="C")


def dispatch_forward(bank: Any, routes: Sequence[Any], dim: int = 0, *,
                     tensors: Optional[str] = None) -> List[Any]:
    """SPEC 8.1: every rank's dispatch output from the global ``bank`` (the concatenation of
    all owner shards along ``dim``, which may be negative as in the original's
    ``sequence_dim``): ``[out_0, out_1, ...]``, ``out_r`` = rows ``[routes[r].global_start,
    routes[r].global_end)`` of ``bank`` along ``dim``.

    ``tensors``: "torch" (default when torch is importable) or "numpy". Raises
    :class:`hpref.Error` ``oracle_mismatch`` for a ``dim`` outside the bank's dims, an
    interval outside the bank, or routes that are not one rank each of one plan (SPEC 7.1's
    shape, owner shards following each other from row 0, one ``needs_exchange``, and every
    pair agreeing: ``routes[r].output_splits[q] == routes[q].input_splits[r]`` == the rows
    where ``q``'s shard meets ``r``'s interval, sent from the offset where they start), the
    message naming the pair and the values."""
    kind = _output_kind(tensors)
    bank = _array(bank, "bank")
    axis = _axis(dim, bank.ndim, "the bank")
    outs = _core.oracle_forward(_to_axis0(bank, axis), routes, RawTensor)
    return [_from_axis0(o, axis, kind) for o in outs]


def dispatch_backward(output_grads: Sequence[Any], routes: Sequence[Any], dim: int = 0, *,
                      tensors: Optional[str] = None) -> List[Any]:
    """SPEC 8.2: every owner's input gradient from every rank's output gradient
    (``output_grads[r]`` shaped like rank ``r``'s dispatch output, sequence along ``dim``):
    its own rows of its output gradient, then each peer's received rows added at their send
    offset, peers in ascending rank, the order of the original's backward, so results
    compare bitwise (``torch.equal`` on the bits) with it, but for the bits of a NaN (a NaN
    stays a NaN; its sign and payload are not torch's, which vary with its version).

    ``tensors`` as in :func:`dispatch_forward`. Raises :class:`hpref.Error`
    ``oracle_mismatch`` for gradients whose rows, row shape or dtype do not fit the routes,
    ``unsupported_arithmetic`` for dtypes without addition (quantized, float8, bits)."""
    kind = _output_kind(tensors)
    if not _iterable(output_grads):
        raise TypeError(f"output_grads must be a sequence of tensors (one per rank), got {output_grads!r:.80}")
    grads = [_array(g, f"output_grads[{i}]") for i, g in enumerate(output_grads)]
    axes = [_axis(dim, g.ndim, f"output_grads[{i}]") for i, g in enumerate(grads)]
    raws = [_to_axis0(g, a) for g, a in zip(grads, axes)]
    outs = _core.oracle_backward(raws, routes, RawTensor)
    return [_from_axis0(o, axes[0] if axes else 0, kind) for o in outs]
