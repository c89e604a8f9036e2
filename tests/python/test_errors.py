"""hpref's error model (issue 11): one hpref.Error subclass per C++ error kind, errors that
pickle, and python_equivalent(err) — the exception type the original implementation raises
for the same refusal — checked against the original itself:

* every frame the original refused in tests/data/frames.jsonl (its recorded answers);
* a corpus of segments, one or more per decode kind, given to the original's
  _decode_received_payloads in-process, and items hpref.codec.encode refuses, given to the
  original's encoder and then its decoder: where python_equivalent names a type the
  original raises exactly that type, where it says None the original accepts;
* hypothesis: every prefix of a segment the original wrote (legacy, framed, and framed with
  its metadata pickle cut) is refused by both, with matching types;
* the notes of docs/python.md's table that name an exception to the rule are true.

The in-process part needs torch and ../shared/original (skipped, saying which, when either
is absent); it runs under torch 2.13 (.venv) and Debian's 1.13."""
import codecs
import collections
import json
import pathlib
import pickle
import re
import struct
import sys

import pytest

import hpref
from hpref import errors

ROOT = pathlib.Path(__file__).resolve().parents[2]
ORIGINAL = pathlib.Path(__file__).resolve().parents[3] / "shared" / "original"
HEADER = ROOT / "reference" / "include" / "hpref" / "error.hpp"
DOCS = ROOT / "docs" / "python.md"


def header_kinds():
    """HPREF_ERROR_KINDS as listed in the C++ header, in order."""
    text = HEADER.read_text()
    block = text[text.index("#define HPREF_ERROR_KINDS(X)"):text.index("enum class Errc")]
    return re.findall(r"\bX\((\w+)\)", block)


KINDS = list(hpref._core.error_kinds())


def camel(kind):
    return "".join(part.capitalize() for part in kind.split("_")) + "Error"


# ---- the classes ----------------------------------------------------------------------


def test_the_extension_lists_the_headers_kinds():
    if not HEADER.exists():
        pytest.skip(f"no C++ header at {HEADER} (an installed package without sources)")
    assert KINDS == header_kinds()
    assert len(KINDS) == 108


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_has_its_class(kind):
    cls = getattr(errors, camel(kind))
    assert cls.kind == kind and cls.__name__ == camel(kind)
    assert issubclass(cls, hpref.Error) and cls is not hpref.Error
    assert errors.error_class(kind) is cls
    err = errors._from_core(kind, f"the {kind} message")
    assert type(err) is cls
    assert (err.kind, err.message, str(err), err.args) == (
        kind, f"the {kind} message", f"the {kind} message", (f"the {kind} message",))
    assert camel(kind) in errors.__all__
    eq = errors.python_equivalent(kind)
    assert eq is None or issubclass(eq, BaseException)
    assert kind in errors._EQUIVALENT


def test_no_class_without_a_kind():
    by_kind = {c.kind for c in vars(errors).values()
               if isinstance(c, type) and issubclass(c, errors.Error) and "kind" in vars(c)
               and c is not errors.Error}
    assert by_kind == set(KINDS)
    assert set(errors._EQUIVALENT) == set(KINDS)


CATEGORIES = [
    (errors.MetadataPickleError, lambda k: k.startswith("pickle_") and k != "pickle_unwritable"),
    (errors.SegmentError, lambda k: k in (
        "truncated_header", "frame_size_mismatch", "metadata_not_pairs", "invalid_schema_node",
        "unknown_schema_tag", "schema_field_count", "invalid_shape", "invalid_byte_range",
        "range_out_of_bounds", "tensor_size_mismatch", "non_canonical_layout",
        "duplicate_mapping_key", "decode_copy_limit")),
    (errors.MergeError, lambda k: k in ("split_sum_mismatch", "duplicate_payload_key")),
    (errors.EncodeError, lambda k: k in ("depth_limit", "unencodable_value", "pickle_unwritable")),
    (errors.ValueModelError, lambda k: k in (
        "invalid_dtype", "unsupported_dtype", "invalid_tensor", "invalid_utf8", "unhashable_key",
        "duplicate_key", "invalid_sample_key")),
    (errors.RouteError, lambda k: k.startswith("route_")),
    (errors.TopologyError, lambda k: k.startswith("topology_")),
    (errors.GroupPlanError, lambda k: k.startswith("group_")),
    (errors.BatchError, lambda k: k.startswith("batch_")),
    (errors.OracleError, lambda k: k in ("oracle_mismatch", "unsupported_arithmetic")),
    (errors.CommError, lambda k: k.startswith("comm_")),
    (errors.TransportError, lambda k: k.startswith("transport_") or k == "exchange_refused"),
    (errors.DispatchError, lambda k: k.startswith("dispatch_")),
    (errors.UsageError, lambda k: k.startswith("json_") or k in (
        "invalid_argument", "invalid_request", "io", "output_limit")),
]


@pytest.mark.parametrize("category,member", CATEGORIES, ids=lambda c: getattr(c, "__name__", ""))
def test_categories_hold_their_kinds(category, member):
    assert [k for k in KINDS if issubclass(errors.error_class(k), category)] == \
        [k for k in KINDS if member(k)]


