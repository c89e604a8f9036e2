"""hpref.codec against the original, in-process (issue 11, SPEC 1-2): on hypothesis-generated
items with keys of the original's real key class (stubs.SampleKey, pickled under
hyper_parallel.distributed_data.schema), hpref decodes what the original's
_encode_payload_segment writes, and the original's _decode_payload_segment decodes what
hpref.codec.encode writes, to the same values: types exact, floats by bit pattern, tensors
by dtype, shape and bytes. Also torch tensors in and out of hpref alone.

Needs torch and ../shared/original (skipped, saying which, when either is absent)."""
import math
import pathlib
import struct
import sys

import pytest

torch = pytest.importorskip("torch", reason="the codec's torch tests need torch")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import hpref  # noqa: E402

ORIGINAL = pathlib.Path(__file__).resolve().parents[3] / "shared" / "original"
if not (ORIGINAL / "seed_transport.py").exists():
    pytest.skip(f"the original implementation is not at {ORIGINAL}", allow_module_level=True)
sys.path.insert(0, str(ORIGINAL))
import seed_transport as original  # noqa: E402
from stubs import SampleKey  # noqa: E402



@pytest.fixture(autouse=True)
def original_key_class_for_pickle():
    """pickle resolves hyper_parallel.distributed_data.schema.SampleKey by name; another
    test module (tests/interop/hpref_interop.py) registers its own class there, so the
    original's is put back for each test here and the other restored after."""
    module = sys.modules[SampleKey.__module__]
    before = module.SampleKey
    module.SampleKey = SampleKey
    yield
    module.SampleKey = before


DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64,
          torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool, torch.complex64]
