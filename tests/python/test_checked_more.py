"""Checked mode for real PyTorch jobs, continued (a review of issue 13's hpref.torch): each
test holds a case the review found broken, on torch 2.13 and Debian's 1.13 (each
interpreter runs this file) unless it says otherwise.

- in-process, on a world of one (``init_process_group`` over a HashStore): option
  validation, enable()'s backend names, polling a work, the send-buffer option for staged
  tensors, the coalesced all_gather, tensors whose elements share memory, what checked
  mode refuses that plain gloo runs, the library a failed work names;
- forked ranks over real gloo (torch.multiprocessing's fork context; ``runn``): subgroup
  messages naming torch's group and world ranks, use_local_synchronization, a slow start,
  wait(timeout=...), a work dropped or timed out while gloo still writes its memory, an
  all_to_all_single whose output overlaps its input, DistributedDataParallel (refused on
  1.13), the store's timeout after a failure, the functional all_gather.

Skips, saying why, where torch is absent."""
from __future__ import annotations

import ctypes
import gc
import json
import os
import re
import socket
import time
import traceback
from datetime import timedelta

import pytest

torch = pytest.importorskip("torch", reason="checked mode wraps torch.distributed; torch is not importable")
dist = pytest.importorskip("torch.distributed", reason="torch.distributed is not available")

import hpref  # noqa: E402
import hpref.torch as ht  # noqa: E402
from hpref import _checked, _torch_pg  # noqa: E402
from hpref._torch_comm import CommGroup, GlooComm, _GlooWork  # noqa: E402
from hpref.errors import (CommBufferMutatedError, CommTimeoutError, CommUsageError,  # noqa: E402
                          InvalidArgumentError)
from test_checked import forked_results  # noqa: E402

TORCH2 = int(torch.__version__.split(".")[0]) >= 2
RUN_LIMIT_S = 60.0


# ---- a world of one, in this process ------------------------------------------------------

@pytest.fixture
def one(monkeypatch):
    """Undoes what a test sets up: torch.distributed, enable(), configure()."""
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "lo")
    for var in ("HPREF_CHECKED_TIMEOUT_S", "HPREF_CHECKED_LOG", "HPREF_CHECKED_BUFFERS"):
        monkeypatch.delenv(var, raising=False)
    yield
    if dist.is_initialized():
        dist.destroy_process_group()
    ht.disable()
    # Groups left in reference cycles (a caught error's traceback holds the test's frame)
    # are released here, where their gloo threads run, not in a forked rank that copied them
    # without threads (its garbage collector would crash there).
    gc.collect()


def init_one(backend="hpref_checked"):
    """The default group of a world of one; ``backend`` None: torch's default (2.x)."""
    kwargs = {} if backend is None else {"backend": backend}
    dist.init_process_group(store=dist.HashStore(), rank=0, world_size=1, timeout=timedelta(seconds=30), **kwargs)
    return dist.group.WORLD


# ---- 11: options -----------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, want", [
    ({"timeout_s": float("inf")}, "timeout_s must be a finite number of seconds > 0, got inf"),
    ({"timeout_s": float("nan")}, "timeout_s must be a finite number of seconds > 0, got nan"),
    ({"timeout_s": True}, "timeout_s must be a finite number of seconds > 0, got True"),
    ({"timeout_s": 0}, "timeout_s must be a finite number of seconds > 0, got 0"),
    ({"timeout_s": "5"}, "timeout_s must be a finite number of seconds > 0, got '5'"),
    # Accepted, then a bare OverflowError from torch's timedelta conversion at the next group.
    ({"timeout_s": 1e300}, "timeout_s must be at most 2147483647 seconds, got 1e+300"),
    ({"log_dir": 123}, "log_dir must be a directory (a non-empty str or os.PathLike), got 123"),
    ({"log_dir": ""}, "log_dir must be a directory (a non-empty str or os.PathLike), got ''"),
    ({"check_buffers": 1}, "check_buffers must be True, False or 'all', got 1"),
    ({"check_buffers": "device"}, "check_buffers must be True, False or 'all', got 'device'"),
])
def test_options_outside_their_values_are_refused_naming_option_and_value(one, kwargs, want):
    before = dict(ht._OPTIONS)
    with pytest.raises(InvalidArgumentError) as got:
        ht.configure(**kwargs)
    assert str(got.value) == want
    assert ht._OPTIONS == before  # nothing set
    with pytest.raises(InvalidArgumentError, match=re.escape(want)):
        ht.enable(["gloo"], **kwargs)
    assert "original" not in ht._ENABLED
    with pytest.raises(InvalidArgumentError, match=re.escape(want)):
        ht.checked(**kwargs)  # refused before it looks for a group


def test_checked_group_must_be_a_process_group(one):
    # checked(group=5) raised a bare KeyError from torch's group tables.
    init_one()
    with pytest.raises(InvalidArgumentError) as got:
        ht.checked(group=5)
    assert str(got.value) == "group must be a torch.distributed process group or None, got 5"


@pytest.mark.parametrize("ranks", [[0.9], "0", [True], 5, [None]])
def test_checked_ranks_must_be_ints(one, ranks):
    # [0.9] made a group of rank 0 (int() truncated it), "12" the ranks [1, 2].
    init_one()
    before = ht._RUNS["count"]
    with pytest.raises(InvalidArgumentError) as got:
        ht.checked(ranks=ranks)
    assert str(got.value) == f"ranks must be a sequence of global ranks (ints), got {ranks!r}"
    assert ht._RUNS["count"] == before  # refused before anything is made or counted


@pytest.mark.parametrize("var, value, want", [
    ("HPREF_CHECKED_TIMEOUT_S", "abc", "a finite number of seconds > 0"),
    ("HPREF_CHECKED_TIMEOUT_S", "0", "a finite number of seconds > 0"),
    ("HPREF_CHECKED_TIMEOUT_S", "-5", "a finite number of seconds > 0"),
    ("HPREF_CHECKED_TIMEOUT_S", "inf", "a finite number of seconds > 0"),
    ("HPREF_CHECKED_BUFFERS", "garbage", "one of 0, 1, all, false, no, off, on, true, yes"),
    ("HPREF_CHECKED_BUFFERS", "2", "one of 0, 1, all, false, no, off, on, true, yes"),
])
def test_environment_options_outside_their_values_are_refused_naming_the_variable(one, monkeypatch, var, value,
                                                                                   want):
    monkeypatch.setenv(var, value)
    with pytest.raises(InvalidArgumentError) as got:
        ht.options()
    assert str(got.value) == f"{var} must be {want}, got {value!r}"
    with pytest.raises(InvalidArgumentError, match=var):  # a group made now says so too
        init_one()


def test_documented_option_values_are_taken(one, monkeypatch, tmp_path):
    monkeypatch.setenv("HPREF_CHECKED_TIMEOUT_S", " 2.5 ")
    monkeypatch.setenv("HPREF_CHECKED_BUFFERS", "Off")
    monkeypatch.setenv("HPREF_CHECKED_LOG", str(tmp_path))
    assert ht.options() == {"timeout_s": 2.5, "log_dir": str(tmp_path), "check_buffers": False}
    monkeypatch.setenv("HPREF_CHECKED_BUFFERS", "ALL")
    assert ht.options()["check_buffers"] == "all"
    ht.configure(timeout_s=3, log_dir=tmp_path / "logs", check_buffers=True)
    assert ht.options() == {"timeout_s": 3.0, "log_dir": str(tmp_path / "logs"), "check_buffers": True}


# ---- 2: enable()'s backend names ----------------------------------------------------------------

def test_enable_takes_one_str_as_one_backend_name(one):
    ht.enable("gloo")
    assert ht._ENABLED["names"] == {"gloo"}
    world = init_one("gloo")
    assert isinstance(world, _torch_pg.HprefProcessGroup) and dist.get_backend() == "gloo"


@pytest.mark.parametrize("names, bad", [(["glo"], "glo"), (["gloo", "mpi"], "mpi"), ("gloo,nccl", "gloo,nccl")])
def test_enable_refuses_unknown_backend_names_naming_them(one, names, bad):
    with pytest.raises(CommUsageError, match=re.escape(f"checked mode wraps gloo and nccl groups, not {bad!r}")):
        ht.enable(names)
    assert "original" not in ht._ENABLED


@pytest.mark.skipif(not TORCH2, reason="torch 1.13 has neither a default backend nor device:backend names")
@pytest.mark.parametrize("backend, answer", [(None, "undefined"), ("cpu:gloo,cuda:nccl", "cpu:gloo,cuda:nccl"),
                                             ("cpu:gloo", "cpu:gloo")])
def test_enable_checks_the_gloo_of_torchs_default_and_device_backend_names(one, backend, answer):
    """torch resolves the name through its BackendConfig (no backend: gloo on a machine
    without an accelerator); the group is checked as the docstring promises, and
    get_backend answers what torch answers."""
    if backend is None and torch._C._get_accelerator().type != "cpu":
        pytest.skip("torch's default resolves to this machine's accelerator library, not gloo")
    ht.enable(["gloo"])
    world = init_one(backend)
    assert isinstance(world, _torch_pg.HprefProcessGroup), type(world)
    assert dist.get_backend() == answer
    t = torch.ones(3)
    dist.all_reduce(t)
    assert t.tolist() == [1.0, 1.0, 1.0] and ht.comm_of(world)._seq == {0: 1}