def test_category_tree():
    for sub in (errors.ValueModelError, errors.DecodeError, errors.EncodeError):
        assert issubclass(sub, errors.CodecError)
    for sub in (errors.MetadataPickleError, errors.SegmentError, errors.MergeError):
        assert issubclass(sub, errors.DecodeError)
    for sub in (errors.TopologyError, errors.GroupPlanError, errors.BatchError):
        assert issubclass(sub, errors.PlanningError)
    # the kinds that sit under no category
    assert [k for k in KINDS if errors.error_class(k).__bases__ == (errors.Error,)] == \
        ["scenario_check", "internal"]


def test_the_stub_declares_every_class_with_its_base():
    import ast
    tree = ast.parse((pathlib.Path(errors.__file__).with_suffix(".pyi")).read_text())
    declared = {node.name: node.bases[0].id for node in tree.body if isinstance(node, ast.ClassDef)}
    classes = {c.__name__: c for c in vars(errors).values()
               if isinstance(c, type) and issubclass(c, errors.Error)}
    assert set(declared) == set(classes)
    for name, base in declared.items():
        assert classes[name].__bases__[0].__name__ == base, name
    functions = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    assert {"python_equivalent", "error_class", "_from_core"} <= functions


def test_issue_12_names_are_the_communicator_kinds():
    assert errors.CommMismatch is errors.error_class("comm_mismatch")
    assert errors.CommDeadlock is errors.error_class("comm_deadlock")
    assert errors.PeerFailed is errors.error_class("comm_peer_failed")
    assert errors.CommTimeout is errors.error_class("comm_timeout")
    assert errors.BufferMutated is errors.error_class("comm_buffer_mutated")
    names = ("CommMismatch", "CommDeadlock", "PeerFailed", "CommTimeout", "BufferMutated")
    for name in names:
        assert issubclass(getattr(errors, name), errors.CommError)
        assert getattr(hpref, name) is getattr(errors, name), name
        assert name in errors.__all__ and name in hpref.__all__, name


def test_an_unknown_kind_is_a_plain_error_with_that_kind():
    err = errors._from_core("kind_from_the_future", "something new")
    assert type(err) is errors.Error
    assert (err.kind, err.message, str(err)) == ("kind_from_the_future", "something new",
                                                 "something new")
    assert errors.python_equivalent(err) is None
    assert errors.error_class("kind_from_the_future") is errors.Error
    assert repr(err) == "Error('something new', kind='kind_from_the_future')"


def test_python_equivalent_refuses_what_is_no_error():
    with pytest.raises(TypeError):
        errors.python_equivalent(ValueError("not ours"))


def roundtrip(err):
    return pickle.loads(pickle.dumps(err, protocol=pickle.HIGHEST_PROTOCOL))


@pytest.mark.parametrize("kind", KINDS + ["kind_from_the_future"])
def test_errors_pickle(kind):
    err = errors._from_core(kind, f"refused: {kind} \u00e9")
    back = roundtrip(err)
    assert type(back) is type(err)
    assert (back.kind, back.message, str(back), back.args) == (err.kind, err.message, str(err),
                                                               err.args)


class RankError(errors.CommPeerFailedError):
    """A subclass with its own __init__ and attributes, as issue 12's simulator adds."""

    def __init__(self, message, group, ranks):
        super().__init__(message)
        self.group, self.ranks = group, ranks


def test_a_subclass_with_its_own_init_and_attributes_pickles():
    back = roundtrip(RankError("rank 3 crashed", group=1, ranks=(3,)))
    assert type(back) is RankError
    assert (back.kind, back.message, back.group, back.ranks) == (
        "comm_peer_failed", "rank 3 crashed", 1, (3,))


def test_raised_errors_are_the_kinds_classes():
    with pytest.raises(errors.TruncatedHeaderError) as e:
        hpref.codec.decode(b"HPB1\x00", tensors="raw")
    assert isinstance(e.value, errors.SegmentError) and isinstance(e.value, hpref.Error)
    assert e.value.kind == "truncated_header" and "HPB1" in str(e.value)
    back = roundtrip(e.value)
    assert type(back) is errors.TruncatedHeaderError and back.message == e.value.message
    assert errors.python_equivalent(e.value) is ValueError


# ---- python_equivalent against the original's recorded answers (frames.jsonl) ---------

FRAMES = [json.loads(line) for line in (ROOT / "tests" / "data" / "frames.jsonl").read_text()
          .splitlines() if line.strip()]
REFUSED = [c for c in FRAMES if "frame_hex" in c and not c["original_answer"]["ok"]]


