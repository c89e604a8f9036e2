"""HPB1 segments between CPython and us (SPEC 2.1, 2.2, 2.5).

- CPython-built segments: header `struct.pack('!4sQQ', b'HPB1', len(meta), len(binary))`,
  metadata `pickle.dumps(tuple of (key, schema) pairs, protocol=2..5)`, then the binary
  region; keys as plain (sample_id, position) tuples and as the SampleKey stand-in class
  (SPEC 1.4); tensors of many dtypes built with struct/array. decode_segment must return
  the items. Legacy segments (a pickle of the tuple of pairs) likewise; decode_received
  merges several.
- Our encode_segment output: the metadata (bytes 20..20+metadata_size) is read by
  pickle.loads and has the SPEC 2.2 structure (tuples everywhere, offsets contiguous from 0
  in depth-first order, binary_size their sum, __hp_value__ only for scalars); decoding it
  in Python gives the items back; the bytes equal a Python transcription of SPEC 2.1-2.3 and
  CPython's pure-Python pickler taught the SPEC 2.3 memo (test_pickle_write.spec_pickle),
  with the keys of __hp_mapping__ pairs as mapping keys; the metadata's memo passes the
  audit and, expanded, is CPython's fast-mode (no memo) pickle of the metadata.

Usage: test_frames.py <hpref>
"""

import array
import dataclasses
import math
import os
import pickle
import random
import struct
import subprocess
import sys
import tempfile

import hpref_interop as hi
from hpref_interop import Tensor, SampleKey
import values
from test_pickle_write import (cpython_fast, expand_memo, golden, has_nan, mark_key,
                               memo_audit, spec_pickle)

PROTOCOLS = (2, 3, 4, 5)
SCALARS = (type(None), bool, int, float, str)


# --- a Python transcription of the encoder (SPEC 2.1, 2.2) ---------------------------------

def has_leaf(v):
    if isinstance(v, (bytes, bytearray, Tensor)):
        return True
    if isinstance(v, (tuple, list)):
        return any(has_leaf(e) for e in v)
    if isinstance(v, dict):
        return any(has_leaf(x) for x in v.values())
    return False


def schema_of(v, binary, shape_type=tuple, seq=tuple, key=lambda k: k):
    """The schema node of v, appending its leaves to `binary` (bytearray) depth-first; each
    mapping key k as key(k) (mark_key: a mapping key for the writer oracles' memo)."""
    if isinstance(v, Tensor):
        off = len(binary)
        binary += v.data
        return ("__hp_tensor__", v.dtype, shape_type(v.shape), off, len(v.data))
    if isinstance(v, (bytes, bytearray)):
        off = len(binary)
        binary += v
        return ("__hp_bytes__" if isinstance(v, bytes) else "__hp_bytearray__", off, len(v))
    if isinstance(v, dict):
        return ("__hp_mapping__",
                seq(seq((key(k), schema_of(x, binary, shape_type, seq, key))) for k, x in v.items()))
    if isinstance(v, tuple):
        return ("__hp_tuple__", seq(schema_of(e, binary, shape_type, seq, key) for e in v))
    if isinstance(v, list):
        return ("__hp_list__", seq(schema_of(e, binary, shape_type, seq, key) for e in v))
    assert isinstance(v, SCALARS), v
    return ("__hp_value__", v)


def header(meta, binary):
    return struct.pack("!4sQQ", b"HPB1", len(meta), len(binary))


def expected_segment(items):
    """Our encoder's bytes per SPEC 2.1-2.3 (keys are (sample_id, position) tuples)."""
    if not items:
        return b""
    if not any(has_leaf(v) for _, v in items):
        return golden(tuple((k, v) for k, v in items))
    binary = bytearray()
    meta = golden(tuple((k, schema_of(v, binary, key=mark_key)) for k, v in items))
    return header(meta, binary) + meta + bytes(binary)


def metadata_object(items, key_obj=lambda k: k):
    """The object our metadata pickle stands for, mapping keys marked, and the binary region."""
    if not any(has_leaf(v) for _, v in items):
        return tuple((key_obj(k), v) for k, v in items), None
    binary = bytearray()
    return tuple((key_obj(k), schema_of(v, binary, key=mark_key)) for k, v in items), binary


