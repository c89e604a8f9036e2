"""hpref.codec.decode against the cases the original implementation answered
(tests/data/frames.jsonl, copied from shared/examples): the same items for every frame it
accepted, an hpref.Error for every frame it refused (SPEC 2). Values are read from and
compared in the JSON interchange form with tests/interop/hpref_interop.py."""
import json
import pathlib
import sys

import pytest

import hpref
from hpref.codec import RawTensor

sys.path.insert(0, str(pathlib.Path(__file__).parents[1] / "interop"))
import hpref_interop as J  # noqa: E402

CASES = [json.loads(line) for line in
         (pathlib.Path(__file__).parents[1] / "data" / "frames.jsonl").read_text().splitlines()
         if line.strip()]


def decoded(frame):
    """hpref.codec.decode's items with RawTensors as the interop module's Tensors."""
    return swap_tensors(hpref.codec.decode(frame, tensors="raw"), RawTensor,
                        lambda t: J.Tensor("torch." + t.dtype, t.shape, bytes(memoryview(t.data))))


def swap_tensors(v, kind, make):
    """`v` with every `kind` tensor replaced by make(tensor)."""
    if isinstance(v, kind):
        return make(v)
    if isinstance(v, hpref.Key):
        return tuple(swap_tensors(x, kind, make) for x in v)
    if isinstance(v, (tuple, list)):
        return type(v)(swap_tensors(x, kind, make) for x in v)
    if isinstance(v, dict):
        return {swap_tensors(k, kind, make): swap_tensors(x, kind, make) for k, x in v.items()}
    return v


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
    assert J.diff(J.items_from_json(want), decoded(frame), "items") is None


def tensor_case():
    c = next(c for c in CASES if "original_frame_hex" in c and "tensor" in json.dumps(c["items"]))
    return bytes.fromhex(c["original_frame_hex"])


def raw_tensors(items):
    found = []
    swap_tensors(items, RawTensor, found.append)
    assert found
    return found


def test_tensors_view_a_writable_segment_in_place():
    frame = tensor_case()
    buffer = bytearray(frame)
    for t in raw_tensors(hpref.codec.decode(buffer, tensors="raw")):
        if len(t.data):
            t.data[0] ^= 0xFF  # writes through to the caller's buffer: no copy was made
    assert bytes(buffer) != frame
    # copy=True decodes a private copy
    buffer = bytearray(frame)
    for t in raw_tensors(hpref.codec.decode(buffer, tensors="raw", copy=True)):
        if len(t.data):
            t.data[0] ^= 0xFF
    assert bytes(buffer) == frame


def test_a_received_uint8_tensor_is_decoded_in_place():
    # What dist.all_to_all_single receives into: a CPU uint8 tensor, which has no buffer
    # protocol ("got a Python Tensor" until 2026-12-04). Viewed in place like a bytearray.
    torch = pytest.importorskip("torch")
    frame = tensor_case()
    received = torch.frombuffer(bytearray(frame * 2), dtype=torch.uint8)
    mine = received[:len(frame)]
    assert hpref.codec.decode(mine, tensors="raw") == hpref.codec.decode(frame, tensors="raw")
    assert hpref.codec.inspect(mine) == hpref.codec.inspect(frame)
    a = hpref.codec.encode([((1, 0), torch.arange(3))])
    b = hpref.codec.encode([((2, 0), b"x")])
    merged = hpref.codec.decode_received(torch.frombuffer(bytearray(a + b), dtype=torch.uint8),
                                         [len(a), len(b)])
    assert merged[(1, 0)].tolist() == [0, 1, 2] and merged[(2, 0)] == b"x"
    for t in raw_tensors(hpref.codec.decode(mine, tensors="raw")):
        if len(t.data):
            t.data[0] ^= 0xFF  # writes through to the received tensor
    assert bytes(mine.numpy()) != frame and bytes(received[len(frame):].numpy()) == frame
    for bad, what in ((torch.zeros(8), "torch.float32 on cpu"),
                      (torch.zeros(16, dtype=torch.uint8)[::2], "torch.uint8 on cpu, not contiguous"),
                      (torch.zeros(4, dtype=torch.uint8).to_sparse(), "torch.uint8 on cpu, torch.sparse_coo")):
        with pytest.raises(hpref.errors.InvalidArgumentError,
                           match="a segment tensor must be a contiguous CPU torch.uint8 tensor, got " + what):
            hpref.codec.decode(bad)