def test_array_bools_are_no_ints_wherever_bool_is_refused():
    """Every argument that refuses Python's bool as an int refuses numpy's and torch's bools
    too (operator.index reads them as 0 and 1: a seed of np.True_ ran as seed 1, a split
    of torch.tensor(True) as 1 byte), naming the argument and the value; their integers
    stay ints."""
    np = pytest.importorskip("numpy")
    from hpref import codec, planning, sim
    try:
        import torch
    except ImportError:  # the numpy cases still run
        torch = None
    layout = [planning.Field("ids", "int32", "cpu", ("n",))]
    calls = {
        "splits[0]": lambda v: codec.decode_received(b"", [v]),
        "max_output_bytes": lambda v: codec.inspect(b"", max_output_bytes=v),
        "max_message_bytes": lambda v: planning.batch_shapes(layout, (1, 2), max_message_bytes=v),
        "status": lambda v: planning.batch_header(layout, status=v),
        "header[1]": lambda v: planning.header_status(layout, (1, v)),
        "batch field 'ids' dim 0": lambda v: planning.batch_layout([planning.Field("ids", "int32", "cpu", (v,))]),
        "seed": lambda v: sim.run(1, lambda comm: None, seed=v),
    }
    bools = [True, np.True_, np.False_, np.array(True)]
    if torch is not None:
        bools += [torch.tensor(True), torch.tensor(False)]
    for what, call in calls.items():
        for value in bools:
            with pytest.raises(hpref.Error, match=f"^{re.escape(what)} must be an? ") as e:
                call(value)
            assert repr(value) in str(e.value), (what, value)
    assert planning.batch_shapes(layout, (1, np.int64(2)), max_message_bytes=np.uint64(8)) == ((2,),)
    if torch is not None:
        assert planning.batch_shapes(layout, (1, torch.tensor(2)), max_message_bytes=torch.tensor(8)) == ((2,),)


def test_frames_jsonl_has_refusals():
    assert len(REFUSED) >= 15


@pytest.mark.parametrize("case", range(len(REFUSED)))
def test_recorded_refusals_have_the_equivalent_type(case):
    c = REFUSED[case]
    recorded = c["original_answer"]["error"].split(":", 1)[0]  # "ValueError: Payload ..."
    with pytest.raises(hpref.Error) as e:
        hpref.codec.decode(bytes.fromhex(c["frame_hex"]), tensors="raw")
    eq = errors.python_equivalent(e.value)
    assert eq is not None and eq.__name__ == recorded, (e.value.kind, str(e.value), recorded)


# ---- the original in-process ----------------------------------------------------------


@pytest.fixture(scope="module")
def original():
    """seed_transport from ../shared/original (needs torch)."""
    pytest.importorskip("torch", reason="the original implementation imports torch")
    if not (ORIGINAL / "seed_transport.py").exists():
        pytest.skip(f"the original implementation is not at {ORIGINAL}")
    if str(ORIGINAL) not in sys.path:
        sys.path.insert(0, str(ORIGINAL))
    import seed_transport
    return seed_transport


def original_outcome(call):
    """None when call() returns, else the exception it raised."""
    try:
        call()
    except Exception as exc:  # noqa: BLE001 - the type is what is compared
        return exc
    return None


def check_same_refusal(err, outcome, label):
    """python_equivalent(err) is the type of the original's exception, or None when the
    original accepted."""
    eq = errors.python_equivalent(err)
    got = None if outcome is None else type(outcome)
    assert got is eq, (f"{label}: hpref {err.kind} ({err.message}) -> {eq}, "
                       f"the original: {got} {outcome!r}")


HDR = struct.Struct("!4sQQ")
K = (0, 0)


def framed(meta, binary=b"", protocol=5):
    """An HPB1 segment around `meta` (pickled unless already bytes)."""
    m = meta if isinstance(meta, bytes) else pickle.dumps(meta, protocol=protocol)
    return HDR.pack(b"HPB1", len(m), len(binary)) + m + binary


def legacy(items, protocol=5):
    return pickle.dumps(items, protocol=protocol)


def one(schema, binary=b""):
    """A frame with one item whose schema node is `schema`."""
    return framed(((K, schema),), binary)


def val(v):
    return ("__hp_value__", v)


def tensor(dtype, shape, offset, size):
    return ("__hp_tensor__", dtype, shape, offset, size)


class Reduce:
    """Pickles as f(*args) (benign callables only)."""

    def __init__(self, f, args):
        self.f, self.args = f, args

    def __reduce__(self):
        return (self.f, self.args)


def nested(depth):
    v = []
    for _ in range(depth - 1):
        v = [v]
    return v


PAIRS = legacy(((K, 1),))  # b"\x80\x05..." ending in STOP
TWICE = legacy(((K, 1), (K, 2)))
BODY = PAIRS[2:]  # without PROTO


def overlapping_bytes(n=24):
    # n bytes leaves over [k, 64 KiB) of one 64 KiB binary region: ~1.5 MB of copies
    return one(("__hp_list__", tuple(("__hp_bytes__", k, 65536 - k) for k in range(n))), bytes(65536))


def shared_bytearray_node(n=24):
    # one memoized schema node, a 64 KiB bytearray leaf, referenced n times: each a new bytearray
    node = ("__hp_bytearray__", 0, 65536)
    return one(("__hp_list__", (node,) * n), bytes(65536))


def frozen_mutation():
    # ((K, L),) then L fetched from the memo and appended to: CPython builds ((K, [1]),)
    return b"\x80\x05K\x00K\x00\x86]\x94\x86\x85h\x00K\x01a0."


