"""hpref.planning: the data topology (SPEC 3.1), the group plan (SPEC 3.2) against the
original's create_data_groups (torch.distributed replaced by a recorder of new_group
calls, on hypothesis-generated meshes and options, refusals included), and the
model-batch layout (SPEC 6.1-6.3)."""
from __future__ import annotations

import collections
import hashlib
import pathlib
import re
import sys
from types import SimpleNamespace

import pytest

import hpref
import hpref.errors
import hpref.planning as planning

ORIGINAL = pathlib.Path(__file__).resolve().parents[3] / "shared" / "original"


def _load_original():
    if not (ORIGINAL / "seed_transport.py").exists():
        return None, f"the original implementation is absent ({ORIGINAL})"
    try:
        import torch  # noqa: F401  (the original module imports it)
    except ImportError:
        return None, "torch is not importable; the original's transport needs it"
    sys.path.insert(0, str(ORIGINAL))
    import seed_transport
    return seed_transport, None


TRANSPORT, WHY = _load_original()
needs_original = pytest.mark.skipif(TRANSPORT is None, reason=str(WHY))

try:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st
except ImportError:
    given = None


def kind_of(call):
    with pytest.raises(hpref.Error) as e:
        call()
    return e.value.kind


# ---------------------------------------------------------------- topology

def test_topology_derives_every_field():
    t = planning.topology((2, 2, 2), ("dp_replicate", "cp", "dp_shard"), range(10, 18), 15)
    assert t.dp_dim_names == ("dp_replicate", "dp_shard")
    assert t.coordinate == (1, 0, 1) and t.data_parallel_size == 4 and t.data_rank == 3
    assert t.constructor_ranks == (10, 11, 14, 15)
    assert t.model_parallel_rank_groups == ((10, 12), (11, 13), (14, 16), (15, 17))
    assert t.constructor_rank == 15 and t.model_parallel_ranks == (15, 17)
    assert t.canonical_text.startswith("hpref-topology-v1\nshape=2,2,2\n")
    assert t.fingerprint == hashlib.sha256(t.canonical_text.encode()).hexdigest()
    other = planning.topology((2, 2, 2), ("dp_replicate", "cp", "dp_shard"), range(10, 18), 10)
    assert other.fingerprint == t.fingerprint and other.data_rank == 0
    assert planning.topology((4,), ("cp",), range(4), 2).data_parallel_size == 1
    assert planning.topology((2, 2), ("a", "b"), range(4), 3, dp_dim_names=("b",)).constructor_ranks == (0, 1)
    with pytest.raises(Exception):  # frozen
        t.global_rank = 1


def test_topology_refusals_by_kind():
    for args, kind in ((((0, 2), ("dp", "cp"), [0, 1], 0), "topology_shape"),
                       (((2,), ("dp", "cp"), [0, 1], 0), "topology_names"),
                       (((2, 1), ("dp", "dp"), [0, 1], 0), "topology_names"),
                       (((2,), ("dp",), [0, 0], 0), "topology_rank_list"),
                       (((2,), ("dp",), [0, 1, 2], 0), "topology_rank_list"),
                       (((2,), ("dp",), [0, 1], 5), "topology_global_rank")):
        assert kind_of(lambda: planning.topology(*args)) == kind
    assert kind_of(lambda: planning.topology((2,), ("dp",), [0, 1], 0, ("cp",))) == "topology_dp_names"


# ---------------------------------------------------------------- group plan

def test_group_plan_example():
    t = planning.topology((2, 2), ("dp", "tp"), range(4), 2)
    p = planning.group_plan(t, (1,), 0, cpu_backend="gloo", communication_device="cuda:0",
                            world_backend="nccl")
    assert p.data_plane_ranks == (0, 1, 2) and p.distributed
    assert p.payload_backend == "nccl" and not p.payload_reuses_control and p.tensor_backend == "nccl"
    assert p.creations == (("control", (0, 1, 2), "gloo"), ("payload", (0, 1, 2), "nccl"),
                           ("model_parallel_host", (0, 1), "gloo"), ("model_parallel_tensor", (0, 1), "nccl"),
                           ("model_parallel_host", (2, 3), "gloo"), ("model_parallel_tensor", (2, 3), "nccl"))
    assert (p.control, p.payload, p.model_parallel, p.model_parallel_tensor) == (0, 1, 4, 5)
    single = planning.group_plan(planning.topology((1,), ("dp",), [0], 0), (0,), 0, cpu_backend="gloo",
                                 distributed=False)
    assert single.creations == () and not single.distributed and single.control is None


