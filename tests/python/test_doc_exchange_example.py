"""docs/python.md "The exchange, end to end": one HPB1 segment per peer through one
all_to_all_single (sizes first), merged with decode_received straight from the received
uint8 tensor; this file runs the document's example on 4 simulated ranks and checks the
document shows it verbatim."""
import os
import pathlib

# --- docs example begins
import numpy as np
import torch
import torch.distributed as dist

import hpref.codec


def exchange_payloads(rank, items_for):
    """Sends items_for(rank, peer) to each peer as one HPB1 segment, all in one
    all_to_all_single; returns the {key: value} this rank received, merged (SPEC 2.5)."""
    world = dist.get_world_size()
    segments = [hpref.codec.encode(items_for(rank, peer)) for peer in range(world)]
    send_sizes = torch.tensor([len(s) for s in segments])
    recv_sizes = torch.empty(world, dtype=torch.int64)
    dist.all_to_all_single(recv_sizes, send_sizes)  # what each peer sends this rank
    send = torch.from_numpy(np.frombuffer(b"".join(segments), dtype=np.uint8).copy())
    recv = torch.empty(int(recv_sizes.sum()), dtype=torch.uint8)
    dist.all_to_all_single(recv, send, recv_sizes.tolist(), send_sizes.tolist())
    return hpref.codec.decode_received(recv, recv_sizes.tolist())  # tensors are views of recv
# --- docs example ends

import hpref.sim  # noqa: E402


def items_for(rank, peer):
    """Rank `rank`'s items for `peer`: one sample keyed (100 * rank + peer, 0)."""
    return [((100 * rank + peer, 0), {"tokens": torch.arange(rank + peer), "source": rank})]


def run_exchange(rank):
    dist.init_process_group("gloo")  # served by the simulator inside hpref.sim.run
    return exchange_payloads(rank, items_for)


def test_every_rank_receives_each_peers_items():
    result = hpref.sim.run(4, run_exchange, seed=3)
    for rank, got in enumerate(result.values()):
        _check(rank, got)


def _check(rank, got):
    assert sorted(got) == [(100 * p + rank, 0) for p in range(4)], sorted(got)
    for p in range(4):
        assert got[(100 * p + rank, 0)]["tokens"].tolist() == list(range(p + rank))
        assert got[(100 * p + rank, 0)]["source"] == p


def _gloo_rank(rank, store, out):
    try:
        dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=4)
        _check(rank, exchange_payloads(rank, items_for))
        dist.destroy_process_group()
        out.write_text("ok")
    except BaseException as e:  # noqa: BLE001 - reported to the parent
        out.write_text(f"{type(e).__name__}: {e}")
    finally:
        os._exit(0)


def test_the_same_code_on_4_real_gloo_processes(tmp_path):
    # The document says the code is the same on real gloo: 4 forked processes, a FileStore.
    ctx = torch.multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_gloo_rank, args=(r, tmp_path / "store", tmp_path / f"rank{r}"))
             for r in range(4)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(120)
        if proc.is_alive():
            proc.kill()
    assert [(tmp_path / f"rank{r}").read_text() if (tmp_path / f"rank{r}").exists() else "hung"
            for r in range(4)] == ["ok"] * 4


def test_the_document_shows_this_file():
    text = pathlib.Path(__file__).read_text()
    begin = "# --- docs example begins\n"
    example = text[text.index(begin) + len(begin):text.index("# --- docs example ends")]
    doc = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "python.md").read_text()
    assert example.strip() in doc, "docs/python.md's exchange example differs from this file"
