"""hpref: the reference implementation of a distributed data plane's codec, routes and
sequence dispatch, in-process for Python (issue 11, first slice: the codec's decoder).

    >>> import hpref
    >>> hpref.codec.decode(segment_bytes)  # [(key, value), ...]
"""
from . import codec
from ._core import Error

__all__ = ["codec", "Error"]
