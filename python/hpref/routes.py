"""Sequence dispatch routes (SPEC 7) from Python: which rows each context-parallel rank
sends to and receives from every peer.

Every function returns :class:`Route` objects with the field names of the original's
``SequenceDispatchRoute`` (``local_length``, ``global_start``, ``global_end``,
``local_output_start``, ``send_offsets``, ``input_splits``, ``output_splits``,
``needs_exchange``; tuples of ints) and its ``owner_ranges()``. A Route is frozen and
compares ``==`` by fields with another Route or with the original's route object.

A refusal raises :class:`hpref.Error` whose ``kind`` is one of the C++ ``route_*`` kinds
(the original raises ``ValueError`` for the same inputs). All arithmetic is int64: a value
or product beyond it is ``route_overflow`` where Python's unbounded ints would go on.

    >>> from hpref import routes
    >>> r = routes.sliding_window((0, 5, 16), 4, 4, 2, 3)
    >>> r.global_start, r.global_end, r.output_splits
    (6, 12, (0, 2, 0, 0))
"""
from __future__ import annotations

import inspect
from typing import Any, Optional, Sequence, Tuple

from . import _core

Route = _core.Route
Route.__module__ = __name__
#: The original's name for a route object.
SequenceDispatchRoute = Route

#: The largest ``size`` that :func:`sliding_window` and :func:`document_prefix` accept.
MAX_ROUTE_PEERS: int = _core.MAX_ROUTE_PEERS
#: The most ranks :func:`plan_all` plans at once (its tables take O(P^2) memory).
MAX_ALL_ROUTES_PEERS: int = _core.MAX_ALL_ROUTES_PEERS

__all__ = ["Route", "SequenceDispatchRoute", "interval", "sliding_window", "document_prefix",
           "plan_all", "compressed_document_offsets", "compressed_owner_offsets", "problem",
           "MAX_ROUTE_PEERS", "MAX_ALL_ROUTES_PEERS"]


def interval(local_length: int, rank: int, intervals: Sequence[Tuple[int, int]], *,
             owner_offsets: Optional[Sequence[int]] = None) -> Route:
    """SPEC 7.1: ``rank``'s route when peer ``p`` needs the global rows
    ``intervals[p] = (start, end)``.

    ``owner_offsets`` (P + 1 entries from 0) say which rows each rank owns; by default
    ``p * local_length``. Checks in the SPEC's order, each its own error kind:
    ``route_owner_count``, ``route_no_intervals``, ``route_owner_start``, ``route_rank``,
    ``route_owner_order``, ``route_interval``, ``route_local_length``."""
    return _core.interval_route(local_length, rank, intervals, owner_offsets)


def sliding_window(boundaries: Sequence[int], local_length: int, size: int, rank: int,
                   window: int) -> Route:
    """SPEC 7.2: ``rank``'s route for document-local sliding-window halos: peer ``p``
    needs rows ``[max(doc_start(p L), p L - window + 1), (p + 1) L)``.

    ``boundaries`` are the document starts and the end (from 0 to ``local_length * size``,
    strictly increasing). Errors ``route_arguments`` (naming the argument),
    ``route_boundaries``, ``route_too_large`` (``size`` beyond :data:`MAX_ROUTE_PEERS`),
    then those of :func:`interval`."""
    return _core.sliding_window_route(boundaries, local_length, size, rank, window)


def document_prefix(boundaries: Sequence[int], local_length: int, size: int, rank: int,
                    ratio: int) -> Route:
    """SPEC 7.4: ``rank``'s route for document-prefix (main KV) banks over compressed
    documents with ``ratio`` 1 or 2 (SPEC 7.3): peer ``p`` needs the blocks from the start
    of its document to the end of its own blocks.

    Errors as :func:`sliding_window` (a ratio other than 1 or 2 is ``route_arguments``)."""
    return _core.document_prefix_route(boundaries, local_length, size, rank, ratio)


