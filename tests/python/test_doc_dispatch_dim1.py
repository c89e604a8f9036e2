"""docs/python.md, Oracle: sequence dispatch along dim=1 of a [batch, seq, hidden] tensor. The
document's block is taken as it is shown and run, its `your_dispatch` being in turn a
dispatch written here from SPEC 8 (an autograd Function over torch.distributed's
all_to_all_single) and the original's async_sequence_dispatch (../shared/original; skipped,
saying so, where it is absent): the block's own asserts check the oracle's answers, and every
simulated rank's output and input gradient against them."""
import pathlib
import re
import sys
import traceback

import pytest

torch = pytest.importorskip("torch", reason="the example dispatches torch tensors; torch is not importable")
import torch.distributed as dist  # noqa: E402

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "python.md"
ORIGINAL = pathlib.Path(__file__).resolve().parents[3] / "shared" / "original"


def example() -> str:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    found = [b for b in blocks if "oracle.dispatch_forward(bank, plan, dim=1)" in b]
    assert len(found) == 1, "docs/python.md has no (or more than one) dim=1 dispatch example"
    return found[0]


class _Spec8Dispatch(torch.autograd.Function):
    """SPEC 8.1-8.2 on the default group: rows to each peer from the shard, the output
    received[:local_output_start] ++ shard ++ received[local_output_start:]; backward sends the
    rows outside the shard back and adds them at their send offsets, peers in rank order."""

    @staticmethod
    def forward(ctx, local, dim, route):
        ctx.dim, ctx.route = dim, route
        x = local.movedim(dim, 0).contiguous()
        if not route.needs_exchange:
            return local.clone()
        send = torch.cat([x[o:o + n] for o, n in route.owner_ranges() if n] or [x[:0]])
        received = x.new_empty((sum(route.output_splits), *x.shape[1:]))
        dist.all_to_all_single(received, send, list(route.output_splits), list(route.input_splits))
        s = route.local_output_start
        return torch.cat([received[:s], x, received[s:]]).movedim(0, dim).contiguous()

    @staticmethod
    def backward(ctx, grad):
        dim, route = ctx.dim, ctx.route
        if not route.needs_exchange:
            return grad, None, None
        g = grad.movedim(dim, 0).contiguous()
        s, n = route.local_output_start, route.local_length
        own = g[s:s + n].clone()
        back = g.new_empty((sum(route.input_splits), *g.shape[1:]))
        dist.all_to_all_single(back, torch.cat([g[:s], g[s + n:]]), list(route.input_splits),
                               list(route.output_splits))
        at = 0
        for offset, count in route.owner_ranges():
            own[offset:offset + count] += back[at:at + count]
            at += count
        return own.movedim(0, dim), None, None


def spec8_dispatch(tensor, sequence_dim, route):
    return _Spec8Dispatch.apply(tensor, sequence_dim, route)


def original_dispatch(tensor, sequence_dim, route):
    sys.path.insert(0, str(ORIGINAL))
    from seed_sequence_dispatch import async_sequence_dispatch

    return async_sequence_dispatch(tensor, sequence_dim, route, None).wait()


def run_example(your_dispatch):
    namespace = {"__name__": "doc_dispatch_dim1", "your_dispatch": your_dispatch}
    exec(compile(example(), str(DOC), "exec"), namespace)
    return namespace


def test_the_example_with_a_spec8_dispatch():
    run_example(spec8_dispatch)


def test_the_example_with_the_originals_dispatch():
    if not (ORIGINAL / "seed_sequence_dispatch.py").exists():
        pytest.skip(f"the original implementation is absent ({ORIGINAL})")
    run_example(original_dispatch)


def _dispatch_without_the_peers_gradient(tensor, sequence_dim, route):
    """The forward right, the backward keeping the shard's own rows only (what the peers send
    back is lost): the block must fail on it."""
    output = spec8_dispatch(tensor.detach(), sequence_dim, route)
    before = route.local_output_start
    after = output.shape[sequence_dim] - before - route.local_length
    shard = torch.nn.functional.pad(tensor, (0, 0, before, after))  # along dim 1 of [b, s, h]
    return output - shard.detach() + shard


def test_a_dispatch_that_loses_the_peers_gradient_fails_the_example():
    with pytest.raises(AssertionError) as failed:
        run_example(_dispatch_without_the_peers_gradient)
    line = [f.lineno for f in traceback.extract_tb(failed.value.__traceback__) if f.filename == str(DOC)][-1]
    assert "torch.equal(grad, grads[rank])" in example().splitlines()[line - 1]  # the gradients differ
