"""hpref.sim.run (issue 12, SPEC 9.3): Python functions on forked simulated ranks with the
simulator's communicator: results pickled back, the same seed giving the same trace hash,
mismatches, dead peers and exceptions reported per rank with the failure class (the cause
raised, not a peer failure's echo), faults applied, and no process or /dev/shm segment left
behind; a value that does not unpickle in the parent, a caller's gc.freeze(), the replay
line's arguments, the ranks' output (nothing printed twice, nothing lost to a kill or to an
in-memory sys.stdout) and the hash seed the process started with."""
import os
import sys
import time

import numpy as np
import pytest

import hpref
import hpref.sim as sim


def gather_and_sum(rank, extra):
    c = sim.communicator()
    world = c.world()
    mine = np.full(3, rank, dtype=np.int64)
    every = np.zeros(3 * c.size(), dtype=np.int64)
    c.all_gather(world, mine.ctypes.data, mine.nbytes, every.ctypes.data, every.nbytes).wait()
    total = np.array([rank + 0.5], dtype=np.float64)
    c.all_reduce(world, total.ctypes.data, total.nbytes, "float64", "sum").wait()
    counts = [rank + 1] * c.size()  # rank r sends r+1 bytes to everyone
    send = np.full(sum(counts), rank, dtype=np.uint8)
    recv_counts = [p + 1 for p in range(c.size())]
    recv = np.zeros(sum(recv_counts), dtype=np.uint8)
    c.all_to_all_v(world, send.ctypes.data, counts, recv.ctypes.data, recv_counts).wait()
    return every.tolist(), float(total[0]), recv.tolist(), extra


def test_values_come_back_from_every_rank():
    result = sim.run(4, gather_and_sum, {"k": 1}, seed=5, torch_distributed=False)
    assert result.ok and result.failure == "none" and result.exit_code == 0
    want_gather = [r for r in range(4) for _ in range(3)]
    want_a2a = [p for p in range(4) for _ in range(p + 1)]
    for rank, (every, total, recv, extra) in enumerate(result.values()):
        assert every == want_gather and total == 8.0 and recv == want_a2a and extra == {"k": 1}


def test_the_same_seed_gives_the_same_trace_and_another_seed_another():
    runs = [sim.run(4, gather_and_sum, None, seed=s, trace=True, torch_distributed=False)
            for s in (7, 7, 8)]
    assert runs[0].trace_hash == runs[1].trace_hash and runs[0].trace == runs[1].trace
    assert runs[0].trace and runs[0].trace_hash != runs[2].trace_hash


def test_a_trace_argument_that_is_no_bool_or_path_is_refused_before_the_run():
    with pytest.raises(ValueError, match="trace: the path is empty"):
        sim.run(2, gather_and_sum, None, trace="", torch_distributed=False)
    with pytest.raises(TypeError, match="trace must be None, a bool or a path, got 1"):
        sim.run(2, gather_and_sum, None, trace=1, torch_distributed=False)


def test_a_run_without_trace_keeps_no_lines_and_has_the_same_hash():
    """trace=None: the simulator keeps no lines (Options::keep_trace), the hash is the same."""
    kept = sim.run(4, gather_and_sum, None, seed=7, trace=True, torch_distributed=False)
    hashed = sim.run(4, gather_and_sum, None, seed=7, torch_distributed=False)
    assert hashed.trace is None and len(kept.trace) > 4
    assert hashed.trace_hash == kept.trace_hash and hashed.decisions == kept.decisions
    raw = [hpref._core.sim_run(2, lambda comm: b"x", seed=1, keep_trace=k) for k in (True, False)]
    assert raw[0]["trace"] and raw[1]["trace"] == [] and raw[0]["trace_hash"] == raw[1]["trace_hash"]


def mismatched(rank):
    c = sim.communicator()
    mine = np.zeros(rank + 1, dtype=np.uint8)  # every rank a different size: a bug
    every = np.zeros(c.size() * (rank + 1), dtype=np.uint8)
    c.all_gather(c.world(), mine.ctypes.data, mine.nbytes, every.ctypes.data, every.nbytes).wait()