# ---- 1: polling a work --------------------------------------------------------------------------

def test_is_completed_becomes_true_and_finishes_the_operation(one):
    init_one()
    t = torch.arange(6.0).reshape(2, 3).t()  # staged: the result is copied back once complete
    work = dist.all_reduce(t, async_op=True)
    start = time.monotonic()
    while not work.is_completed():
        assert time.monotonic() - start < 10, "is_completed() still False after 10 s"
        time.sleep(0.001)
    assert work.is_success() and work.exception() is None
    assert t.tolist() == [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]
    assert work.wait() is True


def test_a_polled_operation_keeps_its_error_for_wait(one):
    init_one()
    x = torch.arange(8, dtype=torch.int64)
    out = torch.empty(8, dtype=torch.int64)
    work = dist.all_to_all_single(out, x, async_op=True)
    x.add_(1)
    start = time.monotonic()
    while not work.is_completed():
        assert time.monotonic() - start < 10, "is_completed() still False after 10 s"
        time.sleep(0.001)
    assert not work.is_success() and isinstance(work.exception(), CommBufferMutatedError)
    for _ in range(2):
        with pytest.raises(CommBufferMutatedError, match="rank 0 changed its send buffer of 64 bytes"):
            work.wait()


# ---- 7: the send-buffer option reaches staged tensors ------------------------------------------------

def _mutate_staged(group=None):
    """A non-contiguous send tensor (staged through a contiguous copy) changed before wait."""
    outs = [torch.zeros(2)]
    inp = torch.ones(4)[::2]
    work = dist.all_gather(outs, inp, group=group, async_op=True)
    inp.add_(1)
    work.wait()
    return outs[0].tolist()


@pytest.mark.parametrize("how", ["configure", "environment"])
def test_send_buffers_unchecked_means_staged_tensors_too(one, monkeypatch, how):
    if how == "configure":
        ht.configure(check_buffers=False)
    else:
        monkeypatch.setenv("HPREF_CHECKED_BUFFERS", "0")
    world = init_one()
    assert ht.comm_of(world).check_buffers is False
    assert _mutate_staged() == [1.0, 1.0]  # what was sent: the tensor at launch
    checked = ht.checked(check_buffers=True)
    with pytest.raises(CommBufferMutatedError, match=r"all_gather on group 1 seq 0 \[0\] \(hpref_checked\): "
                                                     r"rank 0 changed input tensor 0 between launch and wait\(\)"):
        _mutate_staged(checked)


# ---- 8: the coalesced all_gather ------------------------------------------------------------------

def test_the_coalesced_all_gather_into_tensor_runs_one_per_pair(one):
    world = init_one()
    ins = [torch.arange(3.0), torch.arange(4, dtype=torch.int64).reshape(2, 2).t()]  # the second staged
    outs = [torch.zeros(3), torch.zeros(2, 2, dtype=torch.int64)]
    names = ["allgather_into_tensor_coalesced"] + (["all_gather_single_coalesced"] if TORCH2 else [])
    for name in names:
        outs = [torch.zeros_like(o) for o in outs]
        work = getattr(world, name)(outs, ins)
        assert work.wait() is True and work.is_completed()
        assert outs[0].tolist() == [0.0, 1.0, 2.0] and outs[1].tolist() == [[0, 2], [1, 3]]
    assert ht.comm_of(world)._seq == {0: 2 * len(names)}  # one checked all_gather per pair
    with pytest.raises(CommUsageError, match=r"the output tensor has 8 bytes, expected 1 x 12"):
        world.allgather_into_tensor_coalesced([torch.zeros(3), torch.zeros(2)], [torch.zeros(3), torch.zeros(3)])
    assert ht.comm_of(world)._seq == {0: 2 * len(names)}  # every pair is checked before the first moves


# ---- 13: tensors whose elements share memory ---------------------------------------------------------

def test_a_written_tensor_whose_elements_share_memory_is_refused_at_launch(one):
    world = init_one()
    t = torch.tensor([1.0]).expand(4)
    with pytest.raises(CommUsageError) as got:
        dist.all_reduce(t)
    assert str(got.value).startswith(
        "all_reduce on group 0 [0] (hpref_checked): the reduced tensor (shape [4], strides [0]) has elements "
        "sharing one memory location (an expand()ed view)")
    with pytest.raises(CommUsageError, match=r"all_gather on group 0 \[0\] \(hpref_checked\): the output tensor"):
        dist.all_gather([torch.zeros(1).expand(2)], torch.ones(2))
    assert ht.comm_of(world)._seq == {}  # refused before the signatures were exchanged
    out = torch.zeros(2)
    dist.all_gather([out], torch.tensor([3.0]).expand(2))  # read, not written: taken
    assert out.tolist() == [3.0, 3.0] and ht.comm_of(world)._seq == {0: 1}


# ---- what checked mode refuses that plain gloo runs (README, "Check a real job") ---------------------

@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_operations_plain_gloo_runs_are_refused_at_once_naming_them(one):
    ht.enable(["gloo"])
    world = init_one("gloo")  # named gloo, as the code asks: torch's own checks take it for gloo
    calls = {
        "all_reduce SUM over torch.float16": lambda: dist.all_reduce(torch.ones(2, dtype=torch.float16)),
        "all_reduce SUM over torch.uint8": lambda: dist.all_reduce(torch.ones(2, dtype=torch.uint8)),
        "all_reduce PRODUCT over torch.float32": lambda: dist.all_reduce(torch.ones(2), op=dist.ReduceOp.PRODUCT),
        "reduce_scatter_tensor on group 0": lambda: dist.reduce_scatter_tensor(torch.ones(2), torch.ones(2)),
        "send/isend on group 0": lambda: world.send([torch.ones(2)], 0, 0),
        "monitored_barrier on group 0": lambda: dist.monitored_barrier(),
    }
    for what, call in calls.items():
        with pytest.raises(CommUsageError) as got:
            call()
        assert str(got.value).startswith(what), (what, str(got.value))
    assert ht.comm_of(world)._seq == {}  # refused before the signatures were exchanged


def test_a_failed_library_work_is_named_by_its_library():
    from hpref._torch_comm import _GlooWork

    class Failing:
        def wait(self, *args):
            raise RuntimeError("ncclInternalError: something")

        def is_completed(self):
            return True

    for library in ("gloo", "nccl"):
        with pytest.raises(hpref.CommError, match=f"^all_reduce on group 0 \\[0\\] failed in {library}: ncclInternal"):
            _GlooWork(Failing(), "all_reduce on group 0 [0]", (), library).wait()


# ---- forked ranks over real gloo ------------------------------------------------------------------

LEAVE_WAIT_S = 30.0


def _rank_main(rank, world, tmp, fn, args, env):
    os.environ.update(env, GLOO_SOCKET_IFNAME="lo")
    torch.set_num_threads(1)
    out = {"rank": rank}
    try:
        out["value"] = fn(rank, world, os.path.join(tmp, "store"), *args)
        out["status"] = "ok"
    except BaseException as e:  # noqa: BLE001 - reported per rank
        out.update(status="error", type=type(e).__name__, message=str(e), where=traceback.format_exc()[-2000:])
    path = os.path.join(tmp, f"rank{rank}.pt")
    torch.save(out, path + ".part")
    os.replace(path + ".part", path)
    # Leave together (outside gloo's sockets): a rank that exits while a peer still reads its
    # connection can fail that peer with "Connection closed by peer" (pytorch/gloo#155; CI
    # saw it under load when rank 2 left _local_synchronization right after init). Bounded,
    # so a hung peer (killed by forked_results) does not hold the others past LEAVE_WAIT_S.
    deadline = time.monotonic() + LEAVE_WAIT_S
    while time.monotonic() < deadline and not all(
            os.path.exists(os.path.join(tmp, f"rank{r}.pt")) for r in range(world)):
        time.sleep(0.01)
    os._exit(0)  # a rank whose peers failed must not wait in gloo's teardown


def runn(tmp_path, name, world, fn, *args, env=None, limit_s=RUN_LIMIT_S):
    """fn(rank, world, store_path, *args) on ``world`` forked ranks; each rank's
    {"status": "ok", "value"} or {"status": "error", type, message}, or {"status": "died"}
    when still running ``limit_s`` after the start (killed) or gone without a result."""
    tmp = tmp_path / name
    tmp.mkdir()
    gc.collect()  # see the fixture one
    return forked_results(tmp, world, limit_s, _rank_main,
                          lambda r: (r, world, str(tmp), fn, args, dict(env or {})))


def _free_port():
    """A TCP port of 127.0.0.1 nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _init(rank, world, store_path, backend="gloo", timeout_s=30.0):
    dist.init_process_group(backend, store=dist.FileStore(store_path, world), rank=rank, world_size=world,
                            timeout=timedelta(seconds=timeout_s))


def _each(calls):
    """Runs each call, keeping its error's type and message: the rank goes on."""
    seen = []
    for call in calls:
        try:
            seen.append(("ok", call()))
        except hpref.Error as e:
            seen.append((type(e).__name__, str(e)))
    return seen


