"""hpref.oracle (SPEC 8) against a direct Python computation (torch slicing and torch's own
CPU add_ in SPEC 8.2's order) and against the original's async_sequence_dispatch, forward
and backward, run in-process: one thread per rank and a stand-in for torch.distributed's
all_to_all_single (the real collective on 4 gloo ranks is in test_dispatch_gloo.py).
Results are compared bitwise, on every dtype the original moves."""
from __future__ import annotations

import doctest
import pathlib
import sys
import threading
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch", reason="hpref.oracle's results are torch tensors; torch is not importable")
import numpy as np  # noqa: E402

import hpref  # noqa: E402
import hpref.oracle as oracle  # noqa: E402
import hpref.routes as routes  # noqa: E402
from tensor_cases import bits  # noqa: E402

ORIGINAL = pathlib.Path(__file__).resolve().parents[3] / "shared" / "original"
if (ORIGINAL / "seed_sequence_dispatch.py").exists():
    sys.path.insert(0, str(ORIGINAL))
    import seed_sequence_dispatch as SEED
    WHY = None
else:
    SEED, WHY = None, f"the original implementation is absent ({ORIGINAL})"
needs_original = pytest.mark.skipif(SEED is None, reason=str(WHY))

try:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st
except ImportError:
    given = None
needs_hypothesis = pytest.mark.skipif(given is None, reason="hypothesis is not installed")

FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
INTS = [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8]
DTYPES = FLOATS + INTS + [torch.complex64, torch.bool]


def assert_bitwise(got, want):
    assert len(got) == len(want)
    for r, (g, w) in enumerate(zip(got, want)):
        assert isinstance(g, torch.Tensor), type(g)
        assert g.dtype == w.dtype and g.shape == w.shape, (r, g.dtype, w.dtype, g.shape, w.shape)
        assert g.is_contiguous()
        assert torch.equal(bits(g), bits(w)), (r, g, w)


def make_bank(rows, dtype, shape=(3,), dim=0, seed=0):
    """A bank of `rows` sequence rows along `dim`, values whose float sums depend on order."""
    g = torch.Generator().manual_seed(seed)
    full = [rows] + list(shape)
    full.insert(dim % len(full), full.pop(0))
    if dtype.is_floating_point or dtype.is_complex:
        scale = torch.pow(10.0, torch.randint(-3, 4, full, generator=g).double())
        x = torch.randn(full, generator=g, dtype=torch.float64) * scale
        if dtype.is_complex:
            return torch.complex(x, x.flip(0)).to(dtype)
        return x.to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, full, generator=g).bool()
    info = torch.iinfo(dtype)
    return torch.randint(info.min, info.max, full, generator=g, dtype=torch.int64).to(dtype)


def owners_of(plan):
    """Owner offsets the routes imply (SPEC 8: global_start + local_output_start)."""
    out = [0]
    for r in plan:
        out.append(out[-1] + r.local_length)
    return out


def python_forward(bank, plan, dim):
    return [bank.narrow(dim, r.global_start, r.global_end - r.global_start).contiguous() for r in plan]


def python_backward(grads, plan, dim, peer_order=None):
    """SPEC 8.2 in torch: own rows of the output gradient, then each peer's rows added with
    torch's CPU add_ in ascending rank (or `peer_order`)."""
    owners = owners_of(plan)
    out = []
    for r, route in enumerate(plan):
        g = grads[r].movedim(dim, 0)
        own = g[route.local_output_start:route.local_output_start + route.local_length].clone()
        for q in (peer_order or range(len(plan))):
            if q == r:
                continue
            lo, hi = max(owners[r], plan[q].global_start), min(owners[r + 1], plan[q].global_end)
            if hi > lo:
                peer = grads[q].movedim(dim, 0)
                own[lo - owners[r]:hi - owners[r]].add_(peer[lo - plan[q].global_start:hi - plan[q].global_start])
        out.append(own.movedim(0, dim).contiguous())
    return out


def output_grads(plan, dtype, shape, dim, seed=1):
    return [make_bank(r.global_end - r.global_start, dtype, shape, dim, seed + i) for i, r in enumerate(plan)]


