"""Random torch.distributed programs, the same on real gloo and on hpref.sim.run (issue 12's
promise that a PyTorch team's own code runs unchanged on the simulator): seeded programs of
all_reduce, broadcast, all_gather (list, and on torch 2.x into one tensor),
all_to_all_single (even and uneven splits), on torch 2.x all_to_all (list; equal pieces, as
gloo asks), barrier, all_gather_object and broadcast_object_list (objects of another size
on each rank), new_group, sync and async (waited one operation later), on the
world and on subgroups, with tensors laid out as real code lays them out - whole tensors,
slices at an offset into a larger one, pieces of one buffer in order (which hpref hands to
the communicator as one buffer) and out of order or with gaps (which it stages). Every
rank's outputs must equal gloo's exactly: values are small integers, so sums are exact in
any order. Only what gloo itself runs is drawn (docs/python.md lists what hpref refuses).

One spawn of 4 gloo ranks and one simulated run execute every program, and one more spawn
with every group checked (hpref.torch.enable): checked gloo must give plain gloo's outputs.
A program's seed and operation index are in each result's name, so a difference names the
operation."""
from __future__ import annotations

import collections
import json
import os
import random
from datetime import timedelta

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
from sim_code import values_on_the_simulator  # noqa: E402
from tensor_cases import data  # noqa: E402

TORCH2 = int(torch.__version__.split(".")[0]) >= 2
WORLD = 4
SEEDS = range(1, 9)  # programs
OPS = 40             # operations per program

REDUCE_DTYPES = [torch.int32, torch.int64, torch.float32, torch.float64]
MOVE_DTYPES = REDUCE_DTYPES + [torch.uint8, torch.int8, torch.float16]  # gloo has no int16
if TORCH2:  # 1.13's gloo has no bfloat16 or bool, nor all_gather_into_tensor
    MOVE_DTYPES += [torch.bfloat16, torch.bool]
REDUCE_OPS = {"sum": dist.ReduceOp.SUM, "min": dist.ReduceOp.MIN, "max": dist.ReduceOp.MAX}


def placed(rng, tensor):
    """``tensor`` as real code may hold it: itself, or a contiguous slice at an offset into a
    larger buffer (the data the same either way)."""
    if rng.random() < 0.5 or tensor.numel() == 0:
        return tensor
    before, after = rng.randint(1, 5), rng.randint(0, 5)
    buf = torch.zeros(before + tensor.numel() + after, dtype=tensor.dtype)
    view = buf[before:before + tensor.numel()].view(tensor.shape)
    view.copy_(tensor)
    return view


def pieces(rng, sizes, dtype, cols):
    """Output (or input) tensors of ``sizes[i] x cols`` elements, laid out one of four ways:
    separate tensors, pieces of one buffer in order, in a shuffled order, or with gaps."""
    way = rng.choice(["separate", "in_order", "shuffled", "gaps"])
    if way == "separate":
        return [torch.zeros(s, cols, dtype=dtype) for s in sizes], way
    gap = 1 if way == "gaps" else 0
    order = list(range(len(sizes)))
    if way == "shuffled":
        rng.shuffle(order)
    start, spans = 0, {}
    for i in order:
        spans[i] = (start, start + sizes[i])
        start += sizes[i] + gap
    buf = torch.zeros(start, cols, dtype=dtype)
    return [buf[spans[i][0]:spans[i][1]] for i in range(len(sizes))], way


def an_object(rng):
    """A picklable object of a random size: what all_gather_object and
    broadcast_object_list carry (each rank's of another length)."""
    return {"ints": [rng.randint(-9, 9) for _ in range(rng.randint(0, 40))],
            "text": "x" * rng.randint(0, 300), "nested": (rng.random() < 0.5, None, rng.randint(0, 2 ** 40))}


def program(seed):
    """The operations of program ``seed``: the same list on every rank."""
    rng = random.Random(seed)
    subsets = [sorted(rng.sample(range(WORLD), rng.randint(2, WORLD - 1))) for _ in range(2)]
    ops = []
    for i in range(OPS):
        kinds = ["all_reduce", "broadcast", "all_gather", "all_to_all_single", "barrier",
                 "all_gather_object", "broadcast_object_list"]
        if TORCH2:  # 1.13's gloo has neither
            kinds += ["all_gather_into_tensor", "all_to_all"]
        group = rng.choice([None, None, 0, 1])
        members = list(range(WORLD)) if group is None else subsets[group]
        n = len(members)
        op = {"i": i, "kind": rng.choice(kinds), "group": group, "members": members,
              "async": rng.random() < 0.3, "seed": seed * 1000 + i, "cols": rng.randint(1, 3)}
        if op["kind"] == "all_reduce":
            op.update(dtype=rng.choice(REDUCE_DTYPES), red=rng.choice(sorted(REDUCE_OPS)),
                      rows=rng.randint(0, 5))
        elif op["kind"] == "broadcast":
            op.update(dtype=rng.choice(MOVE_DTYPES), src=rng.choice(members), rows=rng.randint(0, 5))
        elif op["kind"] in ("all_gather", "all_gather_into_tensor"):
            # (1.13's gloo dies of SIGFPE gathering empty tensors)
            op.update(dtype=rng.choice(MOVE_DTYPES), rows=rng.randint(0 if TORCH2 else 1, 4),
                      own_piece=rng.random() < 0.3)
        elif op["kind"] == "broadcast_object_list":
            op.update(src=rng.choice(members), count=rng.randint(1, 3))
        elif op["kind"] in ("all_to_all_single", "all_to_all"):
            # gloo's list all_to_all takes equal pieces only
            even = op["kind"] == "all_to_all" or rng.random() < 0.3
            rows = rng.randint(0, 3)
            op.update(dtype=rng.choice(MOVE_DTYPES), even=even,
                      counts=[[rows if even else rng.randint(0, 3) for _ in range(n)] for _ in range(n)])
        ops.append(op)
    return subsets, ops