# ---- 4: subgroup messages name torch's group and the world ranks ---------------------------------

def _subgroup_messages(rank, world, store_path):
    ht.enable(["gloo"], timeout_s=4)
    _init(rank, world, store_path)
    g = dist.new_group([1, 2])
    if rank == 0:
        return "non-member"

    def staged():
        outs = [torch.zeros(2) for _ in range(2)]
        inp = torch.ones(4)[::2]
        work = dist.all_gather(outs, inp, group=g, async_op=True)
        inp.add_(1)
        work.wait()

    def contiguous():
        inp, out = torch.ones(4), torch.empty(4)
        work = dist.all_to_all_single(out, inp, group=g, async_op=True)
        inp.add_(1)
        work.wait()

    def late():
        if rank == 2:
            time.sleep(7)
        dist.all_reduce(torch.ones(1), group=g)

    seen = _each([lambda: dist.reduce(torch.ones(1), dst=1, group=g), staged, contiguous])
    dist.barrier(group=g)
    return seen + _each([late])


def test_subgroup_errors_name_torchs_group_and_the_world_rank(tmp_path):
    res = runn(tmp_path, "names", 3, _subgroup_messages)
    assert res[0] == {"rank": 0, "value": "non-member", "status": "ok"}, res[0]
    for r in (1, 2):
        assert res[r]["status"] == "ok", res[r]
        seen = res[r]["value"]
        assert seen[0] == ("CommUsageError", "reduce on group 1 [1, 2] (gloo) is not supported: hpref's process "
                                             "group offers the communicator's operations only (SPEC 9.1: "
                                             "all_reduce, broadcast, all_gather, all_to_all, barrier); "
                                             "point-to-point and the other collectives are not simulated")
        assert seen[1] == ("CommBufferMutatedError",
                           f"all_gather on group 1 seq 0 [1, 2] (gloo): rank {r} changed input tensor 0 between "
                           "launch and wait() (a real backend may read it at any time before wait)")
        assert seen[2] == ("CommBufferMutatedError",
                           f"all_to_all_v on group 1 seq 1 [1, 2]: rank {r} changed its send buffer of 16 bytes "
                           "between launch and wait() (the backend may read it at any time before wait() returns)")
    kind, message = res[1]["value"][3]  # rank 2 comes 7 s late to the 4 s deadline
    assert kind == "CommTimeoutError", message
    assert re.match(r"the signature exchange of all_reduce on group 1 seq 3 \[1, 2\]: rank 1 waited (\d+\.\d) s "
                    r"since the launch, the 4 s deadline; last launches: rank 1: all_reduce seq 3 .*; "
                    r"rank 2: barrier seq 2 .*\(a checked launch, async_op=True too, returns only once every "
                    r"member has launched the operation: ", message), message
    assert 3.5 <= float(re.search(r"waited (\S+) s", message).group(1)) < 7.0, message
    # Rank 1 has given the group up after its own timeout (its gloo pair to rank 2 may be
    # closed by then, or not yet): a peer failure or a timeout.
    kind, message = res[2]["value"][3]
    assert kind in ("CommPeerFailedError", "CommTimeoutError"), message
    assert "group 0" not in message and "all_reduce on group 1 seq 3 [1, 2]" in message, message


# ---- 3: new_group(use_local_synchronization=True) -------------------------------------------------

def _local_synchronization(rank, world, store_path):
    ht.enable(["gloo"], timeout_s=20)
    _init(rank, world, store_path)
    if rank in (0, 1):
        dist.new_group([0, 1], use_local_synchronization=True)
    return "made"


@pytest.mark.skipif(not TORCH2, reason="torch 1.13's new_group has no use_local_synchronization")
def test_use_local_synchronization_is_refused_at_once_naming_the_flag(tmp_path):
    res = runn(tmp_path, "local", 3, _local_synchronization)
    for r in (0, 1):
        assert res[r].get("type") == "CommUsageError", res[r]
        assert res[r]["message"].startswith("new_group(use_local_synchronization=True) lets the ranks outside the "
                                            "group skip the call; under hpref.torch.enable() every new_group is "
                                            "agreed over the checked world group"), res[r]
    assert res[2]["status"] == "ok", res[2]


# ---- 9: timeout_s is no deadline of the job's start ------------------------------------------------

def _slow_start(rank, world, store_path, late_rank, late_s, torch_timeout_s):
    ht.enable(["gloo"], timeout_s=2)
    if rank == late_rank:
        time.sleep(late_s)
        if late_s > torch_timeout_s:
            return "never came"
    _init(rank, world, store_path, timeout_s=torch_timeout_s)
    t = torch.ones(1)
    dist.all_reduce(t)
    return t.item()


def test_a_rank_starting_later_than_timeout_s_is_waited_for_within_torchs_timeout(tmp_path):
    res = runn(tmp_path, "late", 2, _slow_start, 1, 5.0, 30.0)
    assert [(r["status"], r.get("value")) for r in res] == [("ok", 2.0)] * 2, [r.get("message") for r in res]


def test_a_rank_that_never_comes_is_a_timeout_naming_it(tmp_path):
    res = runn(tmp_path, "never", 2, _slow_start, 1, 6.0, 3.0)
    assert res[1]["value"] == "never came"
    assert res[0].get("type") == "CommTimeoutError", res[0]
    assert re.fullmatch(r"making a checked gloo group of ranks \[0, 1\] \(rank 0 of 2\): rank 1 did not come "
                        r"within \d+\.\d s \(the group's torch timeout, 3 s\)", res[0]["message"]), res[0]


# ---- 10: wait(timeout=...) ------------------------------------------------------------------------

def _short_wait(rank, world, store_path):
    ht.enable(["gloo"], timeout_s=30)
    _init(rank, world, store_path)
    t = torch.ones(1 << 23)  # 32 MiB: gloo needs far more than a millisecond for it
    work = dist.all_reduce(t, async_op=True)
    if rank == 0:
        try:
            work.wait(timeout=timedelta(milliseconds=1))
        finally:
            time.sleep(3)  # the peer's own wait completes meanwhile (gloo goes on)
        return "waited"
    work.wait()
    return t[0].item()


def test_wait_gives_up_past_the_timeout_it_is_given(tmp_path):
    res = runn(tmp_path, "wait", 2, _short_wait)
    assert res[0].get("type") == "CommTimeoutError", res[0]
    assert re.match(r"all_reduce on group 0 seq 0 \[0, 1\]: rank 0 waited \d+\.\d s since the launch, the "
                    r"0\.001 s given to wait\(\); last launches: rank 0: all_reduce seq 0", res[0]["message"]), res[0]
    assert res[1]["status"] == "ok", res[1]


# ---- a work dropped, or whose wait(timeout) gave up, before gloo finished ----------------------------------

def _dropped(rank, world, store_path, how):
    ht.enable(["gloo"], timeout_s=30)
    _init(rank, world, store_path)
    n = 1 << 23  # 32 MiB a tensor: the staged output (64 MiB) is mapped memory, unmapped when freed
    outs = [torch.zeros(n) for _ in range(world)]
    work = dist.all_gather(outs, torch.full((n,), float(rank + 1)), async_op=True)
    if how == "timeout":
        with pytest.raises(CommTimeoutError) as got:
            work.wait(timeout=timedelta(milliseconds=1))  # gloo goes on moving the bytes
        # What unittest and loggers do: the frames' locals (the old wait()'s own reference to
        # the staged memory) go, so the work no longer keeps it alive by accident.
        traceback.clear_frames(got.value.__traceback__)
        del got
    del work
    gc.collect()
    junk = [torch.zeros(n) for _ in range(4)]  # the freed memory again, were it freed
    time.sleep(2)  # gloo finishes meanwhile
    dirty = [int(torch.count_nonzero(j)) for j in junk]
    dist.barrier()  # a dropped work that finished is completed here: its copies made, as gloo writes them
    return dirty, [o[0].item() for o in outs]


@pytest.mark.parametrize("how", ["dropped", "timeout"])
def test_memory_gloo_still_writes_outlives_a_dropped_or_timed_out_work(tmp_path, how):
    res = runn(tmp_path, how, 2, _dropped, how)
    for r in res:
        assert r["status"] == "ok", r  # the old code: SIGSEGV ("died") or junk written
        dirty, firsts = r["value"]
        assert dirty == [0, 0, 0, 0], r
        assert firsts == ([1.0, 2.0] if how == "dropped" else [0.0, 0.0]), r


# ---- all_to_all_single whose output is (or overlaps) its input ------------------------------------------

def _a2a_in_place(rank, world, store_path):
    ht.enable(["gloo"], timeout_s=20)
    _init(rank, world, store_path)
    seen = []
    t = torch.arange(4.0) + 10 * rank
    work = dist.all_to_all_single(t, t, async_op=True)
    time.sleep(0.3)  # gloo has written the output (the input) by now
    work.wait()
    seen.append(t.tolist())
    buf = torch.arange(6.0) + 10 * rank
    work = dist.all_to_all_single(buf[2:], buf[:4], async_op=True)  # overlapping, not the same
    time.sleep(0.3)
    work.wait()
    seen.append(buf.tolist())
    return seen


