"""hpref.routes (SPEC 7) against the original's sequence_dispatch module, in-process:
every route function on thousands of hypothesis-generated cases, refusals included (both
refuse, for the same reason, or both give equal routes), the cases the original answered
(tests/data/routes.jsonl, ../shared/examples/routes.jsonl), and the Route object's
behaviour as a stand-in for the original's SequenceDispatchRoute.

The differential tests skip, saying why, where ../shared/original or torch is absent."""
from __future__ import annotations

import itertools
import json
import pathlib
import pickle
import sys

import pytest

import hpref
import hpref.errors
import hpref.routes as routes

ROOT = pathlib.Path(__file__).resolve().parents[2]
ORIGINAL = ROOT.parent / "shared" / "original"


def _load_original():
    """(module, None) or (None, why it cannot run)."""
    if not (ORIGINAL / "seed_sequence_dispatch.py").exists():
        return None, f"the original implementation is absent ({ORIGINAL})"
    try:
        import torch  # noqa: F401  (the original module imports it)
    except ImportError:
        return None, "torch is not importable; the original's sequence_dispatch needs it"
    sys.path.insert(0, str(ORIGINAL))
    import seed_sequence_dispatch
    import stubs
    return (seed_sequence_dispatch, stubs), None


_LOADED, _WHY = _load_original()
needs_original = pytest.mark.skipif(_LOADED is None, reason=str(_WHY))
if _LOADED is not None:
    SEED, STUBS = _LOADED

try:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st
except ImportError:  # the generated cases skip; the recorded ones still run
    given = None

needs_hypothesis = pytest.mark.skipif(given is None, reason="hypothesis is not installed")

FIELDS = ("local_length", "global_start", "global_end", "local_output_start", "send_offsets",
          "input_splits", "output_splits", "needs_exchange")

# The original's refusal messages (one per group of SPEC 7 checks) and the hpref kinds of
# the same group: "refuse for the same reason".
REASONS = {
    "Dispatch requires ordered owner offsets and a valid rank":
        {"route_owner_count", "route_no_intervals", "route_owner_start", "route_rank",
         "route_owner_order"},
    "Dispatch intervals must cover their complete owner shard within the global bank":
        {"route_interval"},
    "Local bank length differs from the supplied owner offsets": {"route_local_length"},
    "SWA dispatch requires positive dimensions and a valid CP rank": {"route_arguments"},
    "SWA document boundaries must span the full contiguous CP sequence": {"route_boundaries"},
    "Main KV dispatch requires a supported ratio and equal positive raw CP shards":
        {"route_arguments"},
    "Main KV document boundaries must span the complete contiguous CP sequence":
        {"route_boundaries"},
}


def outcome(call):
    """call()'s result, or the exception it raised."""
    try:
        return call()
    except Exception as e:  # noqa: BLE001 (compared below)
        return e


def assert_route_fields(got, want):
    """got (an hpref Route) has want's fields with the original's types."""
    assert isinstance(got, routes.Route), got
    for name in FIELDS:
        g, w = getattr(got, name), getattr(want, name)
        assert g == w and type(g) is type(w), (name, g, w)
    for name in ("send_offsets", "input_splits", "output_splits"):
        assert all(type(v) is int for v in getattr(got, name))
    assert got.owner_ranges() == want.owner_ranges()


def assert_same(original_call, hpref_call):
    """Both refuse for the same reason, or both give equal routes (== both ways)."""
    want, got = outcome(original_call), outcome(hpref_call)
    if isinstance(want, Exception):
        assert type(want) is ValueError, want
        assert isinstance(got, hpref.Error), f"the original refused ({want}) but hpref gave {got!r}"
        assert got.kind in REASONS[str(want)], (got.kind, str(want), str(got))
        assert hpref.errors.python_equivalent(got) is ValueError
        return None
    assert not isinstance(got, Exception), f"hpref refused ({got!r}) where the original gave {want}"
    if isinstance(want, tuple) and want and isinstance(want[0], int):  # compressed offsets
        assert got == want and type(got) is tuple
        return got
    if isinstance(want, (list, tuple)):  # all ranks
        assert type(got) is tuple and len(got) == len(want)
        for g, w in zip(got, want):
            assert_route_fields(g, w)
        return got
    assert got == want and want == got and not got != want
    assert_route_fields(got, want)
    return got


# ---------------------------------------------------------------- recorded answers

