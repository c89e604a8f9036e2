"""hpref.planning: the data topology (SPEC 3.1), the group plan (SPEC 3.2) against the
original's create_data_groups (torch.distributed replaced by a recorder of new_group
calls, on hypothesis-generated meshes and options, refusals included), and the
model-batch layout (SPEC 6.1-6.3)."""
from __future__ import annotations

import collections
import hashlib
import itertools
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
    assert t.canonical_text == ("hpref-topology-v2\nshape=2,2,2\nnames=12:dp_replicate,2:cp,8:dp_shard\n"
                                "ranks=10,11,12,13,14,15,16,17\ndp=12:dp_replicate,8:dp_shard\n")
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


def test_topology_fingerprint_separates_names_holding_separators():
    """SPEC 3.1's canonical text names each name's length: joined bare with ',' these
    meshes shared one text, so one fingerprint."""
    for a, b in (((("a,b", "c"), None), (("a", "b,c"), None)),
                 ((("a,b", "a", "b"), ("a,b",)), (("a,b", "a", "b"), ("a", "b")))):
        ta = planning.topology((1, 1, 1)[:len(a[0])], a[0], [0], 0, dp_dim_names=a[1] or ())
        tb = planning.topology((1, 1, 1)[:len(b[0])], b[0], [0], 0, dp_dim_names=b[1] or ())
        assert ta.canonical_text != tb.canonical_text and ta.fingerprint != tb.fingerprint, (a, b)
    assert planning.topology((1, 1), ("a,b", "c"), [0], 0, ()).canonical_text == \
        "hpref-topology-v2\nshape=1,1\nnames=3:a,b,1:c\nranks=0\ndp=\n"


def test_topology_arguments_of_the_wrong_type_are_named():
    """nanobind's int casters truncated floats and read strs ('5', np.float32(5.9) and
    tensor(5.5) became 5, Fraction(5, 2) 2) and took bools as ints; its other refusals
    were a generic 'incompatible function arguments'. Each is now its check's kind,
    naming the argument and the value; numpy and torch integers are ints."""
    np = pytest.importorskip("numpy")
    from fractions import Fraction
    torch = sys.modules.get("torch")
    good = dict(mesh_shape=(2, 4), mesh_dim_names=("dp", "cp"), rank_list=range(8), global_rank=5)
    odd = ["5", 5.0, np.float32(5.9), Fraction(5, 2), True, np.True_, None]
    if torch is not None:
        odd += [torch.tensor(5.5), torch.tensor(True)]
    for value in odd:
        for arg, kind, call in (
                ("global_rank", "topology_global_rank", dict(good, global_rank=value)),
                (r"mesh_shape\[0\]", "topology_shape", dict(good, mesh_shape=(value, 4))),
                (r"rank_list\[5\]", "topology_rank_list", dict(good, rank_list=[0, 1, 2, 3, 4, value, 6, 7]))):
            with pytest.raises(hpref.Error, match=f"^{arg} must be an int") as e:
                planning.topology(**call)
            assert e.value.kind == kind and repr(value) in str(e.value), (arg, value)
    for arg, kind, call in (("global_rank", "topology_global_rank", dict(good, global_rank=2 ** 31)),
                            (r"rank_list\[1\]", "topology_rank_list", dict(good, rank_list=[0, 2 ** 40])),
                            (r"mesh_shape\[0\]", "topology_shape", dict(good, mesh_shape=(2 ** 63, 1)))):
        with pytest.raises(hpref.Error, match=f"^{arg} must be an int") as e:
            planning.topology(**call)
        assert e.value.kind == kind
    for names, kind, dp in (((7, "cp"), "topology_names", None), (("\ud800", "cp"), "topology_names", None),
                            ("dpcp", "topology_names", None), (("dp", "cp"), "topology_dp_names", ("\ud800",)),
                            (("dp", "cp"), "topology_dp_names", "dp"), (("dp", "cp"), "topology_dp_names", (None,))):
        with pytest.raises(hpref.Error) as e:
            planning.topology((2, 4), names, range(8), 5, dp)
        assert e.value.kind == kind, (names, dp, e.value)
    integers = planning.topology((np.int64(2), 4), ("dp", "cp"), np.arange(8), np.int32(5))
    assert integers == planning.topology(**good)
    if torch is not None:
        assert planning.topology((torch.tensor(2), 4), ("dp", "cp"), torch.arange(8), torch.tensor(5)) == integers


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