def test_an_all_to_all_whose_output_overlaps_its_input_answers_like_the_simulator(tmp_path):
    res = runn(tmp_path, "a2a", 2, _a2a_in_place)
    # the old code: a false BufferMutated on one rank, wrong data on the other
    assert [r.get("value") for r in res] == [[[0.0, 1.0, 10.0, 11.0], [0.0, 1.0, 0.0, 1.0, 10.0, 11.0]],
                                             [[2.0, 3.0, 12.0, 13.0], [10.0, 11.0, 2.0, 3.0, 12.0, 13.0]]], res


# ---- DistributedDataParallel on a checked group -------------------------------------------------

def _ddp(rank, world, store_path):
    ht.enable(["gloo"], timeout_s=15)
    _init(rank, world, store_path)
    torch.manual_seed(0)
    start = time.monotonic()
    try:
        model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 2))
    except CommUsageError as e:
        return ["refused", time.monotonic() - start, str(e)]
    model(torch.ones(3, 4) * (rank + 1)).sum().backward()
    return ["ran", time.monotonic() - start, model.module.weight.grad[0].tolist()]


def test_ddp_on_a_checked_group_runs_on_torch2_and_is_refused_at_once_on_torch1(tmp_path):
    res = runn(tmp_path, "ddp", 2, _ddp, limit_s=45)  # the old code on 1.13: waits forever ("died")
    for r in res:
        assert r["status"] == "ok", r
        what, seconds, detail = r["value"]
        if TORCH2:
            assert what == "ran" and detail == [4.5] * 4, r  # the mean of 3 x 1 and 3 x 2
        else:
            assert what == "refused" and seconds < 5, r
            assert detail == ("DistributedDataParallel (_verify_params_across_processes) on group 0 [0, 1] (gloo) "
                              "needs torch 2.x: torch 1.13's C++ waits on a Python process group's work where it "
                              "never completes"), r


# ---- 12: the store's timeout after a failure (torch 1.13's stores have no check()) ------------------------

def _store_after_failure(rank, world, store_path):
    ht.configure(timeout_s=2)
    _init(rank, world, store_path, backend="hpref_checked", timeout_s=20)
    store = dist.distributed_c10d._get_default_store()
    before = store.timeout
    if rank == 1:
        time.sleep(5)
        return "late"
    try:
        dist.all_reduce(torch.ones(1))
    except hpref.CommError as e:
        return [type(e).__name__, before.total_seconds(), store.timeout.total_seconds()]
    return "completed"


def test_the_stores_timeout_is_left_as_torch_set_it_after_a_timeout(tmp_path):
    res = runn(tmp_path, "store", 2, _store_after_failure)
    kind, before, after = res[0]["value"]
    assert kind == "CommTimeoutError" and after == before, res[0]  # not the 0.5 s of a look-up


# ---- 8: torch 2.x's functional all_gather ---------------------------------------------------------

def _functional(rank, world, store_path):
    from torch.distributed import _functional_collectives as fc
    ht.enable(["gloo"], timeout_s=20)
    _init(rank, world, store_path)
    t = torch.full((2,), float(rank))
    gather = getattr(fc, "all_gather_single", None) or fc.all_gather_tensor
    return [gather(t, 0, dist.group.WORLD).tolist(), fc.all_reduce(t, "sum", dist.group.WORLD).tolist()]


@pytest.mark.skipif(not TORCH2, reason="torch 1.13 has no functional collectives")
@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_the_functional_all_gather_runs_checked(tmp_path):
    res = runn(tmp_path, "functional", 2, _functional)
    assert [r.get("value") for r in res] == [[[0.0, 0.0, 1.0, 1.0], [1.0, 1.0]]] * 2, res

def _new_group_default_vs_gloo(rank, world, store_path):
    ht.enable(["gloo"])
    dist.init_process_group(store=dist.FileStore(store_path, world), rank=rank, world_size=world,
                            timeout=timedelta(seconds=30))  # no backend: torch's default
    group = dist.new_group([0, 1]) if rank == 0 else dist.new_group([0, 1], backend="gloo")
    t = torch.ones(2)
    dist.all_reduce(t, group=group)
    return t.tolist()


@pytest.mark.skipif(not TORCH2, reason="torch 1.13's init_process_group requires a backend name")
def test_new_group_with_the_default_backend_agrees_with_one_naming_its_library(tmp_path):
    """With init_process_group() naming no backend, new_group(ranks) on one rank and
    new_group(ranks, backend="gloo") on another make the same gloo group on a machine
    without an accelerator (plain gloo runs it); the checked world agreed the names asked for
    and refused it ("rank 0 asked for [0, 1] on undefined but rank 1 asked for [0, 1] on
    gloo", a checked-mode audit). Agreed by the libraries the names resolve to now."""
    res = runn(tmp_path, "default_vs_gloo", 2, _new_group_default_vs_gloo)
    assert [r.get("value") for r in res] == [[2.0, 2.0]] * 2, res


# ---- gaps a mutation sample found (2026-12-03): each test fails with its mutant -------------
# (C = hpref/_checked.py, T = hpref/_torch_comm.py, H = hpref/torch.py; docs/verification.md)

# ---- test_checked.py ("the signature code is the C++ one") -------------------------------------

def test_new_group_backend_names_cut_to_the_signatures_room_stay_told_apart():
    """C03. Two ranks asking for new_groups whose backend names agree in the 16 bytes a
    2-member signature holds, and differ after them: the message must not show the two
    requests as the same text (the cut name carries its crc32)."""
    n = 2
    a = _checked._new_group_signature(n, [0, 1], "b" * 16)         # fits the room exactly
    b = _checked._new_group_signature(n, [0, 1], "b" * 16 + "x")   # cut to the same 16 bytes
    with pytest.raises(hpref.CommMismatch) as got:
        _checked.check_signatures(a + b, 0, [0, 1], 3)
    msg = str(got.value)
    m = re.match(r"new_group mismatch on group 0 seq 3: rank 0 asked for \[0, 1\] on (.*) but rank 1 asked "
                 r"for \[0, 1\] on (.*)$", msg)
    assert m, msg
    assert m.group(1) != m.group(2), msg  # two different requests must read differently


# ---- test_checked.py or test_checked_more.py (in-process, no torch.distributed) -----------------

class _CopyWork:
    def __init__(self):
        self.done = False

    def wait(self, *args):
        self.done = True

    def is_completed(self):
        return True


class _OneRankAcceleratorComm:
    """The Communicator seam for a world of one whose world group holds accelerator memory
    (host memory standing in for it), with a to_host that counts its calls: what CheckedComm
    sees over an nccl TorchComm, without a GPU."""

    device = None

    def __init__(self, keep_copies=True):
        self.to_host_calls = 0
        self.keep_copies = keep_copies
        self.copies = []  # keeps each host copy alive (see the use-after-free test below)

    def rank(self):
        return 0

    def size(self):
        return 1

    def world(self):
        return CommGroup(0, (0,), 0, "nccl", "accelerator")

    def world_backend(self):
        return "nccl"

    def to_host(self, addr, nbytes):
        self.to_host_calls += 1
        copy = torch.frombuffer((ctypes.c_uint8 * nbytes).from_address(addr), dtype=torch.uint8).clone()
        if self.keep_copies:
            self.copies.append(copy)
        return copy  # like TorchComm.to_host on a CUDA device: view.cpu(), a new host tensor

    def all_to_all_v(self, group, in_addr, in_counts, out_addr, out_counts, space="host"):
        ctypes.memmove(out_addr, in_addr, int(in_counts[0]))
        return _CopyWork()

    def all_gather(self, group, in_addr, in_bytes, out_addr, out_bytes, space="host"):
        ctypes.memmove(out_addr, in_addr, in_bytes)
        return _CopyWork()


@pytest.mark.parametrize("check_buffers, copies", [(True, 0), (False, 0), ("all", 2)])
def test_accelerator_send_buffers_are_copied_to_the_host_only_with_all(check_buffers, copies):
    """C12. check_buffers=True (the default) checks host buffers only: an accelerator send
    buffer costs a device sync and a host copy at launch and at wait, so it is copied only
    with "all" (CheckedComm's docstring, hpref.torch.configure)."""
    inner = _OneRankAcceleratorComm()
    comm = _checked.CheckedComm(inner, check_buffers=check_buffers, timeout_s=10)
    src, out = torch.arange(4, dtype=torch.uint8), torch.zeros(4, dtype=torch.uint8)
    comm.all_gather(inner.world(), src.data_ptr(), 4, out.data_ptr(), 4, "accelerator").wait()
    assert out.tolist() == [0, 1, 2, 3]
    assert inner.to_host_calls == copies