def recorded_cases():
    """The route cases the original answered: tests/data/routes.jsonl and, where present,
    ../shared/examples/routes.jsonl (duplicates once)."""
    lines = []
    for path in (ROOT / "tests" / "data" / "routes.jsonl",
                 ROOT.parent / "shared" / "examples" / "routes.jsonl"):
        if path.exists():
            lines += [line for line in path.read_text().splitlines() if line.strip()]
    return [json.loads(line) for line in dict.fromkeys(lines)]


RECORDED = recorded_cases()


def call_recorded(request):
    r = dict(request)
    op = r.pop("op")
    if op == "interval_route":
        return routes.interval(r["local_length"], r["rank"], [tuple(i) for i in r["intervals"]],
                               owner_offsets=r.get("owner_offsets"))
    if op == "sliding_window_route":
        return routes.sliding_window(r["boundaries"], r["local_length"], r["size"], r["rank"],
                                     r["window"])
    assert op == "document_prefix_route", op
    return routes.document_prefix(r["boundaries"], r["local_length"], r["size"], r["rank"],
                                  r["ratio"])


def test_recorded_cases_are_there():
    assert len(RECORDED) >= 60
    assert {c["request"]["op"] for c in RECORDED} == {
        "interval_route", "sliding_window_route", "document_prefix_route"}
    assert any(not c["original_answer"]["ok"] for c in RECORDED)


@pytest.mark.parametrize("case", range(len(RECORDED)))
def test_recorded_answer_of_the_original(case):
    answer = RECORDED[case]["original_answer"]
    got = outcome(lambda: call_recorded(RECORDED[case]["request"]))
    if not answer["ok"]:
        assert isinstance(got, hpref.Error), got
        message = answer["error"].split(": ", 1)[1]
        assert answer["error"].startswith("ValueError: ")
        assert got.kind in REASONS[message], (got.kind, message)
        return
    assert not isinstance(got, Exception), got
    want = answer["route"]
    for name in FIELDS:
        value = getattr(got, name)
        assert (list(value) if isinstance(value, tuple) else value) == want[name], name


# ---------------------------------------------------------------- generated cases

