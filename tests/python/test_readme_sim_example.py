"""README "Test your own PyTorch code": torch.distributed code run unchanged on simulated
ranks with hpref.sim.run and the pytest plugin; this file runs the README's example and
checks the README shows it verbatim."""
import pathlib

# --- README example begins
import pytest
import torch
import torch.distributed as dist

import hpref
import hpref.sim


def exchange(rank, bug=False):
    dist.init_process_group("gloo")  # your code as it is: every group is served by the simulator
    world = dist.get_world_size()
    send = [rank + 1] * world  # rank r sends r + 1 rows to every peer
    if bug and rank == 1:
        send[3] += 1  # a stale split on one rank
    recv = [peer + 1 for peer in range(world)]
    out = torch.empty(sum(recv))
    dist.all_to_all_single(out, torch.full((sum(send),), float(rank)), recv, send)
    return out.tolist()


def test_exchange():
    result = hpref.sim.run(4, exchange, seed=1)
    assert result.ok and result.values()[0] == [0, 1, 1, 2, 2, 2, 3, 3, 3, 3]


def test_a_stale_split_is_named_not_a_hang():
    result = hpref.sim.run(4, exchange, True, seed=1)
    assert result.failure == "collective mismatch"
    assert "rank 1 sends 12 bytes to rank 3, which expects 8" in result.ranks[0].message
    with pytest.raises(hpref.CommMismatch):
        result.values()


@pytest.mark.hpref_cluster(world_size=4, seeds=range(1, 33))
def test_exchange_on_32_schedules(rank):
    assert exchange(rank)[:3] == [0, 1, 1]
# --- README example ends


def test_readme_shows_this_file():
    text = pathlib.Path(__file__).read_text()
    example = text[text.index("# --- README example begins\n") + 27:text.index("# --- README example ends")]
    readme = (pathlib.Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert example.strip() in readme, "README's simulator example differs from this file"