def left(outs):
    """What an operation left in its output tensors, comparable across processes."""
    return [(str(t.dtype), t.tolist()) for t in outs]


def run_program(seed, rank):
    """Runs program ``seed`` on this rank; {"<seed>.<op>": what the operation left}."""
    subsets, ops = program(seed)
    groups = [dist.new_group(s) for s in subsets]  # every rank, in the same order
    rng = random.Random(seed * 7919 + rank)  # layouts: each rank its own
    results, pending = {}, []
    for op in ops:
        if rank not in op["members"]:
            continue
        group = None if op["group"] is None else groups[op["group"]]
        me = op["members"].index(rank)
        n, cols, kind = len(op["members"]), op["cols"], op["kind"]
        name = f"{seed}.{op['i']}.{kind}"
        if kind == "barrier":
            work, outs = dist.barrier(group=group, async_op=op["async"]), []
        elif kind in ("all_gather_object", "broadcast_object_list"):  # no async form
            obj_rng = random.Random(op["seed"] * 31 + rank)  # each rank its own objects, own sizes
            if kind == "all_gather_object":
                got = [None] * n
                dist.all_gather_object(got, an_object(obj_rng), group=group)
            else:
                got = [an_object(obj_rng) for _ in range(op["count"])]
                dist.broadcast_object_list(got, src=op["src"], group=group)
            results[name] = got
            continue
        elif kind == "all_reduce":
            t = placed(rng, data(op["seed"] + rank, op["dtype"], (op["rows"], cols)))
            work, outs = dist.all_reduce(t, op=REDUCE_OPS[op["red"]], group=group, async_op=op["async"]), [t]
        elif kind == "broadcast":
            t = placed(rng, data(op["seed"] + rank, op["dtype"], (op["rows"], cols)))
            work, outs = dist.broadcast(t, src=op["src"], group=group, async_op=op["async"]), [t]
        elif kind == "all_gather":
            out, way = pieces(rng, [op["rows"]] * n, op["dtype"], cols)
            mine = data(op["seed"] + rank, op["dtype"], (op["rows"], cols))
            if op["own_piece"]:  # the input is this rank's own piece of the output
                out[me].copy_(mine)
                mine = out[me]
            else:
                mine = placed(rng, mine)
            work, outs = dist.all_gather(out, mine, group=group, async_op=op["async"]), out
            name += f".{way}"
        elif kind == "all_gather_into_tensor":
            out = torch.zeros(n * op["rows"], cols, dtype=op["dtype"])
            mine = data(op["seed"] + rank, op["dtype"], (op["rows"], cols))
            if op["own_piece"]:
                out[me * op["rows"]:(me + 1) * op["rows"]].copy_(mine)
                mine = out[me * op["rows"]:(me + 1) * op["rows"]]
            else:
                mine = placed(rng, mine)
            work = dist.all_gather_into_tensor(out, mine, group=group, async_op=op["async"])
            outs = [out]
        elif kind == "all_to_all_single":
            send_rows = op["counts"][me]
            recv_rows = [op["counts"][j][me] for j in range(n)]
            x = placed(rng, data(op["seed"] + rank, op["dtype"], (sum(send_rows), cols)))
            out = placed(rng, torch.zeros(sum(recv_rows), cols, dtype=op["dtype"]))
            splits = (None, None) if op["even"] else (recv_rows, send_rows)
            work = dist.all_to_all_single(out, x, output_split_sizes=splits[0], input_split_sizes=splits[1],
                                          group=group, async_op=op["async"])
            outs = [out]
        else:  # all_to_all, list form
            send_rows = op["counts"][me]
            recv_rows = [op["counts"][j][me] for j in range(n)]
            ins, in_way = pieces(rng, send_rows, op["dtype"], cols)
            for j, piece in enumerate(ins):
                piece.copy_(data(op["seed"] + rank * 10 + j, op["dtype"], tuple(piece.shape)))
            out, out_way = pieces(rng, recv_rows, op["dtype"], cols)
            work, outs = dist.all_to_all(out, ins, group=group, async_op=op["async"]), out
            name += f".{in_way}.{out_way}"
        if op["async"]:
            pending.append((name, work, outs))
        else:
            results[name] = left(outs)
        while pending and (not op["async"] or len(pending) > 1):  # waited one operation later
            done_name, done_work, done_outs = pending.pop(0)
            done_work.wait()
            results[done_name] = left(done_outs)
    for done_name, done_work, done_outs in pending:
        done_work.wait()
        results[done_name] = left(done_outs)
    return results


