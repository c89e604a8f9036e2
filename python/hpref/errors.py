"""hpref's refusals as Python exceptions (docs/python.md, "Errors").

Every C++ ``hpref::Error`` arrives as an instance of the :class:`Error` subclass of its
kind: ``err.kind`` is the error kind the CLI prints (``"frame_size_mismatch"``),
``err.message`` (also ``str(err)``) the sentence naming the bad value. Kinds are grouped
under a few category classes (:class:`DecodeError`, :class:`RouteError`,
:class:`CommError`, ...), so a test catches a whole area at once.

:func:`python_equivalent` names the exception type the original implementation (the seed
modules on PyTorch) raises for the same refusal, or None where it does not refuse, so a
differential test can assert that both refuse for the same reason::

    with pytest.raises(hpref.Error) as ours:
        hpref.codec.decode(frame)
    with pytest.raises(hpref.python_equivalent(ours.value)):
        original._decode_payload_segment(frame)
"""
from __future__ import annotations

import ast
import operator
import pickle
import re
from typing import Any, Callable, Dict, Optional, Type, Union

__all__ = [
    "Error", "python_equivalent", "error_class",
    # categories
    "CodecError", "ValueModelError", "DecodeError", "MetadataPickleError", "SegmentError",
    "MergeError", "EncodeError", "RouteError", "PlanningError", "TopologyError",
    "GroupPlanError", "BatchError", "OracleError", "CommError", "TransportError",
    "DispatchError", "UsageError",
    # issue 12's names for communicator detections
    "CommMismatch", "CommDeadlock", "PeerFailed", "CommTimeout", "BufferMutated",
]


class Error(Exception):
    """An hpref refusal: ``kind`` (as in the CLI's JSON answers) and ``message``, one
    sentence naming the bad value (also ``str(err)``). Pickles (the class, kind, message
    and any attributes a subclass adds travel), so errors can cross process boundaries."""

    kind: str = "error"

    def __init__(self, message: str, kind: Optional[str] = None):
        """``message``: the sentence; ``kind``: only for a kind without its own class
        (:func:`_from_core` passes it for kinds this module does not know)."""
        super().__init__(message)
        self.message = message
        if kind is not None and kind != type(self).kind:
            self.kind = kind

    def __str__(self) -> str:
        """The message, as the CLI prints it after the kind."""
        return self.message

    def __repr__(self) -> str:
        """``ClassName('message')``, with the kind where the class does not fix it."""
        if "kind" in self.__dict__:
            return f"{type(self).__name__}({self.message!r}, kind={self.kind!r})"
        return f"{type(self).__name__}({self.message!r})"

    def __reduce__(self):
        """Rebuilt without calling a subclass's ``__init__`` (whose signature may differ):
        the class, message and kind, then the remaining attributes as state."""
        state = {k: v for k, v in self.__dict__.items() if k not in ("message", "kind")}
        return (_restore, (type(self), self.message, self.kind), state or None)


def _restore(cls: Type[Error], message: str, kind: str) -> Error:
    """The unpickling half of :meth:`Error.__reduce__`."""
    err = cls.__new__(cls, message)
    Error.__init__(err, message, kind)
    return err


# ---- categories -----------------------------------------------------------------------


class CodecError(Error):
    """SPEC 1-2: values, tensors, keys, the metadata pickle and the HPB1 segment, both
    directions (a decode may also raise a :class:`ValueModelError`, e.g. for a dtype)."""


class ValueModelError(CodecError):
    """SPEC 1: a value, dtype, tensor or sample key that the value model refuses."""


class DecodeError(CodecError):
    """SPEC 2.1-2.5: bytes that do not decode (metadata pickle, segment, merge)."""


class MetadataPickleError(DecodeError):
    """SPEC 2.3: the metadata pickle: opcodes, globals, structure and limits (the stack
    limit is also the writer's)."""


class SegmentError(DecodeError):
    """SPEC 2.1, 2.2, 2.4: the HPB1 frame, its schema nodes and descriptors."""


class MergeError(DecodeError):
    """SPEC 2.5: merging a received buffer (split sizes, a key twice)."""


class EncodeError(CodecError):
    """SPEC 2.6: a value the format cannot carry."""


class RouteError(Error):
    """SPEC 7: sequence dispatch route arguments."""


class PlanningError(Error):
    """SPEC 3 and 6.1-6.3: the pure planners (topology, groups, model batch)."""


class TopologyError(PlanningError):
    """SPEC 3.1: the data topology."""


class GroupPlanError(PlanningError):
    """SPEC 3.2: group planning, one kind per check."""


class BatchError(PlanningError):
    """SPEC 6.1-6.3: model batch spec, layout and header."""