def test_a_mismatch_is_named_on_every_rank():
    result = sim.run(3, mismatched, torch_distributed=False)
    assert result.failure == "collective mismatch" and result.exit_code == 3
    for r in result.ranks:
        assert r.status == "error" and r.kind == "comm_mismatch" and r.error_type == "CommMismatchError"
        assert "all_gather" in r.message and "group 0 seq 0" in r.message
        assert isinstance(r.exception(), hpref.CommMismatch)
    with pytest.raises(hpref.CommMismatch):
        result.values()


def raises_on_rank_two(rank):
    if rank == 2:
        raise KeyError("no such sample")
    c = sim.communicator()
    c.barrier(c.world()).wait()
    return rank


def test_an_exception_is_reported_and_its_peers_fail_without_waiting():
    result = sim.run(4, raises_on_rank_two, torch_distributed=False)
    assert result.ranks[2].status == "error" and result.ranks[2].error_type == "KeyError"
    assert "no such sample" in result.ranks[2].message
    for r in (0, 1, 3):
        assert result.ranks[r].kind == "comm_peer_failed" and "rank 2" in result.ranks[r].message
    assert result.failure == "peer failure"


def _sleeps(rank):
    time.sleep(0.3)
    return rank


def test_a_sub_millisecond_timeout_is_one_millisecond():
    """timeout_s below a millisecond is the simulator's shortest turn, 1 ms (its unit): a rank
    that sleeps past it is killed, and the message names 1 ms (0 ms killed a rank at once)."""
    result = sim.run(1, _sleeps, timeout_s=0.0004, torch_distributed=False)
    [rank] = result.ranks
    assert rank.status == "died", rank
    assert rank.message == "rank 0 held the baton for more than 1 ms without reaching a scheduling point, and was killed"


def test_a_crash_fault_kills_the_rank_and_is_named_in_the_replay_line():
    result = sim.run(4, gather_and_sum, None, seed=2, faults=["crash:1@2"], torch_distributed=False)
    assert result.ranks[1].status == "died" and "signal 9" in result.ranks[1].message
    assert all(result.ranks[r].kind == "comm_peer_failed" for r in (0, 2, 3))
    assert "faults=['crash:1@2']" in result.replay and "seed=2" in result.replay
    again = sim.run(4, gather_and_sum, None, seed=2, faults=["crash:1@2"], torch_distributed=False)
    assert again.trace_hash == result.trace_hash


class UnprintableError(Exception):
    def __str__(self):
        raise RuntimeError("str fails")


class UnprintableHprefError(hpref.errors.CommUsageError):
    def __str__(self):
        raise UnprintableError()  # whose own __str__ raises too


def raises_unprintable(rank):
    if rank == 1:
        raise UnprintableError("never printed")
    if rank == 2:
        raise UnprintableHprefError("never printed either")
    return rank


def test_an_exception_whose_str_raises_is_still_named():
    result = sim.run(3, raises_unprintable, torch_distributed=False)
    assert result.ranks[0].status == "ok"
    one, two = result.ranks[1], result.ranks[2]
    assert (one.status, one.kind, one.error_type) == ("error", "exception", "UnprintableError")
    assert one.message == "<str() failed: RuntimeError: str fails>"
    assert (two.status, two.kind, two.error_type) == ("error", "exception", "UnprintableHprefError")
    assert two.message == "<str() failed: UnprintableError>"


def test_no_segment_is_left_behind():
    sim.run(2, gather_and_sum, None, torch_distributed=False)
    assert hpref._core.sim_leftover_segments() == []
    assert not [n for n in os.listdir("/dev/shm") if n.startswith(f"hpref-sim-{os.getpid()}-")]