if given is not None:
    FAST = dict(deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))

    def nudged(draw, value, chance=8):
        """value, or (about one time in `chance`) one off."""
        return value + draw(st.sampled_from([-1, 1])) if draw(st.integers(0, chance - 1)) == 0 else value

    @st.composite
    def interval_cases(draw):
        """(local_length, rank, intervals, owner_offsets): mostly valid, some one off."""
        peers = draw(st.integers(0, 7))
        if draw(st.booleans()):
            sizes = draw(st.lists(st.integers(0, 5), min_size=peers, max_size=peers))
            owners = list(itertools.accumulate([0] + sizes))
            if draw(st.integers(0, 9)) == 0:
                i = draw(st.integers(0, len(owners) - 1))
                owners[i] = nudged(draw, owners[i], 1)
            if draw(st.integers(0, 19)) == 0:
                owners = owners[:-1] if draw(st.booleans()) else owners + [owners[-1]]
            given_owners = tuple(owners)
        else:
            length = draw(st.integers(-1, 5))
            owners = [p * length for p in range(peers + 1)]
            given_owners = None
        total = owners[-1] if owners else 0
        intervals = []
        for p in range(peers):
            lo, hi = (owners[p], owners[p + 1]) if p + 1 < len(owners) else (0, total)
            start = draw(st.integers(min(0, lo), max(0, lo)))
            end = draw(st.integers(min(hi, total), max(hi, total)))
            intervals.append((nudged(draw, start, 16), nudged(draw, end, 16)))
        rank = nudged(draw, draw(st.integers(0, max(peers - 1, 0))), 10)
        if given_owners is None:
            local_length = length
        else:
            own = owners[rank + 1] - owners[rank] if 0 <= rank < len(owners) - 1 else 0
            local_length = nudged(draw, own, 10)
        return local_length, rank, tuple(intervals), given_owners

    @st.composite
    def boundary_cases(draw, last=("window", st.integers(-1, 40))):
        """(boundaries, local_length, size, rank, window or ratio): mostly valid."""
        local_length = nudged(draw, draw(st.integers(1, 8)), 12)
        size = nudged(draw, draw(st.integers(1, 6)), 12)
        total = local_length * size
        inner = draw(st.sets(st.integers(1, max(total - 1, 1)), max_size=6)) if total > 1 else set()
        boundaries = [0] + sorted(b for b in inner if b < total) + [total]
        if draw(st.integers(0, 9)) == 0:  # a broken boundary list
            i = draw(st.integers(0, len(boundaries) - 1))
            boundaries[i] = nudged(draw, boundaries[i], 1)
        if draw(st.integers(0, 29)) == 0:
            boundaries = boundaries[:draw(st.integers(0, 1))]
        rank = nudged(draw, draw(st.integers(0, max(size - 1, 0))), 12)
        return tuple(boundaries), local_length, size, rank, draw(last[1])

    @needs_original
    @settings(max_examples=2000, **FAST)
    @given(interval_cases())
    def test_interval_route_equals_the_original(case):
        local_length, rank, intervals, owners = case
        assert_same(lambda: SEED.interval_route(local_length, rank, intervals, owner_offsets=owners),
                    lambda: routes.interval(local_length, rank, intervals, owner_offsets=owners))

    @needs_original
    @settings(max_examples=2000, **FAST)
    @given(boundary_cases())
    def test_sliding_window_route_equals_the_original(case):
        assert_same(lambda: SEED.sliding_window_route(*case),
                    lambda: routes.sliding_window(*case))

    @needs_original
    @settings(max_examples=2000, **FAST)
    @given(boundary_cases(last=("ratio", st.integers(0, 3))))
    def test_document_prefix_route_equals_the_original(case):
        assert_same(lambda: SEED.document_prefix_route(*case),
                    lambda: routes.document_prefix(*case))

    @needs_original
    @settings(max_examples=500, **FAST)
    @given(boundary_cases(last=("ratio", st.integers(1, 3))))
    def test_compressed_offsets_equal_the_original(case):
        boundaries, local_length, _, _, ratio = case
        if (list(boundaries) != sorted(boundaries) or not boundaries or boundaries[0] != 0
                or local_length <= 0):
            return  # the original's stubs do not validate; hpref refuses (tested below)
        assert_same(lambda: STUBS.compressed_document_offsets(boundaries, ratio),
                    lambda: routes.compressed_document_offsets(boundaries, ratio))
        assert_same(lambda: STUBS.compressed_owner_offsets(boundaries, ratio, local_length),
                    lambda: routes.compressed_owner_offsets(boundaries, ratio, local_length))

    def original_all_ranks(one_rank, ranks):
        """[one_rank(r) for r in ranks], or rank 0's refusal (the checks that do not depend
        on the rank refuse every rank alike)."""
        first = outcome(lambda: one_rank(0))
        if isinstance(first, Exception):
            raise first
        return [first] + [one_rank(r) for r in range(1, ranks)]

    @needs_original
    @settings(max_examples=400, **FAST)
    @given(interval_cases())
    def test_plan_all_intervals_equals_the_original_per_rank(case):
        local_length, _, intervals, owners = case
        if not intervals:
            with pytest.raises(hpref.Error) as e:
                routes.plan_all("interval", local_length, intervals, owner_offsets=owners)
            assert e.value.kind in ("route_no_intervals", "route_owner_count")
            return

        def one_rank(r):
            length = local_length
            if owners is not None:
                length = owners[r + 1] - owners[r] if len(owners) == len(intervals) + 1 else 0
            return SEED.interval_route(length, r, intervals, owner_offsets=owners)

        assert_same(lambda: original_all_ranks(one_rank, len(intervals)),
                    lambda: routes.plan_all("interval", local_length, intervals, owner_offsets=owners))

    @needs_original
    @settings(max_examples=400, **FAST)
    @given(boundary_cases())
    def test_plan_all_sliding_window_equals_the_original_per_rank(case):
        boundaries, local_length, size, _, window = case
        if size <= 0:
            return  # no rank to compare with (refusal tested below)
        assert_same(lambda: original_all_ranks(
                        lambda r: SEED.sliding_window_route(boundaries, local_length, size, r, window), size),
                    lambda: routes.plan_all("sliding_window", boundaries, local_length, size, window))

    @needs_original
    @settings(max_examples=400, **FAST)
    @given(boundary_cases(last=("ratio", st.integers(0, 3))))
    def test_plan_all_document_prefix_equals_the_original_per_rank(case):
        boundaries, local_length, size, _, ratio = case
        if size <= 0:
            return
        assert_same(lambda: original_all_ranks(
                        lambda r: SEED.document_prefix_route(boundaries, local_length, size, r, ratio), size),
                    lambda: routes.plan_all("document_prefix", boundaries, local_length, size, ratio))