class OracleError(Error):
    """SPEC 8: the global oracle."""


class CommError(Error):
    """SPEC 9: what a communicator detects (mismatch, deadlock, peer failure, a send
    buffer mutated, ...)."""


class TransportError(Error):
    """SPEC 4-6: the data-plane and model-parallel transports."""


class DispatchError(Error):
    """SPEC 8: sequence dispatch execution."""


class UsageError(Error):
    """The request itself: the CLI's JSON interchange, arguments, I/O, output limits."""


# ---- one class per kind (reference/include/hpref/error.hpp, HPREF_ERROR_KINDS) --------

# SPEC 1: values, tensors, dtypes, keys
class InvalidDtypeError(ValueModelError):
    """A dtype that is not a string or lacks the ``torch.`` prefix (SPEC 1.3)."""
    kind = "invalid_dtype"


class UnsupportedDtypeError(ValueModelError):
    """``torch.<x>`` not in the dtype table, or not in the chosen torch release's (SPEC 1.3)."""
    kind = "unsupported_dtype"


class InvalidTensorError(ValueModelError):
    """A tensor whose shape and bytes disagree, or whose bytes cannot be read (SPEC 1.2)."""
    kind = "invalid_tensor"


class InvalidUtf8Error(ValueModelError):
    """A str that is not valid UTF-8 (a lone surrogate) (SPEC 1.1)."""
    kind = "invalid_utf8"


class UnhashableKeyError(ValueModelError):
    """An item or mapping key that is not hashable (SPEC 1.1)."""
    kind = "unhashable_key"


class DuplicateKeyError(ValueModelError):
    """Two equal keys in one mapping value (SPEC 1.1)."""
    kind = "duplicate_key"


class InvalidSampleKeyError(ValueModelError):
    """A sample key with a negative position or an empty or negative sample_id (SPEC 1.4)."""
    kind = "invalid_sample_key"


# SPEC 2.3: the metadata pickle
class PickleTruncatedError(MetadataPickleError):
    """The pickle ends inside an opcode or before STOP."""
    kind = "pickle_truncated"


class PickleOpcodeError(MetadataPickleError):
    """An opcode outside the accepted subset, or an unknown byte."""
    kind = "pickle_opcode"


class PickleGlobalError(MetadataPickleError):
    """A GLOBAL/STACK_GLOBAL other than the accepted three shapes."""
    kind = "pickle_global"


class PickleReduceError(MetadataPickleError):
    """REDUCE, NEWOBJ or BUILD outside the accepted shapes."""
    kind = "pickle_reduce"


class PickleProtocolError(MetadataPickleError):
    """PROTO outside 2-5."""
    kind = "pickle_protocol"


class PickleTrailingBytesError(MetadataPickleError):
    """Bytes after STOP."""
    kind = "pickle_trailing_bytes"


class PickleStackError(MetadataPickleError):
    """An opcode that finds the stack or its MARKs not as it needs them."""
    kind = "pickle_stack"


class PickleIntRangeError(MetadataPickleError):
    """An integer beyond 64 bits."""
    kind = "pickle_int_range"


class PickleInvalidUtf8Error(MetadataPickleError):
    """A string opcode whose bytes are not valid UTF-8."""
    kind = "pickle_invalid_utf8"


class PickleUnhashableKeyError(MetadataPickleError):
    """A dict key (or key-class fields) that is not hashable."""
    kind = "pickle_unhashable_key"


class PickleDuplicateKeyError(MetadataPickleError):
    """A dict with two keys equal under key equality."""
    kind = "pickle_duplicate_key"


class PickleMemoMissingError(MetadataPickleError):
    """BINGET/LONG_BINGET of an index never stored."""
    kind = "pickle_memo_missing"


class PickleFrozenMutationError(MetadataPickleError):
    """A list or dict modified after it was fetched from the memo."""
    kind = "pickle_frozen_mutation"


class PickleDepthLimitError(MetadataPickleError):
    """Values nested deeper than the depth limit (256)."""
    kind = "pickle_depth_limit"


class PickleMemoLimitError(MetadataPickleError):
    """More memo entries than the limit (1 Mi)."""
    kind = "pickle_memo_limit"


class PickleNodeLimitError(MetadataPickleError):
    """More value nodes than the limit (16 Mi), memo references counted as copies."""
    kind = "pickle_node_limit"


class PickleStackLimitError(MetadataPickleError):
    """A stack deeper than the limit (1 Mi entries), reading or writing."""
    kind = "pickle_stack_limit"


class PickleUnwritableError(EncodeError):
    """A value the metadata pickle cannot hold (a tensor outside the binary region)."""
    kind = "pickle_unwritable"


