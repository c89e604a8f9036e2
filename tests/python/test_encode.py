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


def test_tensors_without_dense_bytes_are_refused_by_kind_and_strided_views_encode():
    """SPEC 1.2 tensors are dense and strided: sparse, nested and meta-device tensors are
    refused as invalid_tensor naming their kind (they raised torch's own RuntimeError or
    NotImplementedError from inside the encoder); a strided view whose size-1 dim has
    another stride (the imag of a conj view) encodes its values."""
    torch = pytest.importorskip("torch")
    base = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    refused = {"sparse_coo": base.to_sparse(), "meta-device": torch.empty(2, device="meta")}
    if hasattr(base, "to_sparse_csr"):
        refused["sparse_csr"] = base.to_sparse_csr()
    if hasattr(torch, "nested") and hasattr(torch.nested, "nested_tensor"):
        refused["nested"] = torch.nested.nested_tensor([torch.ones(2), torch.ones(3)])
    for kind, t in refused.items():
        with pytest.raises(hpref.Error) as e:
            hpref.codec.encode([((1, 0), t)])
        assert e.value.kind == "invalid_tensor", kind
        assert f"a {kind} tensor of torch.float32 cannot be encoded" in e.value.message
    imag = torch.tensor([1 + 2j, 3 - 4j]).conj().imag[:1]  # shape (1,), stride 2, a neg view
    [(_, back)] = hpref.codec.decode(hpref.codec.encode([((1, 0), imag)]))
    assert back.tolist() == [-2.0] and back.dtype == torch.float32