@needs_hypothesis
@needs_original
def test_the_generated_cases_reach_every_reason():
    """The strategies above refuse for each of the original's reasons and accept with and
    without an exchange (else the differential would compare little)."""
    seen = set()

    @settings(max_examples=600, **FAST)
    @given(interval_cases(), boundary_cases(), boundary_cases(last=("ratio", st.integers(0, 3))))
    def collect(interval_case, window_case, prefix_case):
        l, rank, intervals, owners = interval_case
        for call in (lambda: SEED.interval_route(l, rank, intervals, owner_offsets=owners),
                     lambda: SEED.sliding_window_route(*window_case),
                     lambda: SEED.document_prefix_route(*prefix_case)):
            r = outcome(call)
            seen.add(str(r) if isinstance(r, Exception) else f"exchange={r.needs_exchange}")

    collect()
    assert set(REASONS) | {"exchange=True", "exchange=False"} <= seen, seen


# ---------------------------------------------------------------- the Route object

def a_route():
    return routes.sliding_window((0, 5, 16), 4, 4, 2, 3)


def test_route_fields_and_owner_ranges():
    r = a_route()
    assert (r.local_length, r.global_start, r.global_end, r.local_output_start) == (4, 6, 12, 2)
    assert (r.send_offsets, r.input_splits, r.output_splits) == ((0, 0, 0, 2), (0, 0, 0, 2), (0, 2, 0, 0))
    assert r.needs_exchange is True
    assert r.owner_ranges() == ((0, 0), (0, 0), (0, 0), (2, 2))
    assert routes.Route._fields == FIELDS


def test_route_is_frozen_hashable_picklable_and_printable():
    r = a_route()
    with pytest.raises(AttributeError):
        r.local_length = 3
    with pytest.raises(AttributeError):
        r.extra = 1
    same = routes.Route(*(getattr(r, f) for f in FIELDS))
    assert same == r and hash(same) == hash(r) and len({r, same}) == 1
    assert pickle.loads(pickle.dumps(r)) == r
    assert repr(r).startswith("Route(local_length=4, global_start=6,") and "needs_exchange=True)" in repr(r)
    assert routes.SequenceDispatchRoute is routes.Route


@pytest.mark.parametrize("field", FIELDS)
def test_route_differs_in_any_field(field):
    r = a_route()
    values = {f: getattr(r, f) for f in FIELDS}
    values[field] = (not values[field] if field == "needs_exchange" else
                     values[field][:-1] + (values[field][-1] + 1,) if isinstance(values[field], tuple)
                     else values[field] + 1)
    other = routes.Route(**values)
    assert other != r and not other == r


def test_owner_ranges_of_tables_of_unequal_lengths_stop_at_the_shorter():
    """SPEC 7.1's tables have one entry per peer, but a Route takes any, as the original's
    dataclass does (routes.problem says they differ); owner_ranges pairs them as the
    original's zip. It read input_splits past its end (a crash, or memory's garbage)."""
    for offsets, counts, want in (((0, 1), (0,), ((0, 0),)),
                                  (tuple(range(64)), (0,), ((0, 0),)),
                                  ((0,), (0, 5, 7), ((0, 0),)),
                                  ((), (1, 2), ()),
                                  ((0, 2), (0, 1), ((0, 0), (2, 1)))):
        r = routes.Route(3, 0, 3, 0, offsets, counts, (0,), False)
        assert r.owner_ranges() == want, (offsets, counts)
        assert r.send_offsets == offsets and r.input_splits == counts
        if len(offsets) != len(counts) and offsets:
            assert "differ in size" in routes.problem(r), (offsets, counts)
        if _LOADED is not None:
            original = SEED.SequenceDispatchRoute(3, 0, 3, 0, offsets, counts, (0,), False)
            assert original.owner_ranges() == want and original == r


@needs_original
def test_route_equals_the_original_object_both_ways():
    r = a_route()
    original = SEED.sliding_window_route((0, 5, 16), 4, 4, 2, 3)
    assert r == original and original == r and not r != original
    changed = SEED.SequenceDispatchRoute(**{f: getattr(original, f) for f in FIELDS[:-1]},
                                         needs_exchange=False)
    assert r != changed and changed != r
    assert r != (4, 6, 12, 2) and r != object() and r != None  # noqa: E711


def test_arguments_beyond_int64_are_route_overflow():
    """SPEC 7's divergence: Python's unbounded ints would go on."""
    for call in (lambda: routes.interval(2 ** 63, 0, [(0, 1)]),
                 lambda: routes.sliding_window((0, 2 ** 64), 1, 1, 0, 1),
                 lambda: routes.plan_all("sliding_window", (0, 4), 2 ** 62, 4, 1)):
        with pytest.raises(hpref.Error) as e:
            call()
        assert e.value.kind == "route_overflow", e.value