def test_an_unchanged_accelerator_send_buffer_is_no_buffer_mutated():
    """Not a mutant: a bug this sample found. With check_buffers="all", CheckedComm._checksum
    checksums ``self._to_host(addr, nbytes).data_ptr()``: the host copy (TorchComm.to_host on
    a CUDA device returns ``view.cpu()``, a new tensor) is freed before buffer_checksum reads
    it, so an unchanged send buffer can read as changed (a false BufferMutated) and a changed
    one as unchanged. Fails today (0 of 20 clean all_gathers pass with a to_host returning a
    fresh tensor); passes once the copy is kept alive across the checksum."""
    inner = _OneRankAcceleratorComm(keep_copies=False)
    comm = _checked.CheckedComm(inner, check_buffers="all", timeout_s=10)
    for _ in range(20):
        src, out = torch.arange(64, dtype=torch.uint8), torch.zeros(64, dtype=torch.uint8)
        comm.all_gather(inner.world(), src.data_ptr(), 64, out.data_ptr(), 64, "accelerator").wait()
        assert out.tolist() == list(range(64))


class _ReadAtWaitWork:
    """A host work whose backend reads the send buffer only inside wait(), after ``during``
    (another thread of the caller's, or a later in-place operation, changing the buffer
    while wait() runs)."""

    def __init__(self, comm, in_addr, out_addr, nbytes):
        self.comm, self.args = comm, (out_addr, in_addr, nbytes)

    def wait(self, *args):
        if self.comm.during is not None:
            self.comm.during()
        ctypes.memmove(*self.args)

    def is_completed(self):
        return True


class _OneRankReadAtWaitComm(_OneRankAcceleratorComm):
    """A world of one in host memory whose all_to_all_v reads its send buffer at wait()."""

    during = None

    def world(self):
        return CommGroup(0, (0,), 0, "gloo", "host")

    def world_backend(self):
        return "gloo"

    def all_to_all_v(self, group, in_addr, in_counts, out_addr, out_counts, space="host"):
        return _ReadAtWaitWork(self, in_addr, out_addr, int(in_counts[0]))

    def barrier(self, group):
        return _CopyWork()


def test_a_send_buffer_changed_while_wait_runs_is_named():
    """A change made while wait() runs - before the backend has read the buffer - was missed:
    the wait-side checksum was taken before the backend's wait (a checked-mode audit: an
    async all_to_all_single whose send buffer a later in-place all_reduce, or a prefetch
    thread, wrote gave silently wrong bytes on real gloo). Compared after it now, as the C++
    checked mode does; the bytes the backend moved are the changed ones, so this is no false
    alarm."""
    inner = _OneRankReadAtWaitComm()
    comm = _checked.CheckedComm(inner, timeout_s=10)
    src, out = torch.arange(16, dtype=torch.uint8), torch.zeros(16, dtype=torch.uint8)
    comm.all_to_all_v(inner.world(), src.data_ptr(), [16], out.data_ptr(), [16], "host").wait()
    assert out.tolist() == list(range(16))  # unchanged: no error
    work = comm.all_to_all_v(inner.world(), src.data_ptr(), [16], out.data_ptr(), [16], "host")
    inner.during = lambda: src.fill_(7)
    with pytest.raises(CommBufferMutatedError, match=r"all_to_all_v on group 0 seq 1 \[0\]: rank 0 changed "
                                                     r"its send buffer of 16 bytes between launch and wait\(\)"):
        work.wait()
    assert out.tolist() == [7] * 16


def test_a_second_thread_launching_on_a_group_mid_launch_is_named_at_once():
    """Two threads calling one checked group: each checked operation is two operations of
    gloo underneath, which the threads interleaved differently on each rank, and every rank
    waited out its deadline (30 minutes by default; a checked-mode audit). A launch while
    another thread's launch on the same group is in progress is comm_usage at once, naming
    both threads; the first launch goes on."""
    import threading

    inner = _OneRankReadAtWaitComm()
    comm = _checked.CheckedComm(inner, timeout_s=10)
    src, out = torch.arange(4, dtype=torch.uint8), torch.zeros(4, dtype=torch.uint8)
    seen = []

    def second():
        try:
            comm.barrier(inner.world())
            seen.append("launched")
        except hpref.Error as e:
            seen.append((type(e).__name__, str(e)))

    def during():  # the first launch's signature exchange is in flight
        inner.during = None
        t = threading.Thread(target=second, name="prefetch")
        t.start()
        t.join(10)

    inner.during = during
    comm.all_to_all_v(inner.world(), src.data_ptr(), [4], out.data_ptr(), [4], "host").wait()
    assert out.tolist() == [0, 1, 2, 3]
    assert seen == [("CommUsageError",
                     f"barrier on group 0: launched by thread 'prefetch' while thread "
                     f"{threading.current_thread().name!r} is launching all_to_all_v on the same group; a "
                     "Communicator, here the group's, is driven by one thread at a time (SPEC 9.1): each checked "
                     "operation is two operations of the library underneath, which two threads interleave "
                     "differently on each rank")], seen
    assert comm._launching == {}  # the first launch's marker went with it

    def interrupted():  # a KeyboardInterrupt inside a launch leaves no marker behind
        inner.during = None
        raise KeyboardInterrupt

    inner.during = interrupted
    with pytest.raises(KeyboardInterrupt):
        comm.all_to_all_v(inner.world(), src.data_ptr(), [4], out.data_ptr(), [4], "host")
    assert comm._launching == {}
    comm.barrier(inner.world()).wait()  # the group goes on: seq 2 (the refused launch took none)
    assert comm.last_launches() == "unknown (no store)" and comm._seq[inner.world().id] == 3


def test_last_launches_of_an_earlier_default_group_are_not_shown_as_this_runs():
    """A job that destroys its default group and makes it again over the same store (torch
    allows it) found the first run's "last launch" keys: a timeout in run 1 said "rank 1:
    all_reduce seq 5" for a rank that had launched nothing in it (a checked-mode audit).
    An entry of another run reads as nothing."""
    inner = _OneRankReadAtWaitComm()
    store = dist.HashStore()
    first = _checked.CheckedComm(inner, store=store, timeout_s=10)  # run 0
    src, out = torch.arange(4, dtype=torch.uint8), torch.zeros(4, dtype=torch.uint8)
    for _ in range(3):
        first.all_to_all_v(inner.world(), src.data_ptr(), [4], out.data_ptr(), [4], "host").wait()
    assert first.last_launches().startswith("rank 0: all_to_all_v seq 2")
    second = _checked.CheckedComm(inner, store=store, timeout_s=10, run=1)
    assert second.last_launches() == "rank 0: nothing"
    second.all_to_all_v(inner.world(), src.data_ptr(), [4], out.data_ptr(), [4], "host").wait()
    assert second.last_launches().startswith("rank 0: all_to_all_v seq 0")


def test_a_launch_entry_that_is_not_a_launch_reads_as_unreadable_and_the_store_stays_in_use():
    """A key holding something other than a launch's JSON object is named unreadable, with
    why; unlike a failed store call it does not stop the store's use."""
    inner = _OneRankReadAtWaitComm()
    store = dist.HashStore()
    comm = _checked.CheckedComm(inner, store=store, timeout_s=10, latest_store=lambda: store)
    for value, why in ((b"\xff", "UnicodeDecodeError"), (b"{", "JSONDecodeError"), (b"[1]", "not a launch"),
                       (b'{"rank": 0}', "not a launch")):
        store.set(f"{_checked.LAST_KEY}0", value)
        assert comm.last_launches() == f"rank 0: unreadable ({why})"
    src, out = torch.arange(4, dtype=torch.uint8), torch.zeros(4, dtype=torch.uint8)
    comm.all_to_all_v(inner.world(), src.data_ptr(), [4], out.data_ptr(), [4], "host").wait()
    assert comm.last_launches().startswith("rank 0: all_to_all_v seq 0")


# ---- test_checked_more.py ("11: options", "2: enable()'s backend names") --------------------------

def test_the_default_deadline_is_the_groups_torch_timeout(one):
    """H01. With no timeout_s configured (nor HPREF_CHECKED_TIMEOUT_S), a checked group's
    deadline is the group's own torch timeout, not a fixed 30 minutes."""
    assert ht.options(timedelta(seconds=7))["timeout_s"] == 7.0
    assert ht.options()["timeout_s"] == 1800.0
    # A group timeout of zero or less would expire every wait at once; 7 (no timedelta) is
    # no timeout at all: both named, not taken as a deadline of -5 or 7 seconds.
    for bad in (timedelta(seconds=-5), timedelta(0), 7):
        with pytest.raises(hpref.errors.InvalidArgumentError,
                           match=r"the group's torch timeout \(torch_timeout\) must be a timedelta > 0, got "):
            ht.options(bad)
    world = init_one()  # timeout=30 s
    assert ht.comm_of(world)._timeout_s == 30.0


def test_checked_options_apply_to_its_own_group_only(one):
    """H08. checked()'s keyword options override configure()'s for the twin it makes, and
    only for it: a group made afterwards gets configure()'s options again."""
    ht.configure(timeout_s=9)
    init_one()
    twin = ht.checked(timeout_s=3, check_buffers=False)
    assert ht.comm_of(twin)._timeout_s == 3.0 and ht.comm_of(twin).check_buffers is False
    assert ht.options() == {"timeout_s": 9.0, "log_dir": None, "check_buffers": True}
    later = ht.checked()
    assert ht.comm_of(later)._timeout_s == 9.0 and ht.comm_of(later).check_buffers is True


