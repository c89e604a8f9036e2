"""The pytest plugin (issue 12): @pytest.mark.hpref_cluster runs a test body on simulated
ranks for every seed, stops at the first failing seed, prints the replay line, and the
replay line reproduces the failure; a passing body passes on every seed. Under faults only
what a fired fault explains passes; skip and xfail in the body; seeds checked and read once;
the ranks' output under --capture=sys; the PYTHONHASHSEED re-run (and the warning under
pytest.main() from another program). Runs pytest on generated test files in a subprocess
(-p hpref.pytest_plugin, as in a source tree)."""
import os
import re
import shlex
import subprocess
import sys
import textwrap

import pytest

BODY = textwrap.dedent('''
    import numpy as np
    import pytest
    import hpref.sim as sim

    def exchange(rank):
        c = sim.communicator()
        n = c.size()
        send = np.full(4 * n, rank, dtype=np.uint8)
        recv = np.zeros(4 * n, dtype=np.uint8)
        c.all_to_all_v(c.world(), send.ctypes.data, [4] * n, recv.ctypes.data, [4] * n).wait()
        return recv

    @pytest.mark.hpref_cluster(world_size=4, seeds=range(1, 9))
    def test_exchange_is_right(rank):
        assert exchange(rank).tolist() == [p for p in range(4) for _ in range(4)]

    @pytest.mark.hpref_cluster(world_size=4, seeds=range(1, 65), faults=["random"])
    def test_exchange_checks_nothing(rank):
        # no checksum: a flipped byte is silently wrong data, found by some seed's fault
        assert exchange(rank).tolist() == [p for p in range(4) for _ in range(4)]

    @pytest.mark.hpref_cluster(world_size=3)
    def test_mismatched_sizes(rank):
        c = sim.communicator()
        mine = np.zeros(rank + 1, dtype=np.uint8)
        every = np.zeros(3 * (rank + 1), dtype=np.uint8)
        c.all_gather(c.world(), mine.ctypes.data, mine.nbytes, every.ctypes.data, every.nbytes).wait()
''')


def pytest_run(tmp_path, *args):
    env = dict(os.environ, PYTHONHASHSEED="0")
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "hpref.pytest_plugin", "-q",
                           "-p", "no:cacheprovider", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("plugin")
    (tmp / "test_generated.py").write_text(BODY)
    return tmp, pytest_run(tmp, "test_generated.py")


def test_passing_body_passes_and_failures_name_seed_class_and_replay(first_run):
    tmp, run = first_run
    out = run.stdout + run.stderr
    assert "1 passed" in out and "2 failed" in out, out
    assert re.search(r"test_mismatched_sizes.*seed 1 of 1 failed: collective mismatch", out, re.S), out
    # A shell command (the hash seed as a variable, not "(PYTHONHASHSEED=0)" after it), with
    # the session's -p plugins: without -p hpref.pytest_plugin, --hpref-seed is unknown.
    assert (f"replay: PYTHONHASHSEED=0 {shlex.quote(sys.executable)} -m pytest -p hpref.pytest_plugin "
            "-p no:cacheprovider test_generated.py::test_mismatched_sizes --hpref-seed=1\n") in out, out
    m = re.search(r"seed (\d+) of 64 failed: rank \d: AssertionError", out)
    assert m and int(m.group(1)) > 1, out  # found by exploring seeds: seed 1's fault is harmless