PLANS = {
    "window": routes.plan_all("sliding_window", (0, 3, 11, 12, 20, 24), 4, 6, 9),
    "prefix": routes.plan_all("document_prefix", (0, 3, 11, 12, 20, 24), 4, 6, 2),
    "interval": routes.plan_all("interval", 3, [(0, 5), (0, 9), (2, 12), (6, 12)]),
    "gaps": routes.plan_all("interval", 0, [(0, 2), (0, 7), (2, 9), (2, 9)], owner_offsets=(0, 2, 2, 7, 9)),
    "none": routes.plan_all("interval", 3, [(0, 3), (3, 6), (6, 9)]),
}


# ---------------------------------------------------------------- against Python

@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("plan", sorted(PLANS))
@pytest.mark.parametrize("dim,shape", [(0, (3,)), (1, (2, 3)), (-1, (2,)), (0, ())])
def test_forward_and_backward_equal_python(dtype, plan, dim, shape):
    p = PLANS[plan]
    bank = make_bank(owners_of(p)[-1], dtype, shape, dim)
    assert_bitwise(oracle.dispatch_forward(bank, p, dim), python_forward(bank, p, dim))
    grads = output_grads(p, dtype, shape, dim)
    assert_bitwise(oracle.dispatch_backward(grads, p, dim), python_backward(grads, p, dim))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_the_cases_make_the_summation_order_matter(dtype):
    """The float cases above would catch another order: summing the peers in descending
    rank gives other bits here."""
    p = PLANS["window"]
    grads = output_grads(p, dtype, (64,), 0)
    got = oracle.dispatch_backward(grads, p)
    reversed_order = python_backward(grads, p, 0, peer_order=range(len(p) - 1, -1, -1))
    assert any(not torch.equal(bits(g), bits(w)) for g, w in zip(got, reversed_order))


def test_results_are_independent_of_the_inputs():
    p = PLANS["none"]
    bank = torch.arange(9.0)
    outs = oracle.dispatch_forward(bank, p)
    outs[0][0] = 100.0
    assert bank[0] == 0.0
    grads = [torch.ones(3) for _ in p]
    back = oracle.dispatch_backward(grads, p)
    back[1][0] = 5.0
    assert grads[1][0] == 1.0


def test_numpy_in_numpy_or_torch_out():
    p = PLANS["window"]
    bank = make_bank(24, torch.float32, (2,), dim=1)
    want = python_forward(bank, p, 1)
    as_numpy = oracle.dispatch_forward(bank.numpy(), p, dim=1, tensors="numpy")
    assert all(isinstance(a, np.ndarray) and a.flags.c_contiguous for a in as_numpy)
    assert all(np.array_equal(a, w.numpy()) for a, w in zip(as_numpy, want))
    assert_bitwise(oracle.dispatch_forward(bank.numpy(), p, dim=1), want)
    grads = output_grads(p, torch.float32, (2,), 1)
    assert_bitwise(oracle.dispatch_backward([g.numpy() for g in grads], p, dim=1),
                   python_backward(grads, p, 1))
    raw = hpref._tensors.to_raw(bank.movedim(1, 0).contiguous())
    assert_bitwise(oracle.dispatch_forward(raw, p), python_forward(bank.movedim(1, 0), p, 0))


def test_autograd_inputs_are_read_as_values():
    p = PLANS["window"]
    bank = torch.randn(24, 2, requires_grad=True)
    assert_bitwise(oracle.dispatch_forward(bank, p), python_forward(bank.detach(), p, 0))


@needs_original
def test_routes_of_the_original_are_accepted():
    p = [SEED.sliding_window_route((0, 3, 11, 12, 20, 24), 4, 6, r, 9) for r in range(6)]
    bank = make_bank(24, torch.float32)
    assert_bitwise(oracle.dispatch_forward(bank, p), oracle.dispatch_forward(bank, PLANS["window"]))