def spec_segment(items, key_obj=lambda k: k):
    """Our encoder's bytes from CPython's pickler taught the SPEC 2.3 memo (spec_pickle),
    with each key key_obj(k) (a key-class instance: its class is memoized)."""
    if not items:
        return b""
    obj, binary = metadata_object(items, key_obj)
    meta = spec_pickle(obj)
    return meta if binary is None else header(meta, binary) + meta + bytes(binary)


def memo_problem(seg, items, key_obj=lambda k: k):
    """None, or what is wrong with the memo of our segment's metadata pickle: the audit, and
    the pickle with its memo expanded against CPython's fast-mode pickle of the metadata."""
    if not seg:
        return None
    meta = seg
    if seg.startswith(b"HPB1"):
        msize, = struct.unpack("!Q", seg[4:12])
        meta = seg[20:20 + msize]
    problem = memo_audit(meta)
    if problem:
        return "metadata memo: " + problem
    obj, _ = metadata_object(items, key_obj)
    if expand_memo(meta) != cpython_fast(obj):
        return "metadata with its memo expanded is not CPython's fast pickle %s" % (
            hi.short_hex(cpython_fast(obj), 600))
    return None


def cpython_segment(items, protocol, key_obj=lambda k: k, seq=tuple, shape_type=tuple,
                    dumps=pickle.dumps):
    """A segment built by CPython: pickle.dumps of the metadata at `protocol`."""
    binary = bytearray()
    meta_obj = seq(seq((key_obj(k), schema_of(v, binary, shape_type, seq))) for k, v in items)
    meta = dumps(meta_obj, protocol=protocol)
    return header(meta, binary) + meta + bytes(binary)


# --- a Python decoder of our output (SPEC 2.2), checking the encoder's structure ---------------

class Layout:
    def __init__(self, binary):
        self.binary, self.next = binary, 0
        self.problems = []

    def take(self, off, size, where):
        if off != self.next:
            self.problems.append("%s: offset %d, expected %d (contiguous, depth-first)" %
                                 (where, off, self.next))
        self.next = off + size
        return self.binary[off:off + size]


def decode_schema(node, layout, where):
    if type(node) is not tuple or not node:
        raise ValueError("%s: schema node %r is not a non-empty tuple" % (where, node))
    tag = node[0]
    if tag == "__hp_tensor__":
        _, dtype, shape, off, size = node
        if type(shape) is not tuple:
            raise ValueError("%s: shape %r is not a tuple" % (where, shape))
        return Tensor(dtype, shape, layout.take(off, size, where))
    if tag in ("__hp_bytes__", "__hp_bytearray__"):
        if len(node) != 3:
            raise ValueError("%s: %d fields" % (where, len(node)))
        data = layout.take(node[1], node[2], where)
        return bytes(data) if tag == "__hp_bytes__" else bytearray(data)
    if tag == "__hp_mapping__":
        if len(node) != 2 or type(node[1]) is not tuple:
            raise ValueError("%s: mapping node %r" % (where, node))
        out = {}
        for i, pair in enumerate(node[1]):
            if type(pair) is not tuple or len(pair) != 2:
                raise ValueError("%s: mapping entry %r is not a 2-tuple" % (where, pair))
            out[pair[0]] = decode_schema(pair[1], layout, "%s[%r]" % (where, pair[0]))
        return out
    if tag in ("__hp_tuple__", "__hp_list__"):
        if len(node) != 2 or type(node[1]) is not tuple:
            raise ValueError("%s: %s node children %r are not a tuple" % (where, tag, node))
        kids = [decode_schema(c, layout, "%s[%d]" % (where, i)) for i, c in enumerate(node[1])]
        return tuple(kids) if tag == "__hp_tuple__" else kids
    if tag == "__hp_value__":
        if len(node) != 2:
            raise ValueError("%s: value node with %d fields" % (where, len(node)))
        if not isinstance(node[1], SCALARS):
            raise ValueError("%s: __hp_value__ holds a non-scalar %r (SPEC 2.2: only scalars)"
                             % (where, node[1]))
        return node[1]
    raise ValueError("%s: unknown tag %r" % (where, tag))