def test_the_replay_line_reproduces_the_failure(first_run):
    # Pasted into a shell as printed (from another directory too: it starts with a cd then).
    tmp, run = first_run
    out = run.stdout + run.stderr
    line = re.search(r"replay: (.*test_generated.py::test_exchange_checks_nothing .*)", out).group(1)
    assert "--hpref-fault=flip:" in line, line  # the drawn fault, written out
    env = dict(os.environ)  # PATH as it is: the line names its interpreter (a bare `python`
    env.pop("PYTHONHASHSEED", None)  # found another one, without torch, until 2026-12-04)
    again = subprocess.run(["bash", "-c", line], cwd=tmp, env=env, capture_output=True, text=True,
                           timeout=300)
    assert "1 failed" in again.stdout and "AssertionError" in again.stdout, again.stdout + again.stderr
    assert re.search(r"seed \d+ of 1 failed", again.stdout)
    elsewhere = subprocess.run([sys.executable, "-m", "pytest", "-p", "hpref.pytest_plugin", "-q",
                                "-p", "no:cacheprovider", "--rootdir", str(tmp),
                                str(tmp / "test_generated.py") + "::test_mismatched_sizes"],
                               cwd=tmp.parent, env=dict(os.environ, PYTHONHASHSEED="0"),
                               capture_output=True, text=True, timeout=300)
    assert (f"replay: cd {tmp} && PYTHONHASHSEED=0 {shlex.quote(sys.executable)} -m pytest -p hpref.pytest_plugin "
            "-p no:cacheprovider test_generated.py::test_mismatched_sizes --hpref-seed=1\n"
            in elsewhere.stdout), elsewhere.stdout


def outcomes(run):
    """{test name: PASSED/FAILED/SKIPPED/XFAIL} from -v output (-v -v after pytest_run's -q)."""
    found = re.findall(r"^\S*?::(\w+)(?:\[\w+\])? (PASSED|FAILED|SKIPPED|XFAIL|XPASS|ERROR)",
                       run.stdout, re.M)
    return dict(found)


FAULTS = textwrap.dedent('''
    import os, signal, time
    import numpy as np
    import pytest
    import hpref
    import hpref.sim as sim

    def barrier():
        c = sim.communicator()
        c.barrier(c.world()).wait()

    # Failures no fault explains: each fails its test.
    @pytest.mark.hpref_cluster(world_size=2, faults=["delay:0@1"], timeout_s=1)
    def test_hang_under_a_delay(rank):
        barrier()
        if rank == 1:
            while True:
                time.sleep(0.05)

    @pytest.mark.hpref_cluster(world_size=2, faults=["delay:0@1"])
    def test_another_signal_under_a_delay(rank):
        barrier()
        if rank == 1:
            os.kill(os.getpid(), signal.SIGTERM)

    # SIGKILL is what a crash fault sends: on rank 0 (a non-crash plan once read as
    # "crash of rank 0") with only a delay fired, nothing explains it.
    @pytest.mark.hpref_cluster(world_size=2, faults=["delay:1@1"])
    def test_sigkill_of_rank_0_under_a_delay(rank):
        barrier()
        if rank == 0:
            os.kill(os.getpid(), signal.SIGKILL)
        barrier()

    @pytest.mark.hpref_cluster(world_size=2, faults=["delay:0@1"])
    def test_usage_error_under_a_delay(rank):
        c = sim.communicator()
        x = np.ones(1)
        c.all_reduce(c.world(), x.ctypes.data, x.nbytes, "float64", "prod").wait()

    @pytest.mark.hpref_cluster(world_size=2, faults=["crash:1@99"])
    def test_usage_error_under_a_crash_that_never_fires(rank):
        c = sim.communicator()
        x = np.ones(1)
        c.broadcast(c.world(), x.ctypes.data, x.nbytes, 5).wait()

    @pytest.mark.hpref_cluster(world_size=3, faults=["crash:1@2"])
    def test_unrelated_error_beside_a_crash(rank):
        barrier()
        if rank == 2:
            raise hpref.errors.CommUsageError("wrong on its own")
        barrier()

    # What the fired fault explains: each passes.
    @pytest.mark.hpref_cluster(world_size=3, faults=["crash:1@2"])
    def test_crash_and_its_peer_failures(rank):
        barrier()
        barrier()

    @pytest.mark.hpref_cluster(world_size=3, faults=["flip:1@1:0"])
    def test_flip_detected_by_decoding(rank):
        c = sim.communicator()
        frame = np.frombuffer(hpref.codec.encode([("k", 7)]), dtype=np.uint8).copy()
        c.broadcast(c.world(), frame.ctypes.data, frame.nbytes, 0).wait()
        assert hpref.codec.decode(frame.tobytes()) == [("k", 7)]  # rank 1: a decode error
        barrier()  # the others: a peer failure naming rank 1
''')