def node_limit():
    # a list of 1000 ints, then a list holding it 20000 times: 20 M nodes counted as copies
    inner = b"]\x94(" + b"K\x01" * 1000 + b"e0"
    return b"\x80\x05" + inner + b"K\x00K\x00\x86](" + b"h\x00" * 20000 + b"e\x86\x85."


def stack_limit():
    return b"\x80\x05K\x00K\x00\x86(" + b"N" * (1 << 20) + b"l\x86\x85."


def memo_limit():
    return b"\x80\x05N" + b"\x94" * ((1 << 20) + 1) + b"0" + BODY


def replace_once(data, old, new):
    """`data` (a small protocol 5 pickle) without its FRAME, `old` replaced by `new`."""
    if data[2] == pickle.FRAME[0]:
        data = data[:2] + data[11:]
    assert data.count(old) == 1, (data, old)
    return data.replace(old, new)


# (label, hpref's kind, segment, splits or None for one segment, strict)
DECODE_CASES = [
    ("header of 9 bytes", "truncated_header", b"HPB1" + bytes(5), None, False),
    ("sizes announce a byte more", "frame_size_mismatch",
     HDR.pack(b"HPB1", len(legacy(((K, ("__hp_bytes__", 0, 1)),))), 2)
     + legacy(((K, ("__hp_bytes__", 0, 1)),)) + b"x", None, False),
    ("metadata is an int", "metadata_not_pairs", framed(5, b"x"), None, False),
    ("metadata is None", "metadata_not_pairs", framed(None, b"x"), None, False),
    ("metadata entry is an int", "metadata_not_pairs", framed((5,), b"x"), None, False),
    ("metadata entry of three", "metadata_not_pairs", framed(((K, val(1), 3),), b"x"), None, False),
    ("metadata is a str", "metadata_not_pairs", framed("ab", b"x"), None, False),
    ("legacy segment of an int", "metadata_not_pairs", legacy(5), None, False),
    ("legacy segment of a str", "metadata_not_pairs", legacy("abc"), None, False),
    ("legacy entry of one", "metadata_not_pairs", legacy(((K,),)), None, False),
    ("legacy entry is None", "metadata_not_pairs", legacy((None,)), None, False),
    ("schema node is an int", "invalid_schema_node", one(5), None, False),
    ("schema node is a list", "invalid_schema_node", one(["__hp_value__", 1]), None, False),
    ("schema node is empty", "invalid_schema_node", one(()), None, False),
    ("tuple children are an int", "invalid_schema_node", one(("__hp_tuple__", 5)), None, False),
    ("list children are None", "invalid_schema_node", one(("__hp_list__", None)), None, False),
    ("list children are a str", "invalid_schema_node", one(("__hp_list__", "ab")), None, False),
    ("mapping children are a float", "invalid_schema_node", one(("__hp_mapping__", 1.5)), None,
     False),
    ("mapping entry is an int", "invalid_schema_node", one(("__hp_mapping__", (5,))), None, False),
    ("mapping entry of three", "invalid_schema_node",
     one(("__hp_mapping__", (("a", val(1), 3),))), None, False),
    ("unknown tag", "unknown_schema_tag", one(("__hp_nope__", 1)), None, False),
    ("tag is an int", "unknown_schema_tag", one((5, 1)), None, False),
    ("tensor node of four", "schema_field_count", one(("__hp_tensor__", "torch.uint8", (1,), 0),
                                                      b"x"), None, False),
    ("bytes node of two", "schema_field_count", one(("__hp_bytes__", 0), b"x"), None, False),
    ("bytearray node of four", "schema_field_count", one(("__hp_bytearray__", 0, 1, 2), b"x"),
     None, False),
    ("tuple node of one", "schema_field_count", one(("__hp_tuple__",)), None, False),
    ("list node of one", "schema_field_count", one(("__hp_list__",)), None, False),
    ("mapping node of one", "schema_field_count", one(("__hp_mapping__",)), None, False),
    ("value node of one", "schema_field_count", one(("__hp_value__",)), None, False),
    ("dtype without torch.", "invalid_dtype", one(tensor("float32", (1,), 0, 4), bytes(4)), None,
     False),
    ("dtype is an int", "invalid_dtype", one(tensor(5, (1,), 0, 4), bytes(4)), None, False),
    ("dtype torch.nosuch", "unsupported_dtype", one(tensor("torch.nosuch", (1,), 0, 4),
                                                    bytes(4)), None, False),
    ("dtype torch.Tensor", "unsupported_dtype", one(tensor("torch.Tensor", (1,), 0, 4), bytes(4)),
     None, False),
    ("shape with -2", "invalid_shape", one(tensor("torch.float32", (4, -2), 0, 0)), None, False),
    ("shape is an int", "invalid_shape", one(tensor("torch.float32", 5, 0, 20), bytes(20)), None,
     False),
    ("shape is None", "invalid_shape", one(tensor("torch.float32", None, 0, 4), bytes(4)), None,
     False),
    ("shape is a str", "invalid_shape", one(tensor("torch.uint8", "ab", 0, 2), bytes(2)), None,
     False),
    ("shape entry is a str", "invalid_shape", one(tensor("torch.uint8", ("a",), 0, 1), b"x"),
     None, False),
    ("shape entry is a float", "invalid_shape", one(tensor("torch.uint8", (1.0,), 0, 1), b"x"),
     None, False),
    ("shape entry is a bool", "invalid_shape", one(tensor("torch.float32", (True, 1), 0, 4),
                                                   bytes(4)), None, False),
    ("offset -1", "invalid_byte_range", one(("__hp_bytes__", -1, 1), b"x"), None, False),
    ("offset 1.0", "invalid_byte_range", one(("__hp_bytes__", 1.0, 1), b"xy"), None, False),
    ("tensor size None", "invalid_byte_range", one(tensor("torch.uint8", (1,), 0, None), b"x"),
     None, False),
    ("offset True", "invalid_byte_range", one(("__hp_bytearray__", True, 1), b"xy"), None, False),
    ("size False", "invalid_byte_range", one(tensor("torch.uint8", (0,), 0, False), b""), None,
     False),
    ("bytes past the region", "range_out_of_bounds", one(("__hp_bytes__", 0, 5), b"x"), None,
     False),
    ("tensor past the region", "range_out_of_bounds",
     one(tensor("torch.float32", (2,), 4, 8), bytes(8)), None, False),
    ("30 bytes for 8 floats", "tensor_size_mismatch",
     one(tensor("torch.float32", (4, 2), 0, 30), bytes(30)), None, False),
    ("numel beyond int64", "tensor_size_mismatch",
     one(tensor("torch.float32", (1 << 62, 1 << 62), 0, 0)), None, False),
    ("strict: leaves out of order", "non_canonical_layout",
     framed(((K, ("__hp_bytes__", 1, 1)), ((0, 1), ("__hp_bytes__", 0, 1))), b"xy"), None, True),
    ("strict: a gap", "non_canonical_layout", one(("__hp_bytes__", 1, 1), b"xy"), None, True),
    ("mapping key twice", "duplicate_mapping_key",
     one(("__hp_mapping__", (("a", val(1)), ("a", val(2))))), None, False),
    ("mapping keys 1 and True", "duplicate_mapping_key",
     one(("__hp_mapping__", ((1, val(1)), (True, val(2))))), None, False),
    ("item key is a list", "unhashable_key", framed((([0, 0], val(1)),), b""), None, False),
    ("legacy item key is a list", "unhashable_key", legacy((([0], 1),)), None, False),
    ("mapping key is a list", "unhashable_key", one(("__hp_mapping__", (([1], val(1)),))), None,
     False),
    ("a key twice in one segment", "duplicate_payload_key", TWICE, [len(TWICE)], False),
    ("a key from two peers", "duplicate_payload_key", PAIRS + PAIRS, [len(PAIRS)] * 2, False),
    ("splits short of the buffer", "split_sum_mismatch", PAIRS + b"xy", [len(PAIRS)], False),
    ("splits past the buffer", "split_sum_mismatch", PAIRS, [len(PAIRS), 3], False),
    # SPEC 2.3: the metadata pickle
    ("no STOP (protocol 2)", "pickle_truncated", legacy(((K, 1),), protocol=2)[:-1], None,
     False),
    ("no STOP inside a FRAME", "pickle_truncated", PAIRS[:-1], None, False),
    ("frame metadata without STOP", "pickle_truncated",
     framed(legacy(((K, ("__hp_bytes__", 0, 1)),), protocol=3)[:-1], b"x"), None, False),
    ("frame with empty metadata", "pickle_truncated", framed(b"", b"x"), None, False),
    ("SHORT_BINUNICODE cut", "pickle_truncated", b"\x80\x05\x8c\x06abc", None, False),
    ("BININT cut", "pickle_truncated", b"\x80\x05J\x01\x00", None, False),
    ("PROTO cut", "pickle_truncated", b"\x80", None, False),
    ("opcode 0xff", "pickle_opcode", b"\x80\x05\xff.", None, False),
    ("opcode 0x00", "pickle_opcode", b"\x80\x05" + BODY[:-1] + b"\x00.", None, False),
    ("PERSID", "pickle_opcode", b"\x80\x02Pid\n.", None, False),
    ("BINPERSID", "pickle_opcode", b"\x80\x02NQ.", None, False),
    ("NEXT_BUFFER", "pickle_opcode", b"\x80\x05\x97.", None, False),
    ("EXT1", "pickle_opcode", b"\x80\x02\x82\x01.", None, False),
    ("EXT2", "pickle_opcode", b"\x80\x02\x83\x01\x00.", None, False),
    ("EXT4", "pickle_opcode", b"\x80\x02\x84\x01\x00\x00\x00.", None, False),
    ("READONLY_BUFFER on bytes", "pickle_opcode",
     replace_once(legacy(((K, b"ab"),)), b"C\x02ab", b"C\x02ab\x98"), None, False),
    ("a set (EMPTY_SET)", "pickle_opcode", legacy(((K, {1, 2}),)), None, False),
    ("protocol 0", "pickle_opcode", legacy(((K, 1),), protocol=0), None, False),
    ("INT (protocol 0) then POP", "pickle_opcode", b"\x80\x05" + BODY[:-1] + b"I1\n0.", None,
     False),
    ("a set at protocol 2 (builtins.set)", "pickle_global", legacy(((K, {1}),), protocol=2),
     None, False),
    ("collections.OrderedDict", "pickle_global", legacy(((K, collections.OrderedDict()),)),
     None, False),
    ("_codecs.encode(str, 'utf-8')", "pickle_reduce",
     legacy(((K, Reduce(codecs.encode, ("abc", "utf-8"))),), protocol=2), None, False),
    ("bytearray(5)", "pickle_reduce", legacy(((K, Reduce(bytearray, (5,))),), protocol=2), None,
     False),
    ("PROTO 6", "pickle_protocol", b"\x80\x06" + BODY, None, False),
    ("PROTO 255", "pickle_protocol", b"\x80\xff" + BODY, None, False),
    ("PROTO 1", "pickle_protocol", b"\x80\x01" + BODY, None, False),
    ("PROTO 0", "pickle_protocol", b"\x80\x00" + BODY, None, False),
    ("bytes after STOP", "pickle_trailing_bytes", PAIRS + b"junk", None, False),
    ("TUPLE1 on an empty stack", "pickle_stack", b"\x80\x05\x85.", None, False),
    ("POP on an empty stack", "pickle_stack", b"\x80\x050" + BODY, None, False),
    ("MEMOIZE on an empty stack", "pickle_stack", b"\x80\x05\x94" + BODY, None, False),
    ("TUPLE without MARK", "pickle_stack", b"\x80\x05Nt.", None, False),
    ("STOP on an empty stack", "pickle_stack", b"\x80\x05.", None, False),
    ("STOP above two items", "pickle_stack", b"\x80\x05N" + BODY, None, False),
    ("STOP with a MARK open", "pickle_stack", b"\x80\x05(" + BODY, None, False),
    ("APPEND to an int", "pickle_stack", b"\x80\x05K\x01Na.", None, False),
    ("APPENDS to a dict", "pickle_stack", b"\x80\x05}(Ne.", None, False),
    ("SETITEM on an int", "pickle_stack", b"\x80\x05K\x01NNs.", None, False),
    ("SETITEMS on a tuple", "pickle_stack", b"\x80\x05)(NNu.", None, False),
    ("SETITEMS of three", "pickle_stack", b"\x80\x05}(K\x01K\x02K\x03u.", None, False),
    ("DICT of three", "pickle_stack", b"\x80\x05(K\x01K\x02K\x03d.", None, False),
    ("int 2**70", "pickle_int_range", legacy(((K, 2 ** 70),)), None, False),
    ("string b'\\xff'", "pickle_invalid_utf8",
     replace_once(legacy(((K, "Z"),)), b"\x8c\x01Z", b"\x8c\x01\xff"), None, False),
    ("string overlong '/'", "pickle_invalid_utf8",
     replace_once(legacy(((K, "ZZ"),)), b"\x8c\x02ZZ", b"\x8c\x02\xc0\xaf"), None, False),
    ("a lone surrogate", "pickle_invalid_utf8", legacy(((K, "\ud800"),)), None, False),
    ("dict key is a list", "pickle_unhashable_key",
     replace_once(legacy(((K, {"a": 1}),)), b"\x8c\x01a\x94", b"]\x94"), None, False),
    ("dict key is a bytearray", "pickle_unhashable_key",
     replace_once(legacy(((K, {"a": 1}),)), b"\x8c\x01a", b"\x96" + bytes(8)), None, False),
    ("dict key twice", "pickle_duplicate_key",
     replace_once(legacy(((K, {"a": 1, "b": 2}),)), b"\x8c\x01b", b"\x8c\x01a"), None, False),
    ("BINGET of a missing index", "pickle_memo_missing", b"\x80\x05h\x05.", None, False),
    ("LONG_BINGET of a missing index", "pickle_memo_missing", b"\x80\x05" + BODY[:-1]
     + b"j\x07\x00\x00\x000.", None, False),
    ("a list appended to after BINGET", "pickle_frozen_mutation", frozen_mutation(), None, False),
    ("lists 300 deep", "pickle_depth_limit", legacy(((K, nested(300)),)), None, False),
    ("memo of 1 Mi + 1 entries", "pickle_memo_limit", memo_limit(), None, False),
    ("20 M nodes through the memo", "pickle_node_limit", node_limit(), None, False),
    ("a stack of 1 Mi + 2 entries", "pickle_stack_limit", stack_limit(), None, False),
    # SPEC 2.4: the Python objects may copy at most the segment's size plus 1 MiB
    ("overlapping bytes ranges copied 24 times", "decode_copy_limit", overlapping_bytes(), None, False),
    ("a bytearray leaf's node referenced 24 times", "decode_copy_limit", shared_bytearray_node(), None, False),
    ("a legacy bytearray fetched from the memo 24 times", "decode_copy_limit",
     legacy(((K, [bytearray(65536)] * 24),)), None, False),
]