def test_refusals():
    p = PLANS["window"]
    for call, kind in (
        (lambda: oracle.dispatch_forward(torch.zeros(23), p), "oracle_mismatch"),
        (lambda: oracle.dispatch_forward(torch.zeros(25), p), "oracle_mismatch"),  # extra rows
        (lambda: oracle.dispatch_forward(torch.zeros(100), p), "oracle_mismatch"),
        (lambda: oracle.dispatch_forward(torch.zeros(24), p, dim=1), "oracle_mismatch"),
        (lambda: oracle.dispatch_forward(torch.zeros(24), p, dim=-2), "oracle_mismatch"),
        (lambda: oracle.dispatch_forward(torch.zeros(24), []), "oracle_mismatch"),
        (lambda: oracle.dispatch_forward(torch.zeros(24), p[:3] + p[4:]), "oracle_mismatch"),
        (lambda: oracle.dispatch_forward(torch.zeros(24), list(reversed(p))), "oracle_mismatch"),
        (lambda: oracle.dispatch_backward([torch.zeros(4)] * 6, p), "oracle_mismatch"),
        (lambda: oracle.dispatch_backward(output_grads(p, torch.float32, (), 0)[:5], p), "oracle_mismatch"),
        (lambda: oracle.dispatch_backward(
            output_grads(p, torch.float32, (), 0)[:5] + [torch.zeros(7, dtype=torch.float64)], p),
         "oracle_mismatch"),
    ):
        with pytest.raises(hpref.Error) as e:
            call()
        assert e.value.kind == kind, e.value
    broken = routes.Route(**{f: getattr(p[1], f) for f in routes.Route._fields[:3]},
                          local_output_start=0, send_offsets=p[1].send_offsets,
                          input_splits=p[1].input_splits, output_splits=p[1].output_splits,
                          needs_exchange=True)
    with pytest.raises(hpref.Error, match="route 1: local_output_start 0 differs"):
        oracle.dispatch_backward(output_grads(p, torch.float32, (), 0), [p[0], broken] + list(p[2:]))
    # The bank is the owner shards concatenated: a longer one is refused, not read in part.
    with pytest.raises(hpref.Error, match="the global bank has 25 rows but the routes' owner shards hold 24"):
        oracle.dispatch_forward(torch.zeros(25), p)
    with pytest.raises(TypeError, match="bank must be a torch tensor"):
        oracle.dispatch_forward([1.0, 2.0], p)
    with pytest.raises(ValueError, match="tensors must be"):
        oracle.dispatch_forward(torch.zeros(24), p, tensors="raw")


def _route(r, **changes):
    return routes.Route(**{**{f: getattr(r, f) for f in routes.Route._fields}, **changes})


def test_routes_that_disagree_with_each_other_are_refused():
    """Routes each of SPEC 7.1's shape, but not one plan: every pair must agree on the rows
    between them (the docstring's promise), else the original's dispatch moves other rows
    than the bank slice the oracle answers with (it answered, differently)."""
    plan = routes.plan_all("interval", 3, [(0, 3), (1, 6)])
    bank = torch.arange(6.0)
    # Rank 1 asks for rows [1, 3) of rank 0's shard; rank 0 sends [0, 2).
    shifted = [_route(plan[0], send_offsets=(0, 0)), plan[1]]
    assert [routes.problem(r, rank=i) for i, r in enumerate(shifted)] == ["", ""]
    with pytest.raises(hpref.Error, match=r"routes 0 and 1 disagree .* routes\[0\]\.send_offsets\[1\] = 0, "
                       r"but rank 0's owner shard \[0, 3\) meets rank 1's interval \[1, 6\) in 2 rows "
                       r"from offset 1") as e:
        oracle.dispatch_forward(bank, shifted)
    assert e.value.kind == "oracle_mismatch"
    with pytest.raises(hpref.Error, match="routes 0 and 1 disagree"):
        oracle.dispatch_backward([torch.ones(3), torch.ones(5)], shifted)
    # Three ranks: rank 2 takes one row from rank 0 and one from rank 1 where its interval
    # [2, 6) meets rank 1's shard only; each pair's counts agree, with the wrong rows.
    owners = routes.plan_all("interval", 2, [(0, 2), (2, 4), (4, 6)])
    three = [_route(owners[0], send_offsets=(0, 0, 1), input_splits=(0, 0, 1), needs_exchange=True),
             _route(owners[1], send_offsets=(0, 0, 1), input_splits=(0, 0, 1), needs_exchange=True),
             _route(owners[2], global_start=2, local_output_start=2, output_splits=(1, 1, 0),
                    needs_exchange=True)]
    assert [routes.problem(r, rank=i) for i, r in enumerate(three)] == ["", "", ""]
    with pytest.raises(hpref.Error, match=r"routes 0 and 2 disagree .*output_splits\[0\] = 1, "
                       r"routes\[0\]\.input_splits\[2\] = 1 .* in 0 rows") as e:
        oracle.dispatch_forward(torch.arange(6.0), three)
    assert e.value.kind == "oracle_mismatch"
    # One plan answers needs_exchange alike on every rank (else one rank's dispatch waits
    # on an exchange the others never start).
    none = PLANS["none"]
    with pytest.raises(hpref.Error, match="route 1: its needs_exchange is true but route 0's"):
        oracle.dispatch_forward(torch.arange(9.0), [none[0], _route(none[1], needs_exchange=True), none[2]])
    # Every plan the planners make agrees with itself.
    for name, p in PLANS.items():
        oracle.dispatch_forward(make_bank(owners_of(p)[-1], torch.float32), p)