def test_non_integers_are_type_errors():
    with pytest.raises(TypeError, match="local_length must be an int"):
        routes.interval(2.0, 0, [(0, 2)])
    with pytest.raises(TypeError, match=r"boundaries\[1\] must be an int"):
        routes.sliding_window((0, "4"), 2, 2, 0, 1)
    with pytest.raises(ValueError, match=r"intervals\[0\] must be a \(start, end\) pair"):
        routes.interval(2, 0, [(0, 1, 2)])


def test_numpy_and_bool_integers_are_accepted():
    np = pytest.importorskip("numpy")
    r = routes.sliding_window(np.array([0, 5, 16]), np.int64(4), 4, np.int32(2), 3)
    assert r == a_route()
    for boundaries in (np.array([0, 0, 5, 5, 16, 16])[::2], np.array([0, 5, 16], np.int32),
                       np.array([0, 5, 16], ">i8"), np.array([0, 5, 16], np.uint64)):
        assert routes.sliding_window(boundaries, 4, 4, 2, 3) == a_route(), boundaries.dtype
    assert routes.plan_all("sliding_window", np.array([0, 5, 16]), 4, 4, 3)[2] == a_route()
    assert routes.interval(True, 0, [(0, 1)]).local_length == 1


def test_plan_all_refusals():
    with pytest.raises(ValueError, match="kind must be one of"):
        routes.plan_all("ring", (0, 4), 2, 2, 1)
    with pytest.raises(hpref.Error) as e:
        routes.plan_all("sliding_window", (0, 4), 2, 0, 1)
    assert e.value.kind == "route_arguments"
    p = routes.MAX_ALL_ROUTES_PEERS + 1
    with pytest.raises(hpref.Error) as e:
        routes.plan_all("sliding_window", (0, p), 1, p, 1)
    assert e.value.kind == "route_too_large"
    assert len(routes.plan_all("sliding_window", (0, p - 1), 1, p - 1, 1)) == p - 1
    # A rank passed as to the one-rank function, or an argument missing: plan_all's own
    # arguments named (nanobind's "sliding_window_routes(): incompatible function arguments"
    # named an internal function until 2026-12-04).
    with pytest.raises(TypeError, match=r"plan_all\('sliding_window', boundaries, local_length, size, "
                                        r"window\) takes the one-rank function's arguments without "
                                        r"rank: too many positional arguments"):
        routes.plan_all("sliding_window", (0, 8), 4, 2, 0, 2)
    with pytest.raises(TypeError, match=r"plan_all\('document_prefix', boundaries, local_length, "
                                        r"size, ratio\) .*'ratio'"):
        routes.plan_all("document_prefix", (0, 8), 4, 2)
    with pytest.raises(TypeError, match=r"plan_all\('interval', local_length, intervals, \*, "
                                        r"owner_offsets=None\) .*'rank'"):
        routes.plan_all("interval", 4, [(0, 4)], rank=1)
    assert routes.plan_all("document_prefix", (0, 8), 4, 2, ratio=1) == \
        routes.plan_all("document_prefix", (0, 8), 4, 2, 1)


def test_a_refusal_the_original_shares_keeps_its_kind_before_the_size_cap():
    """route_too_large (no counterpart: the original would build the route) comes after the
    rank and boundary checks, whose refusals the original makes too (ValueError)."""
    big = routes.MAX_ROUTE_PEERS + 1
    for call, kind in ((lambda: routes.sliding_window((0, 4), 1, big, 0, 1), "route_boundaries"),
                       (lambda: routes.sliding_window((0, big), 1, big, -1, 1), "route_arguments"),
                       (lambda: routes.document_prefix((0, 4), 1, big, 0, 1), "route_boundaries"),
                       (lambda: routes.plan_all("sliding_window", (0, 4), 1, big, 1), "route_boundaries")):
        with pytest.raises(hpref.Error) as e:
            call()
        assert e.value.kind == kind, e.value
        assert hpref.errors.python_equivalent(e.value) is ValueError
    with pytest.raises(hpref.Error) as e:
        routes.sliding_window((0, big), 1, big, 0, 1)
    assert e.value.kind == "route_too_large" and hpref.errors.python_equivalent(e.value) is None