# SPEC 2.1, 2.2, 2.4: segments
class TruncatedHeaderError(SegmentError):
    """A segment that starts with HPB1 but is under 20 bytes."""
    kind = "truncated_header"


class FrameSizeMismatchError(SegmentError):
    """``20 + metadata_size + binary_size`` is not the segment's length."""
    kind = "frame_size_mismatch"


class MetadataNotPairsError(SegmentError):
    """Metadata (or a legacy segment) that is not a sequence of (key, value) pairs."""
    kind = "metadata_not_pairs"


class InvalidSchemaNodeError(SegmentError):
    """A schema node that is not a non-empty tuple, or children that are not a sequence."""
    kind = "invalid_schema_node"


class UnknownSchemaTagError(SegmentError):
    """A schema node whose tag is none of the ``__hp_*__`` tags."""
    kind = "unknown_schema_tag"


class SchemaFieldCountError(SegmentError):
    """A schema node with the wrong number of fields for its tag."""
    kind = "schema_field_count"


class InvalidShapeError(SegmentError):
    """A tensor shape that is not a sequence of non-negative ints."""
    kind = "invalid_shape"


class InvalidByteRangeError(SegmentError):
    """An offset or size that is not a non-negative int."""
    kind = "invalid_byte_range"


class RangeOutOfBoundsError(SegmentError):
    """A byte range past the binary region."""
    kind = "range_out_of_bounds"


class TensorSizeMismatchError(SegmentError):
    """``numel * element_size`` is not the descriptor's size."""
    kind = "tensor_size_mismatch"


class NonCanonicalLayoutError(SegmentError):
    """``strict``: a binary layout the encoder would not write."""
    kind = "non_canonical_layout"


class DecodeCopyLimitError(SegmentError):
    """Decoding into Python objects would copy more than the segment's size plus 1 MiB into
    str, bytes and bytearray objects (overlapping byte ranges, a bytearray referenced from
    many places): memory a small multiple of the input (SPEC 2.4)."""
    kind = "decode_copy_limit"


class DuplicateMappingKeyError(SegmentError):
    """Two equal keys in one ``__hp_mapping__`` node."""
    kind = "duplicate_mapping_key"


# SPEC 2.5: merging a received buffer
class SplitSumMismatchError(MergeError):
    """Split sizes that do not sum to the received buffer's length."""
    kind = "split_sum_mismatch"


class DuplicatePayloadKeyError(MergeError):
    """A key that arrives twice in one received buffer."""
    kind = "duplicate_payload_key"


# SPEC 2.6: encoding
class DepthLimitError(EncodeError):
    """A value nested deeper than the encoder's limit."""
    kind = "depth_limit"


class UnencodableValueError(EncodeError):
    """A Python object of a type the format cannot carry."""
    kind = "unencodable_value"


# SPEC 7: sequence dispatch routes
class RouteOwnerCountError(RouteError):
    """Owner offsets without one more entry than intervals."""
    kind = "route_owner_count"


class RouteNoIntervalsError(RouteError):
    """No intervals."""
    kind = "route_no_intervals"


class RouteOwnerStartError(RouteError):
    """Owner offsets that do not start at 0."""
    kind = "route_owner_start"


class RouteRankError(RouteError):
    """A rank outside ``[0, P)``."""
    kind = "route_rank"


class RouteOwnerOrderError(RouteError):
    """Owner offsets that decrease."""
    kind = "route_owner_order"


class RouteIntervalError(RouteError):
    """An interval that does not cover its complete owner shard within the bank."""
    kind = "route_interval"


class RouteLocalLengthError(RouteError):
    """A local length that differs from this rank's owner shard."""
    kind = "route_local_length"


class RouteArgumentsError(RouteError):
    """Non-positive dimensions, a rank out of range, a window or ratio refused."""
    kind = "route_arguments"


class RouteBoundariesError(RouteError):
    """Document boundaries that do not span the sequence strictly increasing from 0."""
    kind = "route_boundaries"


class RouteOverflowError(RouteError):
    """Route arithmetic beyond int64."""
    kind = "route_overflow"


class RouteTooLargeError(RouteError):
    """A route for more ranks or documents than can be planned."""
    kind = "route_too_large"


# SPEC 3.1: data topology
class TopologyShapeError(TopologyError):
    """A mesh shape that is empty or has a non-positive dim."""
    kind = "topology_shape"


class TopologyNamesError(TopologyError):
    """Mesh dim names that are not unique or not one per dim."""
    kind = "topology_names"


class TopologyRankListError(TopologyError):
    """A rank list that does not fill the mesh with unique ranks."""
    kind = "topology_rank_list"


class TopologyGlobalRankError(TopologyError):
    """A global rank not in the rank list."""
    kind = "topology_global_rank"