def python_decode(seg, key_is=tuple):
    """Decode our segment in Python; raise ValueError naming a structural problem."""
    if seg == b"":
        return []
    if not seg.startswith(b"HPB1"):
        meta = pickle.loads(seg)
        if type(meta) is not tuple:
            raise ValueError("legacy metadata is a %s, not a tuple" % type(meta).__name__)
        for p in meta:
            if type(p) is not tuple or len(p) != 2 or has_leaf(p[1]):
                raise ValueError("legacy pair %r" % (p,))
        return [(_key(k, key_is), v) for k, v in meta]
    magic, msize, bsize = struct.unpack("!4sQQ", seg[:20])
    if 20 + msize + bsize != len(seg):
        raise ValueError("20 + %d + %d != %d" % (msize, bsize, len(seg)))
    meta = pickle.loads(seg[20:20 + msize])
    if type(meta) is not tuple:
        raise ValueError("metadata is a %s, not a tuple" % type(meta).__name__)
    layout = Layout(seg[20 + msize:])
    items = []
    for i, pair in enumerate(meta):
        if type(pair) is not tuple or len(pair) != 2:
            raise ValueError("metadata pair %d %r is not a 2-tuple" % (i, pair))
        items.append((_key(pair[0], key_is),
                      decode_schema(pair[1], layout, "items[%d].value" % i)))
    if layout.problems:
        raise ValueError("; ".join(layout.problems))
    if layout.next != bsize:
        raise ValueError("leaves cover %d bytes, binary_size is %d" % (layout.next, bsize))
    return items


def _key(k, key_is):
    if type(k) is not key_is:
        raise ValueError("item key %r is a %s, expected %s" % (k, type(k).__name__,
                                                              key_is.__name__))
    return hi.key_values(k) if dataclasses.is_dataclass(k) else k


# --- tensors of many dtypes ---------------------------------------------------------------

def tensor(dtype, shape, elems=None, rng=None):
    n = hi.numel(shape)
    short = dtype[len("torch."):]
    fmt = {"float64": "<d", "float32": "<f", "float16": "<e", "int64": "<q", "int32": "<i",
           "int16": "<h", "int8": "<b", "uint8": "<B", "uint16": "<H", "uint32": "<I",
           "uint64": "<Q"}
    if elems is not None:
        if short == "bool":
            data = bytes(1 if e else 0 for e in elems)
        elif short == "complex64":
            data = b"".join(struct.pack("<ff", e.real, e.imag) for e in elems)
        elif short == "complex128":
            data = b"".join(struct.pack("<dd", e.real, e.imag) for e in elems)
        elif short == "bfloat16":
            data = b"".join(struct.pack("<f", e)[2:] for e in elems)
        else:
            data = b"".join(struct.pack(fmt[short], e) for e in elems)
        assert len(elems) == n
    else:
        size = n * hi.DTYPE_SIZES[short]
        data = bytes(rng.getrandbits(8) for _ in range(size))
    return Tensor(dtype, shape, data)


def fixed_tensors():
    f32 = array.array("f", [1.0, -2.5, 3.25, 0.0, -0.0, float("inf")])
    assert f32.itemsize == 4 and sys.byteorder == "little"
    return [
        Tensor("torch.float32", (2, 3), f32.tobytes()),
        tensor("torch.float64", (3,), [math.pi, -1e-310, float("nan")]),
        tensor("torch.float16", (2, 2), [1.0, 0.5, -2.0, 65504.0]),
        tensor("torch.bfloat16", (4,), [1.0, -1.0, 3.0, 0.15625]),
        tensor("torch.int64", (2,), [2**63 - 1, -2**63]),
        tensor("torch.int32", (1, 1, 3), [2**31 - 1, -2**31, 7]),
        tensor("torch.int16", (2,), [-32768, 32767]),
        tensor("torch.int8", (5,), [-128, -1, 0, 1, 127]),
        tensor("torch.uint8", (0,), []),
        tensor("torch.uint8", (4,), [0, 1, 128, 255]),
        tensor("torch.uint16", (1,), [65535]),
        tensor("torch.uint32", (2,), [0, 2**32 - 1]),
        tensor("torch.uint64", (1,), [2**64 - 1]),
        tensor("torch.bool", (2, 2), [True, False, False, True]),
        tensor("torch.complex64", (2,), [1 + 2j, -0.5j]),
        tensor("torch.complex128", (1,), [3 - 4j]),
        tensor("torch.float32", (), [42.0]),             # 0-d: numel 1
        tensor("torch.float32", (3, 0, 5), []),          # a zero dim: numel 0
        tensor("torch.int64", (0, 2**40), []),           # huge dim times zero
    ]