SETTINGS = settings(max_examples=150, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def same(a, b, path="v"):
    """None when a and b are equal as SPEC 1.1's structural equality says, else where not."""
    if type(a) is not type(b):
        return f"{path}: {type(a).__name__} != {type(b).__name__}"
    if isinstance(a, torch.Tensor):
        if a.dtype != b.dtype or tuple(a.shape) != tuple(b.shape):
            return f"{path}: {a.dtype}{tuple(a.shape)} != {b.dtype}{tuple(b.shape)}"
        ab = a.contiguous().reshape(-1).view(torch.uint8)
        bb = b.contiguous().reshape(-1).view(torch.uint8)
        return None if torch.equal(ab, bb) else f"{path}: tensor bytes differ"
    if isinstance(a, float):
        return None if struct.pack("<d", a) == struct.pack("<d", b) else f"{path}: {a!r} != {b!r}"
    if isinstance(a, (tuple, list)):
        if len(a) != len(b):
            return f"{path}: length {len(a)} != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            d = same(x, y, f"{path}[{i}]")
            if d:
                return d
        return None
    if isinstance(a, dict):
        if list(a) != list(b):
            return f"{path}: keys {list(a)!r} != {list(b)!r}"
        for k in a:
            d = same(a[k], b[k], f"{path}[{k!r}]")
            if d:
                return d
        return None
    return None if a == b else f"{path}: {a!r} != {b!r}"


@st.composite
def tensors(draw):
    dtype = draw(st.sampled_from(DTYPES))
    shape = tuple(draw(st.lists(st.integers(0, 4), max_size=3)))
    n = math.prod(shape)
    raw = draw(st.binary(min_size=n * torch.empty((), dtype=dtype).element_size(),
                         max_size=n * torch.empty((), dtype=dtype).element_size()))
    if dtype == torch.bool:  # only 0 and 1 are bools
        raw = bytes(b & 1 for b in raw)
    t = torch.frombuffer(bytearray(raw), dtype=torch.uint8) if raw else torch.empty(0, dtype=torch.uint8)
    return t.view(dtype).reshape(shape)


scalars = (st.none() | st.booleans() | st.integers(-2 ** 63, 2 ** 63 - 1)
           | st.floats(allow_nan=False) | st.text(max_size=12))
hashable = st.none() | st.booleans() | st.integers(-2 ** 63, 2 ** 63 - 1) | st.text(max_size=8)
leaves = scalars | st.binary(max_size=12) | st.binary(max_size=12).map(bytearray) | tensors()
values = st.recursive(
    leaves,
    lambda children: (st.lists(children, max_size=4) | st.lists(children, max_size=4).map(tuple)
                      | st.dictionaries(hashable, children, max_size=4)),
    max_leaves=12)
keys = st.builds(SampleKey, st.integers(0, 2 ** 40) | st.text(min_size=1, max_size=6),
                 st.integers(0, 7))
items_lists = st.lists(st.tuples(keys, values), max_size=6, unique_by=lambda kv: kv[0])


@SETTINGS
@given(items_lists)
def test_hpref_decodes_what_the_original_encodes(items):
    frame = original._encode_payload_segment(items)
    got = hpref.codec.decode(frame, key_class=SampleKey, tensors="torch")
    assert all(type(k) is SampleKey for k, _ in got)
    assert same(list(got), list(items)) is None, same(list(got), list(items))


@SETTINGS
@given(items_lists)
def test_the_original_decodes_what_hpref_encodes(items):
    frame = hpref.codec.encode(items, key_class=SampleKey)
    got = original._decode_payload_segment(frame)
    assert same(list(got), list(items)) is None, same(list(got), list(items))


@SETTINGS
@given(items_lists)
def test_hpref_reads_back_what_hpref_writes_with_torch_tensors(items):
    got = hpref.codec.decode(hpref.codec.encode(items, key_class=SampleKey), key_class=SampleKey)
    assert same(list(got), list(items)) is None


def test_memoized_keys_are_one_str_object_as_the_original_reads_them():
    # SPEC 2.3: the writer memoizes each repeated mapping-key str; pickle.loads (the
    # original's decode) then gives one object for all its places, and so does hpref (one
    # hash per key, not per dict). Strs that are not memoized stay distinct objects.
    items = [((i, 0), {"tokens": i, "text": "same" * (i % 2 + 1), "emb": torch.zeros(2)})
             for i in range(200)]
    frame = hpref.codec.encode(items)

    def sharing(decoded):
        dicts = [v for _, v in decoded]
        keys = [[id(k) for k in d] for d in dicts]
        texts = {id(d["text"]) for d in dicts}
        return all(k == keys[0] for k in keys), len(texts)

    ours = hpref.codec.decode(frame)
    theirs = original._decode_payload_segment(frame)
    assert sharing(ours) == sharing(theirs) == (True, 200)
    assert list(ours[5][1]) == ["tokens", "text", "emb"]


def test_keys_without_a_key_class_are_tuples_that_find_the_plain_tuple():
    frame = original._encode_payload_segment([(SampleKey(5, 1), {"x": torch.ones(2)})])
    (key, value), = hpref.codec.decode(frame)
    assert isinstance(key, hpref.Key) and key == (5, 1) and hash(key) == hash((5, 1))
    assert {key: 1}[(5, 1)] == 1 and key.sample_id == 5 and key.position == 1
    # with the key class, the user's own lookups hit
    lookup = dict(hpref.codec.decode(frame, key_class=SampleKey))
    assert lookup[SampleKey(5, 1)]["x"].tolist() == [1.0, 1.0]


def test_tuple_keys_become_key_class_instances_when_a_key_class_is_given():
    frame = hpref.codec.encode([((3, 0), torch.zeros(1))])  # hpref's transports write tuples
    (key, _), = hpref.codec.decode(frame, key_class=SampleKey)
    assert key == SampleKey(3, 0)


def test_decoded_torch_tensors_view_the_received_bytearray():
    t = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    buffer = bytearray(hpref.codec.encode([((0, 0), t)]))
    (_, got), = hpref.codec.decode(buffer)
    assert torch.equal(got, t)
    got.add_(1)  # in place: the caller's buffer changes, as the original's bytearray views do
    (_, again), = hpref.codec.decode(buffer)
    assert torch.equal(again, t + 1)


def test_encode_reads_non_contiguous_and_accelerator_free_tensors_like_the_original():
    t = torch.arange(12, dtype=torch.int32).reshape(3, 4).t()  # not contiguous
    z = torch.tensor(2.5, dtype=torch.bfloat16)  # 0-d
    items = [(SampleKey(1, 0), {"t": t, "z": z, "e": torch.empty(0, 3)})]
    ours = original._decode_payload_segment(hpref.codec.encode(items, key_class=SampleKey))
    assert same(list(ours), [(SampleKey(1, 0), {"t": t.contiguous(), "z": z, "e": torch.empty(0, 3)})]) is None


def test_numpy_arrays_encode_as_their_torch_dtype():
    np = pytest.importorskip("numpy")
    a = np.arange(6, dtype=np.int16).reshape(2, 3)
    (_, got), = hpref.codec.decode(hpref.codec.encode([((0, 0), a)]))
    assert got.dtype == torch.int16 and got.tolist() == a.tolist()
    (_, back), = hpref.codec.decode(hpref.codec.encode([((0, 0), a)]), tensors="numpy")
    assert back.dtype == a.dtype and (back == a).all()
    flags = np.array([[True, False, True]])
    (_, got), = hpref.codec.decode(hpref.codec.encode([((0, 0), flags)]))
    assert got.dtype == torch.bool and got.tolist() == flags.tolist()


def test_decode_received_merges_in_rank_order_and_refuses_a_key_twice():
    seg = [hpref.codec.encode([((r, 0), torch.full((2,), float(r)))]) for r in range(3)]
    merged = hpref.codec.decode_received(b"".join(seg), [len(s) for s in seg])
    assert list(merged) == [(0, 0), (1, 0), (2, 0)] and merged[(2, 0)].tolist() == [2.0, 2.0]
    with pytest.raises(hpref.Error) as e:
        hpref.codec.decode_received(seg[0] + seg[0], [len(seg[0])] * 2)
    assert e.value.kind == "duplicate_payload_key"
    with pytest.raises(ValueError):  # the original refuses the same buffer
        original._decode_received_payloads(seg[0] + seg[0], [len(seg[0])] * 2)
    with pytest.raises(hpref.Error) as e:
        hpref.codec.decode_received(seg[0], [len(seg[0]) + 1])
    assert e.value.kind == "split_sum_mismatch"


def test_dtype_table_follows_the_torch_release():
    names = set(hpref._core.dtype_names())
    # the table for the importable torch is exactly what it resolves (checked on 1.13 and 2.13)
    live = {n for n in names if isinstance(getattr(torch, n, None), torch.dtype)}
    assert hpref.codec.torch_dtypes() == live
    assert hpref.codec.torch_dtypes(torch.__version__) == live
    assert "uint16" not in hpref.codec.torch_dtypes("1.13") and "uint16" in hpref.codec.torch_dtypes("2.13")
    frame = hpref.codec.encode([((0, 0), hpref.RawTensor("uint16", (1,), b"\x01\x00"))])
    with pytest.raises(hpref.Error) as e:
        hpref.codec.decode(frame, torch_version="1.13")
    assert e.value.kind == "unsupported_dtype" and "uint16" in e.value.message
    got = hpref.codec.decode(frame, torch_version="2.13", tensors="raw")
    assert got[0][1].dtype == "uint16"