def test_every_decode_kind_has_a_case():
    decode_kinds = {k for k in KINDS if issubclass(errors.error_class(k), errors.DecodeError)}
    decode_kinds -= {"pickle_unwritable"}
    decode_kinds |= {"invalid_dtype", "unsupported_dtype", "unhashable_key"}
    assert decode_kinds <= {c[1] for c in DECODE_CASES}


def hpref_decode(segment, splits, strict):
    if splits is None:
        return hpref.codec.decode(segment, tensors="raw", strict=strict)
    return hpref.codec.decode_received(segment, splits, tensors="raw", strict=strict)


@pytest.mark.parametrize("label,kind,segment,splits,strict", DECODE_CASES,
                         ids=[c[0] for c in DECODE_CASES])
def test_decode_refusals_match_the_original(original, label, kind, segment, splits, strict):
    with pytest.raises(hpref.Error) as e:
        hpref_decode(segment, splits, strict)
    assert e.value.kind == kind, (label, e.value.kind, str(e.value))
    outcome = original_outcome(lambda: original._decode_received_payloads(
        segment, [len(segment)] if splits is None else splits))
    check_same_refusal(e.value, outcome, label)


# (label, hpref's kind, items)
ENCODE_CASES = [
    ("a lone surrogate", "invalid_utf8", [(K, "\ud800")]),
    ("a set beside bytes (framed)", "unencodable_value", [(K, {"b": b"x", "s": {1}})]),
    ("an object beside a tensor-free bytes item", "unencodable_value",
     [(K, b"x"), ((0, 1), [object()])]),
    ("lists 300 deep", "depth_limit", [(K, nested(300))]),
    ("lists 1100 deep", "depth_limit", [(K, nested(1100))]),
    ("lists 1001 deep beside bytes", "depth_limit", [(K, [b"x", nested(1001)])]),
    ("an item key that is a list", "unhashable_key", [([0, 0], 1)]),
    ("int 2**70", "invalid_argument", [(K, 2 ** 70)]),
]


