"""The same torch.distributed code on hpref.sim.run as on real gloo: a test helper shared by
test_torch_pg.py and test_torch_pg_programs.py."""
import pytest
import torch.distributed as dist


def values_on_the_simulator(world, fn, seed):
    """What ``fn(rank)`` returns on each of ``world`` simulated ranks, after the code's own
    ``init_process_group("gloo")`` (the code as it is on gloo); the run must succeed."""
    sim = pytest.importorskip("hpref.sim", reason="hpref.sim (the simulator binding) is not built")

    def rank_main(rank):
        dist.init_process_group("gloo")
        return fn(rank)

    result = sim.run(world, rank_main, seed=seed)
    assert result.ok, [(r.rank, r.status, r.message) for r in result.ranks]
    return result.values()