def test_group_plan_refusals_by_kind():
    t = planning.topology((2, 2), ("dp", "tp"), range(4), 2)
    plan = planning.group_plan
    assert kind_of(lambda: plan(t, (1,), 3, cpu_backend="gloo")) == "group_planner"
    assert kind_of(lambda: plan(t, (1,), 0, cpu_backend="gloo", distributed=False)) == "group_not_distributed"
    assert kind_of(lambda: plan(t, (1,), 0, cpu_backend="gloo", world_size=8)) == "group_mesh_world"
    assert kind_of(lambda: plan(t, (1,), 0, cpu_backend="gloo", rank=1)) == "group_rank"
    assert kind_of(lambda: plan(t, (1,), 0, cpu_backend="nccl")) == "group_cpu_backend"
    assert kind_of(lambda: plan(t, (1,), 0, cpu_backend="gloo", payload_backend="")) == "group_payload_backend"
    assert kind_of(lambda: plan(t, (1,), 0, cpu_backend="gloo", communication_device="tpu")) == "group_device"
    assert kind_of(lambda: plan(t, (1,), 0, cpu_backend="gloo", payload_backend="nccl")) == "group_payload_device"


class _Recorder:
    """torch.distributed as create_data_groups uses it: the world's state, and new_group
    calls recorded in order (each returns a token naming its index)."""

    def __init__(self, distributed, world_size, rank, backend):
        self.state = (distributed, world_size, rank, backend)
        self.created = []

    def is_available(self):
        return True

    def is_initialized(self):
        return self.state[0]

    def get_world_size(self, group=None):
        return self.state[1]

    def get_rank(self, group=None):
        return self.state[2]

    def get_backend(self, group=None):
        return self.state[3]

    def new_group(self, ranks, backend=None):
        self.created.append((tuple(sorted(ranks)), backend))
        return SimpleNamespace(index=len(self.created) - 1)