class TopologyDpNamesError(TopologyError):
    """Data-parallel dim names that are not unique or not in the mesh."""
    kind = "topology_dp_names"


# SPEC 3.2: group planning
class GroupPlannerError(GroupPlanError):
    """A planner rank outside the data-plane ranks."""
    kind = "group_planner"


class GroupNotDistributedError(GroupPlanError):
    """A mesh of more than one rank without torch.distributed."""
    kind = "group_not_distributed"


class GroupMeshWorldError(GroupPlanError):
    """A mesh that does not hold exactly the world's ranks."""
    kind = "group_mesh_world"


class GroupRankError(GroupPlanError):
    """The topology's global rank is not this rank."""
    kind = "group_rank"


class GroupCpuBackendError(GroupPlanError):
    """A cpu_backend that is empty or not a host backend."""
    kind = "group_cpu_backend"


class GroupPayloadBackendError(GroupPlanError):
    """A payload_backend that is empty."""
    kind = "group_payload_backend"


class GroupPayloadDeviceError(GroupPlanError):
    """A payload backend and communication device that do not match."""
    kind = "group_payload_device"


class GroupDeviceError(GroupPlanError):
    """A device string that names no device."""
    kind = "group_device"


# SPEC 6.1-6.3: model batch
class BatchSpecError(BatchError):
    """A model batch spec that is malformed."""
    kind = "batch_spec"


class BatchMissingFieldError(BatchError):
    """A batch without a field of the spec."""
    kind = "batch_missing_field"


class BatchUnknownFieldError(BatchError):
    """A batch field the spec does not name."""
    kind = "batch_unknown_field"


class BatchDtypeError(BatchError):
    """A batch field of another dtype than the spec's."""
    kind = "batch_dtype"


class BatchRankError(BatchError):
    """A batch field of another number of dims than the spec's."""
    kind = "batch_rank"


class BatchDimError(BatchError):
    """A batch field whose fixed dim differs from the spec's."""
    kind = "batch_dim"


class BatchSymbolError(BatchError):
    """A dynamic symbol given two values."""
    kind = "batch_symbol"


class BatchHeaderError(BatchError):
    """A batch header with a bad status, length or symbol value."""
    kind = "batch_header"


class BatchSizeLimitError(BatchError):
    """A batch field larger than max_message_bytes."""
    kind = "batch_size_limit"


# SPEC 8: the global oracle
class OracleMismatchError(OracleError):
    """A dispatch result that differs from the oracle's."""
    kind = "oracle_mismatch"


class UnsupportedArithmeticError(OracleError):
    """Summing gradients of a dtype without arithmetic (quantized, float8, bits)."""
    kind = "unsupported_arithmetic"


# SPEC 9: communicators
class CommMismatchError(CommError):
    """Ranks that launched different collectives at one sequence number of a group."""
    kind = "comm_mismatch"


class CommDeadlockError(CommError):
    """Every live rank waits and none can progress."""
    kind = "comm_deadlock"


class CommPeerFailedError(CommError):
    """A peer of the collective failed (crashed or raised)."""
    kind = "comm_peer_failed"


class CommTimeoutError(CommError):
    """A collective that did not complete in time (MPI, NCCL)."""
    kind = "comm_timeout"


class CommBufferMutatedError(CommError):
    """A send buffer modified before its collective completed."""
    kind = "comm_buffer_mutated"


class CommMemorySpaceError(CommError):
    """A buffer in a memory space the group's backend does not move."""
    kind = "comm_memory_space"


class CommUsageError(CommError):
    """A communicator used against its contract (a dtype all_reduce lacks, bad ranks)."""
    kind = "comm_usage"


class CommResourceError(CommError):
    """The machine ran out (fork, mmap, the simulator's segment)."""
    kind = "comm_resource"


class CommBackendError(CommError):
    """The MPI or NCCL library failed."""
    kind = "comm_backend"


# SPEC 4-6, 8: transports and dispatch
class TransportNotMemberError(TransportError):
    """A transport used on a rank outside its groups, or without the group it needs."""
    kind = "transport_not_member"


class TransportDeviceError(TransportError):
    """An accelerator group without a matching communication device."""
    kind = "transport_device"


class TransportSizeLimitError(TransportError):
    """A size over max_message_bytes (the refusing rank)."""
    kind = "transport_size_limit"


class TransportLimitMismatchError(TransportError):
    """Ranks that configured different max_message_bytes."""
    kind = "transport_limit_mismatch"


class ExchangeRefusedError(TransportError):
    """An exchange another rank refused (every other rank)."""
    kind = "exchange_refused"