@needs_original
def test_a_nan_stays_a_nan_but_its_bits_are_not_promised():
    """The documented exception to "bitwise torch's": a sum that is a NaN in torch is a NaN
    here, every other element bitwise torch's; the NaN's sign and payload may differ
    (torch's vectorised bfloat16 add writes 0xffff, its scalar one and the oracle 0x7fc0)."""
    plan = routes.plan_all("interval", 1, [(0, 1), (0, 2)])  # rank 1 receives row 0
    for dtype, payload in ((torch.bfloat16, 0x7f81), (torch.float16, 0x7c01), (torch.float32, None)):
        for width in (1, 64):
            g0 = torch.zeros(1, width, dtype=dtype)
            g1 = torch.ones(2, width, dtype=dtype)
            g1[0, ::3] = float("nan")
            g1[0, 1::3] = -float("nan")
            if payload is not None:
                g1[0, 2::3] = torch.tensor([payload], dtype=torch.int16).view(dtype)[0]
            want = g0.clone().add_(g1[:1])
            got = oracle.dispatch_backward([g0, g1], plan)[0]
            assert torch.equal(torch.isnan(got), torch.isnan(want)) and bool(torch.isnan(got)[0, 0])
            finite = torch.ones(1, width, dtype=dtype)
            g1[0] = 0.5
            assert torch.equal(bits(oracle.dispatch_backward([finite, g1], plan)[0]),
                               bits(finite.clone().add_(g1[:1])))
    doc = oracle.__doc__ + oracle.dispatch_backward.__doc__
    assert doc.count("NaN") >= 2


def test_dim_takes_numpy_and_torch_integers_not_bools():
    p = PLANS["window"]
    bank = make_bank(24, torch.float32, (2,), dim=1)
    want = python_forward(bank, p, 1)
    for dim in (np.int64(1), np.int32(-1), torch.tensor(1)):
        assert_bitwise(oracle.dispatch_forward(bank, p, dim), want)
    grads = output_grads(p, torch.float32, (2,), 1)
    assert_bitwise(oracle.dispatch_backward(grads, p, np.int64(1)), python_backward(grads, p, 1))
    for dim in (True, np.True_, 1.0, "1", torch.tensor(1.0)):
        with pytest.raises(TypeError, match="dim must be an int"):
            oracle.dispatch_forward(bank, p, dim)


def test_docstring_examples():
    for module in (oracle, routes):
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        assert result.attempted > 0 and result.failed == 0, module


# ---------------------------------------------------------------- against the original

class _World:
    """all_to_all_single between threads (one per rank): each posts its send buffer and
    splits at launch; wait() copies the peers' rows between two barriers."""

    def __init__(self, size):
        self.size = size
        self.barrier = threading.Barrier(size, timeout=30)
        self.posted = [None] * size


class _Work:
    def __init__(self, group, output, output_splits):
        self.group, self.output, self.output_splits = group, output, output_splits

    def wait(self):
        world, me = self.group.world, self.group.rank
        world.barrier.wait()
        cursor = 0
        for q in range(world.size):
            send, splits = world.posted[q]
            assert splits[me] == self.output_splits[q], (me, q, splits, self.output_splits)
            self.output.narrow(0, cursor, splits[me]).copy_(send.narrow(0, sum(splits[:me]), splits[me]))
            cursor += splits[me]
        world.barrier.wait()
        return True