def test_tensors_of_immutable_bytes_are_a_private_writable_copy():
    frame = tensor_case()
    for t in raw_tensors(hpref.codec.decode(frame, tensors="raw")):
        assert isinstance(t.data, memoryview) and t.data.ndim == 1 and not t.data.readonly
        if len(t.data):
            t.data[0] ^= 0xFF
    assert frame == tensor_case()


def test_error_names_its_kind():
    with pytest.raises(hpref.Error) as e:
        hpref.codec.decode(b"HPB1\x00")
    assert e.value.kind == "truncated_header"


def test_inspect_prints_what_hpref_frame_inspect_prints():
    frame = tensor_case()
    view = hpref.codec.inspect(frame)
    assert view.startswith(f"segment: HPB1 frame, {len(frame)} bytes = header 20 + metadata ")
    assert "tensor " in view and "item 0 key " in view
    cli = pathlib.Path(__file__).parents[2] / "build" / "release" / "tools" / "hpref"
    if cli.exists():  # the same text as the command (one implementation, hpref/inspect.hpp)
        import subprocess
        out = subprocess.run([str(cli), "frame", "inspect"], input=frame, capture_output=True,
                             check=True).stdout.decode()
        assert out == view
    with pytest.raises(hpref.Error) as e:
        hpref.codec.inspect(frame, max_output_bytes=10)
    assert e.value.kind == "output_limit"
    with pytest.raises(hpref.Error) as e:
        hpref.codec.inspect(frame[:-1])
    assert e.value.kind == "frame_size_mismatch"
    np = pytest.importorskip("numpy")
    assert hpref.codec.inspect(frame, max_output_bytes=np.int64(1 << 20)) == view
    for bad in (-1, 1 << 64, 1.5, True):  # named, not nanobind's "incompatible arguments"
        with pytest.raises(hpref.Error, match=f"max_output_bytes .*got {bad!r}"):
            hpref.codec.inspect(frame, max_output_bytes=bad)
    with pytest.raises(hpref.Error, match=f"splits\\[1\\] must be a non-negative int64, got {1 << 64}"):
        hpref.codec.decode_received(frame, [len(frame), 1 << 64])


def test_a_long_string_fetched_from_the_memo_is_one_python_object():
    """A memo reference shares a string's bytes; in Python it is one str object shared, as
    pickle.loads gives it, not one copy per reference (a 1 MiB key in 2,000 dicts would be
    2 GB of copies from a 1 MiB segment)."""
    import pickle
    key = "k" * 100_000
    items = (((1, 0), [{key: i} for i in range(50)]),)
    segment = pickle.dumps(items, protocol=5)  # CPython memoizes the key: BINGET after the first
    assert len(segment) < 2 * len(key)
    (_, dicts), = hpref.codec.decode(segment)
    keys = [next(iter(d)) for d in dicts]
    assert keys[0] == key and all(k is keys[0] for k in keys)


def test_a_memo_shared_tuple_is_one_python_object():
    """A tuple nesting pairs of one memoized tuple, 20 levels deep, is 2^20 logical tuples
    from ~110 bytes; it comes back as pickle.loads gives it, one object per node (it was
    2^21 Python tuples: 680 MB at 22 levels), equal to the original structure."""
    import pickle
    t = ("x",)
    for _ in range(20):
        t = (t, t)
    segment = pickle.dumps((((1, 0), t),), protocol=5)
    assert len(segment) < 200
    (_, value), = hpref.codec.decode(segment)
    assert value == t
    node = value
    for _ in range(20):
        assert node[0] is node[1]
        node = node[0]
    assert node == ("x",)


def framed_one(schema, binary):
    """A framed segment of one item, key (1, 0), whose schema node is ``schema``."""
    import pickle
    import struct
    metadata = pickle.dumps((((1, 0), schema),), protocol=5)
    return b"HPB1" + struct.pack(">QQ", len(metadata), len(binary)) + metadata + binary


