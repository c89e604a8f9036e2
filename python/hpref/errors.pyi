from typing import Any, Optional, Type, Union

__all__ = [
    "Error", "python_equivalent", "error_class", "CodecError", "ValueModelError",
    "DecodeError", "MetadataPickleError", "SegmentError", "MergeError", "EncodeError",
    "RouteError", "PlanningError", "TopologyError", "GroupPlanError", "BatchError",
    "OracleError", "CommError", "TransportError", "DispatchError", "UsageError",
    "CommMismatch", "CommDeadlock", "PeerFailed", "CommTimeout", "BufferMutated",
    "BatchDimError", "BatchDtypeError", "BatchHeaderError", "BatchMissingFieldError",
    "BatchRankError", "BatchSizeLimitError", "BatchSpecError", "BatchSymbolError",
    "BatchUnknownFieldError", "CommBackendError", "CommBufferMutatedError",
    "CommDeadlockError", "CommMemorySpaceError", "CommMismatchError", "CommPeerFailedError",
    "CommResourceError", "CommTimeoutError", "CommUsageError", "DepthLimitError",
    "DispatchAxisError", "DispatchGroupError", "DispatchLengthError", "DispatchReusedError",
    "DecodeCopyLimitError", "DispatchRouteError", "DuplicateKeyError", "DuplicateMappingKeyError",
    "DuplicatePayloadKeyError", "ExchangeRefusedError", "FrameSizeMismatchError",
    "GroupCpuBackendError", "GroupDeviceError", "GroupMeshWorldError",
    "GroupNotDistributedError", "GroupPayloadBackendError", "GroupPayloadDeviceError",
    "GroupPlannerError", "GroupRankError", "InternalError", "InvalidArgumentError",
    "InvalidByteRangeError", "InvalidDtypeError", "InvalidRequestError",
    "InvalidSampleKeyError", "InvalidSchemaNodeError", "InvalidShapeError",
    "InvalidTensorError", "InvalidUtf8Error", "IoError", "JsonSyntaxError", "JsonValueError",
    "MetadataNotPairsError", "NonCanonicalLayoutError", "OracleMismatchError",
    "OutputLimitError", "PickleDepthLimitError", "PickleDuplicateKeyError",
    "PickleFrozenMutationError", "PickleGlobalError", "PickleIntRangeError",
    "PickleInvalidUtf8Error", "PickleMemoLimitError", "PickleMemoMissingError",
    "PickleNodeLimitError", "PickleOpcodeError", "PickleProtocolError", "PickleReduceError",
    "PickleStackError", "PickleStackLimitError", "PickleTrailingBytesError",
    "PickleTruncatedError", "PickleUnhashableKeyError", "PickleUnwritableError",
    "RangeOutOfBoundsError", "RouteArgumentsError", "RouteBoundariesError",
    "RouteIntervalError", "RouteLocalLengthError", "RouteNoIntervalsError",
    "RouteOverflowError", "RouteOwnerCountError", "RouteOwnerOrderError",
    "RouteOwnerStartError", "RouteRankError", "RouteTooLargeError", "ScenarioCheckError",
    "SchemaFieldCountError", "SplitSumMismatchError", "TensorSizeMismatchError",
    "TopologyDpNamesError", "TopologyGlobalRankError", "TopologyNamesError",
    "TopologyRankListError", "TopologyShapeError", "TransportConstructorFailedError",
    "TransportDeviceError", "TransportLimitMismatchError", "TransportNoPayloadGroupError",
    "TransportNotMemberError", "TransportSizeLimitError", "TransportSpecMismatchError",
    "TransportTargetsError", "TruncatedHeaderError", "UnencodableValueError",
    "UnhashableKeyError", "UnknownSchemaTagError", "UnsupportedArithmeticError",
    "UnsupportedDtypeError",
]