def test_with_faults_only_what_a_fired_fault_explains_passes(tmp_path):
    (tmp_path / "test_faults.py").write_text(FAULTS)
    run = pytest_run(tmp_path, "-v", "-v", "-rs", "test_faults.py")
    got = outcomes(run)
    out = run.stdout + run.stderr
    assert got == {"test_hang_under_a_delay": "FAILED", "test_another_signal_under_a_delay": "FAILED",
                   "test_sigkill_of_rank_0_under_a_delay": "FAILED", "test_usage_error_under_a_delay": "FAILED",
                   "test_usage_error_under_a_crash_that_never_fires": "FAILED",
                   "test_unrelated_error_beside_a_crash": "FAILED",
                   "test_crash_and_its_peer_failures": "PASSED",
                   "test_flip_detected_by_decoding": "PASSED"}, out
    assert "rank 1: died: rank 1 held the baton" in out and "rank 1 killed by signal 15" in out
    assert "rank 0 killed by signal 9" in out
    assert "rank 2: CommUsageError: wrong on its own" in out


OUTCOMES = textwrap.dedent('''
    import pytest
    import hpref.sim as sim

    @pytest.mark.hpref_cluster(world_size=2)
    def test_skips_on_every_rank(rank):
        pytest.skip("needs 8 GPUs")

    @pytest.mark.hpref_cluster(world_size=2)
    def test_importorskip(rank):
        pytest.importorskip("no_such_module_for_hpref")

    @pytest.mark.hpref_cluster(world_size=2)
    def test_xfails_on_every_rank(rank):
        pytest.xfail("known bug")

    @pytest.mark.hpref_cluster(world_size=3)
    def test_skips_on_one_rank(rank):
        if rank == 0:
            pytest.skip("only rank 0 thinks so")
        c = sim.communicator()
        c.barrier(c.world()).wait()
''')


def test_skip_and_xfail_on_every_rank_are_kept_and_on_some_ranks_fail(tmp_path):
    (tmp_path / "test_outcomes.py").write_text(OUTCOMES)
    run = pytest_run(tmp_path, "-v", "-v", "-rs", "test_outcomes.py")
    out = run.stdout + run.stderr
    assert outcomes(run) == {"test_skips_on_every_rank": "SKIPPED", "test_importorskip": "SKIPPED",
                             "test_xfails_on_every_rank": "XFAIL", "test_skips_on_one_rank": "FAILED"}, out
    assert re.search(r"SKIPPED \[1\] test_outcomes.py:\d+: needs 8 GPUs", out), out  # at the test
    assert "pytest.skip on ranks [0], not on every rank (not on ranks [1, 2])" in out


SEEDS = textwrap.dedent('''
    import pytest
    import hpref.sim as sim

    @pytest.mark.hpref_cluster(world_size=2, seeds=[])
    def test_no_seeds(rank):
        pass

    @pytest.mark.parametrize("n", [1, 2])
    @pytest.mark.hpref_cluster(world_size=2, seeds=iter([4, 5, 6]))
    def test_iterator_seeds(rank, n):
        assert False, "fails on every seed"

    @pytest.mark.hpref_cluster(world_size=4)
    def test_cause_named(rank):
        assert rank != 3, "rank 3 computed garbage"
        c = sim.communicator()
        c.barrier(c.world()).wait()
''')


