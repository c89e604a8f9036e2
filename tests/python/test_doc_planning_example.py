"""docs/python.md, Planning: the hpref.planning example (hpref demo's 2 x 4 mesh seen from
rank 5, its group plan, and the demo's longest-first rule placing four samples on the two
constructors) is taken from the document as it is shown, run, and what it prints compared with
the output the document shows below it."""
import contextlib
import io
import pathlib
import re

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "python.md"


def example():
    """(code, printed lines) of the planning example and the block after it."""
    text = DOC.read_text()
    match = re.search(r"```python\n(from hpref import planning\n.*?)```\n\nprints\n\n```\n(.*?)```",
                      text, re.S)
    assert match, "docs/python.md has no hpref.planning example followed by its output"
    return match.group(1), match.group(2).splitlines()


def test_the_planning_example_prints_what_the_document_shows():
    code, shown = example()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, str(DOC), "exec"), {"__name__": "doc_planning_example"})
    assert out.getvalue().splitlines() == shown


def test_the_example_follows_the_planning_section():
    text = DOC.read_text()
    section = text[text.index("### Planning (`hpref.planning`"):text.index("### Speed of route planning")]
    assert example()[0] in section