def test_bad_arguments_are_refused_by_name():
    with pytest.raises(ValueError, match="world_size"):
        sim.run(0, gather_and_sum)
    with pytest.raises(hpref.Error) as e:
        sim.run(2, gather_and_sum, None, faults=["explode:1@1"])
    assert e.value.kind == "invalid_argument" and "explode:1@1" in e.value.message
    with pytest.raises(RuntimeError, match="only available inside"):
        sim.communicator()


@pytest.mark.parametrize("kwargs, error, names", [
    ({"seed": -1}, hpref.errors.InvalidArgumentError, "seed must be an int in [0, 2**64), got -1"),
    ({"seed": 2**64}, hpref.errors.InvalidArgumentError, f"seed must be an int in [0, 2**64), got {2**64}"),
    ({"seed": 1.5}, hpref.errors.InvalidArgumentError, "seed must be an int in [0, 2**64), got 1.5"),
    ({"seed": True}, hpref.errors.InvalidArgumentError, "got True"),
    ({"faults": "crash:1@1"}, hpref.errors.InvalidArgumentError, "faults must be a list of fault plans"),
    ({"faults": None}, hpref.errors.InvalidArgumentError, "faults must be a list of fault plans"),
    ({"faults": ["crash:1@1", 7]}, hpref.errors.InvalidArgumentError, "faults[1] must be a fault plan str"),
    ({"faults": ["crash:1@\ud800"]}, hpref.errors.InvalidArgumentError, "faults[0] must be a fault plan str"),
    ({"timeout_s": float("inf")}, ValueError, "timeout_s must be a number of seconds in (0, 2147483], got inf"),
    ({"timeout_s": float("nan")}, ValueError, "got nan"),
    ({"timeout_s": 2**40}, ValueError, f"got {2**40}"),
    ({"timeout_s": 0}, ValueError, "got 0"),
    ({"timeout_s": "60"}, TypeError, "timeout_s must be a number of seconds, got '60'"),
    ({"timeout_s": True}, TypeError, "timeout_s must be a number of seconds, got True"),
], ids=["seed-negative", "seed-2**64", "seed-float", "seed-bool", "faults-str", "faults-none",
        "faults-item", "faults-not-utf8", "timeout-inf", "timeout-nan", "timeout-huge", "timeout-zero",
        "timeout-str", "timeout-bool"])
def test_bad_run_arguments_are_named_with_their_value(kwargs, error, names):
    with pytest.raises(error) as e:
        sim.run(2, gather_and_sum, None, torch_distributed=False, **kwargs)
    assert names in str(e.value)


def ident(rank, *args):
    return rank


def test_world_size_64_is_taken_and_65_and_bools_are_refused():
    assert sim.run(64, ident, torch_distributed=False).values() == list(range(64))
    for bad in (65, True, False):
        with pytest.raises(ValueError, match=f"world_size must be an int in 1..64, got {bad!r}"):
            sim.run(bad, ident, torch_distributed=False)


def test_edge_run_arguments_are_taken():
    result = sim.run(2, gather_and_sum, None, seed=2**64 - 1, faults=("crash:1@9",), timeout_s=2147483,
                     torch_distributed=False)
    assert result.ok and result.seed == 2**64 - 1 and result.faults == ["crash:1@9"]
    assert sim.run(2, gather_and_sum, None, seed=np.uint64(3), torch_distributed=False).seed == 3


def two_groups_in_opposite_orders(rank):
    c = sim.communicator()
    a = c.new_group([0, 1], "sim")
    b = c.new_group([0, 1], "sim")
    if rank == 2:
        return None
    first, second = (a, b) if rank == 0 else (b, a)  # a classic lock-order deadlock
    c.barrier(first).wait()
    c.barrier(second).wait()


def chrome(result, tmp_path, name):
    import json
    path = tmp_path / name
    sim._write_trace(str(path), result.trace)
    return json.loads(path.read_text())


def slices(doc):
    return [e for e in doc["traceEvents"] if e["ph"] == "X"]