def test_a_shared_tuple_holding_something_mutable_is_made_at_each_place():
    """A schema node referenced twice (memo) decodes once, but a tuple holding a list comes
    back as two tuples with two lists, as the original's decoder makes them: appending to one
    never changes the other. A tuple of immutables is shared (only `is` tells)."""
    with_list = ("__hp_tuple__", (("__hp_list__", (("__hp_bytes__", 0, 1),)),))
    immutable = ("__hp_tuple__", (("__hp_bytes__", 0, 1), ("__hp_value__", 5)))
    schema = ("__hp_tuple__", (with_list, with_list, immutable, immutable))
    segment = framed_one(schema, b"z")
    assert segment.count(b"__hp_list__") == 1  # memoized: one node, referenced twice
    (_, (a, b, c, d)), = hpref.codec.decode(segment)
    assert a == b == ([b"z"],) and a is not b and a[0] is not b[0]
    a[0].append(1)
    assert b == ([b"z"],)
    assert c == d == (b"z", 5) and c is d


def test_overlapping_bytes_leaves_stay_distinct():
    """Two bytes leaves at one offset of the binary region with different sizes (accepted
    outside strict mode, SPEC 2.4) are two different values."""
    binary = bytes(range(80))
    segment = framed_one(("__hp_tuple__", (("__hp_bytes__", 0, 64), ("__hp_bytes__", 0, 80))), binary)
    (_, (a, b)), = hpref.codec.decode(segment)
    assert a == binary[:64] and b == binary


def test_copies_into_python_objects_stay_within_the_input_plus_1_mib():
    """SPEC 2.4 (memory a small multiple of the input): the C++ Value shares what overlapping
    ranges and memo references repeat, but each distinct bytes range, each bytearray and each
    aligned complex128 copy is a new Python object; a 1 MiB segment of overlapping ranges
    became 2 GB of bytes objects. What an encoder writes copies each byte once, whatever its
    size; past the input's size plus 1 MiB the decode is refused before the copy is made."""
    big = bytes(range(256)) * (3 << 12)  # 3 MiB: one leaf larger than the slack decodes
    (_, value), = hpref.codec.decode(hpref.codec.encode([((1, 0), {"a": big, "b": bytearray(big)})]))
    assert value["a"] == big and value["b"] == big
    # 15 overlapping 64 KiB ranges: ~1 MB of copies, within 64 KiB + 1 MiB
    (_, leaves), = hpref.codec.decode(framed_one(
        ("__hp_list__", tuple(("__hp_bytes__", k, 65536 - k) for k in range(15))), bytes(65536)))
    assert [len(b) for b in leaves] == [65536 - k for k in range(15)]
    with pytest.raises(hpref.errors.DecodeCopyLimitError, match=r"more than \d+ bytes into str, bytes and "
                       r"bytearray objects \(the input's \d+ bytes plus 1 MiB\)"):
        hpref.codec.decode(framed_one(
            ("__hp_list__", tuple(("__hp_bytes__", k, 65536 - k) for k in range(40))), bytes(65536)))
    # decode_received: the budget is the whole buffer's
    seg = framed_one(("__hp_list__", (("__hp_bytearray__", 0, 65536),) * 20), bytes(65536))
    with pytest.raises(hpref.errors.DecodeCopyLimitError):
        hpref.codec.decode_received(seg, [len(seg)])


def test_misaligned_complex128_copies_count_against_the_budget():
    """A misaligned complex128 tensor is copied (torch crashes on it in place): 20 at offset 0
    and 20 at offset 8 of one 64 KiB region are at least 20 copies of 64 KiB wherever the
    region lies, refused; aligned tensors of other dtypes are views and cost nothing."""
    pytest.importorskip("torch")
    n = 4095  # 16 x 4095 bytes: fits at offset 0 and at offset 8
    odd = ("__hp_list__", tuple(("__hp_tensor__", "torch.complex128", (n,), 8 * (i % 2), 16 * n) for i in range(40)))
    with pytest.raises(hpref.errors.DecodeCopyLimitError):
        hpref.codec.decode(bytearray(framed_one(odd, bytes(65536))))
    views = ("__hp_list__", tuple(("__hp_tensor__", "torch.uint8", (65536,), 0, 65536) for _ in range(40)))
    (_, tensors), = hpref.codec.decode(framed_one(views, bytes(65536)))
    assert len(tensors) == 40