@pytest.mark.parametrize("label,kind,items", ENCODE_CASES, ids=[c[0] for c in ENCODE_CASES])
def test_encode_refusals_match_the_original(original, label, kind, items):
    """The original's side of an encode refusal: its encoder, then its decoder on the
    bytes (a key that is not hashable passes its encoder and fails its receiver)."""
    with pytest.raises(hpref.Error) as e:
        hpref.codec.encode(items)
    assert e.value.kind == kind, (label, e.value.kind, str(e.value))

    def encode_then_decode():
        segment = original._encode_payload_segment(items)
        original._decode_received_payloads(segment, [len(segment)])

    check_same_refusal(e.value, original_outcome(encode_then_decode), label)


# The notes of docs/python.md that name an exception to python_equivalent: (label, segment,
# hpref's kind, what the original does instead: an exception type or None for accepting).
DOCUMENTED_EXCEPTIONS = [
    ("a global that does not resolve", b"\x80\x02cnosuch_module_hpref\nf\n)R.", "pickle_global",
     ModuleNotFoundError),
    ("legacy segment of a dict (its keys are unpacked)", legacy({1: 2}), "metadata_not_pairs",
     TypeError),
    ("metadata of an empty str (nothing to unpack)", framed("", b"x"), "metadata_not_pairs",
     None),
    ("_codecs.encode('\u20ac', 'latin1')",
     b"\x80\x02c_codecs\nencode\nX\x03\x00\x00\x00\xe2\x82\xacX\x06\x00\x00\x00latin1\x86R.",
     "pickle_reduce", UnicodeEncodeError),
    ("SETITEM on a list with an int key", b"\x80\x05]K\x00Ns.", "pickle_stack", IndexError),
]