def test_chrome_trace_has_one_slice_per_operation_matching_the_text_trace(tmp_path):
    result = sim.run(4, gather_and_sum, None, seed=3, trace=str(tmp_path / "run.json"),
                     torch_distributed=False)
    import json
    doc = json.loads((tmp_path / "run.json").read_text())
    names = {e["tid"]: e["args"]["name"] for e in doc["traceEvents"] if e["ph"] == "M"}
    assert names == {r: f"rank {r}" for r in range(4)}
    lines = sim.run(4, gather_and_sum, None, seed=3, trace=True, torch_distributed=False).trace
    launches = [(i, l.split()) for i, l in enumerate(lines) if len(l.split()) > 3 and l.split()[1].startswith("g")]
    got = slices(doc)
    assert len(got) == len(launches) == 12  # 3 operations x 4 ranks
    for e, (step, w) in zip(sorted(got, key=lambda e: e["ts"]), launches):
        assert e["ts"] == step and e["tid"] == int(w[0][1:]) and e["name"] == w[3]
        assert f"g{e['args']['group']}" == w[1] and f"s{e['args']['seq']}" == w[2]
        # ends when the last member launched the same operation
        last = max(i for i, v in launches if v[1:3] == w[1:3])
        assert e["ts"] + e["dur"] == last + 1 and "problem" not in e["args"]


def test_chrome_trace_marks_a_mismatch_and_a_deadlock(tmp_path):
    bad = sim.run(3, mismatched, trace=True, torch_distributed=False)
    marked = [e for e in slices(chrome(bad, tmp_path, "mismatch.json")) if "problem" in e["args"]]
    assert sorted(e["tid"] for e in marked) == [0, 1, 2]
    assert all(e["args"]["problem"] == "mismatch" and e["cname"] == "terrible" for e in marked)
    stuck = sim.run(3, two_groups_in_opposite_orders, trace=True, torch_distributed=False)
    assert stuck.failure == "deadlock"
    doc = chrome(stuck, tmp_path, "deadlock.json")
    marked = [e for e in slices(doc) if e["args"].get("problem") == "deadlock"]
    assert sorted(e["tid"] for e in marked) == [0, 1]
    assert any(e["ph"] == "i" and e["name"].startswith("deadlock") for e in doc["traceEvents"])


def test_the_command_writes_the_same_chrome_trace(tmp_path):
    import json
    import pathlib
    import subprocess
    cli = pathlib.Path(__file__).parents[2] / "build" / "release" / "tools" / "hpref"
    if not cli.exists():
        pytest.skip(f"the hpref command is not built at {cli}")
    subprocess.run([str(cli), "sim", "run", "all_gather", "--ranks", "3", "--seed", "4",
                    "--trace", str(tmp_path / "t.txt")], check=True, capture_output=True)
    subprocess.run([str(cli), "sim", "run", "all_gather", "--ranks", "3", "--seed", "4",
                    "--trace", str(tmp_path / "t.json"), "--trace-format", "chrome"],
                   check=True, capture_output=True)
    lines = (tmp_path / "t.txt").read_text().splitlines()
    doc = json.loads((tmp_path / "t.json").read_text())
    assert doc == json.loads(hpref._core.sim_chrome_trace(lines)) and slices(doc)


SLEEPER = """
import signal, sys, time
# Ctrl-C raises KeyboardInterrupt even where this process was started with SIGINT ignored
# (a background job of a non-interactive shell: the test failed there, its parent never
# interrupted).
signal.signal(signal.SIGINT, signal.default_int_handler)
sys.path.insert(0, {here!r})
import hpref.sim as sim

def sleepy(rank):
    c = sim.communicator()
    c.barrier(c.world()).wait()
    time.sleep(60)  # holds the baton: the parent is interrupted or killed meanwhile

print("started", flush=True)
sim.run(3, sleepy, torch_distributed=False, timeout_s=300)
"""


