"""The original's async_sequence_dispatch, forward and backward, on 4 real gloo ranks
(torch.multiprocessing, a file store in tmp_path), against hpref.oracle: every rank's
output and input gradient compared bitwise, for sliding-window and document-prefix routes
in float32, bfloat16 and float16 (SPEC 8.1-8.2: the oracle sums in the original's order).

Skips, saying why, where ../shared/original or torch (with torch.distributed's gloo) is
absent."""
from __future__ import annotations

import os
import pathlib
import sys

import pytest

torch = pytest.importorskip("torch", reason="the original's dispatch runs on torch; torch is not importable")
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

import hpref.oracle as oracle  # noqa: E402
import hpref.routes as routes  # noqa: E402
from tensor_cases import bank_and_grads, bits  # noqa: E402

ORIGINAL = pathlib.Path(__file__).resolve().parents[3] / "shared" / "original"
if not (ORIGINAL / "seed_sequence_dispatch.py").exists():
    pytest.skip(f"the original implementation is absent ({ORIGINAL})", allow_module_level=True)
if not dist.is_available() or not dist.is_gloo_available():
    pytest.skip("torch.distributed with gloo is not available in this torch build", allow_module_level=True)

WORLD = 4
BOUNDARIES = (0, 3, 27, 28, 32)  # 4 documents over 4 ranks of 8 rows, one across all
LOCAL = 8
# (name, route kind, window or ratio, sequence dim, bank shape with None for the sequence)
CASES = [("window", "sliding_window", 11, 0, (None, 5)),
         ("window-dim1", "sliding_window", 3, 1, (2, None, 3)),
         ("prefix", "document_prefix", 2, 0, (None, 5)),
         ("prefix-dim-2", "document_prefix", 1, -2, (None, 4))]
DTYPES = ("float32", "bfloat16", "float16")


def plan_of(kind, last):
    """The original's routes, rank by rank (the workers use them; the parent checks they
    equal hpref's)."""
    import seed_sequence_dispatch as seed

    one = seed.sliding_window_route if kind == "sliding_window" else seed.document_prefix_route
    return [one(BOUNDARIES, LOCAL, WORLD, r, last) for r in range(WORLD)]


def _leave_together(path, rank, timeout):
    """Every rank done before any destroys its group. A gloo barrier then
    destroy_process_group is racy (pytorch/gloo#155, open: a rank that tears its context
    down as soon as its barrier returns can fail a peer still inside it, "Connection closed
    by peer"; CI saw it once on torch 1.13). The ranks meet in a file store instead, outside
    gloo's sockets: when it returns, no rank has a gloo operation in flight."""
    meeting = dist.FileStore(path, WORLD)
    meeting.set(f"left{rank}", "1")
    meeting.wait([f"left{r}" for r in range(WORLD)], timeout)


def _worker(rank, store, out_dir):
    """One gloo rank: every case's dispatch output and input gradient, saved to out_dir."""
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    sys.path.insert(0, str(ORIGINAL))
    import seed_sequence_dispatch as seed

    torch.set_num_threads(1)
    from datetime import timedelta

    # A deadline for a hang, not a speed bound: under CI's load (an ASan build beside) four
    # torch imports and gloo rendezvous once took longer than 60 s.
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=WORLD,
                            timeout=timedelta(seconds=300))
    results = {}
    try:
        for seed_value, (name, kind, last, dim, shape) in enumerate(CASES):
            plan = plan_of(kind, last)
            owners = [0]
            for r in plan:
                owners.append(owners[-1] + r.local_length)
            for dtype in DTYPES:
                bank, grads = bank_and_grads(shape, dim, dtype, plan, seed_value)
                local = bank.narrow(dim, owners[rank], owners[rank + 1] - owners[rank]).contiguous()
                local.requires_grad_(True)
                try:
                    out = seed.async_sequence_dispatch(local, dim, plan[rank], None).wait()
                except RuntimeError as e:  # refused locally, before any byte moves, on every rank
                    if "Invalid scalar type" not in str(e):
                        raise
                    results[(name, dtype)] = f"gloo of torch {torch.__version__}: {e}"
                    continue
                out.backward(grads[rank])
                results[(name, dtype)] = (out.detach().clone(), local.grad.clone())
        _leave_together(store + ".leave", rank, timedelta(seconds=300))
    finally:
        dist.destroy_process_group()
    torch.save(results, os.path.join(out_dir, f"rank{rank}.pt"))


@pytest.fixture(scope="module")
def gloo_results(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gloo")
    sys.path.insert(0, str(ORIGINAL))
    mp.spawn(_worker, args=(str(tmp / "store"), str(tmp)), nprocs=WORLD, join=True)
    return [torch.load(str(tmp / f"rank{r}.pt")) for r in range(WORLD)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", range(len(CASES)), ids=[c[0] for c in CASES])
def test_gloo_dispatch_equals_the_oracle_bitwise(gloo_results, case, dtype):
    name, kind, last, dim, shape = CASES[case]
    plan = routes.plan_all(kind, BOUNDARIES, LOCAL, WORLD, last)
    assert list(plan) == plan_of(kind, last)
    assert any(r.needs_exchange and sum(r.output_splits) > 0 for r in plan)
    bank, grads = bank_and_grads(shape, dim, dtype, plan, case)
    forward = oracle.dispatch_forward(bank, plan, dim)
    backward = oracle.dispatch_backward(grads, plan, dim)
    refused = gloo_results[0][(name, dtype)]
    if isinstance(refused, str):  # torch 1.13's gloo has no bfloat16 all_to_all
        assert dtype == "bfloat16" and torch.__version__ < "2", refused
        pytest.skip(f"the original cannot run here: {refused}")
    for rank in range(WORLD):
        out, grad = gloo_results[rank][(name, dtype)]
        assert out.dtype == forward[rank].dtype and out.shape == forward[rank].shape
        assert torch.equal(bits(out), bits(forward[rank])), (name, dtype, rank)
        assert grad.dtype == backward[rank].dtype and grad.shape == backward[rank].shape
        assert torch.equal(bits(grad), bits(backward[rank])), (name, dtype, rank)


@pytest.mark.parametrize("kind,last", [("sliding_window", 11), ("document_prefix", 2)])
def test_some_gradient_sums_three_or_more_terms(kind, last):
    """The cases above exercise the order of a float sum: some row is its owner's and two
    peers' (a sum of two terms would be the same in either order)."""
    plan = routes.plan_all(kind, BOUNDARIES, LOCAL, WORLD, last)
    rows = sum(r.local_length for r in plan)
    counts = [sum(1 for q in plan if q.global_start <= row < q.global_end) for row in range(rows)]
    assert max(counts) >= 3
