"""hpref.codec.decode against the cases the original implementation answered
(tests/data/frames.jsonl, copied from shared/examples): the same items for every frame it
accepted, an hpref.Error for every frame it refused (SPEC 2)."""
import json
import math
import pathlib

import pytest

import hpref
from hpref.codec import RawTensor

CASES = [json.loads(line) for line in
         (pathlib.Path(__file__).parents[1] / "data" / "frames.jsonl").read_text().splitlines()
         if line.strip()]


def as_json(v):
    """The JSON interchange form of a decoded value (ARCHITECTURE.md, the CLI's JSON)."""
    if isinstance(v, RawTensor):
        return {"tensor": {"dtype": "torch." + v.dtype, "shape": list(v.shape),
                           "hex": bytes(memoryview(v.data)).hex()}}
    if isinstance(v, bool) or v is None or isinstance(v, (int, str)):
        return v
    if isinstance(v, float):
        return {"float": v}
    if isinstance(v, bytearray):
        return {"bytearray": bytes(v).hex()}
    if isinstance(v, bytes):
        return {"bytes": v.hex()}
    if isinstance(v, tuple):
        return {"tuple": [as_json(x) for x in v]}
    if isinstance(v, list):
        return {"list": [as_json(x) for x in v]}
    if isinstance(v, dict):
        return {"dict": [[as_json(k), as_json(x)] for k, x in v.items()]}
    raise TypeError(type(v))


def same(a, b):
    if isinstance(a, dict) and isinstance(b, dict) and "float" in a and "float" in b:
        return (math.isnan(a["float"]) and math.isnan(b["float"])) or a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


@pytest.mark.parametrize("case", range(len(CASES)))
def test_decode_matches_the_original(case):
    c = CASES[case]
    if "original_frame_hex" in c:  # the original encoded these items
        frame, want = bytes.fromhex(c["original_frame_hex"]), c["items"]
    else:
        frame, answer = bytes.fromhex(c["frame_hex"]), c["original_answer"]
        if not answer["ok"]:
            with pytest.raises(hpref.Error):
                hpref.codec.decode(frame, tensors="raw")
            return
        want = answer["items"]
    got = [[as_json(k), as_json(v)] for k, v in hpref.codec.decode(frame, tensors="raw")]
    assert same(got, want)


def test_tensors_view_the_segment_without_copying():
    c = next(c for c in CASES if "original_frame_hex" in c and "tensor" in json.dumps(c["items"]))
    items = hpref.codec.decode(bytes.fromhex(c["original_frame_hex"]), tensors="raw")

    def tensors(v):
        if isinstance(v, RawTensor):
            yield v
        elif isinstance(v, (list, tuple)):
            for x in v:
                yield from tensors(x)
        elif isinstance(v, dict):
            for x in v.values():
                yield from tensors(x)

    found = [t for _, v in items for t in tensors(v)]
    assert found
    for t in found:
        view = memoryview(t.data)
        assert view.readonly and view.ndim == 1


def test_error_names_its_kind():
    with pytest.raises(hpref.Error) as e:
        hpref.codec.decode(b"HPB1\x00")
    assert e.value.args[0] == "truncated_header"