def random_tensor(rng):
    dtype = "torch." + rng.choice(sorted(hi.DTYPE_SIZES))
    shape = tuple(rng.choice((0, 1, 2, 3, 5)) for _ in range(rng.randrange(0, 4)))
    return tensor(dtype, shape, rng=rng)


def random_item_value(rng, depth=0):
    r = rng.random()
    if depth >= 3 or r < 0.3:
        return random_tensor(rng) if rng.random() < 0.4 else values.rand_scalar(rng)
    n = rng.choice((0, 1, 2, 3, 4))
    kind = rng.choice(("tuple", "list", "dict"))
    kids = [random_item_value(rng, depth + 1) for _ in range(n)]
    if kind == "tuple":
        return tuple(kids)
    if kind == "list":
        return kids
    return {values.rand_key(rng): k for k in kids}


def random_key(rng, i):
    return ("img-%d" % rng.randrange(1000), i) if rng.random() < 0.3 else (rng.randrange(2**40), i)


def random_items(rng, n=None):
    n = rng.randrange(1, 6) if n is None else n
    return [(random_key(rng, i), random_item_value(rng)) for i in range(n)]


# --- the checks ---------------------------------------------------------------------------

def decode_request(seg, **extra):
    r = {"op": "decode_segment", "frame_hex": seg.hex()}
    r.update(extra)
    return r


