"""hpref: the reference implementation of a distributed data plane's codec, routes and
sequence dispatch, in-process for Python: the oracle a PyTorch implementation is checked
against (docs/python.md).

    >>> import hpref
    >>> segment = hpref.codec.encode([((7, 0), {"text": "abc"})])
    >>> hpref.codec.decode(segment)
    [(Key(sample_id=7, position=0), {'text': 'abc'})]
"""
from . import codec, errors
from .codec import Key, KeyClass, RawTensor
from .errors import Error

__all__ = ["codec", "errors", "Error", "Key", "KeyClass", "RawTensor"]