def test_overflow_of_a_product_maps_to_the_originals_refusal():
    """A product of int64 arguments beyond int64 comes only from arguments the original
    refuses (its boundaries cannot end there, its intervals cannot reach that owner offset);
    an argument beyond int64 is the divergence (the original goes on)."""
    for call in (lambda: routes.sliding_window((0, 4), 2 ** 62, 2, 0, 1),
                 lambda: routes.document_prefix((0, 4), 2 ** 62, 2, 0, 1),
                 lambda: routes.interval(2 ** 62, 1, ((0, 2 ** 62), (2 ** 62, 2 ** 63 - 1)))):
        with pytest.raises(hpref.Error) as e:
            call()
        assert e.value.kind == "route_overflow" and " * " in str(e.value), e.value
        assert hpref.errors.python_equivalent(e.value) is ValueError
    with pytest.raises(hpref.Error) as e:
        routes.sliding_window((0, 4), 2 ** 64, 2, 0, 1)
    assert e.value.kind == "route_overflow" and hpref.errors.python_equivalent(e.value) is None
    assert hpref.errors.python_equivalent("route_overflow") is None


def test_compressed_offsets_refusals_name_the_values():
    for boundaries, message in (((3, 5, 9), "must start at 0, got 3"), ((), "are empty"),
                                ((0, 7, 5), "decrease at index 2: 7 then 5")):
        with pytest.raises(hpref.Error, match=message):
            routes.compressed_document_offsets(boundaries, 2)


def test_compressed_offsets_refuse_what_the_stubs_do_not_check():
    for call, kind in ((lambda: routes.compressed_document_offsets((0, 4), 0), "route_arguments"),
                       (lambda: routes.compressed_document_offsets((1, 4), 1), "route_boundaries"),
                       (lambda: routes.compressed_document_offsets((0, 4, 3), 2), "route_boundaries"),
                       (lambda: routes.compressed_owner_offsets((0, 4), 1, 0), "route_arguments")):
        with pytest.raises(hpref.Error) as e:
            call()
        assert e.value.kind == kind
    assert routes.compressed_document_offsets((0, 3, 8), 2) == (0, 1, 3)
    assert routes.compressed_owner_offsets((0, 3, 8), 2, 4) == (0, 1, 3)


def test_compressed_owner_offsets_caps_its_rank_count():
    """SPEC 7.3's p = 0..boundaries[-1] // local_length, capped at MAX_ROUTE_PEERS ranks as
    the window and prefix planners cap theirs (route_too_large, naming the values): at
    size = 2**63 - 1, size + 1 overflowed int64, and at 2**40 ranks it allocated 8 TiB."""
    cap = routes.MAX_ROUTE_PEERS
    for boundaries, ratio, length, named in (((0, 2 ** 63 - 1), 1, 1, f"end at {2 ** 63 - 1}"),
                                             ((0, 2 ** 40), 1, 1, f"{2 ** 40} shards of local_length 1"),
                                             ((0, 3, 2 * cap + 2), 2, 2, f"{cap + 1} shards")):
        with pytest.raises(hpref.Error, match=named) as e:
            routes.compressed_owner_offsets(boundaries, ratio, length)
        assert e.value.kind == "route_too_large" and str(cap) in str(e.value)
    offsets = routes.compressed_owner_offsets((0, 5, cap), 1, 1)  # the cap itself: cap + 1 entries
    assert len(offsets) == cap + 1 and offsets[:3] == (0, 1, 2) and offsets[-1] == cap
    if _LOADED is not None:
        assert routes.compressed_owner_offsets((0, 5, 96), 2, 8) == STUBS.compressed_owner_offsets((0, 5, 96), 2, 8)


def test_problem_names_a_broken_route():
    r = a_route()
    assert routes.problem(r) == "" and routes.problem(r, rank=2) == ""
    assert "rank 3 sends itself 2 rows" in routes.problem(r, rank=3)
    values = {f: getattr(r, f) for f in FIELDS}
    shifted = routes.Route(**dict(values, local_output_start=0))
    assert routes.problem(shifted) == ""
    assert "local_output_start 0 differs from the 2 rows" in routes.problem(shifted, rank=2)
    broken = routes.Route(**dict(values, output_splits=(0, 3, 0, 0)))
    assert "does not hold" in routes.problem(broken)
    with pytest.raises(TypeError, match="needs the attribute"):
        routes.problem(object())
    with pytest.raises(ValueError):
        routes.problem(r, rank=-1)


@needs_original
def test_problem_accepts_the_original_route():
    original = SEED.document_prefix_route((0, 3, 9, 16), 4, 4, 1, 2)
    assert routes.problem(original, rank=1) == ""