def cpython_built(suite, rng):
    base_items = [
        ((0, 0), {"input_ids": tensor("torch.int64", (4,), [101, 2023, 2003, 102]),
                  "label": 1, "text": "a sentence"}),
        ((0, 1), [b"raw bytes", bytearray(b"mutable"), b"", bytearray()]),
        ((12345, 3), ("caption", tensor("torch.float32", (2,), [0.5, -0.25]), None)),
        (("doc-7", 0), {"nested": {"deep": [tensor("torch.uint8", (3,), [1, 2, 3]), 2.5]},
                        ("k", 1): True, 7: b"\x00\xff"}),
        ((2**63 - 1, 2**63 - 1), tensor("torch.bool", (), [True])),
    ]
    fixed = [((100 + i, 0), t) for i, t in enumerate(fixed_tensors())]
    cases = [("realistic items", base_items), ("tensors of many dtypes", fixed),
             ("one item", [((1, 0), b"x")]), ("all tensors in one list",
                                               [((5, 5), [t for _, t in fixed])])]
    for i in range(60):
        items = random_items(rng)
        if not any(has_leaf(v) for _, v in items):
            items.append(((99, 99), b"leaf"))
        cases.append(("random items #%d" % i, items))

    for label, items in cases:
        for p in PROTOCOLS:
            for key_form in ("tuple", "SampleKey"):
                key_obj = (lambda k: k) if key_form == "tuple" else (lambda k: SampleKey(*k))
                seg = cpython_segment(items, p, key_obj)
                what = "segment %s" % hi.short_hex(seg, 600)
                name = "CPython frame: %s [protocol %d, %s keys]" % (label, p, key_form)
                suite.ask(name, decode_request(seg), hi.expect_items(items, what))
                # CPython's encoding is depth-first and contiguous: strict accepts it too
                suite.ask(name + " strict", decode_request(seg, strict=True),
                          hi.expect_items(items, what))
        # the pure-Python pickler, lists where SPEC 2.2 accepts them, and shapes as lists
        seg = cpython_segment(items, 4, dumps=pickle._dumps)
        suite.ask("CPython frame (pure-Python pickler): " + label, decode_request(seg),
                  hi.expect_items(items, "segment %s" % hi.short_hex(seg, 600)))
        seg = cpython_segment(items, 5, seq=list, shape_type=list)
        suite.ask("CPython frame with lists for sequences: " + label, decode_request(seg),
                  hi.expect_items(items, "segment %s" % hi.short_hex(seg, 600)))

    # dtype aliases are accepted and come back canonical (SPEC 1.3)
    aliases = {"double": "float64", "float": "float32", "half": "float16", "cdouble": "complex128",
               "cfloat": "complex64", "chalf": "complex32", "long": "int64", "int": "int32",
               "short": "int16"}
    for alias, canon in sorted(aliases.items()):
        size = hi.DTYPE_SIZES[canon] * 2
        data = bytes(range(size))
        meta = pickle.dumps((((1, 0), ("__hp_tensor__", "torch." + alias, (2,), 0, size)),),
                            protocol=4)
        seg = header(meta, data) + meta + data
        suite.ask("dtype alias torch.%s" % alias, decode_request(seg),
                  hi.expect_items([((1, 0), Tensor("torch." + canon, (2,), data))],
                                  "segment %s" % seg.hex()))

    # layouts Python accepts and the encoder never writes: accepted, refused under strict
    data = b"AAAABBBB"
    layouts = {
        "out of order": ((("__hp_bytes__", 4, 4), ("__hp_bytes__", 0, 4)), [b"BBBB", b"AAAA"]),
        "overlapping": ((("__hp_bytes__", 0, 4), ("__hp_bytes__", 2, 4)), [b"AAAA", b"AABB"]),
        "gapped": ((("__hp_bytes__", 0, 2), ("__hp_bytes__", 4, 4)), [b"AA", b"BBBB"]),
        "shared": ((("__hp_bytes__", 0, 8), ("__hp_bytearray__", 0, 8)),
                   [data, bytearray(data)]),
    }
    for label, (kids, expected) in layouts.items():
        meta = pickle.dumps((((3, 0), ("__hp_list__", kids)),), protocol=5)
        seg = header(meta, data) + meta + data
        what = "segment %s" % seg.hex()
        suite.ask("%s layout accepted" % label, decode_request(seg),
                  hi.expect_items([((3, 0), expected)], what))
        suite.ask("%s layout refused under strict" % label, decode_request(seg, strict=True),
                  hi.expect_refusal("non_canonical_layout", (), what))

    # __hp_value__ holding any Value is returned as is; extra fields ignored (SPEC 2.2)
    meta = pickle.dumps((((4, 0), ("__hp_tuple__", (("__hp_value__", [1, {"a": (2,)}]),
                                                     ("__hp_bytes__", 0, 1)), "extra")),
                         ((4, 1), ("__hp_value__", None, "ignored"))), protocol=3)
    seg = header(meta, b"z") + meta + b"z"
    suite.ask("__hp_value__ with a container, extra fields", decode_request(seg),
              hi.expect_items([((4, 0), ([1, {"a": (2,)}], b"z")), ((4, 1), None)],
                              "segment %s" % seg.hex()))


def legacy(suite, rng):
    cases = [
        [((0, 0), {"text": "hello", "n": 3}), ((0, 1), [1.5, None, (True, "x")])],
        [(("s", 0), 1)],
        [((i, 0), "v%d" % i) for i in range(1500)],   # SETITEMS-like batching of the tuple
    ]
    for i in range(30):
        cases.append([(random_key(rng, j), values.rand_value(rng, max_depth=3, with_binary=False))
                      for j in range(rng.randrange(1, 6))])
    for n, items in enumerate(cases):
        for p in PROTOCOLS:
            for key_form in ("tuple", "SampleKey"):
                obj = tuple((k if key_form == "tuple" else SampleKey(*k), v) for k, v in items)
                seg = pickle.dumps(obj, protocol=p)
                suite.ask("CPython legacy segment #%d [protocol %d, %s keys]" % (n, p, key_form),
                          decode_request(seg),
                          hi.expect_items(items, "segment %s" % hi.short_hex(seg, 600)))
        # a list of lists is a sequence of pairs too
        seg = pickle.dumps([list(p) for p in items], protocol=4)
        suite.ask("CPython legacy segment #%d as a list of lists" % n, decode_request(seg),
                  hi.expect_items(items, "segment %s" % hi.short_hex(seg, 600)))