class _FakeDist:
    @staticmethod
    def all_to_all_single(output, input, output_split_sizes, input_split_sizes, group, async_op):
        assert async_op and sum(input_split_sizes) == input.shape[0]
        group.world.posted[group.rank] = (input, list(input_split_sizes))
        return _Work(group, output, list(output_split_sizes))


def run_ranks(size, body):
    """body(group) on `size` threads, one per rank; their results in rank order."""
    world, results, errors = _World(size), [None] * size, []

    def run(rank):
        try:
            results[rank] = body(SimpleNamespace(world=world, rank=rank))
        except BaseException as e:  # noqa: BLE001 (reported below)
            errors.append(e)
            world.barrier.abort()

    threads = [threading.Thread(target=run, args=(r,)) for r in range(size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


def original_dispatch(bank, grads, plan, dim, monkeypatch):
    """The original's forward outputs and input gradients per rank (autograd for floating
    dtypes; its backward function called directly for the others)."""
    monkeypatch.setattr(SEED, "dist", _FakeDist)
    owners = owners_of(plan)
    differentiable = bank.dtype.is_floating_point or bank.dtype.is_complex

    def body(group):
        r = group.rank
        local = bank.narrow(dim, owners[r], owners[r + 1] - owners[r]).contiguous()
        if differentiable:
            local.requires_grad_(True)
        out = SEED.async_sequence_dispatch(local, dim, plan[r], group).wait()
        if differentiable:
            out.backward(grads[r])
            return out.detach(), local.grad
        if not plan[r].needs_exchange:
            return out, grads[r]
        ctx = SimpleNamespace(route=plan[r], group=group)
        moved = grads[r].movedim(dim, 0).contiguous()
        return out, SEED._SequenceDispatchWait.backward(ctx, moved)[0].movedim(0, dim).contiguous()

    results = run_ranks(len(plan), body)
    return [o for o, _ in results], [g for _, g in results]


@needs_original
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("plan", sorted(PLANS))
def test_equal_to_the_original_dispatch(dtype, plan, monkeypatch):
    p = PLANS[plan]
    for dim, shape in ((0, (3,)), (-1, (2,))):
        bank = make_bank(owners_of(p)[-1], dtype, shape, dim)
        grads = output_grads(p, dtype, shape, dim)
        outs, input_grads = original_dispatch(bank, grads, p, dim, monkeypatch)
        assert_bitwise(oracle.dispatch_forward(bank, p, dim), outs)
        assert_bitwise(oracle.dispatch_backward(grads, p, dim), input_grads)


if given is not None:
    @st.composite
    def plans(draw):
        """All ranks' routes of a generated window, prefix or interval configuration."""
        size = draw(st.integers(1, 6))
        length = draw(st.integers(1, 5))
        total = size * length
        inner = sorted(draw(st.sets(st.integers(1, max(total - 1, 1)), max_size=5)) - {total})
        boundaries = tuple([0] + [b for b in inner if b < total] + [total])
        kind = draw(st.sampled_from(["window", "prefix", "interval"]))
        if kind == "window":
            return routes.plan_all("sliding_window", boundaries, length, size,
                                   draw(st.integers(1, 3 * length)))
        if kind == "prefix":
            return routes.plan_all("document_prefix", boundaries, length, size, draw(st.sampled_from([1, 2])))
        owners = [0]
        for _ in range(size):
            owners.append(owners[-1] + draw(st.integers(0, 4)))
        intervals = [(draw(st.integers(0, owners[p])), draw(st.integers(owners[p + 1], owners[-1])))
                     for p in range(size)]
        return routes.plan_all("interval", 0, intervals, owner_offsets=owners)

    @needs_original
    @settings(max_examples=400, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(plans(), st.sampled_from([torch.float32, torch.bfloat16, torch.float16, torch.int32]),
           st.integers(0, 2**31))
    def test_generated_plans_equal_the_original_dispatch(p, dtype, seed):
        with pytest.MonkeyPatch.context() as monkeypatch:
            bank = make_bank(owners_of(p)[-1], dtype, (4,), 0, seed)
            grads = output_grads(p, dtype, (4,), 0, seed + 1)
            outs, input_grads = original_dispatch(bank, grads, p, 0, monkeypatch)
            assert_bitwise(oracle.dispatch_forward(bank, p), outs)
            assert_bitwise(oracle.dispatch_backward(grads, p), input_grads)