def children_of(pid):
    kids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                kids.append(int(entry))
    return kids


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("how", ["interrupt", "kill"])
def test_an_interrupted_or_killed_parent_leaves_no_rank_and_no_segment(tmp_path, how):
    import signal
    import subprocess
    import time
    script = tmp_path / "sleeper.py"
    script.write_text(SLEEPER.format(here=os.environ.get("PYTHONPATH", "").split(os.pathsep)[0]))
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "started"
    deadline = time.time() + 30
    while len(children_of(proc.pid)) < 3 and time.time() < deadline:
        time.sleep(0.05)
    ranks = children_of(proc.pid)
    assert len(ranks) == 3, ranks
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT if how == "interrupt" else signal.SIGKILL)
    proc.wait(timeout=30)
    if how == "interrupt":
        assert "KeyboardInterrupt" in proc.stderr.read()
    deadline = time.time() + 10
    while any(alive(p) for p in ranks) and time.time() < deadline:
        time.sleep(0.05)
    assert not any(alive(p) for p in ranks)
    assert not [n for n in os.listdir("/dev/shm") if n.startswith(f"hpref-sim-{proc.pid}-")]
    assert hpref._core.sim_leftover_segments() == []


def skips_a_new_group(rank):
    c = sim.communicator()
    if rank != 3:
        c.new_group([0, 1], "sim")  # rank 3 forgot: new_group is a world collective
    c.barrier(c.world()).wait()


def test_a_skipped_new_group_is_a_mismatch_not_a_hang():
    result = sim.run(4, skips_a_new_group, torch_distributed=False)
    assert result.failure == "collective mismatch", result.ranks
    for r in result.ranks:
        assert r.kind == "comm_mismatch" and "new_group #1" in r.message
        assert "ranks [3] went past it" in r.message


def test_values_raises_the_cause_with_its_builtin_type_not_a_peer_failure_echo():
    result = sim.run(4, raises_on_rank_two, torch_distributed=False)
    assert result.first_failure() is result.ranks[2]
    assert isinstance(result.ranks[2].exception(), KeyError)
    with pytest.raises(KeyError, match="rank 2: 'no such sample'"):
        result.values()
    assert result.ranks[0].is_peer_failure() and not result.ranks[2].is_peer_failure()


def _rebuilt_only_in_a_rank():
    if sim._COMM is None:
        raise ValueError("this value unpickles only inside a rank")
    return OnlyInARank()


class OnlyInARank:
    def __reduce__(self):
        return (_rebuilt_only_in_a_rank, ())


def returns_what_the_parent_cannot_unpickle(rank):
    return OnlyInARank() if rank == 1 else rank


def test_a_value_that_does_not_unpickle_here_is_that_ranks_error_and_the_rest_is_kept():
    result = sim.run(3, returns_what_the_parent_cannot_unpickle, torch_distributed=False)
    assert [r.status for r in result.ranks] == ["ok", "error", "ok"]
    assert result.ranks[0].value == 0 and result.ranks[2].value == 2
    bad = result.ranks[1]
    assert bad.error_type == "ValueError" and bad.kind == "exception"
    assert "OnlyInARank" in bad.message and "this value unpickles only inside a rank" in bad.message
    assert not result.ok and result.failure == "check failed" and result.exit_code == 1
    with pytest.raises(ValueError, match="rank 1: .*OnlyInARank"):
        result.values()


def test_a_callers_own_gc_freeze_is_left_as_it_was():
    import gc
    kept = [[i] for i in range(1000)]
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        assert frozen >= len(kept)
        assert sim.run(2, gather_and_sum, None, torch_distributed=False).ok
        assert gc.get_freeze_count() >= frozen - 100  # a few frozen objects may be freed meanwhile
    finally:
        gc.unfreeze()
    counts = sim.run(2, lambda rank: gc.get_freeze_count(), torch_distributed=False).values()
    assert all(c > 0 for c in counts), counts  # the ranks run with the parent's objects frozen
    assert gc.get_freeze_count() == 0  # and run's own freeze is undone