class TransportTargetsError(TransportError):
    """Payload targets outside the data plane."""
    kind = "transport_targets"


class TransportNoPayloadGroupError(TransportError):
    """An exchange without a payload group."""
    kind = "transport_no_payload_group"


class TransportSpecMismatchError(TransportError):
    """Model-parallel ranks that declared different batch specs."""
    kind = "transport_spec_mismatch"


class TransportConstructorFailedError(TransportError):
    """A peer's view of a data constructor that failed to prepare its batch."""
    kind = "transport_constructor_failed"


class DispatchAxisError(DispatchError):
    """A sequence_dim outside ``[-ndim, ndim)``."""
    kind = "dispatch_axis"


class DispatchLengthError(DispatchError):
    """A sequence axis whose length differs from the route's."""
    kind = "dispatch_length"


class DispatchGroupError(DispatchError):
    """A route for another number of ranks than the group's."""
    kind = "dispatch_group"


class DispatchReusedError(DispatchError):
    """A dispatch handle waited twice."""
    kind = "dispatch_reused"


class DispatchRouteError(DispatchError):
    """A route whose own entries are inconsistent (hand-built or corrupted)."""
    kind = "dispatch_route"


# simulator scenarios, tools, our own bug
class ScenarioCheckError(Error):
    """A check of a simulated scenario itself failed."""
    kind = "scenario_check"


class JsonSyntaxError(UsageError):
    """JSON that does not parse."""
    kind = "json_syntax"


class JsonValueError(UsageError):
    """JSON that parses but is not the interchange form of a value."""
    kind = "json_value"


class InvalidArgumentError(UsageError):
    """An argument outside what the function accepts."""
    kind = "invalid_argument"


class InvalidRequestError(UsageError):
    """A CLI batch request without the fields its op needs."""
    kind = "invalid_request"


class IoError(UsageError):
    """A read or write that failed."""
    kind = "io"


class OutputLimitError(UsageError):
    """An answer larger than the output limit."""
    kind = "output_limit"


class InternalError(Error):
    """An internal invariant failed: hpref's own bug (please report it)."""
    kind = "internal"


# Issue 12's names for what the simulator detects.
CommMismatch = CommMismatchError
CommDeadlock = CommDeadlockError
PeerFailed = CommPeerFailedError
CommTimeout = CommTimeoutError
BufferMutated = CommBufferMutatedError

_CLASSES: Dict[str, Type[Error]] = {
    c.kind: c for c in list(globals().values())
    if isinstance(c, type) and issubclass(c, Error) and c.__module__ == __name__
    and "kind" in c.__dict__ and c is not Error
}
__all__ += sorted(c.__name__ for c in _CLASSES.values())


def error_class(kind: str) -> Type[Error]:
    """The class of ``kind`` (:class:`Error` itself for a kind this module does not know)."""
    return _CLASSES.get(kind, Error)


def _iterable(x: Any) -> bool:
    """Whether ``x`` can stand for a sequence argument: iterable and not a str or bytes (which
    would be read character by character). A parameter that must be one is refused naming
    the value where this answers False."""
    return not isinstance(x, (str, bytes)) and hasattr(x, "__iter__")