class Error(Exception):
    kind: str
    message: str
    def __init__(self, message: str, kind: Optional[str] = ...) -> None: ...
    def __reduce__(self) -> Any: ...

class CodecError(Error): ...
class ValueModelError(CodecError): ...
class DecodeError(CodecError): ...
class MetadataPickleError(DecodeError): ...
class SegmentError(DecodeError): ...
class MergeError(DecodeError): ...
class EncodeError(CodecError): ...
class RouteError(Error): ...
class PlanningError(Error): ...
class TopologyError(PlanningError): ...
class GroupPlanError(PlanningError): ...
class BatchError(PlanningError): ...
class OracleError(Error): ...
class CommError(Error): ...
class TransportError(Error): ...
class DispatchError(Error): ...
class UsageError(Error): ...

class InvalidDtypeError(ValueModelError):
    kind: str
class UnsupportedDtypeError(ValueModelError):
    kind: str
class InvalidTensorError(ValueModelError):
    kind: str
class InvalidUtf8Error(ValueModelError):
    kind: str
class UnhashableKeyError(ValueModelError):
    kind: str
class DuplicateKeyError(ValueModelError):
    kind: str
class InvalidSampleKeyError(ValueModelError):
    kind: str
class PickleTruncatedError(MetadataPickleError):
    kind: str
class PickleOpcodeError(MetadataPickleError):
    kind: str
class PickleGlobalError(MetadataPickleError):
    kind: str
class PickleReduceError(MetadataPickleError):
    kind: str
class PickleProtocolError(MetadataPickleError):
    kind: str
class PickleTrailingBytesError(MetadataPickleError):
    kind: str
class PickleStackError(MetadataPickleError):
    kind: str
class PickleIntRangeError(MetadataPickleError):
    kind: str
class PickleInvalidUtf8Error(MetadataPickleError):
    kind: str
class PickleUnhashableKeyError(MetadataPickleError):
    kind: str
class PickleDuplicateKeyError(MetadataPickleError):
    kind: str
class PickleMemoMissingError(MetadataPickleError):
    kind: str
class PickleFrozenMutationError(MetadataPickleError):
    kind: str
class PickleDepthLimitError(MetadataPickleError):
    kind: str
class PickleMemoLimitError(MetadataPickleError):
    kind: str
class PickleNodeLimitError(MetadataPickleError):
    kind: str
class PickleStackLimitError(MetadataPickleError):
    kind: str
class PickleUnwritableError(EncodeError):
    kind: str
class TruncatedHeaderError(SegmentError):
    kind: str
class FrameSizeMismatchError(SegmentError):
    kind: str
class MetadataNotPairsError(SegmentError):
    kind: str
class InvalidSchemaNodeError(SegmentError):
    kind: str
class UnknownSchemaTagError(SegmentError):
    kind: str
class SchemaFieldCountError(SegmentError):
    kind: str
class InvalidShapeError(SegmentError):
    kind: str
class InvalidByteRangeError(SegmentError):
    kind: str
class RangeOutOfBoundsError(SegmentError):
    kind: str
class TensorSizeMismatchError(SegmentError):
    kind: str
class NonCanonicalLayoutError(SegmentError):
    kind: str
class DecodeCopyLimitError(SegmentError):
    kind: str
class DuplicateMappingKeyError(SegmentError):
    kind: str
class SplitSumMismatchError(MergeError):
    kind: str
class DuplicatePayloadKeyError(MergeError):
    kind: str
class DepthLimitError(EncodeError):
    kind: str
class UnencodableValueError(EncodeError):
    kind: str
class RouteOwnerCountError(RouteError):
    kind: str
class RouteNoIntervalsError(RouteError):
    kind: str
class RouteOwnerStartError(RouteError):
    kind: str
class RouteRankError(RouteError):
    kind: str
class RouteOwnerOrderError(RouteError):
    kind: str
class RouteIntervalError(RouteError):
    kind: str