def test_the_replay_line_has_the_arguments_and_keywords_and_replays_the_run():
    result = sim.run(4, gather_and_sum, {"k": [1, "x"]}, seed=6, timeout_s=30, torch_distributed=False)
    line = result.replay.split("  #")[0]
    assert line == ("hpref.sim.run(4, gather_and_sum, {'k': [1, 'x']}, seed=6, timeout_s=30.0, "
                    "torch_distributed=False)"), line
    again = eval(line, {"hpref": hpref, "gather_and_sum": gather_and_sum})
    assert again.trace_hash == result.trace_hash and again.values() == result.values()


def test_an_argument_whose_repr_is_not_python_is_written_as_an_ellipsis():
    result = sim.run(2, gather_and_sum, object(), seed=2, torch_distributed=False)
    assert result.replay.startswith("hpref.sim.run(2, gather_and_sum, ..., seed=2, torch_distributed=False)")
    assert "repr is not Python" in result.replay
    big = np.arange(10000)  # numpy's repr summarises it with "..."
    assert "gather_and_sum, ..., seed" in sim.run(2, gather_and_sum, big, torch_distributed=False).replay
    long = list(range(100))  # a repr of 390 characters: left out
    assert sim.run(1, ident, long, torch_distributed=False).replay.startswith("hpref.sim.run(1, ident, ..., seed=1")
    assert sim.run(1, ident, "wait...", torch_distributed=False).replay.startswith(  # a str's dots are its own
        "hpref.sim.run(1, ident, 'wait...', seed=1")


def barrier_then_rank(rank):
    c = sim.communicator()
    c.barrier(c.world()).wait()
    return rank


def test_the_replay_names_a_random_fault_as_drawn():
    result = sim.run(2, barrier_then_rank, seed=3, faults=["random"], torch_distributed=False)
    assert result.faults != ["random"]
    assert f"faults={result.faults!r}" in result.replay and "'random'" not in result.replay


@pytest.mark.parametrize("name", ["run.txt", "run.json"])
def test_a_pathlike_trace_is_taken_and_written(tmp_path, name):
    path = tmp_path / name  # a pathlib.Path, not a str
    result = sim.run(2, barrier_then_rank, seed=3, trace=path, torch_distributed=False)
    assert result.ok and result.trace
    text = path.read_text()
    if name.endswith(".json"):
        assert text == hpref._core.sim_chrome_trace(result.trace)
    else:
        assert text.splitlines() == result.trace


def prints_then_barriers(rank):
    print(f"rank {rank} says hello")
    print(f"rank {rank} to stderr", file=sys.stderr)
    sys.stdout.flush()
    sys.stdout.buffer.write(b"\xff\n")  # not UTF-8: the rest of the output must still arrive
    c = sim.communicator()
    c.barrier(c.world()).wait()
    print(f"rank {rank} passed the barrier")
    return rank


def test_ranks_output_reaches_an_in_memory_stream(capsys):
    # capsys replaces sys.stdout by an in-memory stream: a rank's own copy of it would die
    # with the rank.
    print("parent before")
    assert sim.run(2, prints_then_barriers, torch_distributed=False).ok
    out, err = capsys.readouterr()
    assert out.count("parent before") == 1 and "\\xff" in out
    for r in (0, 1):
        assert f"rank {r} says hello" in out and f"rank {r} passed the barrier" in out
        assert f"rank {r} to stderr" in err


OUTPUT = """
import sys, time
sys.path.insert(0, {here!r})
import hpref.sim as sim

def prints(rank):
    print(f"rank {{rank}} before step 1")
    c = sim.communicator()
    c.barrier(c.world()).wait()
    print(f"rank {{rank}} after step 1")
    if rank == 1 and {sleep}:
        time.sleep(5)  # past the turn timeout: killed
    c.barrier(c.world()).wait()
    return rank

print("parent starting")  # buffered (stdout is a pipe) when the ranks fork
r = sim.run(2, prints, faults={faults!r}, timeout_s=0.5, torch_distributed=False)
print("statuses", [x.status for x in r.ranks])
"""