def _is_utf8(text: str) -> bool:
    """Whether a str can be written as UTF-8 (no lone surrogate): names that reach C++."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _checked_int(what: str, value: Any, kind: str, low: int, high: int) -> int:
    """``value`` as an int in ``[low, high)`` (int32, int64, non-negative int64 or uint64):
    an int, or a numpy or torch integer (``operator.index``), not a bool — Python's, numpy's
    or torch's, which operator.index reads as 0 and 1 (numpy 1.x with a warning) — or a
    float; else the error ``kind`` naming ``what`` and the value."""
    refused = isinstance(value, bool) or str(getattr(value, "dtype", "")) in ("bool", "torch.bool")
    n = None
    if not refused:
        try:
            n = operator.index(value)
        except TypeError:
            pass
    if refused or n is None or not low <= n < high:
        wanted = {(-1 << 63, 1 << 63): "an int64", (0, 1 << 63): "a non-negative int64",
                  (0, 1 << 64): "an int in [0, 2**64)", (-1 << 31, 1 << 31): "an int32"}[(low, high)]
        raise _from_core(kind, f"{what} must be {wanted}, got {value!r}")
    return n


def _from_core(kind: str, message: str) -> Error:
    """The exception for a C++ error of ``kind`` (called by hpref._core); a kind without
    a class becomes a plain :class:`Error` carrying that kind."""
    cls = _CLASSES.get(kind)
    return cls(message) if cls is not None else Error(message, kind)


# ---- what the original raises ---------------------------------------------------------
#
# Determined by running the original (../shared/original: seed_transport.py,
# seed_sequence_dispatch.py, stubs.py; CPython 3.11, torch 1.13 and 2.13) on inputs that
# trigger each kind; tests/python/test_errors.py repeats that for every decode kind and
# docs/python.md tabulates it with the exceptions. None: the original does not refuse
# (a SPEC "(divergence)" or "(ours)"), or has no counterpart.

_UnpicklingError = pickle.UnpicklingError
_EQUIVALENT: Dict[str, Optional[Type[BaseException]]] = {
    "invalid_dtype": ValueError,
    "unsupported_dtype": ValueError,
    "invalid_tensor": None,
    "invalid_utf8": None,
    "unhashable_key": TypeError,
    "duplicate_key": None,
    "invalid_sample_key": None,
    "pickle_truncated": _UnpicklingError,
    "pickle_opcode": None,
    "pickle_global": None,
    "pickle_reduce": None,
    "pickle_protocol": ValueError,
    "pickle_trailing_bytes": None,
    "pickle_stack": _UnpicklingError,
    "pickle_int_range": None,
    "pickle_invalid_utf8": UnicodeDecodeError,
    "pickle_unhashable_key": TypeError,
    "pickle_duplicate_key": None,
    "pickle_memo_missing": _UnpicklingError,
    "pickle_frozen_mutation": None,
    "pickle_depth_limit": None,
    "pickle_memo_limit": None,
    "pickle_node_limit": None,
    "pickle_stack_limit": None,
    "pickle_unwritable": None,
    "truncated_header": ValueError,
    "frame_size_mismatch": ValueError,
    "metadata_not_pairs": TypeError,
    "invalid_schema_node": ValueError,
    "unknown_schema_tag": ValueError,
    "schema_field_count": ValueError,
    "invalid_shape": ValueError,
    "invalid_byte_range": ValueError,
    "range_out_of_bounds": ValueError,
    "tensor_size_mismatch": ValueError,
    "non_canonical_layout": None,
    "duplicate_mapping_key": None,
    "decode_copy_limit": None,
    "split_sum_mismatch": None,
    "duplicate_payload_key": ValueError,
    "depth_limit": None,
    "unencodable_value": TypeError,
    "route_owner_count": ValueError,
    "route_no_intervals": ValueError,
    "route_owner_start": ValueError,
    "route_rank": ValueError,
    "route_owner_order": ValueError,
    "route_interval": ValueError,
    "route_local_length": ValueError,
    "route_arguments": ValueError,
    "route_boundaries": ValueError,
    "route_overflow": None,
    "route_too_large": None,
    "topology_shape": None,
    "topology_names": None,
    "topology_rank_list": None,
    "topology_global_rank": None,
    "topology_dp_names": None,
    "group_planner": ValueError,
    "group_not_distributed": ValueError,
    "group_mesh_world": ValueError,
    "group_rank": ValueError,
    "group_cpu_backend": ValueError,
    "group_payload_backend": ValueError,
    "group_payload_device": ValueError,
    "group_device": RuntimeError,
    "batch_spec": None,
    "batch_missing_field": None,
    "batch_unknown_field": None,
    "batch_dtype": None,
    "batch_rank": None,
    "batch_dim": None,
    "batch_symbol": None,
    "batch_header": ValueError,
    "batch_size_limit": None,
    "oracle_mismatch": None,
    "unsupported_arithmetic": RuntimeError,
    "comm_mismatch": None,
    "comm_deadlock": None,
    "comm_peer_failed": RuntimeError,
    "comm_timeout": RuntimeError,
    "comm_buffer_mutated": None,
    "comm_memory_space": None,
    "comm_usage": None,
    "comm_resource": None,
    "comm_backend": None,
    "transport_not_member": ValueError,
    "transport_device": ValueError,
    "transport_size_limit": None,
    "transport_limit_mismatch": None,
    "exchange_refused": None,
    "transport_targets": ValueError,
    "transport_no_payload_group": ValueError,
    "transport_spec_mismatch": None,
    "transport_constructor_failed": RuntimeError,
    "dispatch_axis": ValueError,
    "dispatch_length": ValueError,
    "dispatch_group": RuntimeError,
    "dispatch_reused": RuntimeError,
    "dispatch_route": RuntimeError,
    "scenario_check": None,
    "json_syntax": None,
    "json_value": None,
    "invalid_argument": None,
    "invalid_request": None,
    "io": None,
    "output_limit": None,
    "internal": None,
}

_KEEP = object()  # a refinement's answer: the kind's default applies
_Refinement = Callable[[str], Any]


def _literal(text: str) -> Any:
    """The Python value of a repr in one of our messages, or _KEEP where it does not
    read back (shortened with '...', or not a literal)."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return _KEEP


