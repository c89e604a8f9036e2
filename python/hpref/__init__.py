"""hpref: the reference implementation of a distributed data plane's codec, routes and
sequence dispatch, in-process for Python (issue 11, first slice: the codec).

    >>> import hpref
    >>> segment = hpref.codec.encode([((7, 0), {"text": "abc"})])
    >>> hpref.codec.decode(segment)
    [((7, 0), {'text': 'abc'})]
"""
from . import codec
from ._core import Error

__all__ = ["codec", "Error"]
