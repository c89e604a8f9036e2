"""README "Check a real job", under torchrun: the README's two torchrun commands are run as
shown (4 processes, --standalone: torchrun's own rendezvous on a free port) on the README's
check_job.py, and each prints what the README shows below it.

torchrun is the `torchrun` script beside this interpreter, else this interpreter's
`-m torch.distributed.run` (the module that script runs: Debian's torch 1.13 has no script in
.venv-torch113). Debian's torch 1.13 torchrun cannot start a worker on Python 3.11; there the
commands skip, saying so, and the README's note about it is checked instead."""
import os
import pathlib
import re
import shlex
import socket
import subprocess
import sys

import pytest

pytest.importorskip("torch", reason="the example runs torch.distributed; torch is not importable")
pytest.importorskip("torch.distributed.run", reason="torchrun (torch.distributed.run) is absent from this torch")

from test_readme_checked_example import example  # noqa: E402  (the README's check_job.py)

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"
BROKEN_113 = "AttributeError: 'NoneType' object has no attribute 'get'"


def commands():
    """[(command line, [expected stdout lines])] from the README's torchrun block."""
    section = README.read_text()
    section = section[section.index("## Check a real job"):section.index("## Developing")]
    match = re.search(r"```\n(\$ torchrun .*?)```", section, re.S)
    assert match, "README's Check a real job section has no torchrun block"
    out = []
    for line in match.group(1).splitlines():
        if line.startswith("$ "):
            out.append((line[2:], []))
        else:
            out[-1][1].append(line)
    return out


def torchrun():
    beside = pathlib.Path(sys.executable).parent / "torchrun"
    return [str(beside)] if beside.exists() else [sys.executable, "-m", "torch.distributed.run"]


def workers_cannot_start():
    """Debian's torch 1.13 on Python 3.11: Std.from_str("0") is None (3.11's IntFlag no longer
    lists the 0 member), and torchrun fails on it before it starts a worker."""
    from torch.distributed.elastic.multiprocessing.api import Std

    return Std.from_str("0") is None


def run(tmp_path, line):
    (tmp_path / "check_job.py").write_text(example())
    argv = shlex.split(line)
    assert argv[0] == "torchrun", line
    env = {k: v for k, v in os.environ.items()
           if k not in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env["GLOO_SOCKET_IFNAME"] = "lo"
    # check_job.py's own default port, held busy: the run must use the one torchrun chose.
    with socket.socket() as busy:
        try:
            busy.bind(("127.0.0.1", 29513))
            busy.listen()
        except OSError:
            pass  # in use already: busy all the same
        return subprocess.run(torchrun() + argv[1:], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=300)


@pytest.mark.parametrize("index", [0, 1], ids=["clean", "bug"])
def test_the_readme_torchrun_command_prints_what_it_shows(tmp_path, index):
    if workers_cannot_start():
        pytest.skip(f"this torchrun ({torchrun()}) stops before it starts a worker on Python "
                    f"{sys.version_info.major}.{sys.version_info.minor}: {BROKEN_113}")
    line, want = commands()[index]
    assert want == sorted(want), "the README shows the ranks' lines sorted"
    done = run(tmp_path, line)
    assert done.returncode == 0, done.stderr[-3000:]
    assert sorted(done.stdout.splitlines()) == want, (line, done.stdout, done.stderr[-3000:])


def test_the_readme_names_torch_113s_torchrun_failure(tmp_path):
    if not workers_cannot_start():
        pytest.skip("this torchrun starts its workers; the README's note is about Debian's "
                    "torch 1.13 on Python 3.11")
    assert BROKEN_113 in README.read_text().replace("\n", " ")
    done = run(tmp_path, commands()[0][0])
    assert done.returncode != 0 and BROKEN_113 in done.stderr, done.stderr[-3000:]
