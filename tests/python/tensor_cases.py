"""Helpers the pytest files share: bitwise tensor comparison, deterministic values of any
dtype, and the dispatch test data."""
import torch


def bits(t):
    """t's bytes as a flat uint8 tensor: torch.equal on two of them is bitwise (NaN, -0.0
    and every dtype included)."""
    return t.detach().contiguous().reshape(-1).view(torch.uint8)


def data(seed, dtype, shape=(6,)):
    """Deterministic values of any dtype from (seed, element index):
    integers below 251, exact in every dtype and in sums of a few ranks."""
    n = 1
    for s in shape:
        n *= s
    raw = (torch.arange(n, dtype=torch.int64) * 37 + seed * 101) % 251
    if dtype == torch.bool:
        return (raw % 2 == 1).reshape(shape)
    if dtype.is_complex:
        return torch.complex(raw.double(), -raw.double()).to(dtype).reshape(shape)
    return raw.to(dtype).reshape(shape)


def bank_and_grads(shape, dim, dtype, plan, seed):
    """A global sequence bank and every rank's output gradient for the routes `plan`, the same
    in every process: values of mixed magnitude, so float sums depend on their order. `shape`
    has None for the sequence dim (its length: the plan's rows)."""
    g = torch.Generator().manual_seed(seed)
    shape = [sum(r.local_length for r in plan) if d is None else d for d in shape]

    def values(s):
        scale = torch.pow(10.0, torch.randint(-3, 3, s, generator=g).double())
        return (torch.randn(s, generator=g, dtype=torch.float64) * scale).to(getattr(torch, dtype))

    bank = values(shape)
    grads = []
    for r in plan:
        s = list(shape)
        s[dim % len(s)] = r.global_end - r.global_start
        grads.append(values(s))
    return bank, grads