def long_key_pickle(n):
    """A legacy segment whose two 1 MiB dict keys, equal but for their last byte, are
    memo-shared by n dicts: n x 1 MiB of comparing and hashing from 2 MiB of input."""
    import struct
    key_len = 1 << 20
    p = bytearray(b"\x80\x05K\x01K\x00\x86")  # PROTO 5, the item key (1, 0)
    p += b"]"  # EMPTY_LIST
    for last in (b"a", b"b"):  # memo 0 and 1, popped
        p += b"\x8d" + struct.pack("<Q", key_len) + b"x" * (key_len - 1) + last + b"\x94" + b"0"
    p += b"("
    for _ in range(n):
        p += b"}(h\x00Nh\x01Nu"  # EMPTY_DICT, MARK, BINGET 0, NONE, BINGET 1, NONE, SETITEMS
    return bytes(p + b"e\x86\x85.")  # APPENDS, ((key, list),), STOP


def test_a_long_key_repeated_by_memo_references_is_refused_not_a_long_decode():
    """Work stays proportional to the input (SPEC 2.4): comparing and hashing dict keys is
    charged by their length, so n dicts sharing two 1 MiB keys are refused once they would
    cost more than the node limit plus the input's size; a few are fine."""
    (_, dicts), = hpref.codec.decode(long_key_pickle(100), tensors="raw")
    assert len(dicts) == 100 and len(dicts[0]) == 2
    with pytest.raises(hpref.Error) as e:
        hpref.codec.decode(long_key_pickle(3000), tensors="raw")
    assert e.value.kind == "pickle_node_limit" and "dict keys" in e.value.message


@pytest.mark.parametrize("dtype", ["qint8", "quint8", "qint32", "quint4x2", "quint2x4"])
def test_a_quantized_tensor_is_refused_as_a_torch_tensor_not_a_crash(dtype):
    """SPEC 1.3 lists PyTorch's quantized dtypes, but the wire has no scale or zero point:
    torch.frombuffer makes such a tensor without a quantizer, and torch (2.13) then kills the
    process with SIGSEGV at its first reshape or qscheme, which is what the original's decode
    does with such bytes from a peer. Ours refuses it with unsupported_dtype naming the dtype;
    tensors='raw' gives its bytes; an empty one is torch.empty's, as the original makes it."""
    torch = pytest.importorskip("torch")
    data = bytes(range(8 if dtype == "qint32" else 2))
    for shape in [(2,), (1, 2)]:
        frame = hpref.codec.encode([((1, 0), RawTensor(dtype, shape, data))])
        with pytest.raises(hpref.Error) as e:
            hpref.codec.decode(frame)
        assert e.value.kind == "unsupported_dtype"
        assert f"torch.{dtype} tensor of {len(data)} bytes cannot be made" in e.value.message
        [(_, raw)] = hpref.codec.decode(frame, tensors="raw")
        assert (raw.dtype, tuple(raw.shape), bytes(raw.data)) == (dtype, shape, data)
    [(_, empty)] = hpref.codec.decode(hpref.codec.encode([((1, 0), RawTensor(dtype, (2, 0), b""))]))
    assert empty.dtype == getattr(torch, dtype) and tuple(empty.shape) == (2, 0)


@pytest.mark.parametrize("dtype", sorted(J.DTYPE_SIZES))
def test_every_dtype_decodes_to_a_torch_tensor_torch_can_use_or_a_named_refusal(dtype):
    """Every SPEC 1.3 dtype of a peer's segment, decoded as torch tensors: a tensor of that
    dtype and shape that survives reshape, clone and repr (a Python error from torch, such
    as bits8's repr, is torch's answer; a crash kills the test run), or unsupported_dtype
    naming it (quantized dtypes; dtypes the importable torch lacks). The quantized dtypes
    crashed the process here until 2026-12-01."""
    torch = pytest.importorskip("torch")
    data = bytes(range(4 * J.DTYPE_SIZES[dtype]))
    frame = hpref.codec.encode([((1, 0), RawTensor(dtype, (2, 2), data))])
    try:
        [(_, t)] = hpref.codec.decode(frame)
    except hpref.Error as e:
        assert e.kind == "unsupported_dtype"
        assert f"torch.{dtype}" in str(e)
        assert dtype in {"qint8", "quint8", "qint32", "quint4x2", "quint2x4"} or \
            not isinstance(getattr(torch, dtype, None), torch.dtype)
        return
    assert t.dtype == getattr(torch, dtype) and tuple(t.shape) == (2, 2)
    assert tuple(t.reshape(4).shape) == (4,) and tuple(t.clone().shape) == (2, 2)
    try:
        repr(t)
    except (RuntimeError, NotImplementedError, TypeError):
        pass


