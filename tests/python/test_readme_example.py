"""README "From Python": a PyTorch team's test of its context-parallel dispatch against
hpref.oracle, on 4 real gloo ranks. The implementation under test here is the original's
(../shared/original; skipped, saying so, where it is absent); yours goes in its place.
test_readme_shows_this_file keeps the README's copy of it true."""
# --- README example begins
import pathlib
import sys

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import hpref

ORIGINAL = pathlib.Path(__file__).resolve().parents[3] / "shared" / "original"  # the code under test
if not (ORIGINAL / "seed_sequence_dispatch.py").exists():
    pytest.skip(f"the original implementation is absent ({ORIGINAL})", allow_module_level=True)

BOUNDARIES, LOCAL, WORLD, WINDOW = (0, 3, 27, 28, 32), 8, 4, 11  # 4 documents, 4 ranks x 8 rows


def bank_and_grads():
    g = torch.Generator().manual_seed(0)
    routes = hpref.routes.plan_all("sliding_window", BOUNDARIES, LOCAL, WORLD, WINDOW)
    bank = torch.randn(LOCAL * WORLD, 16, generator=g)
    grads = [torch.randn(r.global_end - r.global_start, 16, generator=g) for r in routes]
    return routes, bank, grads


def rank_main(rank, store, out):
    sys.path.insert(0, str(ORIGINAL))
    from seed_sequence_dispatch import async_sequence_dispatch  # the implementation under test

    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=WORLD)
    routes, bank, grads = bank_and_grads()
    local = bank[rank * LOCAL:(rank + 1) * LOCAL].clone().requires_grad_()
    output = async_sequence_dispatch(local, 0, routes[rank], None).wait()  # hpref's routes
    output.backward(grads[rank])
    torch.save((output.detach(), local.grad), f"{out}/rank{rank}.pt")
    # Every rank done before any tears gloo down (pytorch/gloo#155: a rank that destroys its
    # group at once can fail a peer still in the last collective, "Connection closed by peer").
    leaving = dist.FileStore(f"{store}.leaving", WORLD)
    leaving.set(f"rank{rank}", "done")
    leaving.wait([f"rank{r}" for r in range(WORLD)])
    dist.destroy_process_group()


def test_dispatch_matches_the_oracle(tmp_path):
    mp.spawn(rank_main, args=(tmp_path / "store", tmp_path), nprocs=WORLD)
    routes, bank, grads = bank_and_grads()
    outputs = hpref.oracle.dispatch_forward(bank, routes)  # rows [global_start, global_end)
    inputs = hpref.oracle.dispatch_backward(grads, routes)  # summed in SPEC 8.2's order
    for rank in range(WORLD):
        output, grad = torch.load(f"{tmp_path}/rank{rank}.pt")
        assert torch.equal(output, outputs[rank])
        assert torch.equal(grad, inputs[rank])  # bitwise: the same float sums in the same order
# --- README example ends


def test_readme_shows_this_file():
    text = pathlib.Path(__file__).read_text()
    example = text[text.index("# --- README example begins\n") + 27:text.index("# --- README example ends")]
    readme = (pathlib.Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert example.strip() in readme, "README's From Python example differs from this file"