def test_group_plan_arguments_of_the_wrong_type_are_named():
    np = pytest.importorskip("numpy")
    t = planning.topology((2, 2), ("dp", "tp"), range(4), 2)
    plan = planning.group_plan
    for value in ("0", 0.0, np.float32(0.5), True, None):
        for call, kind, named in (
                (lambda: plan(t, (1, value), 0, cpu_backend="gloo"), "group_planner", r"reader_ranks\[1\]"),
                (lambda: plan(t, (1,), value, cpu_backend="gloo"), "group_planner", "planner_rank"),
                (lambda: plan(t, (1,), 0, cpu_backend="gloo", world_size=value if value is not None else "4"),
                 "group_mesh_world", "world_size"),
                (lambda: plan(t, (1,), 0, cpu_backend="gloo", rank=value if value is not None else "2"),
                 "group_rank", "rank")):
            with pytest.raises(hpref.Error, match=f"^{named} must be an int") as e:
                call()
            assert e.value.kind == kind, (named, value)
    assert kind_of(lambda: plan(t, (1,), 2 ** 31, cpu_backend="gloo")) == "group_planner"
    assert kind_of(lambda: plan(t, (1,), 0, cpu_backend="gloo", distributed=1)) == "group_not_distributed"
    assert kind_of(lambda: plan(t, (1,), 0, cpu_backend="gloo", world_backend=5)) == "group_payload_backend"
    assert plan(t, (np.int32(1),), np.int64(0), cpu_backend="gloo", world_size=np.int64(4)) == \
        plan(t, (1,), 0, cpu_backend="gloo")
    # The original's own checks of these refuse at their step of SPEC 3.2, so an earlier
    # check's error comes first, and without torch.distributed they are not checked at all.
    for options, kind in ((dict(cpu_backend=None), "group_cpu_backend"),
                          (dict(cpu_backend="\ud800"), "group_cpu_backend"),
                          (dict(cpu_backend="gloo", payload_backend=7), "group_payload_backend"),
                          (dict(cpu_backend="gloo", enable_payload_exchange=1), "group_payload_backend"),
                          (dict(cpu_backend="gloo", enable_payload_exchange=np.True_), "group_payload_backend")):
        assert kind_of(lambda: plan(t, (1,), 0, **options)) == kind, options
        assert kind_of(lambda: plan(t, (1,), 3, **options)) == "group_planner", options
        assert kind_of(lambda: plan(t, (1,), 0, **options, rank=1)) == "group_rank", options
        single = planning.topology((1,), ("dp",), [0], 0)
        assert plan(single, (0,), 0, **options, distributed=False).creations == (), options
    assert kind_of(lambda: plan(t, (1,), 0, cpu_backend=None, payload_backend=7)) == "group_cpu_backend"
    assert kind_of(lambda: plan(t, (1,), 0, cpu_backend="gloo", payload_backend="",
                                enable_payload_exchange=1)) == "group_payload_backend"


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
            communication_device=draw(st.sampled_from([None, None, "cpu", "cuda", "cuda:1", "cpu:0", "xpu",
                                                       "meta"])),
            enable_payload_exchange=draw(st.booleans()),
            model_device=draw(st.sampled_from([None, None, "cpu", "cuda", "cuda:0", "cpu:0", "xpu:0",
                                               "meta"])),
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
        assert_same_plan(topo, readers, planner, options, world)


