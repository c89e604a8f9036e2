"""bench/python_sim: the cost of torch.distributed code on hpref's simulator (issue 12),
ratios measured in the same run.

  1. all_to_all_single on 8 ranks at 1 KiB and 16 MiB per rank, and all_gather_object of a
     small dict: per operation through torch.distributed on the simulator (hpref.sim.run +
     hpref._torch_pg), through hpref.sim.communicator() from Python (no torch), and the C++
     simulator's time for the same operation (bench_sim_collectives, same machine, same
     method: 3 operations to warm up, then rank 0 times N operations between barriers, and a
     last barrier keeps every rank alive until rank 0 has read its clock: a rank process's
     exit, on the CPU the run is pinned to, is per-run cost, not the operation's).
     Target: Python/torch <= 1.5x C++. Also the wall time of a whole hpref.sim.run of 8
     ranks making one all_reduce each (what a pytest case pays per seed); no peer.
  2. The original's 5-step data step (8 ranks, dp=2 x cp=4; tests/python/original_harness.py)
     on the simulator and on 8 real gloo processes (torch.multiprocessing), timed inside
     rank 0 between barriers. Target: simulator <= 3x gloo.

Run: ./dev bench python_sim [--skip-data-step] [--json FILE]
Needs build/release/bench/bench_sim_collectives (./dev bench python_sim builds it) and, for
part 2, ../shared/original."""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torch.distributed as dist

import hpref.sim as sim

ROOT = pathlib.Path(__file__).resolve().parents[1]
WORLD = 8


def iterations(nbytes: int) -> int:
    """bench_sim_collectives' schedule, so both sides time the same number of operations."""
    return 3 if nbytes >= (16 << 20) else 10 if nbytes >= (1 << 20) else 50


def cxx_rows(max_bytes: int) -> dict:
    """{(op, bytes per rank): microseconds} from bench_sim_collectives on 8 ranks."""
    exe = ROOT / "build" / "release" / "bench" / "bench_sim_collectives"
    if not exe.exists():
        sys.exit(f"python_sim: {exe} is not built (./dev bench python_sim builds it)")
    out = subprocess.run([str(exe), "--ranks", str(WORLD), "--max-bytes", str(max_bytes), "--no-mpi"],
                         capture_output=True, text=True, check=True).stdout
    rows, op = {}, None
    for line in out.splitlines():
        m = re.match(r"# (\w+), (\d+) ranks", line)
        if m:
            op = m.group(1)
            continue
        parts = line.split()
        if op and len(parts) >= 4 and parts[0].isdigit():
            rows[(op, int(parts[0]))] = float(parts[3])
    return rows


def timed_us(op, barrier, n: int) -> float:
    """us per call of op() over n calls on this rank's clock, after 3 warm-up calls (pages
    copied on first write, as bench_sim_collectives warms up), between barriers; a last
    barrier keeps every rank (a process teardown on the shared CPU) out of rank 0's clock."""
    for _ in range(3):
        op()
    barrier()
    start = time.perf_counter()
    for _ in range(n):
        op()
    barrier()
    elapsed = time.perf_counter() - start
    barrier()
    return elapsed / n * 1e6