# A repr that starts like None, a bool or a number: the original's `for a, b in x` or
# `tuple(x)` finds it not iterable (TypeError); a sequence or str is iterated and fails
# to unpack or check (ValueError).
_SCALAR = re.compile(r"(None|True|False|[-+]?(\d|inf|nan))")


def _unpack_type(value_repr: str) -> Type[BaseException]:
    """What the original's unpacking of the value whose repr this is raises."""
    return TypeError if _SCALAR.match(value_repr) else ValueError


def _pickle_truncated(message: str) -> Any:
    # CPython: input ending where an opcode should start is EOFError ("Ran out of input");
    # ending inside an opcode's argument is UnpicklingError ("pickle data was truncated").
    return EOFError if "an opcode needs" in message else _KEEP


# Opcodes CPython knows but refuses without a persistent_load, buffers or the copyreg
# extension registry (EXT*: "unregistered extension code").
_OPCODES_REFUSED = {"PERSID": _UnpicklingError, "BINPERSID": _UnpicklingError,
                    "NEXT_BUFFER": _UnpicklingError, "EXT1": ValueError, "EXT2": ValueError,
                    "EXT4": ValueError}


def _pickle_opcode(message: str) -> Any:
    # An unknown byte: UnpicklingError ("invalid load key"); the opcodes above; any other
    # opcode CPython knows (sets, protocol 0/1 text opcodes, ...) the original executes.
    if "unknown opcode" in message:
        return _UnpicklingError
    m = re.search(r"pickle: (\w+) \(0x[0-9a-f]{2}\) is refused", message)
    return _OPCODES_REFUSED.get(m.group(1)) if m else None


def _pickle_protocol(message: str) -> Any:
    m = re.search(r"protocol (\d+) is refused", message)
    if not m:
        return _KEEP
    return ValueError if int(m.group(1)) > pickle.HIGHEST_PROTOCOL else None


def _pickle_stack(message: str) -> Any:
    if "STOP with an unclosed MARK" in message:
        return None  # CPython returns the top of the stack
    m = re.search(r"STOP needs exactly one item on the stack, found (\d+)", message)
    if m:
        return _UnpicklingError if m.group(1) == "0" else None
    if re.search(r"APPENDS? needs a list below it", message):
        return AttributeError  # CPython looks up .append / .extend on the target
    if re.search(r"SETITEMS? needs a dict below it", message):
        return TypeError  # CPython's obj[key] = value on a non-dict
    return _KEEP  # underflow, no MARK, odd number of keys and values


def _pickle_invalid_utf8(message: str) -> Any:
    # CPython decodes with 'surrogatepass': lone surrogates (what it writes for such a str)
    # are read; other invalid bytes raise UnicodeDecodeError.
    m = re.search(r"string (b?'.*'|b?\".*\") is not valid UTF-8", message)
    raw = _literal(m.group(1)) if m else _KEEP
    if isinstance(raw, str):
        raw = raw.encode("latin-1", "replace")
    if not isinstance(raw, bytes):
        return _KEEP
    try:
        raw.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return UnicodeDecodeError
    return None


def _metadata_not_pairs(message: str) -> Any:
    m = re.search(r"must be a sequence of \(key, value\) pairs, got (.*)$", message) or \
        re.search(r" entry (.*) is not a \(key, value\) pair", message)
    if not m:
        return _KEEP
    if message.startswith("legacy segment must be"):
        # The original merges with `for key, payload in items`: a dict is iterated by key,
        # and keys that unpack to two (2-tuples, 2-character strs, 2-byte bytes) with
        # distinct hashable first parts merge as {key[0]: key[1]} (a divergence: we refuse).
        value = _literal(m.group(1))
        if isinstance(value, dict) and _unpacks_to_distinct_pairs(value):
            return None
    return _unpack_type(m.group(1))


def _unpacks_to_distinct_pairs(mapping: dict) -> bool:
    firsts = set()
    for key in mapping:
        if not isinstance(key, (tuple, str, bytes)) or len(key) != 2:
            return False
        try:
            if key[0] in firsts:
                return False
            firsts.add(key[0])
        except TypeError:  # unhashable
            return False
    return True


def _invalid_schema_node(message: str) -> Any:
    m = re.search(r" children (.*) are not a tuple or list", message) or \
        re.search(r"__hp_mapping__ entry (.*) is not a \(key, child\) pair", message)
    return _unpack_type(m.group(1)) if m else _KEEP  # else: not a non-empty tuple


def _schema_field_count(message: str) -> Any:
    # The original checks the count of tensor and bytes nodes (ValueError); for the others
    # it indexes schema[1] (IndexError).
    if re.match(r"__hp_(tensor|bytes|bytearray)__ ", message):
        return ValueError
    return IndexError if message.startswith("__hp_") else _KEEP