def merge(suite):
    a_items = [((0, 0), b"first"), ((0, 1), {"t": tensor("torch.int8", (2,), [1, -1])})]
    b_items = [((1, 0), "legacy"), ((1, 1), [None])]
    c_items = [(("x", 0), bytearray(b"third"))]
    a = cpython_segment(a_items, 5, lambda k: SampleKey(*k))
    b = pickle.dumps(tuple(b_items), protocol=2)
    c = cpython_segment(c_items, 2)
    received = a + b"" + b + c
    suite.ask("decode_received of CPython segments (framed, empty, legacy, framed)",
              {"op": "decode_received", "received_hex": received.hex(),
               "splits": [len(a), 0, len(b), len(c)]},
              hi.expect_items(a_items + b_items + c_items, "received %s" % received.hex()))
    # the same key from two peers, once as a SampleKey object, once as a tuple
    d = pickle.dumps((((0, 1), "again"),), protocol=3)
    received = a + d
    suite.ask("decode_received: a key arriving twice is refused",
              {"op": "decode_received", "received_hex": received.hex(),
               "splits": [len(a), len(d)]},
              hi.expect_refusal("duplicate_payload_key", ("(0, 1)", "0, 1"),
                                "received %s" % received.hex()))


def ours_to_cpython(suite, rng):
    cases = [
        [((7, 0), [1, b"\x00", {(1, 2): tensor("torch.float32", (2,), [1.0, 2.0])}]),
         (("a", 1), "s")],
        [((0, 0), {"x": [1, 2, (3, "four")], "y": b"", "z": bytearray(b"ba")})],
        [((0, 0), {"only": "scalars", "n": [1, 2.0, None]}), ((0, 1), ("legacy", True))],
        [],
        [((1, 0), [t for t in fixed_tensors()])],
        [((2, 0), tensor("torch.float64", (), [1.5])), ((2, 1), None), ((2, 2), [[[]]])],
        [((3, 0), {1: b"a", 2.5: b"b", None: b"c", ("t", (1,)): b"d", b"k": b"e"})],
        # SPEC 2.3 memo: mapping keys repeated across items and nodes, past 256 entries
        [((i, 0), {"tokens": i, "score": i / 7, "ok": i % 3 != 0,
                   "emb": tensor("torch.float32", (2,), [i, -i])}) for i in range(5)],
        [((0, 0), {"k%d" % i: b"x" for i in range(300)}),
         ((1, 0), {"k0": b"", "k255": {"k256": [b"y", {"k299": None}]}})],
        [((i, 0), {"text": "text", "meta": {"text": i, ("text", 1): "k"}}) for i in range(3)],
        [(("text", 0), {"text": b"a"}), (("text", 1), {"text": {"text": "text"}})],
    ]
    for _ in range(120):
        cases.append(random_items(rng))
    for _ in range(20):
        cases.append([(random_key(rng, j), values.rand_value(rng, max_depth=3, with_binary=False))
                      for j in range(rng.randrange(1, 4))])

    for n, items in enumerate(cases):
        suite.ask("encode_segment #%d -> CPython" % n,
                  {"op": "encode_segment", "items": [[hi.to_json(k), hi.to_json(v)]
                                                      for k, v in items]},
                  check_encoded(items, tuple))
    # the key_class writer option: CPython reads the keys as SampleKey objects
    for n, items in enumerate(cases[:40]):
        if not items:
            continue
        suite.ask("encode_segment key_class #%d -> CPython" % n,
                  {"op": "encode_segment", "key_class": hi.KEY_CLASS,
                   "items": [[hi.to_json(k), hi.to_json(v)] for k, v in items]},
                  check_encoded(items, SampleKey))


