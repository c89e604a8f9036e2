"""The HPB1 payload segment (SPEC 1-2) from Python.

:func:`decode` gives the Python objects the original's ``pickle.loads`` gives (int, float,
bool, None, str, bytes, bytearray, tuple, list, dict); tensors come back as torch tensors
(numpy arrays when torch is not importable, or on request) that view the segment's memory:
a writable buffer (bytearray, numpy or torch uint8 memory) is viewed in place, as the
original's tensors view its bytearray; an immutable ``bytes`` is copied once. Item keys come
back as instances of the key class you name (:class:`KeyClass`), else as :class:`Key`, which
compares and hashes equal to the plain ``(sample_id, position)`` tuple.

:func:`encode` writes what the original's ``_encode_payload_segment`` writes for the same
items (SPEC 2.3's golden writer bytes), reading tensors without a copy where contiguous."""
from __future__ import annotations

import collections.abc
import dataclasses
import importlib
import sys
import weakref
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

from . import _core
from ._tensors import RawTensor, tensor_maker, to_raw, torch_dtypes
from .errors import _checked_int, _from_core, _is_utf8, _iterable

__all__ = ["Key", "KeyClass", "RawTensor", "decode", "decode_received", "encode", "inspect",
           "torch_dtypes", "DEFAULT_KEY_CLASS"]

DEFAULT_KEY_CLASS = "hyper_parallel.distributed_data.schema.SampleKey"
_DEFAULT_FIELDS = ("sample_id", "position")


class Key(NamedTuple):
    """A sample key (SPEC 1.4) decoded without a key class: a tuple, so ``Key(3, 0) ==
    (3, 0)`` and both hash alike; a lookup by the plain tuple finds it."""

    sample_id: Union[int, str]
    position: int


# KeyClass.coerce's descriptions of classes, dropped with the class.
_DESCRIBED: "weakref.WeakKeyDictionary[type, KeyClass]" = weakref.WeakKeyDictionary()