def run_all(rank):
    results = {}
    for seed in SEEDS:
        results.update(run_program(seed, rank))
    return results


def _gloo_worker(rank, store_path, out_dir, checked=False):
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    torch.set_num_threads(1)
    if checked:  # every group of the job a checked twin (hpref.torch, SPEC 9.2's checked mode)
        import hpref.torch
        hpref.torch.enable(["gloo"], timeout_s=120, log_dir=os.path.join(out_dir, "logs"))
    dist.init_process_group("gloo", init_method=f"file://{store_path}", rank=rank, world_size=WORLD,
                            timeout=timedelta(seconds=120))
    try:
        results = run_all(rank)
        # every rank done before any tears gloo down (pytorch/gloo#155)
        dist.barrier()
    finally:
        dist.destroy_process_group()
    torch.save(results, os.path.join(out_dir, f"rank{rank}.pt"))


def _on_gloo(tmp, checked):
    mp.spawn(_gloo_worker, args=(str(tmp / "store"), str(tmp), checked), nprocs=WORLD, join=True)
    return [torch.load(str(tmp / f"rank{r}.pt")) for r in range(WORLD)]


@pytest.fixture(scope="module")
def gloo(tmp_path_factory):
    """Real gloo's results, one dict per rank."""
    return _on_gloo(tmp_path_factory.mktemp("gloo_programs"), checked=False)


@pytest.fixture(scope="module")
def both(gloo):
    """(real gloo's results, hpref.sim.run's results), one dict per rank."""
    return gloo, values_on_the_simulator(WORLD, run_all, seed=11)


def test_programs_cover_every_operation_and_layout():
    """The generator draws what the comparison is meant to cover (a change to it that stops
    drawing a form fails here, not silently)."""
    drawn = set()
    for seed in SEEDS:
        for op in program(seed)[1]:
            drawn.add(op["kind"])
            drawn.add(("group", op["group"] is not None))
            drawn.add(("async", op["async"]))
            if op["kind"] == "all_to_all_single":
                drawn.add(("even", op["even"]))
    want = {"all_reduce", "broadcast", "all_gather", "all_to_all_single", "barrier",
            "all_gather_object", "broadcast_object_list",
            ("group", True), ("group", False), ("async", True), ("async", False), ("even", True),
            ("even", False)}
    if TORCH2:
        want |= {"all_gather_into_tensor", "all_to_all"}
    assert want <= drawn, want - drawn


def assert_same(gloo, other, rank):
    assert sorted(other[rank]) == sorted(gloo[rank])
    ways = {name.split(".", 3)[3] for name in gloo[rank] if name.count(".") >= 3}
    assert {"in_order", "shuffled", "gaps", "separate"} <= {w for x in ways for w in x.split(".")}, ways
    for name in sorted(gloo[rank]):
        assert other[rank][name] == gloo[rank][name], name


@pytest.mark.filterwarnings("ignore::FutureWarning")
@pytest.mark.parametrize("rank", range(WORLD))
def test_every_rank_gets_what_gloo_gives(both, rank):
    assert_same(*both, rank)


@pytest.fixture(scope="module")
def checked_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("checked_programs")


@pytest.fixture(scope="module")
def checked(checked_dir):
    """The results on gloo with every group checked (hpref.torch.enable), one dict per rank."""
    return _on_gloo(checked_dir, checked=True)


@pytest.mark.filterwarnings("ignore::FutureWarning")
@pytest.mark.parametrize("rank", range(WORLD))
def test_checked_gloo_gives_what_plain_gloo_gives(gloo, checked, checked_dir, rank):
    """The same programs with every group checked: the checks change nothing a program
    receives (and every operation was checked: its log has a line for each)."""
    assert_same(gloo, checked, rank)
    with open(checked_dir / "logs" / f"rank{rank}.jsonl") as f:
        kinds = collections.Counter(json.loads(line)["kind"] for line in f)
    ran = collections.Counter(name.split(".")[2] for name in gloo[rank])
    assert kinds["all_to_all_v"] >= ran["all_to_all_single"] + ran["all_to_all"], (kinds, ran)
    assert kinds["all_reduce"] >= ran["all_reduce"] and kinds["broadcast"] >= ran["broadcast"], (kinds, ran)
    assert kinds["all_gather"] >= ran["all_gather"] + ran["all_gather_into_tensor"], (kinds, ran)
