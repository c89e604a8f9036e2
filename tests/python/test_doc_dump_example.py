"""docs/python.md, "Reading an hpref demo --dump directory": the document's command is run with
the built hpref command (beside this build's Python package, or build/release; skipped,
saying so, where it is not built), then the document's Python block in the directory holding
the dump, and what it prints is compared with the output the document shows."""
import contextlib
import io
import os
import pathlib
import re
import shlex
import subprocess

import pytest

import hpref

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "python.md"
BUILT = [pathlib.Path(hpref.__file__).resolve().parents[2] / "tools" / "hpref",
         pathlib.Path(__file__).resolve().parents[2] / "build" / "release" / "tools" / "hpref"]


def example():
    """(command line, code, printed lines) of the document's dump example."""
    text = DOC.read_text()
    section = text[text.index("### Reading an `hpref demo --dump` directory"):text.index("\n## Errors\n")]
    match = re.search(r"```\n\$ (hpref demo --dump .*?)\n```\n\n```python\n(.*?)```\n\nprints\n\n```\n(.*?)```",
                      section, re.S)
    assert match, "docs/python.md's dump section has no command, Python block and output"
    return match.group(1), match.group(2), match.group(3).splitlines()


def cli():
    for path in BUILT:
        if path.exists():
            return path
    pytest.skip(f"the hpref command is not built (looked at {', '.join(map(str, BUILT))})")


def test_the_dump_example_prints_what_the_document_shows(tmp_path):
    line, code, shown = example()
    argv = shlex.split(line)
    subprocess.run([str(cli()), *argv[1:]], cwd=tmp_path, check=True, capture_output=True, timeout=300)
    out = io.StringIO()
    here = os.getcwd()
    os.chdir(tmp_path)
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(code, str(DOC), "exec"), {"__name__": "doc_dump_example"})
    finally:
        os.chdir(here)
    assert out.getvalue().splitlines() == shown


def test_the_readme_step_line_holds_the_numbers_the_document_cites():
    readme = (DOC.parents[1] / "README.md").read_text()
    assert ("step 1/5: 32 samples, 189286 bytes exchanged, 6958 tokens in rank 0's batch, "
            "imbalance 1.077 -> 1.001") in readme
