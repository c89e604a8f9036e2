"""hpref: the reference implementation of a distributed data plane's codec, routes and
sequence dispatch, in-process for Python: the oracle a PyTorch implementation is checked
against (docs/python.md).

    >>> import hpref
    >>> segment = hpref.codec.encode([((7, 0), {"text": "abc"})])
    >>> hpref.codec.decode(segment)
    [(Key(sample_id=7, position=0), {'text': 'abc'})]
"""
from . import codec, errors, oracle, planning, routes
from .codec import Key, KeyClass, RawTensor
from .errors import (CodecError, CommDeadlock, CommError, CommMismatch, CommTimeout,
                     CommUsageError, DecodeError, DispatchError, EncodeError, Error, OracleError,
                     PeerFailed, BufferMutated, PlanningError, RouteError, TransportError,
                     UsageError, python_equivalent)

__all__ = ["codec", "errors", "oracle", "planning", "routes", "Error", "Key", "KeyClass",
           "RawTensor", "python_equivalent", "CodecError", "DecodeError", "EncodeError",
           "RouteError", "PlanningError", "OracleError", "CommError", "CommMismatch",
           "CommDeadlock", "PeerFailed", "CommTimeout", "BufferMutated", "CommUsageError",
           "TransportError", "DispatchError", "UsageError"]