def test_seeds_are_checked_and_read_once_and_the_headline_names_the_cause(tmp_path):
    (tmp_path / "test_seeds.py").write_text(SEEDS)
    run = pytest_run(tmp_path, "-v", "-v", "-rs", "test_seeds.py")
    out = run.stdout + run.stderr
    assert outcomes(run) == {"test_no_seeds": "FAILED", "test_iterator_seeds": "FAILED",
                             "test_cause_named": "FAILED"}, out
    assert "seeds must name at least one seed, got [], which holds none" in out
    assert len(re.findall(r"seed 4 of 3 failed: rank 0: AssertionError: fails on every seed", out)) == 2, out
    assert "seed 1 of 1 failed: rank 3: AssertionError: rank 3 computed garbage" in out


CAPTURED = textwrap.dedent('''
    import pytest
    import hpref.sim as sim

    @pytest.mark.hpref_cluster(world_size=2)
    def test_fails(rank):
        print(f"rank {rank} stdout line")
        c = sim.communicator()
        c.barrier(c.world()).wait()
        assert rank == 0, f"rank {rank} is wrong"
''')


def test_capture_sys_shows_each_ranks_output_and_traceback(tmp_path):
    (tmp_path / "test_captured.py").write_text(CAPTURED)
    run = pytest_run(tmp_path, "--capture=sys", "test_captured.py")
    out = run.stdout
    assert "1 failed" in out, out
    stdout = out.split("Captured stdout call")[1].split("Captured stderr call")[0]
    assert "rank 0 stdout line" in stdout and "rank 1 stdout line" in stdout, out
    stderr = out.split("Captured stderr call")[1]
    assert "AssertionError: rank 1 is wrong" in stderr and "Traceback" in stderr, out


HASH_SEED_CONFTEST = '''
import os
os.environ["PYTHONHASHSEED"] = "0"  # too late for this interpreter: its str hashes stay random
'''

MARKED = textwrap.dedent('''
    import sys
    import pytest

    @pytest.mark.hpref_cluster(world_size=2)
    def test_marked(rank):
        pass

    def test_hash_seed_at_startup():
        assert sys.flags.hash_randomization == 0  # PYTHONHASHSEED=0 when the interpreter started
''')


def unseeded_env():
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONHASHSEED", "HPREF_PYTEST_REEXEC")}


def test_a_hash_seed_set_after_startup_still_reruns_pytest(tmp_path):
    (tmp_path / "conftest.py").write_text(HASH_SEED_CONFTEST)
    (tmp_path / "test_marked.py").write_text(MARKED)
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "hpref.pytest_plugin", "-q",
                          "-p", "no:cacheprovider", "test_marked.py"], cwd=tmp_path, env=unseeded_env(),
                         capture_output=True, text=True, timeout=300)
    assert "re-running pytest with PYTHONHASHSEED=0" in run.stderr, run.stdout + run.stderr
    assert "2 passed" in run.stdout, run.stdout + run.stderr


RUNNER = textwrap.dedent('''
    import sys
    import pytest
    print("runner started", flush=True)
    code = pytest.main(["-p", "hpref.pytest_plugin", "-p", "no:cacheprovider", "-q", "test_marked.py::test_marked"])
    print("runner finished", int(code), flush=True)
''')


def test_pytest_main_from_another_program_warns_instead_of_rerunning(tmp_path):
    (tmp_path / "test_marked.py").write_text(MARKED)
    (tmp_path / "runner.py").write_text(RUNNER)
    run = subprocess.run([sys.executable, "runner.py", "--an-option-of-the-runner"], cwd=tmp_path,
                         env=unseeded_env(), capture_output=True, text=True, timeout=300)
    out = run.stdout + run.stderr
    assert out.count("runner started") == 1 and "runner finished 0" in out, out
    assert "1 passed, 1 warning" in out and "PYTHONHASHSEED was not set when this process started" in out
    assert "set PYTHONHASHSEED=0 in the environment" in out
