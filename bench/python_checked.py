"""Overhead of hpref's checked mode over plain gloo (issue 13): 4 gloo processes on this
machine, each operation timed per iteration on plain gloo groups and on hpref_checked groups
of the same ranks (hpref.torch.checked), interleaved in rounds so both see the same load:
all_to_all_single at 1 KiB and 16 MiB per rank, all_reduce at 1 KiB. Prints one row per
operation (median seconds per call, both ways) and the ratio checked / plain.

    ./dev bench python_checked [--iters N]
"""
from __future__ import annotations

import argparse
import os
import socket
import statistics
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

WORLD = 4  # --ranks


def cases():
    return [("all_to_all_single 1 KiB", "a2a", 1024), ("all_to_all_single 16 MiB", "a2a", 16 << 20),
            ("all_reduce 1 KiB", "ar", 1024)]


def one(kind, nbytes, group):
    if kind == "a2a":
        x = torch.zeros(nbytes, dtype=torch.uint8)
        out = torch.empty_like(x)
        return lambda: dist.all_to_all_single(out, x, group=group)
    t = torch.zeros(nbytes // 4, dtype=torch.float32)
    return lambda: dist.all_reduce(t, group=group)


def worker(rank, port, iters, world, queue):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), GLOO_SOCKET_IFNAME="lo")
    torch.set_num_threads(1)
    import hpref.torch as ht
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=timedelta(seconds=120))
    plain = dist.new_group(list(range(world)), backend="gloo")
    checked = ht.checked(plain)
    rows = []
    for name, kind, nbytes in cases():
        n = max(3, iters // 16) if nbytes > 1 << 20 else iters
        times = {"plain": [], "checked": []}
        fns = {"plain": one(kind, nbytes, plain), "checked": one(kind, nbytes, checked)}
        for f in fns.values():  # warm-up
            for _ in range(3):
                f()
        for _ in range(n):
            for way in ("plain", "checked"):
                dist.barrier(group=plain)
                t0 = time.perf_counter()
                fns[way]()
                times[way].append(time.perf_counter() - t0)
        rows.append((name, n, statistics.median(times["plain"]), statistics.median(times["checked"])))
    if rank == 0:
        queue.put(rows)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--iters", type=int, default=200, help="timed calls per 1 KiB case (16 MiB: iters / 16)")
    ap.add_argument("--ranks", type=int, default=WORLD, help="gloo processes (default 4)")
    args = ap.parse_args()
    if args.ranks < 2:
        ap.error(f"--ranks must be at least 2, got {args.ranks}")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    mp.spawn(worker, args=(port, args.iters, args.ranks, queue), nprocs=args.ranks)
    rows = queue.get()
    print(f"# torch {torch.__version__}, {args.ranks} gloo ranks on one host, {os.cpu_count()} cores, "
          f"send-buffer checks {'off' if os.environ.get('HPREF_CHECKED_BUFFERS') == '0' else 'on'}")
    print(f"{'operation':28} {'iters':>6} {'plain s':>12} {'checked s':>12} {'ratio':>7}")
    for name, n, plain, checked in rows:
        print(f"{name:28} {n:6d} {plain:12.6f} {checked:12.6f} {checked / plain:7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