def _invalid_shape(message: str) -> Any:
    if "cannot be made as a torch tensor" in message:
        return RuntimeError  # torch.empty's own refusal, the original's too
    if "cannot be made as a numpy array" in message:
        return None  # numpy arrays are ours; the original makes torch tensors of most such
    m = re.search(r"tensor shape (.*) is not a tuple or list of non-negative ints", message)
    if m:
        return _unpack_type(m.group(1))  # tuple(shape)
    m = re.search(r"tensor shape (.*) has an entry that is not a non-negative int", message)
    shape = _literal(m.group(1)) if m else _KEEP
    if isinstance(shape, (tuple, list)) and all(isinstance(d, int) and d >= 0 for d in shape):
        # bools: the original's check takes True/False as ints (SPEC 2.4 divergence), then
        # torch's reshape/empty refuses a bool dim
        return TypeError
    return _KEEP


def _invalid_byte_range(message: str) -> Any:
    m = re.search(r"invalid byte range: offset (.*), size (.*)$", message)
    if not m:
        return _KEEP
    offset, size = _literal(m.group(1)), _literal(m.group(2))
    if all(isinstance(x, int) and x >= 0 for x in (offset, size)):
        return None  # bools, as for shapes
    return _KEEP


def _depth_limit(message: str) -> Any:
    # Past Python's recursion limit the original's pickle.dumps (or its recursive schema
    # encoder) raises RecursionError; between SPEC 2.3's 256 and that it encodes.
    return RecursionError if "deeper than 1000 levels" in message else None


def _transport_not_member(message: str) -> Any:
    # The original checks for a missing group at construction (ValueError), never a call
    # on a rank outside the data plane.
    return None if "which is not in the data plane" in message else _KEEP


def _dispatch_length(message: str) -> Any:
    # A gradient of the wrong shape is refused by autograd itself (RuntimeError).
    return RuntimeError if message.startswith("gradient ") else _KEEP


def _route_overflow(message: str) -> Any:
    # A product of int64 arguments beyond int64 ("sequence length local_length * size = a *
    # b", "owner offset p * local_length = ..."): the original refuses those arguments (the
    # boundaries cannot end at that length, the intervals cannot reach that owner offset). An
    # argument itself beyond int64 is the divergence: the original goes on.
    return ValueError if " * " in message else _KEEP


def _dispatch_group(message: str) -> Any:
    # torch skips a collective on a group this rank is not in (a warning, no error).
    return None if "(this rank is not a member)" in message else _KEEP


_REFINE: Dict[str, _Refinement] = {
    "pickle_truncated": _pickle_truncated,
    "pickle_opcode": _pickle_opcode,
    "pickle_protocol": _pickle_protocol,
    "pickle_stack": _pickle_stack,
    "pickle_invalid_utf8": _pickle_invalid_utf8,
    "metadata_not_pairs": _metadata_not_pairs,
    "invalid_schema_node": _invalid_schema_node,
    "schema_field_count": _schema_field_count,
    "invalid_shape": _invalid_shape,
    "invalid_byte_range": _invalid_byte_range,
    "depth_limit": _depth_limit,
    "transport_not_member": _transport_not_member,
    "dispatch_length": _dispatch_length,
    "dispatch_group": _dispatch_group,
    "route_overflow": _route_overflow,
}


def python_equivalent(err: Union[Error, str]) -> Optional[Type[BaseException]]:
    """The exception type the original implementation raises for the refusal ``err``
    (ValueError, TypeError, pickle.UnpicklingError, ...), or None where the original does
    not refuse it (a SPEC divergence) or has no counterpart.

    ``err``: an :class:`Error` or a kind name. For an error, kinds whose Python type
    depends on the input (a truncated pickle: EOFError or UnpicklingError; a bool where
    an int belongs: accepted by the original) are decided from the message, which names
    the bad value; for a kind name, the kind's usual type is returned (docs/python.md
    lists both)."""
    if isinstance(err, Error):
        kind, message = err.kind, err.message
    elif isinstance(err, str):
        kind, message = err, None
    else:
        raise TypeError(f"python_equivalent takes an hpref.Error or a kind name, got {err!r}")
    if message is None and kind not in _EQUIVALENT:  # a misspelt name read as "the original accepts it"
        raise ValueError(f"python_equivalent: {kind!r} is not an error kind (docs/python.md lists them)")
    default = _EQUIVALENT.get(kind)
    refine = _REFINE.get(kind)
    if message is None or refine is None:
        return default
    answer = refine(message)
    return default if answer is _KEEP else answer