# The same for encoding: (label, items, hpref's kind, what the original's encoder and
# decoder do instead).
DOCUMENTED_ENCODE_EXCEPTIONS = [
    ("an object in a segment without binary leaves", [(K, object())], "unencodable_value",
     None),
]


@pytest.mark.parametrize("label,items,kind,instead", DOCUMENTED_ENCODE_EXCEPTIONS,
                         ids=[c[0] for c in DOCUMENTED_ENCODE_EXCEPTIONS])
def test_documented_encode_exceptions_are_true(original, label, items, kind, instead):
    with pytest.raises(hpref.Error) as e:
        hpref.codec.encode(items)
    assert e.value.kind == kind

    def encode_then_decode():
        segment = original._encode_payload_segment(items)
        original._decode_received_payloads(segment, [len(segment)])

    outcome = original_outcome(encode_then_decode)
    got = None if outcome is None else type(outcome)
    assert got is instead and got is not errors.python_equivalent(e.value), (label, outcome)


@pytest.mark.parametrize("label,segment,kind,instead", DOCUMENTED_EXCEPTIONS,
                         ids=[c[0] for c in DOCUMENTED_EXCEPTIONS])
def test_documented_exceptions_are_true(original, label, segment, kind, instead):
    with pytest.raises(hpref.Error) as e:
        hpref.codec.decode(segment, tensors="raw")
    assert e.value.kind == kind
    outcome = original_outcome(lambda: original._decode_received_payloads(segment,
                                                                          [len(segment)]))
    got = None if outcome is None else type(outcome)
    assert got is instead and got is not errors.python_equivalent(e.value), (label, outcome)