@pytest.mark.parametrize("name", ["hpref_checked", "HPREF_CHECKED_NCCL"])
def test_enable_refuses_the_checked_backends_own_names(one, name):
    """H09. enable() takes the library names the code uses; a checked backend's own name
    is refused at once, naming it, and nothing is wrapped."""
    with pytest.raises(CommUsageError, match=re.escape(f"not {name.lower()!r}: groups of {name.lower()!r} are "
                                                       "checked already")):
        ht.enable([name])
    assert "original" not in ht._ENABLED


def test_enable_again_replaces_the_checked_libraries(one):
    """H10. A second enable() call sets which libraries are checked from now on."""
    ht.enable([])
    ht.enable(["gloo"])
    world = init_one("gloo")
    assert isinstance(ht.comm_of(world), _checked.CheckedComm) and dist.get_backend() == "gloo"


def test_disable_resets_configures_options(one):
    """H12. disable() undoes enable() and resets configure()'s options (its docstring)."""
    ht.enable(["gloo"], timeout_s=5, check_buffers=False)
    assert ht.options()["timeout_s"] == 5.0
    ht.disable()
    assert ht.options() == {"timeout_s": 1800.0, "log_dir": None, "check_buffers": True}


# ---- test_torch_pg.py / test_checked_more.py: TorchComm (GlooComm) on a world of one ------------------

@pytest.fixture
def gloo1(monkeypatch):
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "lo")
    store = dist.HashStore()
    inner = dist.ProcessGroupGloo(dist.PrefixStore("inner/", store), 0, 1, timedelta(seconds=2))
    return GlooComm(inner, store=store, timeout=timedelta(seconds=2))


def test_torch_comm_refuses_a_new_group_rank_outside_the_world(gloo1):
    """T05. new_group ranks must be world ranks in [0, size): size itself is refused at
    once (CommUsageError), not handed to gloo, which would wait for a rank that never comes."""
    start = time.monotonic()
    with pytest.raises(CommUsageError, match=r"new_group ranks \[0, 1\] must be distinct world ranks in \[0, 1\)"):
        gloo1.new_group([0, 1], "gloo")
    assert time.monotonic() - start < 1.0


def test_torch_comm_all_gather_refuses_an_output_of_another_size(gloo1):
    """T06. all_gather's out_bytes must be group.size x in_bytes: larger is refused too."""
    src, out = torch.arange(4, dtype=torch.uint8), torch.zeros(8, dtype=torch.uint8)
    world = gloo1.world()
    for out_bytes in (2, 8):
        with pytest.raises(CommUsageError, match=f"out_bytes {out_bytes} != group size 1 x in_bytes 4"):
            gloo1.all_gather(world, src.data_ptr(), 4, out.data_ptr(), out_bytes)


def test_torch_comm_all_reduce_refuses_a_partial_element(gloo1):
    """T13. all_reduce's nbytes must be a whole number of elements of its dtype."""
    t = torch.zeros(2, dtype=torch.float32)
    with pytest.raises(CommUsageError, match="6 bytes is not a whole number of float32"):
        gloo1.all_reduce(gloo1.world(), t.data_ptr(), 6, "float32", "sum")


def test_a_library_work_past_the_timeout_given_to_wait_is_comm_timeout():
    """T04. TorchComm's work: torch's "timed out" past a timeout given to wait() is
    CommTimeout (SPEC 9.2: the group's use ends), not a generic backend failure; the same
    error is raised by every later wait()."""
    class Slow:
        def wait(self, timeout=None):
            raise RuntimeError("[../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting "
                               "1ms for recv operation to complete")

        def is_completed(self):
            return False

    work = _GlooWork(Slow(), "all_reduce on group 0 [0]", (), "gloo")
    for _ in range(2):
        with pytest.raises(hpref.CommTimeout, match=r"^all_reduce on group 0 \[0\]: not complete within the "
                                                    r"0\.001 s given to wait\(\)"):
            work.wait(0.001)


# ---- test_checked_more.py (forked ranks over real gloo) ----------------------------------------------

def _subgroup_log(rank, world, store_path, log_dir):
    ht.enable(["gloo"], timeout_s=20, log_dir=log_dir)
    _init(rank, world, store_path)
    g = dist.new_group([1, 2])
    if rank in (1, 2):
        dist.all_reduce(torch.ones(2), group=g)
    dist.barrier()
    return "done"


def test_each_ranks_log_holds_its_own_lines_for_subgroups_too(tmp_path):
    """C16. HPREF_CHECKED_LOG / log_dir: rank R's operations, on every group it is in, go to
    <log_dir>/rank<R>.jsonl (what hpref verify reads per rank) — a subgroup's member whose
    group rank differs from its world rank included."""
    log = tmp_path / "log"
    res = runn(tmp_path, "log", 3, _subgroup_log, str(log))
    assert [r.get("value") for r in res] == ["done"] * 3, res
    for r in range(3):
        lines = [json.loads(x) for x in (log / f"rank{r}.jsonl").read_text().splitlines()]
        assert lines and {x["rank"] for x in lines} == {r}, (r, lines)
        sub = [x for x in lines if x["kind"] == "all_reduce"]
        assert (len(sub) == 1 and sub[0]["ranks"] == [1, 2]) if r in (1, 2) else not sub, (r, lines)


def _late_subgroup_member(rank, world, store_path):
    _init(rank, world, store_path, timeout_s=30)
    if rank == 2:
        time.sleep(6)
        return "never came"
    return type(ht.checked(ranks=[1, 2], timeout_s=2)).__name__


def test_a_subgroup_member_that_never_comes_is_named_by_its_world_rank(tmp_path):
    """H04. Making a checked twin of ranks [1, 2], where world rank 2 never comes: the
    CommTimeout names world rank 2 (the ranks the code knows), not its group rank 1."""
    res = runn(tmp_path, "late", 3, _late_subgroup_member)
    assert res[2]["value"] == "never came"
    assert res[1].get("type") == "CommTimeoutError", res[1]
    assert re.match(r"making a checked gloo group of ranks \[1, 2\] \(rank 0 of 2\): rank 2 did not come within",
                    res[1]["message"]), res[1]


def _crossed_groups(rank, world, store_path):
    ht.enable(["gloo"], timeout_s=2)
    _init(rank, world, store_path)
    a, b = dist.new_group([0, 1]), dist.new_group([0, 1])
    # Rank 0 waits on group a, rank 1 on group b: each is in the other's "nothing".
    return _each([lambda: dist.all_reduce(torch.ones(1), group=a if rank == 0 else b)])


def test_a_member_waiting_on_another_group_is_named_with_its_latest_launch(tmp_path):
    """A checked-mode audit: a member blocked in another group's operation read as "rank 1:
    nothing" in this group's timeout, which sent the reader looking for a rank that never
    came. Each launch is also kept under the rank's world rank in the job's default store,
    and the timeout names a member's latest launch where it is on another group."""
    res = runn(tmp_path, "crossed", 2, _crossed_groups)
    for r, (mine, other) in ((0, (1, 2)), (1, (2, 1))):
        assert res[r]["status"] == "ok", res[r]
        [(kind, message)] = res[r]["value"]
        assert kind == "CommTimeoutError", message
        peer = 1 - r
        want = (f"the signature exchange of all_reduce on group {mine} seq 0 [0, 1]: rank {r} waited ")
        assert message.startswith(want), message
        assert (f"rank {peer}: nothing (latest launch: all_reduce on group {other} seq 0)" in message), message
        assert f"rank {r}: all_reduce seq 0 (op sum, dtype float32, bytes 4)" in message, message


def _raises_and_leaves(rank, world, store_path):
    ht.enable(["gloo"], timeout_s=10)
    _init(rank, world, store_path)
    src, out = torch.ones(world), torch.empty(world)
    work = dist.all_to_all_single(out, src, async_op=True)
    if rank == 2:
        src.add_(1)
        try:
            work.wait()
        except hpref.BufferMutated:
            # Leaves at once, as a job whose rank raised does, with its result where runn
            # reads it (the others wait for every result before they leave).
            torch.save({"rank": rank, "status": "ok", "value": "left"},
                       os.path.join(os.path.dirname(store_path), f"rank{rank}.pt"))
            os._exit(0)
    work.wait()
    return _each([lambda: dist.all_reduce(torch.ones(1))])


def _gives_up(rank, world, store_path):
    ht.enable(["gloo"], timeout_s=2)
    _init(rank, world, store_path)
    dist.barrier()
    if rank == 1:  # comes once rank 0 has given the all_reduce up (its result is written)
        while not os.path.exists(os.path.join(os.path.dirname(store_path), "rank0.pt")):
            time.sleep(0.05)
    return _each([lambda: dist.all_reduce(torch.ones(1))])