def check_encoded(items, key_is):
    def check(a):
        if not a.get("ok"):
            return "refused (%s: %s); items %s" % (a.get("kind"), a.get("error"), hi.short(items))
        seg = bytes.fromhex(a["frame_hex"])
        what = "items %s; our segment %s" % (hi.short(items, 300), hi.short_hex(seg, 600))
        try:
            got = python_decode(seg, key_is)
        except Exception as e:
            return "CPython-side decode of our segment failed: %s: %s; %s" % (
                type(e).__name__, e, what)
        d = hi.diff([tuple(p) for p in items], [tuple(p) for p in got], "items")
        if d:
            return "CPython reads different items: %s; %s" % (d, what)
        key_obj = (lambda k: k) if key_is is tuple else (lambda k: SampleKey(*k))
        if key_is is tuple:
            exp = expected_segment(items)
            if seg != exp:
                return "bytes differ from the SPEC 2.1-2.3 transcription %s; %s" % (
                    hi.short_hex(exp, 600), what)
        if not any(has_nan(v) for _, v in items):
            exp = spec_segment(items, key_obj)
            if seg != exp:
                return "bytes differ from CPython's pickle with the SPEC 2.3 memo %s; %s" % (
                    hi.short_hex(exp, 600), what)
            problem = memo_problem(seg, items, key_obj)
            if problem:
                return "%s; %s" % (problem, what)
        return None
    return check


# --- SPEC 1.4 key classes described by name, fields and state ------------------------------

def key_classes():
    """A frozen dataclass with other fields (dict state), a frozen slots=True dataclass with
    the default fields and one with three fields (values state)."""
    return [
        hi.make_key_class("interop_tests.frames.ShardKey",
                          fields=("shard", "sample_id", "position")),
        hi.make_key_class("interop_tests.frames.SlottedKey", slots=True),
        hi.make_key_class("interop_tests.frames.Slotted3", fields=("a", "b", "c"), slots=True),
    ]


def class_key(rng, cls, j):
    """A distinct key tuple for item j: one value per field of `cls`."""
    n = len(hi.key_fields(cls))
    if n == 2:
        return random_key(rng, j)
    return ("shard-%d" % rng.randrange(8), rng.choice((rng.randrange(2**40), "doc")), j)[:n]


def check_class_encoded(items, cls):
    def check(a):
        if not a.get("ok"):
            return "refused (%s: %s); items %s" % (a.get("kind"), a.get("error"), hi.short(items))
        seg = bytes.fromhex(a["frame_hex"])
        what = "items %s; our segment %s" % (hi.short(items, 300), hi.short_hex(seg, 600))
        try:
            got = python_decode(seg, cls)   # every key an instance of cls
        except Exception as e:
            return "CPython-side decode of our segment failed: %s: %s; %s" % (
                type(e).__name__, e, what)
        d = hi.diff([tuple(p) for p in items], [tuple(p) for p in got], "items")
        if d:
            return "CPython reads different items: %s; %s" % (d, what)
        if not any(has_nan(v) for _, v in items):
            exp = spec_segment(items, lambda k: cls(*k))
            if seg != exp:
                return "bytes differ from CPython's pickle with the SPEC 2.3 memo %s; %s" % (
                    hi.short_hex(exp, 600), what)
            problem = memo_problem(seg, items, lambda k: cls(*k))
            if problem:
                return "%s; %s" % (problem, what)
        return None
    return check