# ---- hypothesis: every prefix of what the original writes -----------------------------


@pytest.fixture(scope="module")
def generated(original):
    """Strategies for items the original encodes (scalars, bytes, tensors)."""
    import torch
    from hypothesis import strategies as st

    scalars = st.one_of(st.none(), st.booleans(), st.integers(-2 ** 63, 2 ** 63 - 1),
                        st.floats(allow_nan=False), st.text(max_size=12))
    leaves = st.one_of(scalars, st.binary(max_size=12),
                       st.builds(lambda n: torch.arange(n, dtype=torch.int16),
                                 st.integers(0, 5)))
    values = st.recursive(leaves, lambda kids: st.one_of(
        st.lists(kids, max_size=3), st.lists(kids, max_size=3).map(tuple),
        st.dictionaries(st.text(max_size=4), kids, max_size=3)), max_leaves=8)
    keys = st.tuples(st.integers(0, 1000), st.integers(0, 3))
    return st.lists(st.tuples(keys, values), min_size=1, max_size=4,
                    unique_by=lambda kv: kv[0])


def cut_metadata(segment, cut):
    """A consistent frame whose metadata pickle is cut to `cut` bytes."""
    _, meta, binary = HDR.unpack_from(segment)
    body = segment[HDR.size:HDR.size + meta]
    return framed(body[:cut], segment[HDR.size + meta:])


def test_every_prefix_is_refused_alike(original, generated):
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    @settings(max_examples=200, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                     HealthCheck.function_scoped_fixture])
    @given(items=generated, data=st.data())
    def check(items, data):
        segment = original._encode_payload_segment(items)
        if segment.startswith(b"HPB1") and data.draw(st.booleans(), label="cut the metadata"):
            meta = HDR.unpack_from(segment)[1]
            bad = cut_metadata(segment, data.draw(st.integers(0, meta - 1), label="cut"))
        else:
            bad = segment[:data.draw(st.integers(1, len(segment) - 1), label="cut")]
        with pytest.raises(hpref.Error) as e:
            hpref.codec.decode_received(bad, [len(bad)], tensors="raw")
        outcome = original_outcome(lambda: original._decode_received_payloads(bad, [len(bad)]))
        check_same_refusal(e.value, outcome, f"{bad.hex()}")

    check()


# ---- docs/python.md -------------------------------------------------------------------


def docs_table():
    """Rows of the kind table in docs/python.md's "## Errors" section."""
    text = DOCS.read_text()
    start = text.index("## Errors")
    end = text.find("\n## ", start + 1)
    section = text[start:end if end >= 0 else len(text)]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| `") and len(cells) >= 4:
            rows[cells[0].strip("`")] = cells
    return rows


def test_the_docs_table_is_the_code():
    if not DOCS.exists():
        pytest.skip(f"no {DOCS} (an installed package without sources)")
    rows = docs_table()
    assert list(rows) == KINDS
    for kind, cells in rows.items():
        assert cells[1].strip("`") == errors.error_class(kind).__name__, kind
        want = errors.python_equivalent(kind)
        name = "—" if want is None else (
            "pickle.UnpicklingError" if want is pickle.UnpicklingError else want.__name__)
        shown = re.match(r"`([^`]+)`|—", cells[2])
        assert shown and (shown.group(1) or "—") == name, (kind, cells[2], name)
    # "test" rows are the kinds this file runs against the original, and only those
    tested = {c[1] for c in DECODE_CASES} | {c[1] for c in ENCODE_CASES} | {
        c[2] for c in DOCUMENTED_EXCEPTIONS} | {c[2] for c in DOCUMENTED_ENCODE_EXCEPTIONS}
    assert {k for k, cells in rows.items() if cells[4] == "test"} == tested


def test_a_legacy_dict_the_original_merges_has_no_equivalent_refusal():
    """The original merges a legacy segment with `for key, payload in items`: a dict whose
    keys unpack to two (distinct first parts) merges as {key[0]: key[1]}; we refuse it
    (metadata_not_pairs), so python_equivalent says None there, and ValueError where the
    original's unpacking or duplicate check refuses too."""
    import pickle
    from hpref.codec import decode_received
    for value, want in (({(1, 0): "x"}, None), ({"ab": 1}, None), ({(1, 0): "x", (1, 2): "y"}, ValueError),
                        ({(1, 2, 3): "x"}, ValueError), ([[1, 2, 3]], ValueError), (None, TypeError)):
        blob = pickle.dumps(value, 5)
        with pytest.raises(hpref.Error) as e:
            decode_received(blob, [len(blob)])
        assert e.value.kind == "metadata_not_pairs", e.value
        assert hpref.python_equivalent(e.value) is want, (value, e.value)