def _plan_interval(local_length, intervals, *, owner_offsets=None):
    return _core.interval_routes(local_length, intervals, owner_offsets)


def _plan_sliding_window(boundaries, local_length, size, window):
    return _core.sliding_window_routes(boundaries, local_length, size, window)


def _plan_document_prefix(boundaries, local_length, size, ratio):
    return _core.document_prefix_routes(boundaries, local_length, size, ratio)


_PLANNERS = {
    "interval": _plan_interval,
    "sliding_window": _plan_sliding_window,
    "document_prefix": _plan_document_prefix,
}


def plan_all(kind: str, *args: Any, **kwargs: Any) -> Tuple[Route, ...]:
    """Every rank's route of one configuration (index = rank), sharing the O(P + D) work
    of intervals and owners; each route then costs O(P). The arguments are those of the
    one-rank function without ``rank``:

    - ``plan_all("interval", local_length, intervals, *, owner_offsets=None)`` (with
      ``owner_offsets``, ``local_length`` is not read: each rank's is its owner shard's
      length, and the equality below holds with that length given to each rank),
    - ``plan_all("sliding_window", boundaries, local_length, size, window)``,
    - ``plan_all("document_prefix", boundaries, local_length, size, ratio)``.

    Equals ``[f(..., rank=r, ...) for r in range(P)]``; refuses (with the same kinds) when
    every rank would, and with ``route_too_large`` beyond :data:`MAX_ALL_ROUTES_PEERS`
    ranks. ``ValueError`` for an unknown ``kind``."""
    planner = _PLANNERS.get(kind)
    if planner is None:
        raise ValueError(f"kind must be one of {sorted(_PLANNERS)}, got {kind!r}")
    try:
        return planner(*args, **kwargs)
    except TypeError:
        # Only now is the argument list checked (a call that plans pays nothing for it): a
        # wrong one is named as plan_all's, not as the internal function that takes them.
        signature = inspect.signature(planner)
        try:
            signature.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"plan_all({kind!r}, {str(signature)[1:-1]}) "
                            f"takes the one-rank function's arguments without rank: {e}") from None
        raise


def compressed_document_offsets(boundaries: Sequence[int], ratio: int) -> Tuple[int, ...]:
    """SPEC 7.3: prefix sums of each document's complete blocks of ``ratio`` raw tokens
    (``len(boundaries)`` entries from 0). ``boundaries`` must start at 0 and not decrease
    (``route_boundaries``), ``ratio`` must be positive (``route_arguments``)."""
    return _core.compressed_document_offsets(boundaries, ratio)


def compressed_owner_offsets(boundaries: Sequence[int], ratio: int,
                             local_length: int) -> Tuple[int, ...]:
    """SPEC 7.3: entry ``p``, for ``p = 0..boundaries[-1] // local_length``, counts the
    blocks whose last raw token is before ``p * local_length`` (a block belongs to the rank
    holding its last token). Errors as :func:`compressed_document_offsets`,
    ``route_arguments`` for a ``local_length`` that is not positive, and ``route_too_large``
    for more than :data:`MAX_ROUTE_PEERS` ranks (``boundaries[-1] // local_length``), the
    window and prefix routes' cap, before anything is allocated."""
    return _core.compressed_owner_offsets(boundaries, ratio, local_length)


def problem(route: Any, *, rank: Optional[int] = None) -> str:
    """Why ``route`` (a :class:`Route` or any object with its fields, such as the original's
    ``SequenceDispatchRoute``) breaks the shape every route satisfies, in one sentence, or
    ``""`` when it holds: one entry per peer in every table, non-negative values, send
    ranges inside the owner shard, no exchange unless ``needs_exchange``, an interval of
    the own rows plus those received. With ``rank`` also: its own entries are 0 and
    ``local_output_start`` equals the rows received from ranks before it (SPEC 8.1)."""
    return _core.route_problem(route, rank)