if given is not None:
    NAMES = ["dp", "dp_replicate", "dp_shard", "cp", "tp"]

    @st.composite
    def group_cases(draw):
        dims = draw(st.integers(1, 3))
        names = draw(st.permutations(NAMES))[:dims]
        shape = [draw(st.integers(1, 3)) for _ in names]
        size = 1
        for s in shape:
            size *= s
        ranks = draw(st.permutations(range(size)))
        rank = draw(st.integers(0, size - 1))
        topo = planning.topology(shape, names, ranks, ranks[rank])
        readers = draw(st.lists(st.integers(0, size - 1), max_size=3))
        plane = sorted(set(readers) | set(topo.constructor_ranks))
        planner = draw(st.sampled_from(plane + [size])) if draw(st.integers(0, 9)) else size
        options = dict(
            cpu_backend=draw(st.sampled_from(["gloo", "gloo", "GLOO", "hccl", "nccl", ""])),
            payload_backend=draw(st.sampled_from([None, None, "gloo", "nccl", "hccl", "NCCL", ""])),
            communication_device=draw(st.sampled_from([None, None, "cpu", "cuda", "cuda:1"])),
            enable_payload_exchange=draw(st.booleans()),
            model_device=draw(st.sampled_from([None, None, "cpu", "cuda", "cuda:0"])),
        )
        world = dict(distributed=draw(st.integers(0, 9)) > 0,
                     world_size=size if draw(st.integers(0, 9)) else size + 1,
                     rank=topo.global_rank if draw(st.integers(0, 9)) else (topo.global_rank + 1) % size,
                     world_backend=draw(st.sampled_from(["gloo", "nccl", "hccl"])))
        return topo, tuple(readers), planner, options, world

    @needs_original
    @settings(max_examples=1500, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(group_cases())
    def test_group_plan_equals_the_original(case):
        topo, readers, planner, options, world = case
        fake = _Recorder(world["distributed"], world["world_size"], world["rank"], world["world_backend"])
        real = TRANSPORT.dist
        TRANSPORT.dist = fake
        try:
            want = TRANSPORT.create_data_groups(topo, readers, planner, **options)
        except ValueError as e:
            want = e
        finally:
            TRANSPORT.dist = real
        try:
            got = planning.group_plan(topo, readers, planner, **options, **world)
        except hpref.Error as e:
            got = e
        if isinstance(want, ValueError):
            assert isinstance(got, hpref.Error), f"the original refused ({want}) but hpref planned {got}"
            assert got.kind.startswith("group_"), got
            equivalent = getattr(hpref, "python_equivalent", None) or getattr(hpref.errors, "python_equivalent", None)
            if equivalent is not None:
                assert equivalent(got) is ValueError
            return
        assert not isinstance(got, Exception), f"hpref refused ({got!r}) where the original planned"
        assert [(c.ranks, c.backend) for c in got.creations] == fake.created
        assert got.data_plane_ranks == want.data_plane_ranks and got.planner_rank == want.planner_rank
        assert got.distributed == want.distributed

        def index(group):
            return None if group is None else group.index

        assert got.control == index(want.control_group)
        assert got.payload == index(want.payload_group)
        assert got.model_parallel == index(want.model_parallel_group)
        assert got.model_parallel_tensor == index(want.model_parallel_tensor_group)


# ---------------------------------------------------------------- model batch

FIELDS = [planning.Field("tokens", "int64", "accelerator", ("batch", "seq")),
          planning.Field("mask", "torch.uint8", "cpu", ("batch", "seq")),
          planning.Field("pixels", "float32", "cpu", (3, "side", "side")),
          ("ids", "int32", "cpu", ("batch",))]


def a_batch(np, batch=2, seq=5, side=4):
    return {"tokens": np.zeros((batch, seq), np.int64), "mask": np.ones((batch, seq), np.uint8),
            "pixels": np.zeros((3, side, side), np.float32), "ids": np.arange(batch, dtype=np.int32)}


def test_batch_layout_symbols_and_fingerprint():
    layout = planning.batch_layout(FIELDS)
    assert layout.symbols == ("batch", "seq", "side")
    assert layout.fields[1] == planning.Field("mask", "uint8", "cpu", ("batch", "seq"))
    assert layout.fingerprint == hashlib.sha256(layout.canonical_text.encode()).hexdigest()
    assert layout.canonical_text == ("hpref-batch-spec-v1\n6:tokens int64 accelerator $5:batch $3:seq\n"
                                     "4:mask uint8 cpu $5:batch $3:seq\n6:pixels float32 cpu 3 $4:side $4:side\n"
                                     "3:ids int32 cpu $5:batch\n")
    assert planning.batch_layout(reversed(FIELDS)).fingerprint != layout.fingerprint


def test_batch_header_and_shapes():
    np = pytest.importorskip("numpy")
    layout = planning.batch_layout(FIELDS)
    header = planning.batch_header(layout, a_batch(np))
    assert header == (1, 2, 5, 4)
    assert planning.header_status(layout, header) == planning.BATCH
    assert planning.batch_shapes(layout, header) == ((2, 5), (2, 5), (3, 4, 4), (2,))
    assert planning.batch_header(FIELDS, status=planning.END_OF_DATA) == (0, 0, 0, 0)
    assert planning.batch_header(layout, status=planning.BATCH_FAILED) == (-1, 0, 0, 0)
    torch = sys.modules.get("torch")
    if torch is not None:
        batch = {k: torch.from_numpy(v) for k, v in a_batch(np, 3, 1, 2).items()}
        assert planning.batch_header(layout, batch) == (1, 3, 1, 2)
        flags = [planning.Field("ok", torch.bool, "cpu", ("n",))]
        assert planning.batch_header(flags, {"ok": torch.ones(3, dtype=torch.bool)}) == (1, 3)


def test_batch_refusals_by_kind():
    np = pytest.importorskip("numpy")
    layout = planning.batch_layout(FIELDS)
    good = a_batch(np)
    for batch, kind in (({k: v for k, v in good.items() if k != "mask"}, "batch_missing_field"),
                        (dict(good, ids=good["ids"].astype(np.int64)), "batch_dtype"),
                        (dict(good, ids=[0, 1]), "batch_dtype"),
                        (dict(good, ids=np.zeros((2, 1), np.int32)), "batch_rank"),
                        (dict(good, pixels=np.zeros((2, 4, 4), np.float32)), "batch_dim"),
                        (dict(good, pixels=np.zeros((3, 4, 5), np.float32)), "batch_symbol"),
                        (dict(good, extra=np.zeros(1)), "batch_unknown_field"),
                        (dict(good, **{"7": np.zeros(1)}), "batch_unknown_field")):
        assert kind_of(lambda: planning.batch_header(layout, batch)) == kind, kind
    for odd_name in (7, None, b"ids", ("ids",)):  # None too: it is no "nothing found" here
        assert kind_of(lambda: planning.batch_header(layout, {**good, odd_name: 1})) == \
            "batch_unknown_field", odd_name
    with pytest.raises(hpref.Error, match="batch field 'ids' must be a int32 tensor, got a Python str"):
        planning.batch_header(layout, dict(good, ids="abc"))  # it said "got NoneType"
    with pytest.raises(hpref.Error, match="'ids' must be a int32 tensor, got a Python NoneType"):
        planning.batch_header(layout, dict(good, ids=None))
    with pytest.raises(hpref.Error, match="'ids' must be a int32 tensor, got a Python OrderedDict"):
        planning.batch_header(layout, dict(good, ids=collections.OrderedDict()))
    # Lone surrogates reach no C++ cast: in a value's type name (escaped) and in a field name
    # (no declared name has one); both raised std::bad_cast as RuntimeError.
    odd = type("Odd", (), {"__qualname__": "\ud800x"})
    with pytest.raises(hpref.Error, match=r"got a Python \\ud800x"):
        planning.batch_header(layout, dict(good, ids=odd()))
    assert kind_of(lambda: planning.batch_header(layout, {**good, "\ud800": np.zeros(1)})) == \
        "batch_unknown_field"
    # The checks' order is the C++ one: a missing field before a later field's type.
    first, *rest = good
    assert kind_of(lambda: planning.batch_header(layout, {k: "x" for k in rest})) == "batch_missing_field"
    # A name that is not a str is an unknown field, reported after the declared fields'
    # checks like any other (it was raised first, before a missing field).
    assert kind_of(lambda: planning.batch_header(layout, {7: 1, **{k: good[k] for k in rest}})) == \
        "batch_missing_field"
    assert kind_of(lambda: planning.batch_header(layout, {"\ud800": 1, **dict(good, ids="x")})) == \
        "batch_dtype"
    # Of several unknown names the first in the batch's order is named, whatever its type
    # (the C++ core names its first str one: 7 came second to "extra").
    for batch, named in (({**good, 7: 1, "extra": 1}, "7"), ({**good, "extra": 1, 7: 1}, "'extra'"),
                         ({**good, "\ud800": 1, "extra": 1}, "'\\ud800'")):
        with pytest.raises(hpref.Error, match=f"^batch field {re.escape(named)} is not in the spec"):
            planning.batch_header(layout, batch)
    assert kind_of(lambda: planning.batch_header(layout, status=1)) == "batch_header"
    assert kind_of(lambda: planning.header_status(layout, (1, 2, 3))) == "batch_header"
    assert kind_of(lambda: planning.header_status(layout, (2, 0, 0, 0))) == "batch_header"
    assert kind_of(lambda: planning.batch_shapes(layout, (0, 0, 0, 0))) == "batch_header"
    assert kind_of(lambda: planning.batch_shapes(layout, (1, -1, 0, 0))) == "batch_header"
    assert kind_of(lambda: planning.batch_shapes(layout, (1, 2, 5, 4), max_message_bytes=191)) == "batch_size_limit"
    assert planning.batch_shapes(layout, (1, 2, 5, 4), max_message_bytes=192)[2] == (3, 4, 4)
    for fields, kind in (([("a", "float32"), ("a", "int8")], "batch_spec"),
                         ([("", "float32")], "batch_spec"),
                         ([("a", "float32", "cpu", (-1,))], "batch_spec"),
                         ([("a", "float32", "cpu", ("",))], "batch_spec"),
                         ([("a", "float32", "gpu")], "batch_spec"),
                         ([("a", "float32", "cpu", "BT")], "batch_spec"),  # not symbols B, T
                         ([("a", "float32", "cpu", (1.5,))], "batch_spec"),
                         ([("a", "float32", "cpu", (1 << 63,))], "batch_spec"),
                         ([(7, "float32")], "batch_spec"),
                         ([("a", "float31")], "unsupported_dtype")):
        assert kind_of(lambda: planning.batch_layout(fields)) == kind, fields


def test_headers_and_limits_that_are_not_int64_are_named():
    """A received header's values, a status and max_message_bytes are checked in Python and
    named (nanobind's own refusal listed its signatures and named no value); numpy and torch
    integers are ints here, bools are not."""
    np = pytest.importorskip("numpy")
    layout = planning.batch_layout(FIELDS)
    for header, bad in (((1, 2, 5.0, 4), "header\\[2\\] .* got 5.0"),
                        ((1, 1 << 63, 5, 4), f"header\\[1\\] .* got {1 << 63}"),
                        ((True, 2, 5, 4), "header\\[0\\] .* got True")):
        for f in (planning.header_status, planning.batch_shapes):
            with pytest.raises(hpref.Error, match=bad) as e:
                f(layout, header)
            assert e.value.kind == "batch_header"
    assert planning.batch_shapes(layout, np.array([1, 2, 5, 4]))[0] == (2, 5)
    # numpy integers stand for ints in a status, a limit and a fixed dim
    assert planning.batch_header(layout, status=np.int64(0)) == (0, 0, 0, 0)
    assert planning.batch_shapes(layout, (1, 2, 5, 4), max_message_bytes=np.int64(192))[2] == (3, 4, 4)
    assert planning.batch_layout([("a", "int8", "cpu", (np.int32(3),))]).fields[0].dims == (3,)
    with pytest.raises(hpref.Error, match="status must be an int64, got 2.0"):
        planning.batch_header(layout, status=2.0)
    with pytest.raises(hpref.Error, match="max_message_bytes .* got -1"):
        planning.batch_shapes(layout, (1, 2, 5, 4), max_message_bytes=-1)


def test_docstring_example():
    import doctest

    result = doctest.testmod(planning)
    assert result.attempted > 0 and result.failed == 0


@needs_original
@pytest.mark.skipif(given is None, reason="hypothesis is not installed")
def test_the_generated_group_cases_reach_every_outcome():
    """The generated cases refuse at every check the original makes and plan payload and
    accelerator groups (else the differential above would compare little)."""
    seen = set()

    @settings(max_examples=1500, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(group_cases())
    def collect(case):
        topo, readers, planner, options, world = case
        try:
            p = planning.group_plan(topo, readers, planner, **options, **world)
        except hpref.Error as e:
            seen.add(e.kind)
            return
        seen.update(c.role for c in p.creations)
        seen.add("reuse" if p.payload_reuses_control else "no reuse")
        seen.add("local" if not p.distributed else "distributed")

    collect()
    assert {"group_planner", "group_not_distributed", "group_mesh_world", "group_rank",
            "group_cpu_backend", "group_payload_backend", "group_payload_device", "control",
            "payload", "model_parallel_host", "model_parallel_tensor", "reuse", "no reuse",
            "local", "distributed"} <= seen, seen