@pytest.mark.parametrize("how", ["crash", "timeout"])
def test_what_a_rank_printed_before_it_was_killed_arrives_and_nothing_twice(tmp_path, how):
    import subprocess
    script = tmp_path / "prints.py"
    script.write_text(OUTPUT.format(here=os.environ.get("PYTHONPATH", "").split(os.pathsep)[0],
                                    sleep=how == "timeout", faults=["crash:1@3"] if how == "crash" else []))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # a pipe: block-buffered
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env,
                         timeout=60).stdout
    assert out.count("parent starting") == 1, out
    assert "statuses ['error', 'died']" in out, out
    for r in (0, 1):
        assert f"rank {r} before step 1" in out and f"rank {r} after step 1" in out, out


HASH_SEED = """
import os, sys
os.environ["PYTHONHASHSEED"] = "0"  # too late: the interpreter drew its str-hash secret at startup
sys.path.insert(0, {here!r})
import hpref.sim as sim
r = sim.run(2, lambda rank: rank, torch_distributed=False)
print(r.hash_seed_random, "PYTHONHASHSEED unset" in r.replay)
"""


@pytest.mark.parametrize("startup", [None, "0", "7", "random"])
def test_the_hash_seed_is_the_one_the_process_started_with(tmp_path, startup):
    import subprocess
    script = tmp_path / "hash_seed.py"
    script.write_text(HASH_SEED.format(here=os.environ.get("PYTHONPATH", "").split(os.pathsep)[0]))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}
    if startup is not None:
        env["PYTHONHASHSEED"] = startup
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env,
                         timeout=60)
    random = startup in (None, "random")
    assert out.stdout.split() == [str(random), str(random)], out.stdout + out.stderr


def test_a_torch_rank_runs_single_threaded():
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        values = sim.run(2, lambda rank: torch.get_num_threads()).values()
    finally:
        torch.set_num_threads(before)
    assert values == [1, 1]


PRE_IMPORTS = """
import sys
sys.path.insert(0, {here!r})
import torch
import hpref.sim as sim
assert "hpref._torch_pg" not in sys.modules
assert "torch.fx.experimental.symbolic_shapes" not in sys.modules
assert sim.run(2, lambda rank: rank).ok
print("hpref._torch_pg" in sys.modules, "torch.fx.experimental.symbolic_shapes" in sys.modules)
"""


def test_what_every_rank_would_import_is_imported_once_in_the_parent(tmp_path):
    """The process-group adapter and sympy's symbolic shapes (a first backward's import),
    where the parent imported torch: each rank would otherwise import them in turn."""
    pytest.importorskip("torch")
    import subprocess
    script = tmp_path / "pre_imports.py"
    script.write_text(PRE_IMPORTS.format(here=os.environ.get("PYTHONPATH", "").split(os.pathsep)[0]))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["True", "True"], out.stdout + out.stderr


def exits(rank):
    raise SystemExit(3)


def decodes(rank):
    return b"\xff".decode("utf-8")


def test_a_ranks_system_exit_or_unicode_error_comes_back_as_a_runtime_error():
    """values() must not exit the caller (SystemExit), nor fail to rebuild an exception whose
    constructor takes other arguments (UnicodeDecodeError)."""
    result = sim.run(1, exits, torch_distributed=False)
    assert result.ranks[0].error_type == "SystemExit"
    assert isinstance(result.ranks[0].exception(), RuntimeError)
    with pytest.raises(RuntimeError, match="rank 0 error: SystemExit: 3"):
        result.values()
    result = sim.run(1, decodes, torch_distributed=False)
    assert result.ranks[0].error_type == "UnicodeDecodeError"
    with pytest.raises(RuntimeError, match="rank 0 error: UnicodeDecodeError: 'utf-8' codec"):
        result.values()


def test_a_ranks_own_exception_prints_its_traceback_once(capfd):
    result = sim.run(4, raises_on_rank_two, torch_distributed=False)
    assert result.ranks[1].kind == "comm_peer_failed"  # an hpref error: no traceback printed
    err = capfd.readouterr().err
    assert err.count("Traceback") == 1 and "KeyError: 'no such sample'" in err
    assert "in raises_on_rank_two" in err
