"""hpref.sim.run and the processes around it (SPEC 9.3: errors reach the caller, never a
hang; a rank killed at any instant never wedges the others): an interrupt with logging
imported, a process a rank forks, a caller that ignores SIGCHLD, fault plans whose numbers
do not fit. Each case runs in a fresh interpreter where a hang is possible, so that a
regression fails within its timeout instead of blocking the suite."""
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import hpref
import hpref.sim as sim

HERE = os.environ.get("PYTHONPATH", "").split(os.pathsep)[0]


def script(tmp_path, body):
    path = tmp_path / "case.py"
    path.write_text(f"import sys\nsys.path.insert(0, {HERE!r})\n" + textwrap.dedent(body))
    return path


def test_an_interrupt_with_logging_imported_is_a_keyboardinterrupt_and_frees_logging(tmp_path):
    # logging (torch imports it) releases its lock in an after-fork hook. The interrupt was
    # delivered while sim.run was still inside the fork bracket: the hook took the
    # KeyboardInterrupt ("Exception ignored"), its lock stayed held (the next log call from
    # another thread hung) and sim.run returned the killed ranks' peer failures.
    path = script(tmp_path, """
        import logging, os, threading, time
        import hpref.sim as sim

        def sleepy(rank):
            c = sim.communicator()
            c.barrier(c.world()).wait()
            time.sleep(60)  # holds the baton while the parent is interrupted

        print("started", flush=True)
        try:
            sim.run(3, sleepy, torch_distributed=False, timeout_s=300)
            print("returned", flush=True)
        except KeyboardInterrupt:
            t = threading.Thread(target=lambda: logging.getLogger("x").warning("logged"))
            t.start()
            t.join(20)
            print("interrupted", "logging held" if t.is_alive() else "logging free", flush=True)
            sys.stdout.flush()
            os._exit(0)
    """)
    proc = subprocess.Popen([sys.executable, str(path)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "started"
        time.sleep(1.0)  # the ranks exist and one sleeps holding the baton
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert out.strip() == "interrupted logging free", (out, err)
    assert "Exception ignored" not in err, err


def test_a_process_a_rank_forks_neither_reports_for_it_nor_calls_as_it(tmp_path):
    # A child forked in a rank that returns from the rank function (an exception in an
    # os.fork() child without os._exit) reported the rank's end on its slot: the monitor
    # then waited for the rank's exit while the rank waited for its turn, forever. And a
    # collective called from such a child acted as the rank.
    path = script(tmp_path, """
        import os
        import hpref.sim as sim

        def forks(rank):
            c = sim.communicator()
            read, write = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(read)
                try:
                    c.barrier(c.world()).wait()
                    os.write(write, b"called as the rank")
                except Exception as e:  # the refusal, named
                    os.write(write, f"{type(e).__name__}: {e}".encode())
                os.close(write)
                raise RuntimeError("a forked child falls through")  # no os._exit
            os.close(write)
            said = os.read(read, 4096).decode()
            os.waitpid(pid, 0)
            c.barrier(c.world()).wait()
            return said

        result = sim.run(2, forks, torch_distributed=False, timeout_s=20)
        print(result.failure)
        for r in result.ranks:
            print(r.status, r.value)
    """)
    done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=120)
    lines = done.stdout.splitlines()
    assert lines[0] == "none", (done.stdout, done.stderr)
    for line in lines[1:]:
        assert line.startswith("ok CommUsageError: rank "), line
        assert "which the rank forked: only the rank's own process may call it" in line


def test_a_caller_ignoring_sigchld_still_sees_a_crash_at_once():
    # With SIGCHLD ignored the kernel reaped the ranks itself: waitpid found none, and a
    # crashed rank was reported only when the turn timeout expired ("held the baton").
    def crashes(rank):
        c = sim.communicator()
        for _ in range(3):
            c.barrier(c.world()).wait()
        return rank

    before = signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    try:
        result = sim.run(2, crashes, faults=["crash:1@2"], torch_distributed=False, timeout_s=60)
        assert signal.getsignal(signal.SIGCHLD) == signal.SIG_IGN  # the caller's, restored
    finally:
        signal.signal(signal.SIGCHLD, before)
    assert result.ranks[1].status == "died"
    assert result.ranks[1].message == "rank 1 killed by signal 9", result.ranks[1]
    assert result.unfired_faults == []


@pytest.mark.parametrize("faults, named", [
    (["crash:4294967296@1"], "fault 'crash:4294967296@1' names rank 4294967296, past any cluster"),
    (["flip:1@1:18446744073709551614"],
     "fault 'flip:1@1:18446744073709551614' names byte 18446744073709551614, past any payload"),
    (["crash:1@2", "crash:1@5"], "faults crash:1@2 and crash:1@5 both crash rank 1: a rank dies once"),
    (["delay:1@18446744073709551615", "delay:1@2"],
     "fault delay:1@2 takes the delays of rank 1 past 18446744073709551615 decisions in all"),
])
def test_fault_plans_that_cannot_run_as_written_are_refused(faults, named):
    # Each ran as another plan: the rank wrapped to 0 or 1, the byte to a seeded one, and
    # of two crashes of one rank the last was taken and the other reported as fired.
    with pytest.raises(hpref.Error, match=named.replace("(", r"\(")):
        sim.run(2, lambda rank: rank, faults=faults, torch_distributed=False)