class RouteLocalLengthError(RouteError):
    kind: str
class RouteArgumentsError(RouteError):
    kind: str
class RouteBoundariesError(RouteError):
    kind: str
class RouteOverflowError(RouteError):
    kind: str
class RouteTooLargeError(RouteError):
    kind: str
class TopologyShapeError(TopologyError):
    kind: str
class TopologyNamesError(TopologyError):
    kind: str
class TopologyRankListError(TopologyError):
    kind: str
class TopologyGlobalRankError(TopologyError):
    kind: str
class TopologyDpNamesError(TopologyError):
    kind: str
class GroupPlannerError(GroupPlanError):
    kind: str
class GroupNotDistributedError(GroupPlanError):
    kind: str
class GroupMeshWorldError(GroupPlanError):
    kind: str
class GroupRankError(GroupPlanError):
    kind: str
class GroupCpuBackendError(GroupPlanError):
    kind: str
class GroupPayloadBackendError(GroupPlanError):
    kind: str
class GroupPayloadDeviceError(GroupPlanError):
    kind: str
class GroupDeviceError(GroupPlanError):
    kind: str
class BatchSpecError(BatchError):
    kind: str
class BatchMissingFieldError(BatchError):
    kind: str
class BatchUnknownFieldError(BatchError):
    kind: str
class BatchDtypeError(BatchError):
    kind: str
class BatchRankError(BatchError):
    kind: str
class BatchDimError(BatchError):
    kind: str
class BatchSymbolError(BatchError):
    kind: str
class BatchHeaderError(BatchError):
    kind: str
class BatchSizeLimitError(BatchError):
    kind: str
class OracleMismatchError(OracleError):
    kind: str
class UnsupportedArithmeticError(OracleError):
    kind: str
class CommMismatchError(CommError):
    kind: str
class CommDeadlockError(CommError):
    kind: str
class CommPeerFailedError(CommError):
    kind: str
class CommTimeoutError(CommError):
    kind: str
class CommBufferMutatedError(CommError):
    kind: str
class CommMemorySpaceError(CommError):
    kind: str
class CommUsageError(CommError):
    kind: str
class CommResourceError(CommError):
    kind: str
class CommBackendError(CommError):
    kind: str
class TransportNotMemberError(TransportError):
    kind: str
class TransportDeviceError(TransportError):
    kind: str
class TransportSizeLimitError(TransportError):
    kind: str
class TransportLimitMismatchError(TransportError):
    kind: str
class ExchangeRefusedError(TransportError):
    kind: str
class TransportTargetsError(TransportError):
    kind: str
class TransportNoPayloadGroupError(TransportError):
    kind: str
class TransportSpecMismatchError(TransportError):
    kind: str
class TransportConstructorFailedError(TransportError):
    kind: str
class DispatchAxisError(DispatchError):
    kind: str
class DispatchLengthError(DispatchError):
    kind: str
class DispatchGroupError(DispatchError):
    kind: str
class DispatchReusedError(DispatchError):
    kind: str
class DispatchRouteError(DispatchError):
    kind: str
class ScenarioCheckError(Error):
    kind: str
class JsonSyntaxError(UsageError):
    kind: str
class JsonValueError(UsageError):
    kind: str
class InvalidArgumentError(UsageError):
    kind: str
class InvalidRequestError(UsageError):
    kind: str
class IoError(UsageError):
    kind: str
class OutputLimitError(UsageError):
    kind: str
class InternalError(Error):
    kind: str

CommMismatch = CommMismatchError
CommDeadlock = CommDeadlockError
PeerFailed = CommPeerFailedError
CommTimeout = CommTimeoutError
BufferMutated = CommBufferMutatedError

def error_class(kind: str) -> Type[Error]: ...
def python_equivalent(err: Union[Error, str]) -> Optional[Type[BaseException]]: ...
def _from_core(kind: str, message: str) -> Error: ...