class KeyClass:
    """The user's sample-key class as SPEC 1.4 describes it: dotted name, ordered field names
    and state form (``"dict"``: pickled as BUILD with a dict of the fields, what a plain or
    frozen dataclass gives; ``"values"``: BUILD with the list of field values, what a
    ``slots=True`` dataclass gives). Decoding makes instances of it without running its code
    (``object.__new__`` and ``object.__setattr__``, as pickle does); encoding writes its
    pickle pattern so the original's ``pickle.loads`` rebuilds it."""

    def __init__(self, module: str, qualname: str, fields: Sequence[str] = _DEFAULT_FIELDS,
                 state: str = "dict", type: Optional[type] = None):  # noqa: A002
        for what, name in (("module", module), ("qualname", qualname)):
            if not isinstance(name, str):
                raise TypeError(f"a key class's {what} must be a str, got {name!r}")
            if not _is_utf8(name):
                raise _from_core("invalid_argument", f"a key class name must be valid UTF-8, got "
                                 f"{name!r} (a lone surrogate)")
        if isinstance(fields, str):  # tuple("sample_id") would be nine one-letter fields
            raise TypeError(f"fields must be a sequence of field names, got the str {fields!r}")
        if "." in qualname:
            raise _from_core("invalid_argument", f"a nested class {module}.{qualname} cannot be a "
                             "key class: SPEC 1.4 names split at the last dot")
        if not module or not qualname:
            raise _from_core("invalid_argument", f"a key class needs a module and a name, got "
                             f"{'.'.join(p for p in (module, qualname) if p)!r}")
        if state not in ("dict", "values"):
            raise _from_core("invalid_argument", f"state must be 'dict' or 'values', got {state!r}")
        fields = tuple(fields)
        if not fields or len(set(fields)) != len(fields) or not all(
                isinstance(f, str) and f.isidentifier() for f in fields):
            raise _from_core("invalid_argument", f"fields must be distinct identifiers, got {fields!r}")
        self.module, self.qualname, self.fields, self.state = module, qualname, fields, state
        # Weak: coerce's table of described classes would otherwise keep every class alive.
        self._type = None if type is None else weakref.ref(type)

    @classmethod
    def from_type(cls, key_type: type) -> "KeyClass":
        """The description of a dataclass (or any class with ``__slots__`` or annotations):
        its module, qualified name, fields in order and the state form pickle writes."""
        if dataclasses.is_dataclass(key_type):
            fields = tuple(f.name for f in dataclasses.fields(key_type))
            state = "dict"
            if "__slots__" in vars(key_type):
                # CPython pickles a frozen slots dataclass as BUILD with the list of values;
                # a mutable one as BUILD with (None, {fields}), which SPEC 1.4 does not read.
                if not key_type.__dataclass_params__.frozen:
                    raise _from_core("invalid_argument", f"{key_type.__qualname__} is a slots=True "
                                     "dataclass that is not frozen: its pickle state (None, "
                                     "{fields}) is not a SPEC 1.4 key-class pattern")
                state = "values"
        elif "__slots__" in vars(key_type):
            raise ValueError(f"{key_type.__qualname__} has __slots__ but is not a dataclass: "
                             "describe it with KeyClass(module, qualname, fields, state)")
        else:
            fields = tuple(getattr(key_type, "__annotations__", {}))
            state = "dict"
        return cls(key_type.__module__, key_type.__qualname__, fields, state, key_type)

    @classmethod
    def coerce(cls, key_class: Union[None, str, type, "KeyClass"]) -> Optional["KeyClass"]:
        """None, a KeyClass, a class (:meth:`from_type`, described once per class and shared
        by later calls) or a dotted name (default fields, dict state) as a KeyClass or None."""
        if key_class is None or isinstance(key_class, KeyClass):
            return key_class
        if isinstance(key_class, type):
            # Described once per class (from_type reads its dataclass fields: ~2 us a call).
            described = _DESCRIBED.get(key_class)
            if described is None:
                described = _DESCRIBED[key_class] = cls.from_type(key_class)
            return described
        if isinstance(key_class, str):
            module, _, name = key_class.rpartition(".")
            return cls(module, name)
        raise TypeError(f"key_class must be None, a class, a KeyClass or a dotted name, got {key_class!r}")

    @property
    def name(self) -> str:
        """The dotted name pickle writes (``module.qualname``)."""
        return f"{self.module}.{self.qualname}"

    @property
    def type(self) -> type:
        """The class itself: the one given (held weakly), else imported by name."""
        known = None if self._type is None else self._type()
        if known is not None:
            return known
        name = f"{self.module}.{self.qualname}"
        try:
            obj: Any = importlib.import_module(self.module)
            for part in self.qualname.split("."):
                obj = getattr(obj, part)
        except (ImportError, AttributeError) as e:
            raise _from_core("invalid_argument", f"key class {name} cannot be imported ({type(e).__name__}: {e}): "
                             "its instances are the keys made and read here (key_class=None: hpref.Key)") from e
        if not isinstance(obj, type):
            raise _from_core("invalid_argument", f"key class {name} is a {type(obj).__name__}, not a class")
        self._type = weakref.ref(obj)
        return obj

    def make(self, *values: Any) -> Any:
        """An instance with ``values`` in field order, built as pickle's NEWOBJ + BUILD do."""
        obj = object.__new__(self.type)
        for field, value in zip(self.fields, values):
            object.__setattr__(obj, field, value)
        return obj

    def values(self, key: Any) -> Optional[tuple]:
        """The field values of an instance of the class, None for anything else."""
        if not isinstance(key, self.type):
            return None
        return tuple(getattr(key, f) for f in self.fields)

    def _core_spec(self):
        if self.fields == _DEFAULT_FIELDS and self.state == "dict":
            return self.name
        return (self.name, list(self.fields), self.state)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, KeyClass) and (self.name, self.fields, self.state) == (
            other.name, other.fields, other.state)

    def __hash__(self) -> int:
        return hash((self.name, self.fields, self.state))

    def __repr__(self) -> str:
        return f"KeyClass({self.module!r}, {self.qualname!r}, fields={self.fields!r}, state={self.state!r})"


