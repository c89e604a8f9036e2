"""hpref.codec.encode: the golden vectors (tests/vectors/golden.jsonl, the bytes SPEC 2's
writer must produce, also checked by the C++ unit suite golden_vectors) byte for byte, and
decode(encode(items)) == items for every case the original answered (SPEC 2)."""
import json
import pathlib

import pytest

import hpref
from hpref.codec import RawTensor
from test_codec import CASES, as_json, same

GOLDEN = [json.loads(line) for line in
          (pathlib.Path(__file__).parents[1] / "vectors" / "golden.jsonl").read_text().splitlines()
          if line.strip()]


def from_json(v):
    """The JSON interchange form (ARCHITECTURE.md) as Python values."""
    if isinstance(v, dict):
        (tag, x), = v.items()
        if tag in ("key", "tuple"):
            return tuple(from_json(i) for i in x)
        if tag == "list":
            return [from_json(i) for i in x]
        if tag == "dict":
            return {from_json(k): from_json(i) for k, i in x}
        if tag == "bytes":
            return bytes.fromhex(x)
        if tag == "bytearray":
            return bytearray.fromhex(x)
        if tag == "float":
            return float(x)
        if tag == "tensor":
            return RawTensor(x["dtype"].removeprefix("torch."), tuple(x["shape"]),
                             bytes.fromhex(x["hex"]))
        raise ValueError(tag)
    return v


@pytest.mark.parametrize("case", range(len(GOLDEN)), ids=[g["name"] for g in GOLDEN])
def test_encode_writes_the_golden_bytes(case):
    g = GOLDEN[case]
    items = [(from_json(k), from_json(v)) for k, v in g["items"]]
    assert hpref.codec.encode(items, key_class=g.get("key_class")).hex() == g["frame_hex"]


@pytest.mark.parametrize("case", [i for i, c in enumerate(CASES) if "items" in c])
def test_encode_then_decode_gives_the_items_back(case):
    want = CASES[case]["items"]
    items = [(from_json(k), from_json(v)) for k, v in want]
    got = [[as_json(k), as_json(v)] for k, v in
           hpref.codec.decode(hpref.codec.encode(items), tensors="raw")]
    assert same(got, want)


def test_encode_refusals_name_the_kind():
    with pytest.raises(hpref.Error) as e:
        hpref.codec.encode([((1, 0), 2 ** 64)])
    assert e.value.args[0] == "invalid_argument" and "18446744073709551616" in e.value.args[1]
    with pytest.raises(hpref.Error) as e:
        hpref.codec.encode([((1, 0), 1)], key_class="NoDot")
    assert e.value.args[0] == "invalid_argument" and "'NoDot'" in e.value.args[1]
    with pytest.raises(hpref.Error) as e:
        hpref.codec.encode([((1, 0), object())])
    assert e.value.args[0] == "invalid_argument" and "object" in e.value.args[1]