def described_key_classes(suite, rng):
    for cls in key_classes():
        req = hi.key_request(cls)
        name = "%s (%s state)" % (cls.__qualname__, req["key_state"])
        cases = [[(class_key(rng, cls, j), random_item_value(rng)) for j in range(rng.randrange(1, 5))]
                 for _ in range(25)]
        cases += [[(class_key(rng, cls, j), values.rand_value(rng, max_depth=3, with_binary=False))
                   for j in range(rng.randrange(1, 4))] for _ in range(10)]
        for n, items in enumerate(cases):
            # CPython -> us: framed at every protocol, and legacy
            for p in PROTOCOLS:
                seg = cpython_segment(items, p, key_obj=lambda k: cls(*k))
                suite.ask("CPython segment #%d with %s keys [protocol %d]" % (n, name, p),
                          decode_request(seg, **req),
                          hi.expect_items(items, "segment %s" % hi.short_hex(seg, 600)))
            if not any(has_leaf(v) for _, v in items):
                seg = pickle.dumps(tuple((cls(*k), v) for k, v in items), protocol=5)
                suite.ask("CPython legacy segment #%d with %s keys" % (n, name),
                          decode_request(seg, **req),
                          hi.expect_items(items, "segment %s" % hi.short_hex(seg, 600)))
            # us -> CPython: pickle.loads makes instances; bytes as CPython's pickler with
            # the SPEC 2.3 memo
            suite.ask("encode_segment #%d with %s keys -> CPython" % (n, name),
                      dict(req, op="encode_segment",
                           items=[[hi.to_json(k), hi.to_json(v)] for k, v in items]),
                      check_class_encoded(items, cls))


def frame_flags(suite, hpref):
    """`hpref frame encode|decode --key-class --key-fields --key-state` (SPEC 1.4)."""
    cls = hi.make_key_class("interop_tests.frames.FlagKey", fields=("a", "b", "c"), slots=True)
    flags = ["--key-class", "interop_tests.frames.FlagKey", "--key-fields", "a,b,c",
             "--key-state", "values"]
    items = [((1, "x", None), b"\x01"), (("k", 2, 3.5), [1, "two"])]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "items.json")
        with open(path, "w") as f:
            f.write(hi.json.dumps([[hi.to_json(k), hi.to_json(v)] for k, v in items]))
        enc = subprocess.run([hpref, "frame", "encode", "--hex", path] + flags,
                             capture_output=True, text=True)
        seg = bytes.fromhex(enc.stdout.strip()) if enc.returncode == 0 else b""
        suite.expect("frame encode --key-fields --key-state", enc.returncode == 0 and
                     seg == spec_segment(items, lambda k: cls(*k)),
                     "exit %d, stderr %r, segment %s, expected %s" % (
                         enc.returncode, enc.stderr, hi.short_hex(seg, 300),
                         hi.short_hex(spec_segment(items, lambda k: cls(*k)), 300)))
        seg_path = os.path.join(tmp, "seg.hex")
        with open(seg_path, "w") as f:
            f.write(cpython_segment(items, 4, key_obj=lambda k: cls(*k)).hex())
        dec = subprocess.run([hpref, "frame", "decode", "--hex", seg_path] + flags,
                             capture_output=True, text=True)
        got = None
        if dec.returncode == 0:
            got = hi.items_from_json(hi.json.loads(dec.stdout)["items"])
        suite.expect("frame decode --key-fields --key-state",
                     got is not None and hi.diff(items, got, "items") is None,
                     "exit %d, stderr %r, items %s" % (dec.returncode, dec.stderr, got))
        # the values state read as the dict state is refused
        dec = subprocess.run([hpref, "frame", "decode", "--hex", seg_path] + flags[:4],
                             capture_output=True, text=True)
        suite.expect("frame decode without --key-state values refuses", dec.returncode == 2 and
                     "pickle_reduce" in dec.stderr, "exit %d, stderr %r" % (dec.returncode,
                                                                            dec.stderr))
        usage = subprocess.run([hpref, "frame", "encode", "--key-fields", "a,b", path],
                               capture_output=True, text=True)
        suite.expect("frame encode --key-fields without --key-class is a usage error",
                     usage.returncode != 0 and "--key-class" in usage.stderr,
                     "exit %d, stderr %r" % (usage.returncode, usage.stderr))


def main():
    hpref = hi.main_args()
    suite = hi.Suite("interop frames", hpref)
    rng = random.Random(20240603)
    cpython_built(suite, rng)
    legacy(suite, rng)
    merge(suite)
    ours_to_cpython(suite, rng)
    described_key_classes(suite, random.Random(20240604))
    frame_flags(suite, hpref)
    suite.finish()


if __name__ == "__main__":
    main()