def assert_same_plan(topo, readers, planner, options, world):
    """hpref's group plan equals the original's create_data_groups (its new_group calls
    recorded), or both refuse: a ValueError as a group_* kind, torch.device's RuntimeError
    as group_device."""
    fake = _Recorder(world["distributed"], world["world_size"], world["rank"], world["world_backend"])
    real = TRANSPORT.dist
    TRANSPORT.dist = fake
    try:
        want = TRANSPORT.create_data_groups(topo, readers, planner, **options)
    except (ValueError, RuntimeError) as e:
        want = e
    finally:
        TRANSPORT.dist = real
    try:
        got = planning.group_plan(topo, readers, planner, **options, **world)
    except hpref.Error as e:
        got = e
    if isinstance(want, Exception):
        assert isinstance(got, hpref.Error), f"the original refused ({want!r}) but hpref planned {got}"
        assert got.kind.startswith("group_"), got
        if isinstance(want, RuntimeError):
            assert got.kind == "group_device", (want, got)
        assert hpref.errors.python_equivalent(got) is type(want), (want, got)
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


DEVICES = ["cpu", "cpu:0", "cpu:1", "xpu", "xpu:0", "meta", "meta:0", "mps", "cuda", "cuda:1",
           "npu", "npu:0", "tpu", "cuda:01", "cuda:", "CUDA", "", 0]


@needs_original
@pytest.mark.parametrize("device", DEVICES + ["torch.device('cpu', 0)", "torch.device('cuda', 1)"], ids=repr)
def test_devices_are_what_torch_device_reads(device):
    """The original reads communication_device and model_device with torch.device, where
    torch's version decides (npu only with torch_npu; an int index is cuda on 1.13 and
    refused without an accelerator on 2.x): hpref refuses exactly those torch refuses, at
    the original's step (a planner error first; nothing without torch.distributed).
    group_plan refused 'cpu:0', torch.device('cpu', 0), 'xpu', 'xpu:0' and 'meta'."""
    torch = sys.modules["torch"]
    if isinstance(device, str) and device.startswith("torch.device"):
        device = eval(device, {"torch": torch})  # noqa: S307 (the ids stay readable)
    topo = planning.topology((2, 2), ("dp", "tp"), range(4), 2)
    for position in ("communication_device", "model_device"):
        for payload, exchange, world_backend, planner, distributed in itertools.product(
                (None, "gloo", "nccl"), (True, False), ("gloo", "nccl"), (0, 3), (True, False)):
            options = dict(cpu_backend="gloo", payload_backend=payload, communication_device=None,
                           enable_payload_exchange=exchange)
            options[position] = device
            world = dict(distributed=distributed, world_size=4 if distributed else 1, rank=2,
                         world_backend=world_backend)
            if not distributed:
                topo_used = planning.topology((1,), ("dp",), [0], 0)
                world["rank"] = 0
                assert_same_plan(topo_used, (0,), 0 if planner == 0 else 3, options, world)
            else:
                assert_same_plan(topo, (1,), planner, options, world)


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


def test_layout_fields_name_dtypes_canonically_and_odd_inputs_are_named():
    """SPEC 1.3: an alias is written back by its canonical name (`fields` kept "half" though
    the canonical text said float16); a symbol with a lone surrogate and a batch that is no
    mapping are refused naming them (nanobind's TypeError, a bare AttributeError)."""
    half = planning.batch_layout([planning.Field("x", "half", "cpu", (2,))])
    assert half.fields == (planning.Field("x", "float16", "cpu", (2,)),)
    assert half == planning.batch_layout([planning.Field("x", "float16", "cpu", (2,))])
    torch = sys.modules.get("torch")
    if torch is not None:
        assert planning.batch_layout([("x", torch.half)]).fields[0].dtype == "float16"
    assert planning.batch_layout([("x", "torch.float")]).fields[0].dtype == "float32"
    with pytest.raises(hpref.Error, match=r"batch field 'x' dim 1: the symbol '\\ud800' is not valid UTF-8") as e:
        planning.batch_layout([("x", "float32", "cpu", ("B", "\ud800"))])
    assert e.value.kind == "batch_spec"
    layout = planning.batch_layout(FIELDS)
    for batch in ([("tokens", 1)], "tokens", 7):
        with pytest.raises(hpref.Error, match="batch must be a mapping of field name -> tensor, got a "
                           f"{type(batch).__name__}") as e:
            planning.batch_header(layout, batch)
        assert e.value.kind == "batch_spec"


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