def _default_tensors() -> str:
    try:
        import torch  # noqa: F401
    except ImportError:
        return "numpy"
    return "torch"


def _flags(**flags: Any) -> None:
    """Refuses a flag that is not True or False (``strict=1`` reached the C++ binding as a
    bare TypeError naming none of the call's parameters)."""
    for name, value in flags.items():
        if not isinstance(value, bool):
            raise _from_core("invalid_argument", f"{name} must be True or False, got {value!r}")


def _segment(buffer: Any) -> Any:
    """``buffer`` as the decoder reads it: a torch tensor (what all_to_all_single receives
    into, which has no buffer protocol) as the numpy view of its bytes when it is a
    C-contiguous CPU uint8 tensor, refused naming what it is otherwise; anything else as it
    is (the binding checks it)."""
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(buffer, torch.Tensor):
        return buffer
    if buffer.dtype != torch.uint8 or buffer.device.type != "cpu" or buffer.layout != torch.strided \
            or not buffer.is_contiguous():
        layout = "" if buffer.layout == torch.strided else f", {buffer.layout}"
        order = "" if buffer.layout != torch.strided or buffer.is_contiguous() else ", not contiguous"
        raise _from_core("invalid_argument",
                         "a segment tensor must be a contiguous CPU torch.uint8 tensor, got "
                         f"{buffer.dtype} on {buffer.device}{layout}{order} (.view(torch.uint8), "
                         ".cpu() or .contiguous() first)")
    return buffer.detach().reshape(-1).numpy()


def _decode_args(key_class, tensors, torch_version):
    kc = KeyClass.coerce(key_class)
    tensors = _default_tensors() if tensors is None else tensors
    dtypes = torch_dtypes(torch_version) if (torch_version is not None or tensors == "torch") else None
    make_tensor = tensor_maker(tensors, dtypes, torch_version)
    if kc is None:
        return dict(key_class=DEFAULT_KEY_CLASS, make_tensor=make_tensor, make_key=Key,
                    key_arity=2, sample_key_rule=True)
    # The KeyClass itself: the decoder makes its instances as KeyClass.make does, in C.
    return dict(key_class=kc._core_spec(), make_tensor=make_tensor, make_key=kc,
                key_arity=len(kc.fields), sample_key_rule=kc.fields == _DEFAULT_FIELDS)


KeyClassLike = Union[None, str, type, KeyClass]
"""What ``key_class`` accepts: None, a dotted name, a class or a :class:`KeyClass`."""


def decode(buffer: Any, *, strict: bool = False,
           key_class: Union[None, str, type, KeyClass] = None,
           tensors: Optional[str] = None, torch_version: Optional[str] = None,
           copy: bool = False) -> List[Tuple[Any, Any]]:
    """Decodes one payload segment (SPEC 2.1-2.4) into ``[(key, value), ...]``.

    ``buffer``: bytes, any C-contiguous buffer (bytearray, memoryview, numpy uint8 array) or
    a contiguous CPU ``torch.uint8`` tensor (what ``all_to_all_single`` received into).
    Writable buffers and tensors are viewed in place (decoded tensors share them;
    ``copy=True`` decodes a private copy instead); ``bytes`` are copied once. ``strict`` refuses any binary layout
    the encoder would not write (SPEC 2.4). ``key_class``: the user's key class (a class,
    :class:`KeyClass` or dotted name) whose pickle pattern decodes as a key and whose
    instances the keys become; without it keys of the default class come back as
    :class:`Key`. ``tensors``: "torch" (default when importable), "numpy" or "raw".
    ``torch_version``: refuse dtypes that torch release lacks (default: the importable
    torch's, when tensors are torch tensors). Raises :class:`hpref.Error` naming the kind."""
    a = _decode_args(key_class, tensors, torch_version)
    _flags(strict=strict, copy=copy)
    return _core.decode(_segment(buffer), strict=strict, copy=copy, **a)