def buffer_address(buffer):
    import ctypes
    return ctypes.addressof((ctypes.c_char * len(buffer)).from_buffer(buffer))


def test_a_complex128_tensor_anywhere_in_the_segment_is_one_torch_can_use():
    """torch (2.13 and 1.13) kills the process with SIGSEGV on complex128 bytes that are not
    16-byte aligned (clone, sum, repr, copy_; no other dtype at any offset), and a peer puts
    tensors where its metadata says. Decoding into torch tensors gives such a tensor an
    aligned private copy of its bytes; an aligned one stays a view of the caller's buffer.
    Found by test_decode_fuzz.py (2026-12-01); the original's decode crashes there too."""
    torch = pytest.importorskip("torch")
    values = torch.tensor([1 + 2j, -3.5 + 0.25j, 7e300 - 1e-300j], dtype=torch.complex128)
    data = values.view(torch.uint8).numpy().tobytes()
    seen = set()
    for pad in range(16):  # the tensor's bytes start at every offset modulo 16
        z = RawTensor("complex128", (3,), data)
        frame = hpref.codec.encode([((1, 0), {"pad": b"x" * pad, "z": z}),
                                    ((2, 0), RawTensor("complex128", (), data[16:32]))])
        buffer = bytearray(frame)
        at = buffer_address(buffer) + frame.index(data)
        seen.add(at % 16)
        [(_, first), (_, scalar)] = hpref.codec.decode(buffer)
        t = first["z"]
        assert t.data_ptr() % 16 == 0 and scalar.data_ptr() % 16 == 0
        assert torch.equal(t.clone().view(torch.uint8), values.view(torch.uint8))
        assert t.sum() == values.sum() and scalar.clone().item() == -3.5 + 0.25j and repr(t)
        buffer[frame.index(data)] ^= 1  # a view sees the caller's buffer change; a copy not
        assert (t.view(torch.uint8)[0].item() != data[0]) == (at % 16 == 0)
        [(_, first), _] = hpref.codec.decode(frame)  # from bytes: hpref's own copy
        assert first["z"].data_ptr() % 16 == 0 and first["z"].clone().sum() == values.sum()
    assert len(seen) == 16
    # A RawTensor's bytes made into a torch tensor (hpref.oracle's path) likewise.
    from hpref._tensors import from_raw
    odd = bytearray(49)
    odd[1:] = data
    t = from_raw(RawTensor("complex128", (3,), memoryview(odd)[1:]))
    assert t.data_ptr() % 16 == 0 and torch.equal(t.clone(), values)


def test_an_empty_tensor_whose_strides_overflow_is_an_invalid_shape_error():
    """A shape with no elements can still have strides beyond int64 ((0, 2, 0, 2**62):
    2 * 2**62); torch.empty refuses it with a RuntimeError (the original's decode raises
    that; torch 1.13 makes it). Decoding into torch tensors says invalid_shape where torch
    refuses, naming the shape, and python_equivalent says RuntimeError; elsewhere the tensor
    is torch's. tensors='raw' gives it as it is."""
    torch = pytest.importorskip("torch")
    shape = (0, 2, 0, 2 ** 62)
    frame = hpref.codec.encode([((1, 0), RawTensor("float32", shape, b""))])
    try:
        torch.empty(shape)
    except RuntimeError:
        with pytest.raises(hpref.Error) as e:
            hpref.codec.decode(frame)
        assert e.value.kind == "invalid_shape" and str(shape) in e.value.message
        assert hpref.python_equivalent(e.value) is RuntimeError
    else:
        [(_, t)] = hpref.codec.decode(frame)
        assert tuple(t.shape) == shape and t.dtype == torch.float32
    [(_, raw)] = hpref.codec.decode(frame, tensors="raw")
    assert tuple(raw.shape) == shape