def test_a_peer_that_raised_is_named_with_what_it_raised(tmp_path):
    """A checked-mode audit: the members of a rank that raised (a send buffer changed) and
    left read "a peer went away" naming no rank, and a straggler whose peer had timed out
    and given up read the same. A wait that raises keeps "<kind> at <operation>" beside the
    rank's latest launch in the job's store, and the others' messages name it."""
    res = runn(tmp_path, "left", 3, _raises_and_leaves)
    assert res[2]["value"] == "left", res[2]
    for r in (0, 1):
        [(kind, message)] = res[r]["value"]
        assert kind in ("CommPeerFailedError", "CommTimeoutError"), message
        # (the other survivor may have raised first: "rank 1: ..., whose last wait raised comm_peer_failed at ...")
        assert ("rank 2: all_to_all_v seq 0 (bytes 12, counts_in [4, 4, 4], counts_out [4, 4, 4]), whose last wait raised "
                "comm_buffer_mutated at all_to_all_v on group 0 seq 0 [0, 1, 2]") in message, message
    res = runn(tmp_path, "late", 2, _gives_up)
    [(kind, message)] = res[0]["value"]
    assert kind == "CommTimeoutError" and "rank 1: barrier seq 0" in message, message
    [(kind, message)] = res[1]["value"]
    assert kind in ("CommPeerFailedError", "CommTimeoutError"), message
    assert ("rank 0: all_reduce seq 1 (op sum, dtype float32, bytes 4), whose last wait raised comm_timeout at the signature "
            "exchange of all_reduce on group 0 seq 1 [0, 1]") in message, message