def decode_received(buffer: Any, splits: Sequence[int], *, strict: bool = False,
                    key_class: Union[None, str, type, KeyClass] = None,
                    tensors: Optional[str] = None, torch_version: Optional[str] = None,
                    copy: bool = False) -> Dict[Any, Any]:
    """Merges a received buffer (SPEC 2.5): ``splits`` (bytes per data-plane rank, in rank
    order) must sum to its length; each segment is decoded as :func:`decode` does and the
    items merged into a dict; a key that arrives twice is refused naming the key (the
    original raises ValueError). Same options as :func:`decode`."""
    if not _iterable(splits):
        raise _from_core("invalid_argument", f"splits must be a sequence of byte counts, got {splits!r}")
    splits = [_checked_int(f"splits[{i}]", s, "invalid_argument", 0, 1 << 63)
              for i, s in enumerate(splits)]
    a = _decode_args(key_class, tensors, torch_version)
    _flags(strict=strict, copy=copy)
    return dict(_core.decode_received(_segment(buffer), splits, strict=strict, copy=copy, **a))


def inspect(buffer: Any, *, strict: bool = False,
            key_class: Union[None, str, type, KeyClass] = None,
            max_output_bytes: int = 1 << 30) -> str:
    """The layout of a segment as ``hpref frame inspect`` prints it: the header, then each
    item's key and schema tree (dtype, shape, offset and size of every binary leaf). Decodes
    first, so a bad segment raises its error; a view longer than ``max_output_bytes`` is
    refused (``output_limit``)."""
    limit = _checked_int("max_output_bytes", max_output_bytes, "invalid_argument", 0, 1 << 64)
    _flags(strict=strict)
    kc = KeyClass.coerce(key_class)
    return _core.inspect(_segment(buffer), strict=strict,
                         key_class=DEFAULT_KEY_CLASS if kc is None else kc._core_spec(),
                         max_output_bytes=limit)


def _convert_value(x: Any) -> Optional[RawTensor]:
    return to_raw(x)


def encode(items: Any, *, key_class: Union[None, str, type, KeyClass] = None) -> bytes:
    """Encodes ``[(key, value), ...]`` (or a ``{key: value}`` mapping, in its order) as one
    payload segment (SPEC 2.1-2.3), the bytes the
    original's ``_encode_payload_segment`` writes for them: values are None, bool, int
    (64-bit), float, str, bytes, bytearray, tuple, list, mappings (a dict; any other
    ``collections.abc.Mapping`` and dict subclass in the order its ``items()`` gives) and
    tensors (torch tensors, numpy arrays, :class:`RawTensor`; read in place when contiguous
    on the host; masked arrays are refused: the mask has no wire form). With
    ``key_class``, keys that are its instances (or ``(sample_id, position)`` tuples) are
    written as its pickle pattern (SPEC 1.4); without it keys are written as tuples. Raises
    :class:`hpref.Error` naming the kind and the bad value."""
    kc = KeyClass.coerce(key_class)
    if isinstance(items, collections.abc.Mapping):
        # {key: value} (what decode_received gives): its pairs. Iterating it would give the
        # keys alone, and a 2-tuple key would be read as a (key, value) pair.
        items = list(items.items())
    elif not _iterable(items):
        raise _from_core("invalid_argument", "items must be a sequence of (key, value) pairs or a mapping, "
                                             f"got {items!r:.80}")
    return _core.encode(items if isinstance(items, (list, tuple)) else list(items),
                        key_class=None if kc is None else kc._core_spec(),
                        raw_type=RawTensor, convert=_convert_value,
                        torch_tensor=_torch_tensor_type(), mapping_type=collections.abc.Mapping,
                        key_type=kc.type if kc is not None and _importable(kc) else None,
                        key_fields=list(kc.fields) if kc is not None else [])


def _torch_tensor_type():
    torch = sys.modules.get("torch")
    return None if torch is None else torch.Tensor


def _importable(kc: KeyClass) -> bool:
    try:
        kc.type
    except (ImportError, AttributeError):
        return False
    return True
