"""hpref.codec.encode: the golden vectors (tests/vectors/golden.jsonl, the bytes SPEC 2's
writer must produce, also checked by the C++ unit suite golden_vectors) byte for byte, and
decode(encode(items)) == items for every case the original answered (SPEC 2)."""
import json
import pathlib

import pytest

import hpref
from hpref.codec import RawTensor
from test_codec import CASES, J, decoded, swap_tensors

GOLDEN = [json.loads(line) for line in
          (pathlib.Path(__file__).parents[1] / "vectors" / "golden.jsonl").read_text().splitlines()
          if line.strip()]


def items_of(j):
    """JSON interchange items as encode takes them (the interop module's Tensors as RawTensors)."""
    return swap_tensors(J.items_from_json(j), J.Tensor,
                        lambda t: RawTensor(t.dtype.removeprefix("torch."), t.shape, t.data))


@pytest.mark.parametrize("case", range(len(GOLDEN)), ids=[g["name"] for g in GOLDEN])
def test_encode_writes_the_golden_bytes(case):
    g = GOLDEN[case]
    assert hpref.codec.encode(items_of(g["items"]), key_class=g.get("key_class")).hex() == g["frame_hex"]


@pytest.mark.parametrize("case", [i for i, c in enumerate(CASES) if "items" in c])
def test_encode_then_decode_gives_the_items_back(case):
    want = CASES[case]["items"]
    assert J.diff(J.items_from_json(want), decoded(hpref.codec.encode(items_of(want))), "items") is None


def test_encode_refusals_name_the_kind():
    with pytest.raises(hpref.Error) as e:
        hpref.codec.encode([((1, 0), 2 ** 64)])
    assert e.value.kind == "invalid_argument" and "18446744073709551616" in e.value.message
    with pytest.raises(hpref.Error) as e:
        hpref.codec.encode([((1, 0), 1)], key_class="NoDot")
    assert e.value.kind == "invalid_argument" and "'NoDot'" in e.value.message
    with pytest.raises(hpref.Error) as e:
        hpref.codec.encode([((1, 0), object())])
    assert e.value.kind == "unencodable_value" and "object" in e.value.message