def torch_all_to_all(rank: int, nbytes: int) -> float:
    """us per all_to_all_single of nbytes per rank (nbytes / 8 to each peer), rank 0's clock."""
    send = torch.full((nbytes,), rank, dtype=torch.uint8)
    recv = torch.empty(nbytes, dtype=torch.uint8)
    us = timed_us(lambda: dist.all_to_all_single(recv, send), dist.barrier, iterations(nbytes))
    assert recv[:: nbytes // WORLD].tolist() == list(range(WORLD))
    return us


def raw_all_to_all(rank: int, nbytes: int) -> float:
    """The same on the simulator's communicator from Python, without torch."""
    c = sim.communicator()
    w = c.world()
    send = np.full(nbytes, rank, dtype=np.uint8)
    recv = np.zeros(nbytes, dtype=np.uint8)
    counts = [nbytes // WORLD] * WORLD
    return timed_us(lambda: c.all_to_all_v(w, send.ctypes.data, counts, recv.ctypes.data, counts).wait(),
                    lambda: c.barrier(w).wait(), iterations(nbytes))


def torch_all_gather_object(rank: int) -> float:
    item = {"rank": rank, "tokens": 1024 + rank, "source": f"shard-{rank:05d}", "ok": True}
    out = [None] * WORLD
    us = timed_us(lambda: dist.all_gather_object(out, item), dist.barrier, 50)
    assert [o["rank"] for o in out] == list(range(WORLD))
    return us


def one_all_reduce(rank: int) -> float:
    t = torch.ones(4)
    dist.all_reduce(t)
    return t[0].item()


def whole_run_ms(runs: int = 5) -> float:
    """Median wall time of a whole hpref.sim.run on 8 ranks whose function makes one small
    all_reduce: forking the ranks, torch.distributed's set-up in each, the exits (what a
    pytest case with hpref_cluster pays per seed)."""
    times = []
    for _ in range(runs + 1):  # the first run imports what the ranks share: not counted
        start = time.perf_counter()
        result = sim.run(WORLD, one_all_reduce, seed=1)
        times.append(time.perf_counter() - start)
        assert result.values() == [float(WORLD)] * WORLD, result
    return sorted(times[1:])[runs // 2] * 1e3


def on_sim(fn, *args) -> float:
    result = sim.run(WORLD, fn, *args, seed=1)
    return result.values()[0]


# --- part 2: the original's data step ---------------------------------------------------

def _harness():
    sys.path.insert(0, str(ROOT / "tests" / "python"))
    import original_harness as H
    return H


def timed_data_step(rank: int, options) -> float:
    H = _harness()
    dist.barrier()
    start = time.perf_counter()
    H.data_step(rank, options)
    dist.barrier()
    elapsed = time.perf_counter() - start
    dist.barrier()
    return elapsed


def _gloo_rank(rank: int, store: str, out: str, options) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=WORLD)
    seconds = timed_data_step(rank, options)
    if rank == 0:
        pathlib.Path(out).write_text(str(seconds))
    dist.destroy_process_group()


def data_step_times() -> tuple:
    H = _harness()
    if not H.original_present():
        return None, None
    H.load_original()
    H.warm_torch()
    options = H.StepOptions(seed=1, steps=5, keep=False)
    on_simulator = sim.run(WORLD, timed_data_step, options, seed=1).values()[0]
    import torch.multiprocessing as mp
    with tempfile.TemporaryDirectory() as tmp:
        mp.spawn(_gloo_rank, args=(f"{tmp}/store", f"{tmp}/t", options), nprocs=WORLD, join=True)
        on_gloo = float(pathlib.Path(f"{tmp}/t").read_text())
    return on_simulator, on_gloo


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-data-step", action="store_true", help="only part 1")
    parser.add_argument("--json", help="also write the rows as JSON to this file")
    args = parser.parse_args(argv)
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    torch.set_num_threads(1)

    cxx = cxx_rows(16 << 20)
    rows = []
    for nbytes in (1 << 10, 16 << 20):
        t = on_sim(torch_all_to_all, nbytes)
        r = on_sim(raw_all_to_all, nbytes)
        rows.append({"op": f"all_to_all_single {nbytes} B/rank", "torch_us": t, "raw_us": r,
                     "cxx_us": cxx[("all_to_all_v", nbytes)], "target": 1.5})
    # all_gather_object = an all_gather of the sizes and one of the padded pickles; the C++
    # floor: two of bench_sim_collectives' smallest all_gathers.
    rows.append({"op": "all_gather_object (small dict)", "torch_us": on_sim(torch_all_gather_object),
                 "raw_us": None, "cxx_us": 2 * cxx[("all_gather", 1024)], "target": 1.5})
    print(f"python_sim: {WORLD} ranks, torch {torch.__version__}; us per operation (rank 0's clock)")
    print(f"{'operation':34} {'torch':>10} {'python':>10} {'C++':>10} {'torch/C++':>10}  target")
    for r in rows:
        ratio = r["torch_us"] / r["cxx_us"]
        raw = f"{r['raw_us']:10.1f}" if r["raw_us"] else f"{'-':>10}"
        verdict = "met" if ratio <= r["target"] else "NOT met"
        print(f"{r['op']:34} {r['torch_us']:10.1f} {raw} {r['cxx_us']:10.1f} {ratio:9.2f}x  <={r['target']}x {verdict}")
    run_ms = whole_run_ms()
    print(f"hpref.sim.run, {WORLD} ranks, one all_reduce each: {run_ms:.1f} ms a run (median of 5)")
    rows.append({"op": "hpref.sim.run, one all_reduce", "run_ms": run_ms})
    if not args.skip_data_step:
        s, g = data_step_times()
        if s is None:
            print("python_sim: data step skipped: ../shared/original is absent")
        else:
            verdict = "met" if s <= 3 * g else "NOT met"
            print(f"original data step, 5 steps, 8 ranks: simulator {s * 1e3:.1f} ms, gloo {g * 1e3:.1f} ms, "
                  f"ratio {s / g:.2f}x (target <= 3x: {verdict})")
            rows.append({"op": "original data step (5 steps)", "sim_s": s, "gloo_s": g})
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