def _store_host_leaves(rank, world, store_path, port):
    tmp = os.path.dirname(store_path)
    err = os.open(os.path.join(tmp, f"stderr{rank}"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(err, 2)  # torch's C++ warnings, counted below
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    ht.enable(["gloo"], timeout_s=10)
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=timedelta(seconds=30))  # env://
    dist.barrier()
    if rank == 0:  # the TCPStore's server goes with it
        torch.save({"rank": rank, "status": "ok", "value": "left"}, os.path.join(tmp, f"rank{rank}.pt"))
        os._exit(0)
    time.sleep(0.5)
    seen = _each([lambda: dist.all_reduce(torch.ones(1))])
    with open(os.path.join(tmp, f"stderr{rank}")) as f:
        warnings = f.read().count("sendBytes failed")
    return seen, warnings


def test_a_store_gone_with_its_host_is_said_once_not_asked_again(tmp_path):
    """A checked-mode audit: when the rank serving the job's TCPStore (rank 0, env://) went,
    each survivor's peer failure read every member's keys from the dead store, and torch
    printed a page of C++ stack trace for each failed call (8 or 9 per rank, 280 lines for
    two ranks). The first failed call is kept; the message says the store is unreachable
    and why, and no call is made after it."""
    port = _free_port()
    res = runn(tmp_path, "host", 3, _store_host_leaves, port)
    assert res[0]["value"] == "left", res[0]
    for r in (1, 2):
        assert res[r]["status"] == "ok", res[r]
        [(kind, message)], warnings = res[r]["value"]
        assert kind in ("CommPeerFailedError", "CommTimeoutError"), message
        assert re.search(r"; last launches: unknown: a call to the job's store failed \(\w+: .+\), as when the "
                         r"process serving it is gone \(rank 0's with init_method env://\)$", message), message
        assert warnings <= 1, (warnings, message)


def _fails_to_launch(rank, world, store_path, where):
    ht.enable(["gloo"], timeout_s=2)
    _init(rank, world, store_path)
    dist.barrier()
    if rank == 0:
        return _each([lambda: dist.all_reduce(torch.ones(1))])

    def no_memory(*args, **kwargs):
        raise RuntimeError("out of memory (the test's)")

    if where == "exchange":  # the signature exchange's buffers are not made
        _checked._u8 = no_memory
    else:  # agreed, then gloo's all_reduce not launched
        from hpref._torch_comm import TorchComm
        TorchComm.all_reduce = no_memory
    try:
        dist.all_reduce(torch.ones(1))
        seen = "launched"
    except RuntimeError as e:
        seen = str(e)
    while not os.path.exists(os.path.join(os.path.dirname(store_path), "rank0.pt")):
        time.sleep(0.05)  # stays while rank 0 reads the store
    return seen


@pytest.mark.parametrize("where", ["exchange", "operation"])
def test_a_launch_that_failed_outside_the_checks_is_named_with_what_it_raised(tmp_path, where):
    """A checked launch that failed outside the exchange's own timeout and peer checks (the
    signature buffers not made, or the operation not launched once agreed; also a send-buffer
    checksum or the log file failing) left the rank's record saying only that it launched
    there: its peers' timeout read as if it waited with them. The record now says what it
    raised."""
    res = runn(tmp_path, where, 2, _fails_to_launch, where)
    assert res[1]["value"] == "out of memory (the test's)", res[1]
    [(kind, message)] = res[0]["value"]
    assert kind == "CommTimeoutError", message
    assert ("rank 1: all_reduce seq 1 (op sum, dtype float32, bytes 4), whose last wait raised RuntimeError at "
            "all_reduce on group 0 seq 1 [0, 1]") in message, message


def _caught_and_went_on(rank, world, store_path):
    ht.enable(["gloo"], timeout_s=2)
    _init(rank, world, store_path)
    a, b = dist.new_group([0, 1]), dist.new_group([0, 1])
    src, out = torch.ones(2), torch.empty(2)
    works = [dist.all_to_all_single(out, src, group=a, async_op=True),
             dist.all_reduce(torch.ones(1), group=a, async_op=True),
             dist.all_reduce(torch.ones(1), group=b, async_op=True)]  # the latest launch: on b
    if rank == 0:
        src.add_(1)
    seen = _each([work.wait for work in works])
    if rank == 0:
        time.sleep(3)  # computing, past rank 1's deadline
        return seen
    return seen + _each([lambda: dist.all_reduce(torch.ones(1), group=a)])


def test_a_rank_that_caught_an_error_and_went_on_shows_its_latest_launch_on_any_group(tmp_path):
    """A review of the record above: each group kept its own copy of the rank's latest launch
    and error, so group a's wait ending rewrote the rank's latest launch (on group b) with
    a's, and the error stayed or went by which group launched next. The record is now one
    per rank and run: rank 0 caught a BufferMutated on group a, completed two more waits
    (its error is gone) and last launched on group b."""
    res = runn(tmp_path, "caught", 2, _caught_and_went_on)
    assert [kind for kind, _ in res[0]["value"]] == ["CommBufferMutatedError", "ok", "ok"], res[0]
    kind, message = res[1]["value"][3]
    assert kind == "CommTimeoutError", message
    assert ("rank 0: all_reduce seq 1 (op sum, dtype float32, bytes 4) (latest launch: all_reduce on group 2 seq 0)"
            in message), message
    assert "whose last wait raised" not in message, message


def _store_dies_while_waiting(rank, world, store_path, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    ht.enable(["gloo"], timeout_s=3)
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=timedelta(seconds=30))  # env://
    g = dist.new_group([1, 2])
    dist.barrier()
    if rank == 0:  # leaves while rank 1 waits on g: its launch was kept, the reads fail
        time.sleep(1.0)
        torch.save({"rank": rank, "status": "ok", "value": "left"},
                   os.path.join(os.path.dirname(store_path), f"rank{rank}.pt"))
        os._exit(0)
    if rank == 2:
        time.sleep(6)  # past rank 1's deadline
        return "late"
    return _each([lambda: dist.all_reduce(torch.ones(1), group=g)])


def test_a_store_that_dies_while_a_rank_waits_is_not_read_as_nothing(tmp_path):
    """A review: on torch 1.13 (stores without check) a lookup's failure read as the key
    being absent, so a store gone while rank 1 waited said "rank 1: nothing; rank 2:
    nothing" - rank 1 had launched. Only a lookup that timed out is an absent key now."""
    port = _free_port()
    res = runn(tmp_path, "dies", 3, _store_dies_while_waiting, port)
    assert res[2]["value"] == "late", res[2]
    [(kind, message)] = res[1]["value"]
    assert kind == "CommTimeoutError", message
    assert "last launches: unknown: a call to the job's store failed (" in message, message


def test_asking_a_tcp_store_for_an_absent_key_leaves_its_connection_in_step():
    """store_has (a timeout message's lookups of members that launched nothing, a group's
    arrival check) asked torch 1.13's TCPStore, which has no check(), with a timed wait; its
    server answers that wait once the key is set, and the client read the answer as the
    reply to its next call: a get of another key raised "Socket Timeout" (a review's
    finding). compare_set against a value no key holds answers at once and sets nothing."""
    port = _free_port()
    server = dist.TCPStore("127.0.0.1", port, 2, True, timedelta(seconds=10), wait_for_workers=False)
    client = dist.TCPStore("127.0.0.1", port, 2, False, timedelta(seconds=10))
    server.set("other", "OTHER")
    assert not _checked.store_has(client, "k")
    server.set("k", "V")
    time.sleep(0.2)  # a late answer, where one is sent, has reached the client
    assert bytes(client.get("other")) == b"OTHER"
    assert _checked.store_has(client, "k") and bytes(client.get("k")) == b"V"


def test_a_rank_late_to_a_checked_groups_arrival_leaves_the_stores_connection_in_step():
    """A checked gloo group's arrival check (_arrive) waited for every rank's key with the
    store's own timed wait; on torch 1.13's TCPStore (no check()) the server answers that
    wait once the late rank sets its key, and the client that gave up read the answer as the
    reply to its next call ("Socket Timeout"). It polls such stores now."""
    port = _free_port()
    server = dist.TCPStore("127.0.0.1", port, 2, True, timedelta(seconds=10), wait_for_workers=False)
    client = dist.TCPStore("127.0.0.1", port, 2, False, timedelta(seconds=10))
    server.set("other", "OTHER")
    with pytest.raises(CommTimeoutError, match=r"\(rank 0 of 2\): rank 1 did not come within \d+\.\d s"):
        ht._arrive(client, 0, 2, timedelta(seconds=0.3))
    server.set(f"{ht._ARRIVED_KEY}1", "1")  # rank 1 comes, late
    time.sleep(0.2)  # a late answer, where one is sent, has reached the client
    assert bytes(client.get("other")) == b"OTHER"
    ht._arrive(client, 0, 2, timedelta(seconds=0.3))  # both there: returns


class _DictStore(dist.Store):
    """A Python Store with set, get and wait only (no check, no compare_set)."""

    def __init__(self):
        super().__init__()
        self.d = {}

    def set(self, key, value):
        self.d[key] = value

    def get(self, key):
        return self.d[key]

    def wait(self, keys, timeout=None):
        if not all(k in self.d for k in keys):
            raise RuntimeError("Wait timeout")


def test_a_checked_groups_arrival_over_a_python_store_without_compare_set():
    """A review of the polling above: on torch 1.13 a Python Store subclass without
    compare_set fails the binding's internal assert when it is asked ("fn INTERNAL ASSERT
    FAILED"), which store_has raised, and the arrival read every rank as absent ("ranks 0, 1
    did not come within 0.0 s"). Such a store is asked with its own wait."""
    inner = _DictStore()  # kept: the binding looks its methods up on the Python object
    store = dist.PrefixStore("x/", inner)
    store.set(f"{ht._ARRIVED_KEY}1", "1")
    ht._arrive(store, 0, 2, timedelta(seconds=0.3))  # both there: returns
    with pytest.raises(CommTimeoutError, match=r"\(rank 0 of 3\): rank 2 did not come within"):
        ht._arrive(store, 0, 3, timedelta(seconds=0.3))


# ---- test_checked_more.py ("polling a work") / test_torch_pg.py: a Work completes once -------------

def test_a_work_whose_wait_timed_out_stays_failed_with_the_same_error():
    """T02. OnceWork (SPEC 9.1/9.2: a Work completes once; a timeout ends the group's use):
    once wait(timeout) has raised CommTimeout, a later wait() raises that same error — it
    does not wait again and report success when the library finishes after all."""
    class LateWork:  # torch's Work: wait(timeout) times out, a plain wait() completes
        def wait(self, timeout=None):
            if timeout is not None:
                raise RuntimeError("Operation timed out!")
            return True

        def is_completed(self):
            return False

    work = _GlooWork(LateWork(), "all_reduce on group 0 [0, 1]", (), "gloo")
    with pytest.raises(hpref.CommTimeout) as first:
        work.wait(0.001)
    with pytest.raises(hpref.CommTimeout) as again:
        work.wait()
    assert again.value is first.value
    assert work.is_completed()


# ---- test_checked_more.py ("a work dropped ... before gloo finished") ------------------------------------

def _dropped_in_flight(rank, world, store_path):
    import gc
    from hpref import _torch_pg
    store = dist.FileStore(store_path, world)
    inner = dist.ProcessGroupGloo(dist.PrefixStore("inner/", store), rank, world, timedelta(seconds=30))
    _torch_pg.install(GlooComm(inner, store=store, timeout=timedelta(seconds=30)))
    try:
        alone = [dist.new_group([r]) for r in range(world)]
        n = 1 << 23  # 32 MiB a tensor: the staged output (64 MiB) is mapped memory, unmapped when freed
        outs = [torch.zeros(n) for _ in range(world)]
        if rank == 1:
            time.sleep(2)  # rank 0's all_gather waits for it meanwhile
        work = dist.all_gather(outs, torch.full((n,), float(rank + 1)), async_op=True)
        del work
        gc.collect()
        dirty = []
        if rank == 0:
            # An operation launched while the dropped one is still in flight (on a group of
            # rank 0 alone): it prunes the list of parked works, which must keep this one.
            dist.all_reduce(torch.ones(1), group=alone[0])
            junk = [torch.zeros(n) for _ in range(4)]  # the freed memory again, were it freed
            time.sleep(4)  # rank 1 comes; gloo writes the staged output meanwhile
            dirty = [int(torch.count_nonzero(j)) for j in junk]
        dist.barrier()  # the dropped work, finished by now, is completed here
        return dirty, [o[0].item() for o in outs]
    finally:
        _torch_pg.uninstall()


def test_a_dropped_work_still_in_flight_at_the_next_operation_keeps_its_memory(tmp_path):
    """T03. A work dropped unwaited stays parked (its staged memory alive) through every
    later operation until gloo has finished writing it, then is completed: an operation
    launched while it is in flight must not release it."""
    res = runn(tmp_path, "inflight", 2, _dropped_in_flight)
    assert [r["status"] for r in res] == ["ok", "ok"], res  # SIGSEGV ("died") when unmapped memory is written
    assert res[0]["value"] == ([0, 0, 0, 0], [1.0, 2.0]), res[0]
    assert res[1]["value"] == ([], [1.0, 2.0]), res[1]


# ---- test_torch_pg.py: TorchComm's own refusals (world of one) ------------------------------------------

def test_torch_comm_refuses_a_broadcast_root_outside_the_group(gloo1):
    """T07. broadcast's root must be a member: a world rank outside the group is refused at
    once (CommUsageError naming it), not handed to gloo as root index -1."""
    buf = torch.zeros(4, dtype=torch.uint8)
    for root in (1, -1):
        with pytest.raises(CommUsageError, match=f"root {root} .* is not a member"):
            gloo1.broadcast(gloo1.world(), buf.data_ptr(), 4, root)


def test_torch_comm_refuses_buffers_of_another_memory_space(gloo1):
    """T11. A group's operations take its memory space only (SPEC 9.1): a host buffer on an
    nccl-named (accelerator) group, or an accelerator one on the host world, is
    CommMemorySpaceError at once."""
    from hpref.errors import CommMemorySpaceError  # noqa: E402
    src, out = torch.arange(4, dtype=torch.uint8), torch.zeros(4, dtype=torch.uint8)
    acc = gloo1.new_group([0], "nccl")
    assert acc.memory == "accelerator"
    for group, space in ((acc, "host"), (gloo1.world(), "accelerator")):
        with pytest.raises(CommMemorySpaceError, match=f"takes {group.memory} buffers, got a {space} buffer"):
            gloo1.all_gather(group, src.data_ptr(), 4, out.data_ptr(), 4, space)
        with pytest.raises(CommMemorySpaceError):
            gloo1.all_reduce(group, out.data_ptr(), 4, "int32", "sum", space)
    gloo1.all_gather(acc, src.data_ptr(), 4, out.data_ptr(), 4, "accelerator").wait()  # its own space: runs
    assert out.tolist() == [0, 1, 2, 3]


# ---- test_checked.py ("hpref verify": a job that makes its default group again) -------------------------

def _twins_in_two_runs(rank, world, store_path, log):
    _init(rank, world, store_path, timeout_s=30)
    pair = ht.checked(ranks=[0, 1], log_dir=log)  # every rank calls it; ranks 2 and 3 are outside
    if rank in (0, 1):
        dist.all_reduce(torch.ones(2), group=pair)
    dist.barrier()
    dist.destroy_process_group()
    _init(rank, world, store_path + "_again", timeout_s=30)
    pair = ht.checked(ranks=[2, 3], log_dir=log)
    if rank in (2, 3):
        dist.all_reduce(torch.ones(2), group=pair)
    dist.barrier()
    return "done"


def test_a_twin_made_after_init_again_logs_the_second_run_on_ranks_outside_the_first(tmp_path):
    """H07. checked() numbers the runs (default groups) on every rank, members or not: a
    rank that was outside every checked group of the first run still logs its twin of the
    second run as run 1, so hpref verify does not mix it with run 0's group of the same id."""
    log = tmp_path / "log"
    res = runn(tmp_path, "runs", 4, _twins_in_two_runs, str(log))
    assert [r.get("value") for r in res] == ["done"] * 4, res
    runs = []
    for r in range(4):
        lines = [json.loads(x) for x in (log / f"rank{r}.jsonl").read_text().splitlines()]
        assert len(lines) == 1, (r, lines)
        runs.append(lines[0].get("run", 0))
    # (relative: forked ranks inherit the runs this pytest process has counted before)
    assert runs[0] == runs[1] and runs[2] == runs[3] == runs[0] + 1, runs
