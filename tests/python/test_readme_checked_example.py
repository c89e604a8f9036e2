"""README "Check a real job": the 4-rank gloo example (check_job.py) is taken from the README
as it is shown, run with this interpreter, clean and with its planted stale split."""
import os
import pathlib
import re
import socket
import subprocess
import sys

import pytest

pytest.importorskip("torch", reason="the example runs torch.distributed; torch is not importable")

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"


def example() -> str:
    text = README.read_text()
    section = text[text.index("## Check a real job"):]
    match = re.search(r"```python\n(# check_job\.py.*?)```", section, re.S)
    assert match, "README's Check a real job section has no check_job.py block"
    return match.group(1)


def run(tmp_path, *args):
    script = tmp_path / "check_job.py"
    script.write_text(example())
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, MASTER_PORT=str(port), GLOO_SOCKET_IFNAME="lo")
    done = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return sorted(done.stdout.splitlines())


def test_the_clean_job_moves_every_row(tmp_path):
    lines = run(tmp_path)
    assert lines[0] == "0 [0.0, 1.0, 1.0, 2.0, 2.0, 2.0, 3.0, 3.0, 3.0, 3.0]", lines
    assert len(lines) == 4


def test_the_stale_split_is_named_on_every_rank(tmp_path):
    want = ("all_to_all_v counts disagree on group 0 seq 0: rank 1 sends 12 bytes to rank 3, "
            "which expects 8")
    assert run(tmp_path, "--bug") == [f"{r} {want}" for r in range(4)]
