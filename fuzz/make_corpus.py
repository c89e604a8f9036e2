#!/usr/bin/python3
"""Regenerates the seed corpus of the fuzz targets: fuzz/corpus/<target>/<sha1>.

    /usr/bin/python3 fuzz/make_corpus.py [--hpref build/fuzzcheck/tools/hpref] [--clean]

Deterministic (fixed seeds): the same hpref and CPython give the same files. Sources:
  - our encoder (`hpref frame --batch`, ops encode_segment and pickle_write),
  - CPython's pickle.dumps at protocols 2-5 (Debian's /usr/bin/python3), for legacy
    segments, Python-made frames (the seed's layout) and metadata pickles,
  - tests/data/frames.jsonl (frame_hex, original_frame_hex),
  - hand-made edge cases: truncations, huge header sizes, refused opcodes and globals,
    bad schema nodes, non-canonical layouts.
Files are named by the SHA-1 of their bytes, so reruns only add what is missing; --clean
first removes every file of the corpus directories this script fills. The build never
runs this script; commit its output.
"""

import argparse
import copyreg  # noqa: F401  (CPython's pickling of plain objects goes through it)
import dataclasses
import hashlib
import json
import os
import pickle
import random
import struct
import subprocess
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MAX_FILE = 4096

DTYPES = [
    ("float64", 8), ("float32", 4), ("float16", 2), ("bfloat16", 2), ("complex32", 4),
    ("complex64", 8), ("complex128", 16), ("int64", 8), ("int32", 4), ("int16", 2),
    ("int8", 1), ("uint8", 1), ("uint16", 2), ("uint32", 4), ("uint64", 8), ("bool", 1),
    ("qint8", 1), ("quint8", 1), ("qint32", 4), ("quint4x2", 1), ("quint2x4", 1),
    ("float8_e4m3fn", 1), ("float8_e4m3fnuz", 1), ("float8_e5m2", 1), ("float8_e5m2fnuz", 1),
    ("float8_e8m0fnu", 1), ("bits8", 1), ("bits16", 2),
]
ALIASES = ["double", "float", "half", "cdouble", "cfloat", "chalf", "long", "int", "short"]
KEY_CLASS = "hyper_parallel.distributed_data.schema.SampleKey"


# --- the hpref command ---------------------------------------------------------------------

class Hpref:
    """Answers `hpref frame --batch` requests, all in one process."""

    def __init__(self, path):
        self.path = path
        self.pending = []

    def ask(self, requests):
        text = "".join(json.dumps(r) + "\n" for r in requests)
        out = subprocess.run([self.path, "frame", "--batch"], input=text.encode(),
                             stdout=subprocess.PIPE, check=False).stdout.decode()
        answers = [json.loads(line) for line in out.splitlines()]
        assert len(answers) == len(requests), (len(answers), len(requests))
        return answers

    def encode(self, item_lists, key_class=None):
        reqs = []
        for items in item_lists:
            r = {"op": "encode_segment", "items": items}
            if key_class:
                r["key_class"] = key_class
            reqs.append(r)
        out = []
        for items, a in zip(item_lists, self.ask(reqs)):
            if not a["ok"]:
                raise SystemExit(f"make_corpus: hpref refused to encode {items}: {a}")
            out.append(bytes.fromhex(a["frame_hex"]))
        return out

    def pickle_write(self, values):
        answers = self.ask([{"op": "pickle_write", "value": v} for v in values])
        return [bytes.fromhex(a["pickle_hex"]) for a in answers if a["ok"]]


# --- random JSON Values (the CLI interchange format) ---------------------------------------

def rand_tensor(r):
    name, size = r.choice(DTYPES)
    if r.random() < 0.15:
        name = r.choice(ALIASES)
        size = {"double": 8, "float": 4, "half": 2, "cdouble": 16, "cfloat": 8, "chalf": 4,
                "long": 8, "int": 4, "short": 2}[name]
    ndim = r.choice([0, 1, 1, 2, 2, 3])
    shape = [r.choice([0, 1, 2, 3, 4]) for _ in range(ndim)]
    numel = 1
    for d in shape:
        numel *= d
    data = bytes(r.getrandbits(8) for _ in range(numel * size))
    return {"tensor": {"dtype": "torch." + name, "shape": shape, "hex": data.hex()}}


def rand_float(r):
    return {"float": r.choice([0.0, -0.0, 1.5, -2.25, 1e300, 5e-324, 3.141592653589793,
                               "nan", "inf", "-inf", r.uniform(-1e6, 1e6)])}


def rand_str(r):
    return r.choice(["", "a", "image", "doc-876", "ünïcødé", "日本語", "emoji 🎉", "tab\tnl\n",
                     "x" * r.randint(0, 300), "\u0000nul"])


def rand_scalar(r):
    k = r.randrange(6)
    if k == 0:
        return None
    if k == 1:
        return r.choice([True, False])
    if k == 2:
        return r.choice([0, 1, -1, 255, 256, 65535, 65536, 2**31 - 1, -2**31, 2**31,
                         2**63 - 1, -2**63, r.randint(-10**6, 10**6)])
    if k == 3:
        return rand_float(r)
    return rand_str(r)


def rand_hashable(r, depth=0):
    k = r.randrange(5)
    if k == 0 and depth < 2:
        return {"tuple": [rand_hashable(r, depth + 1) for _ in range(r.randint(0, 3))]}
    if k == 1:
        return {"bytes": bytes(r.getrandbits(8) for _ in range(r.randint(0, 6))).hex()}
    return rand_scalar(r)


def rand_value(r, depth, binary=True):
    k = r.randrange(11 if depth > 0 else 8)
    if k == 0 and binary:
        return rand_tensor(r)
    if k == 1 and binary:
        return {"bytes": bytes(r.getrandbits(8) for _ in range(r.randint(0, 12))).hex()}
    if k == 2 and binary:
        return {"bytearray": bytes(r.getrandbits(8) for _ in range(r.randint(0, 12))).hex()}
    if k in (8, 9, 10):
        form = ["tuple", "list", "dict"][k - 8]
        n = r.randint(0, 4)
        if form == "dict":
            keys, entries = set(), []
            for _ in range(n):
                key = rand_hashable(r)
                text = json.dumps(key, sort_keys=True)
                if text in keys:
                    continue
                keys.add(text)
                entries.append([key, rand_value(r, depth - 1, binary)])
            return {"dict": entries}
        return {form: [rand_value(r, depth - 1, binary) for _ in range(n)]}
    return rand_scalar(r)


def rand_key(r, i):
    k = r.randrange(6)
    if k <= 1:
        return {"key": [i * 7 + 3, r.randint(0, 3)]}
    if k == 2:
        return {"key": [f"doc-{i}", r.randint(0, 3)]}
    if k == 3:
        return i
    if k == 4:
        return f"item-{i}"
    return {"tuple": [i, {"bytes": "ab"}, None]}


def rand_items(r, n, depth, binary=True):
    return [[rand_key(r, i), rand_value(r, depth, binary)] for i in range(n)]


# --- CPython-made segments -----------------------------------------------------------------

def key_class_type():
    """A class pickled as hyper_parallel.distributed_data.schema.SampleKey (SPEC 1.4)."""
    module_name, _, name = KEY_CLASS.rpartition(".")
    for part in ("hyper_parallel", "hyper_parallel.distributed_data", module_name):
        sys.modules.setdefault(part, types.ModuleType(part))
    module = sys.modules[module_name]
    if not hasattr(module, name):
        cls = dataclasses.make_dataclass(name, [("sample_id", object), ("position", int)],
                                         frozen=True)
        cls.__module__ = module_name
        cls.__qualname__ = name
        setattr(module, name, cls)
    return getattr(module, name)


def py_frame(pairs, binary, protocol):
    meta = pickle.dumps(pairs, protocol=protocol)
    return b"HPB1" + struct.pack(">QQ", len(meta), len(binary)) + meta + binary


def raw_frame(meta, binary, meta_size=None, binary_size=None):
    ms = len(meta) if meta_size is None else meta_size
    bs = len(binary) if binary_size is None else binary_size
    return b"HPB1" + struct.pack(">QQ", ms, bs) + meta + binary


def python_frames():
    """Frames the way the Python original builds them (tuples, pickle.dumps)."""
    out = []
    t_f32 = ("__hp_tensor__", "torch.float32", (2, 2), 0, 16)
    b_leaf = ("__hp_bytes__", 16, 3)
    ba_leaf = ("__hp_bytearray__", 19, 2)
    binary = bytes(range(16)) + b"abc" + b"xy"
    value = ("__hp_mapping__", (("image", t_f32), ("raw", b_leaf),
                                ("meta", ("__hp_list__", (ba_leaf, ("__hp_value__", 3.5)))),
                                ("shape", ("__hp_tuple__", (("__hp_value__", None),
                                                            ("__hp_value__", "s"))))))
    for protocol in (2, 3, 4, 5):
        out.append(py_frame(((("doc-1", 0), value),), binary, protocol))
    # Memo sharing: one shape tuple object for two tensors, one leaf node used twice.
    shape = (3,)
    shared_leaf = ("__hp_bytes__", 0, 4)
    for protocol in (2, 5):
        pairs = (((1, 0), ("__hp_tensor__", "torch.int8", shape, 0, 3)),
                 ((2, 0), ("__hp_tensor__", "torch.uint8", shape, 3, 3)),
                 ((3, 0), ("__hp_tuple__", (shared_leaf, shared_leaf))))
        out.append(py_frame(pairs, b"\x01\x02\x03\x04\x05\x06", protocol))
    # Lists where Python iterates, extras after mapping/sequence children, a shape list.
    pairs = [[("k", 1), ("__hp_list__", [("__hp_tensor__", "torch.half", [1, 2], 0, 4)],
                         "extra")],
             [("k", 2), ("__hp_mapping__", [(b"bk", ("__hp_value__", [1, {"a": 2}]))], 9)]]
    out.append(py_frame(pairs, b"\x00\x3c\x00\x40", 4))
    # The key-class shim: keys as the Python original's SampleKey objects.
    SampleKey = key_class_type()
    for protocol in (2, 4):
        pairs = ((SampleKey(5, 0), ("__hp_bytes__", 0, 2)),
                 (SampleKey("doc-9", 1), ("__hp_value__", 42)))
        out.append(py_frame(pairs, b"hi", protocol))
    # Gapped, overlapping and out-of-order ranges: accepted unless strict.
    out.append(py_frame(((1, ("__hp_bytes__", 2, 2)),), b"abcd", 4))          # gap
    out.append(py_frame(((1, ("__hp_bytes__", 0, 4)), (2, ("__hp_bytes__", 1, 2))), b"abcd", 4))
    out.append(py_frame(((1, ("__hp_bytes__", 2, 2)), (2, ("__hp_bytes__", 0, 2))), b"abcd", 4))
    out.append(py_frame(((1, ("__hp_bytes__", 0, 2)),), b"abcd", 4))          # short cover
    return out


def legacy_segments():
    out = []
    SampleKey = key_class_type()
    values = [
        (((0, 0), {"label": 3, "text": "hello"}), (("doc-1", 1), [1.5, None, True])),
        ((("a", 0), {"nested": {"x": (1, 2, [3])}, "f": float("-inf")}),),
        (((7, 0), b"raw bytes"), ((8, 0), bytearray(b"\x00\x01"))),
        ((SampleKey(3, 0), {"k": "v"}), (SampleKey("s", 2), 9)),
        (),
    ]
    for i, v in enumerate(values):
        protocols = (2, 3, 4, 5) if i == 2 else (2 + i % 4, 2 + (i + 2) % 4)
        for protocol in protocols:
            out.append(pickle.dumps(v, protocol=protocol))
    out.append(pickle.dumps([[(1, 0), 1], [(2, 0), 2]], protocol=4))  # lists of lists
    out.append(pickle.dumps({"not": "pairs"}, protocol=4))
    out.append(pickle.dumps(((1, 2, 3),), protocol=4))                # a triple
    out.append(pickle.dumps((([1], 0),), protocol=4))                 # unhashable key
    return out


def bad_frames():
    """Every SPEC 2.4 refusal, once."""
    def node(schema, binary=b"", protocol=4):
        return py_frame(((1, schema),), binary, protocol)

    good = pickle.dumps(((1, ("__hp_bytes__", 0, 2)),), protocol=4)
    out = [
        b"", b"HPB1", b"HPB1" + b"\x00" * 15, b"HPB1" + b"\x00" * 16,
        raw_frame(good, b"ab", meta_size=2**64 - 1),
        raw_frame(good, b"ab", binary_size=2**64 - len(good) - 20),  # sum overflows to 0
        raw_frame(good, b"ab", binary_size=2**63),
        raw_frame(good, b"ab", binary_size=3),
        raw_frame(good, b"ab")[:-1],
        raw_frame(good, b"ab") + b"\x00",
        raw_frame(good[:-1] + b"\x00", b"ab"),                       # no STOP
        py_frame({"a": 1}, b"", 4),                                    # not pairs
        py_frame(((1, 2, 3),), b"", 4),
        node([("__hp_value__", 1)]),                                   # list, not tuple node
        node(()), node((7, 1)), node(("__hp_nope__", 1)),
        node(("__hp_tensor__", "torch.float32", (1,), 0)),             # field count
        node(("__hp_bytes__", 0)), node(("__hp_value__",)), node(("__hp_mapping__",)),
        node(("__hp_tensor__", 5, (1,), 0, 4), b"\x00" * 4),           # dtype not a str
        node(("__hp_tensor__", "float32", (1,), 0, 4), b"\x00" * 4),   # no torch. prefix
        node(("__hp_tensor__", "torch.float128", (1,), 0, 16), b"\x00" * 16),
        node(("__hp_tensor__", "torch.float32", (-1,), 0, 4), b"\x00" * 4),
        node(("__hp_tensor__", "torch.float32", (True,), 0, 4), b"\x00" * 4),
        node(("__hp_tensor__", "torch.float32", 4, 0, 4), b"\x00" * 4),
        node(("__hp_tensor__", "torch.float32", (2**62, 2**62), 0, 4), b"\x00" * 4),
        node(("__hp_tensor__", "torch.float32", (2**62, 0), 0, 0), b""),
        node(("__hp_tensor__", "torch.float32", (2,), 0, 4), b"\x00" * 4),
        node(("__hp_tensor__", "torch.float32", (1,), 2, 4), b"\x00" * 4),
        node(("__hp_bytes__", True, 1), b"a"), node(("__hp_bytes__", 0, -1), b"a"),
        node(("__hp_bytes__", 2**63 - 1, 2**63 - 1), b"a"),
        node(("__hp_bytearray__", 0, 2), b"a"),
        node(("__hp_mapping__", ((1, ("__hp_value__", 1)), (1.0, ("__hp_value__", 2))))),
        node(("__hp_mapping__", ((True, ("__hp_value__", 1)), (1, ("__hp_value__", 2))))),
        node(("__hp_mapping__", (([1], ("__hp_value__", 1)),))),
        node(("__hp_mapping__", ((1, 2, 3),))),
        node(("__hp_tuple__", 5)), node(("__hp_list__", (5,))),
        py_frame((([1], ("__hp_value__", 1)),), b"", 4),               # unhashable item key
    ]
    # A schema node shared through the memo under strict decoding (same range twice).
    leaf = ("__hp_bytes__", 0, 2)
    out.append(py_frame(((1, leaf), (2, leaf)), b"ab", 2))
    # Deep nesting near the depth limit.
    deep = ("__hp_value__", 1)
    for _ in range(60):
        deep = ("__hp_list__", (deep,))
    out.append(node(deep, b"", 4))
    return out


def frames_jsonl():
    out = []
    with open(os.path.join(ROOT, "tests", "data", "frames.jsonl")) as f:
        for line in f:
            d = json.loads(line)
            for field in ("frame_hex", "original_frame_hex"):
                if field in d:
                    out.append(bytes.fromhex(d[field]))
    return out


# --- metadata pickles ----------------------------------------------------------------------

class Evil:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


class Plain:
    def __init__(self):
        self.a = 1


def slotted_key(sample_id, position):
    """The state of a frozen slots=True SampleKey: pickled as BUILD with the list of field
    values (SPEC 1.4 values state), under the default class name."""
    SampleKey = key_class_type()
    module = sys.modules[SampleKey.__module__]

    @dataclasses.dataclass(frozen=True, slots=True)
    class Slotted:
        sample_id: object
        position: int
    Slotted.__module__, Slotted.__qualname__ = SampleKey.__module__, SampleKey.__qualname__
    module.SampleKey = Slotted
    try:
        return [pickle.dumps((Slotted(sample_id, position), {"v": 1}), protocol=p)
                for p in (2, 5)]
    finally:
        module.SampleKey = SampleKey


def cpython_pickles():
    SampleKey = key_class_type()
    shared = [1, "two", b"three"]
    scalars = [None, True, False, 0, 1, -1, 255, 256, 65535, 65536, -65536, 2**31 - 1, -2**31,
               2**31, 2**63 - 1, -2**63, 1.5, -0.0, float("nan"), float("inf")]
    texts = ("", "short", "ü" * 200, "long " * 60, "日本", b"", b"\x00\xff" * 10, b"x" * 300)
    groups = [
        (scalars, (2, 3, 4, 5)),
        (texts, (2, 3, 4, 5)),
        ([bytearray(b"ba"), bytearray()], (2, 3, 4, 5)),
        (((), (1,), (1, 2), (1, 2, 3), (1, 2, 3, 4), [], [1, [2, [3, []]]], {}), (2, 5)),
        ({"a": 1, 2: "b", (3, 4): [5], None: None, 1.5: b"x", b"k": bytearray(b"v")}, (3, 4)),
        ([shared, shared, {"again": shared}], (2, 4)),
        (((shared,), (shared,)), (5,)),
        ([None] * 1100, (2, 4)),
        ({i: i for i in range(120)}, (5,)),
        ({"sample": SampleKey(12, 3), "named": SampleKey("doc", 0)}, (2, 4)),
        ((("k", {"image": b"\x01\x02", "label": [1, 2, 3]}),), (5,)),
    ]
    out = []
    for v, protocols in groups:
        for protocol in protocols:
            out.append(pickle.dumps(v, protocol=protocol))
    refused = [
        (Evil(), 2), (Evil(), 4), ({1, 2}, 2), ({1, 2}, 4), (frozenset([1]), 4), (1j, 4),
        (Plain(), 2), (Plain(), 4), (2**64, 4), (2**70, 2), (-2**64 - 1, 4), (2**2100, 4),
        ("\ud800", 4), (OSError("x"), 4), (range(3), 4), (pickle.PickleBuffer(b"pb"), 5),
    ]
    for v, protocol in refused:
        out.append(pickle.dumps(v, protocol=protocol))
    out += slotted_key("doc", 3)  # read by the values-state read (SPEC 1.4)
    for protocol in (0, 1):
        out.append(pickle.dumps([1, "a", (2.5, None)], protocol=protocol))
        out.append(pickle.dumps({"k": b"v"}, protocol=protocol))
    cyclic = []
    cyclic.append(cyclic)
    out.append(pickle.dumps(cyclic, protocol=4))
    d = {}
    d["self"] = d
    out.append(pickle.dumps(d, protocol=2))
    return out


def hand_pickles():
    """Hand-written opcode sequences for the refusals CPython never writes."""
    P = b"\x80\x05"
    memo_bomb = bytearray(P + b")\x94")          # () memoized as 0
    for i in range(30):                           # t_{i+1} = (t_i, t_i): 2^30 nodes
        memo_bomb += b"h" + bytes([i]) + b"h" + bytes([i]) + b"\x86\x94"
    memo_bomb += b"."
    small_bomb = bytearray(P + b")\x94")
    for i in range(18):
        small_bomb += b"h" + bytes([i]) + b"h" + bytes([i]) + b"\x86\x94"
    small_bomb += b"."
    return [
        P + b"N." + b"N",                                   # bytes after STOP
        P + b"NN.",                                         # two items at STOP
        P + b"(N.",                                         # unclosed MARK
        P + b".",                                           # empty stack
        P + b"}(K\x01N\x88Nu.",                             # 1 and True: duplicate keys
        P + b"}(G\x00\x00\x00\x00\x00\x00\x00\x00N" + b"G\x80" + b"\x00" * 7 + b"Nu.",  # 0.0/-0.0
        P + b"]q\x00h\x00K\x01a.",                          # mutate a fetched list
        P + b"]q\x00h\x00K\x01a0.",
        P + b"}q\x00h\x00K\x01K\x02s.",                     # mutate a fetched dict
        P + b"]q\x00K\x01ah\x00h\x00\x86.",                 # fetch a finished list twice
        P + b"h\x05.",                                      # memo miss
        P + b"j\x00\x00\x01\x00.",
        P + b"K\x01\x94\x94h\x00.",                         # MEMOIZE twice
        P + b"\x8a\x09" + b"\x00" * 8 + b"\x01.",           # LONG1 9 bytes
        P + b"\x8a\x08" + b"\xff" * 8 + b".",               # LONG1 8 bytes: -1
        P + b"\x8a\x00.",                                   # LONG1 0 bytes: 0
        P + b"\x8b\x01\x00\x00\x00\x01.",                   # LONG4
        P + b"X\x03\x00\x00\x00\xed\xa0\x80.",              # lone surrogate, UTF-8 coded
        P + b"\x8c\x02\xc3\x28.",                           # invalid UTF-8
        P + b"X\xff\xff\xff\xff.",                          # length past the input
        P + b"\x8d" + b"\xff" * 8 + b".",
        P + b"\x8e" + struct.pack("<Q", 2**63) + b".",
        P + b"\x96" + struct.pack("<Q", 5) + b"abc.",
        P + b"\x95" + struct.pack("<Q", 2**40) + b"N.",     # FRAME past the input
        P + b"\x95" + struct.pack("<Q", 2) + b"N.",
        b"\x80\x06N.", b"\x80\x01N.", b"\x80\x00N.",
        b"N.",                                              # no PROTO
        P + b"cos\nsystem\n(S'echo'\ntR.",                  # GLOBAL os.system + REDUCE
        P + b"(cos\nsystem\nS'x'\ni.",                      # INST
        P + b"(cbuiltins\nlist\no.",                        # OBJ
        P + b"P0\n.", P + b"K\x01Q.", P + b"\x82\x01.",      # PERSID, BINPERSID, EXT1
        P + b"\x8c\x08builtins\x8c\x04eval\x93.",          # STACK_GLOBAL eval
        P + b"\x8c\x08builtins\x8c\tbytearray\x93)R.",      # bytearray()
        P + b"\x8c\x08builtins\x8c\x05bytes\x93)R.",        # bytes()
        P + b"\x8c\x08builtins\x8c\x05bytes\x93K\x01\x85R.",
        P + b"c_codecs\nencode\n\x8c\x03\xc3\xbf\xc2\x80\x8c\x06latin1\x86R.",
        P + b"c_codecs\nencode\n\x8c\x03\xe2\x82\xac\x8c\x06latin1\x86R.",  # above U+00FF
        P + b"c_codecs\nencode\n\x8c\x01a\x8c\x04utf8\x86R.",
        P + b"c__builtin__\nbytearray\nC\x02ab\x85R.",
        P + b"c__builtin__\nbytearray\n\x85R.",             # stack underflow
        P + b"cbuiltins\nbytearray\n.",                     # a global as the result
        P + b"(((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((t" + b"t" * 60,
        P + b"]" * 300 + b"a" * 299 + b".",                 # depth 300
        P + b"]" * 250 + b"a" * 249 + b".",                 # depth 250
        bytes(memo_bomb), bytes(small_bomb),
        P + b"(K\x01K\x02d.",                               # DICT
        P + b"(K\x01K\x02K\x03d.",                          # DICT, odd
        P + b"(K\x01l.", P + b"]K\x01a(K\x02K\x03e.", P + b"](e.", P + b"}(u.",
        P + b"(K\x01\x01.",                                 # POP_MARK with result
        P + b"K\x01(0.",                                    # POP pops a MARK
        P + b"K\x010.",
    ]


# --- received buffers ----------------------------------------------------------------------

def merge_input(segments, flags=0, sizes=None):
    sizes = [len(s) for s in segments] if sizes is None else sizes
    assert len(sizes) <= 8 and all(0 <= s < 65536 for s in sizes)
    return bytes([flags | len(sizes)]) + b"".join(struct.pack("<H", s) for s in sizes) + \
        b"".join(segments)


def merge_inputs(hp):
    r = random.Random(25)
    per_rank = []
    for rank in range(6):
        items = []
        for i in range(r.randint(1, 3)):
            items.append([{"key": [rank * 100 + i, 0]}, rand_value(r, 2)])
        per_rank.append(items)
    segs = hp.encode(per_rank)
    legacy = hp.encode([[[{"key": [900, 0]}, {"list": [1, "x"]}]],
                        [[{"key": ["doc-901", 1]}, None]]])
    dup = hp.encode([[[{"key": [5, 0]}, 1]], [[{"key": [5, 0]}, 2]],
                     [[{"tuple": [1]}, 1], [{"tuple": [{"float": 1.0}]}, 2]]])
    py = python_frames()
    out = [
        merge_input([]),
        merge_input([b""]),
        merge_input(segs[:1]), merge_input(segs[:3]), merge_input(segs[:6]),
        merge_input(segs[:2] + legacy), merge_input([segs[0], b"", segs[1], b""]),
        merge_input(segs[:3], flags=0x80),
        merge_input(segs[:4], flags=0x80, sizes=[len(segs[0]), len(segs[1]), len(segs[2]), 0]),
        merge_input(segs[:2], sizes=[len(segs[0]) + 1, len(segs[1])]),   # sums off by one
        merge_input(segs[:2], sizes=[len(segs[0]), len(segs[1]) - 1]),
        merge_input(segs[:2], sizes=[len(segs[0]) - 3, len(segs[1]) + 3]),  # misplaced cut
        merge_input(dup[:2]), merge_input(dup[2:]), merge_input([dup[0], segs[1], dup[1]]),
        merge_input([py[0], py[6]]), merge_input(py[7:9]),
        merge_input(legacy + [b"HPB1"]), merge_input([legacy[0], b"garbage"]),
        merge_input(legacy, flags=0x8f),        # k = 15 % 9 = 6: too few size bytes
        bytes([0x80 | 2, 0xff, 0xff]),          # header cut short
        merge_input(legacy[:1] * 2),
    ]
    pool = segs + legacy
    for n in range(1, 9):
        out.append(merge_input(pool[:n]))
    for frame in frames_jsonl()[:12]:
        if len(frame) < 1500:
            out.append(merge_input([frame]))
            out.append(merge_input([frame, segs[2]], flags=0x80))
    return out


# --- segments whose metadata takes the decoder's slabs --------------------------------------

SLAB_METADATA = 16384  # reference/src/codec_fast.cpp: this much metadata or more takes slabs


def slab_segments(hp):
    """Framed segments with more than 16 KiB of metadata, so that the fast decoder takes its
    nodes from 64 KiB slabs (hpref/detail/node_arena.hpp) and the fuzzers mutate structures
    there too (lists and dicts that grow, tuples built whole, tensor headers): our encoder's,
    of many random items, and one the Python original's way (pickle.dumps of its schema
    tuples, memo and all)."""
    r = random.Random(16)
    out = hp.encode([rand_items(r, 500, 2), rand_items(r, 350, 3)])
    pairs, binary = [], bytearray()
    for i in range(600):
        tensor = ("__hp_tensor__", "torch.float32", (2,), len(binary), 8)
        binary += struct.pack("<2f", i, -i)
        pairs.append(((i, 0), ("__hp_mapping__", (("x", tensor), ("n", ("__hp_value__", i)),
                                                  ("tags", ("__hp_list__", (
                                                      ("__hp_value__", f"t{i}"),)))))))
    out.append(py_frame(tuple(pairs), bytes(binary), 5))
    for seg in out:
        meta = struct.unpack(">Q", seg[4:12])[0]
        assert SLAB_METADATA <= meta and len(seg) < 65536, (meta, len(seg))
        print(f"make_corpus: slab segment of {meta} metadata bytes, {len(seg)} in all")
    return out


# --- JSON ----------------------------------------------------------------------------------

def json_texts():
    r = random.Random(7)
    out = []
    for n in range(14):
        out.append(json.dumps(rand_items(r, r.randint(1, 4), r.randint(0, 3))))
    for n in range(10):
        out.append(json.dumps(rand_value(r, r.randint(1, 3))))
    out += [
        'null', 'true', 'false', '0', '-9223372036854775808', '9223372036854775807',
        '9223372036854775808', '18446744073709551616', '1.5', '1e5', '"text"',
        '"\\u00e9\\ud83c\\udf89"',
        '"\\ud800"', '[]', '{}', '[[1, 2]]', '[[1, 2], [1, 3]]', '[[{"key": [1, 0]}, 1]]',
        '[[{"key": ["", 0]}, 1]]', '[[{"key": [1, -1]}, 1]]', '[[{"key": [true, 0]}, 1]]',
        '[[{"key": [1]}, 1]]', '[[{"list": [1]}, 1]]', '[[{"dict": []}, 1]]',
        '{"float": "nan"}', '{"float": "-inf"}', '{"float": "NaN"}', '{"float": 1e400}',
        '{"float": -0.0}', '{"float": 5e-324}', '{"float": 1}', '{"float": true}',
        '{"bytes": "0"}', '{"bytes": "zz"}', '{"bytes": "ABcd"}', '{"bytearray": ""}',
        '{"tuple": 1}', '{"list": [], "tuple": []}', '{"set": []}',
        '{"dict": [[1, 2], [true, 3]]}', '{"dict": [[{"list": []}, 1]]}', '{"dict": [[1]]}',
        '{"tensor": {"dtype": "torch.float32", "shape": [1], "hex": "0000803f"}}',
        '{"tensor": {"dtype": "torch.float32", "shape": [2], "hex": "0000803f"}}',
        '{"tensor": {"dtype": "torch.double", "shape": [], "hex": "000000000000f03f"}}',
        '{"tensor": {"dtype": "torch.float128", "shape": [], "hex": ""}}',
        '{"tensor": {"dtype": "float32", "shape": [], "hex": "00000000"}}',
        '{"tensor": {"dtype": "torch.int8", "shape": [-1], "hex": ""}}',
        '{"tensor": {"dtype": "torch.int8", "shape": [4611686018427387904, 4], "hex": ""}}',
        '{"tensor": {"dtype": "torch.int8", "shape": [4611686018427387904, 0], "hex": ""}}',
        '{"tensor": {"dtype": "torch.int8", "shape": [0], "hex": "", "device": "cpu"}}',
        '{"list": [' * 200 + ']}' * 200,
        '{"list": [' * 300 + ']}' * 300,
        '[' * 1100 + ']' * 1100,
        '[[1, 2]] trailing', '[[1, 2]', '{"a": 1, "a": 2}', '"\\u0000"', '"\x01"',
    ]
    return [t.encode() for t in out]


# --- main ----------------------------------------------------------------------------------

# --- route_args and batch_header: fuzz/targets/byte_reader.hpp's encoding -------------------

def br_int(v):
    """One ByteReader integer: selector 1 (signed int16) or 0xff (raw int64)."""
    if -32768 <= v <= 32767:
        return bytes([1]) + struct.pack("<h", v)
    return bytes([0xff]) + struct.pack("<q", v)


def br_ints(values):
    return bytes([len(values)]) + b"".join(br_int(v) for v in values)


def route_args_seeds():
    """The original implementation's route cases (tests/data/routes.jsonl), and extremes."""
    seeds = []
    with open(os.path.join(ROOT, "tests", "data", "routes.jsonl")) as f:
        for line in f:
            req = json.loads(line)["request"]
            if req["op"] == "interval_route":
                blob = bytes([0]) + br_int(req["local_length"]) + br_int(req["rank"])
                blob += bytes([len(req["intervals"])])
                blob += b"".join(br_int(s) + br_int(e) for s, e in req["intervals"])
                owners = req.get("owner_offsets")
                blob += bytes([1]) + br_ints(owners) if owners else bytes([0, 0])
            else:
                op = 1 if req["op"] == "sliding_window_route" else 2
                last = req["window"] if op == 1 else req["ratio"]
                blob = bytes([op, 1]) + br_ints(req["boundaries"])
                blob += br_int(req["local_length"]) + br_int(req["size"]) + br_int(req["rank"])
                blob += br_int(last)
            seeds.append(blob)
    big = 2**62
    seeds.append(bytes([1, 1]) + br_ints([0, big]) + br_int(big) + br_int(3) + br_int(0) + br_int(1))
    seeds.append(bytes([2, 0, 5, 3, 1, 4, 2, 8]) + br_int(2) + br_int(9) + br_int(4) + br_int(2))
    return seeds


def batch_header_seeds():
    seeds = []
    # fields: count, then per field name byte, dtype byte, placement byte, rank, dims
    tokens = bytes([0, 7, 1, 2, 1, 3])          # f0 int64 accelerator dims (B, S)
    # A dim byte d decodes (targets/batch_header.cpp) as symbol "BSHN"[(d >> 1) % 4] when odd,
    # else the fixed size (d >> 1) - 4: 3 is 14, -1 is 6.
    image = bytes([1, 11, 0, 2, 7, 14])         # f1 uint8 cpu dims (N, 3)
    two = bytes([2]) + tokens + image
    for header in ([1, 2, 5, 1], [0, 0, 0, 0], [-1, 0, 0, 0], [1, 0, 0, 0], [1, -1, 2, 3],
                   [2, 1, 1, 1], [1, 2**40, 2**40, 1], [1, 2]):
        for shift in (10, 19):
            seeds.append(two + br_ints(header) + bytes([shift]))
    seeds.append(bytes([2]) + tokens + tokens + br_ints([1, 1, 1]) + bytes([4]))  # repeated name
    seeds.append(bytes([1, 0, 0, 0, 1, 6]) + br_ints([1, 3]) + bytes([5]))          # negative fixed dim
    # A rank-0 int64 field is one 8-byte element: refused under max 4 (batch_size_limit),
    # accepted under max 8 (the oracle once skipped the size check when no dim was looped).
    for shift in (2, 3):
        seeds.append(bytes([1, 0, 7, 0, 0]) + br_ints([1]) + bytes([shift]))
    return seeds


# Issue 10 regressions, each large enough to show its bug under the old code and replayed
# by ctest in every build (so they are exempt from MAX_FILE; git stores them compressed).
def long1(x):
    n = (x.bit_length() + 8) // 8
    return b"\x8a" + bytes([n]) + x.to_bytes(n, "little", signed=True)


def short_unicode(s):
    b = s.encode()
    return b"\x8c" + bytes([len(b)]) + b


# Hash flooding: std::hash is the identity on ints and libstdc++'s tables take the hash
# modulo a prime bucket count from a fixed list (..., 20753, 42043, 85229, ...). Keys that
# are multiples of 42043 * 85229 all land in bucket 0 of both tables a set of 20754 to
# 85229 keys passes through, so checking 50000 of them for duplicates was quadratic: about
# 18 s per decode under the old hash (SPEC 2.3 dicts, 2.2 __hp_mapping__, 2.5 merging),
# and each target decodes more than once, past the 30 s ctest TIMEOUT of its replay;
# milliseconds under the keyed one.
FLOOD_STEP = 42043 * 85229
FLOOD_KEYS = [FLOOD_STEP * (i + 1) for i in range(50000)]


def flood_dict_pickle():
    out = bytearray(b"\x80\x05}")
    for s in range(0, len(FLOOD_KEYS), 1000):
        out += b"(" + b"".join(long1(k) + b"N" for k in FLOOD_KEYS[s:s + 1000]) + b"u"
    return bytes(out + b".")


def flood_mapping_frame():
    # (0, ("__hp_mapping__", ((k, ("__hp_value__", None)), ...))): one child node, memoized.
    child = short_unicode("__hp_value__") + b"N\x86\x94"  # memo 0
    pairs = b"(" + long1(FLOOD_KEYS[0]) + child + b"\x86"
    pairs += b"".join(long1(k) + b"h\x00\x86" for k in FLOOD_KEYS[1:]) + b"t"
    meta = b"\x80\x05K\x00" + short_unicode("__hp_mapping__") + pairs + b"\x86\x86\x85."
    return raw_frame(meta, b"")


def flood_legacy_segment():
    return b"\x80\x05(" + b"".join(long1(k) + b"N\x86" for k in FLOOD_KEYS) + b"t."


# Unbounded stack: one-byte pushes (EMPTY_DICT) that nothing consumes were held until STOP
# refused them: 238 bytes of memory per input byte, 730 MB for these 3 MiB (the targets'
# RssBound allows 192 per byte). The stack limit (SPEC 2.3, 1 Mi entries) stops it at 1 MiB.
STACK_PUSHES = b"}" * (3 << 20) + b"."


# Memo sharing: a framed segment of 269 bytes whose one value is ("__hp_tuple__", (n, n))
# nested 20 deep over one empty __hp_bytes__ leaf, 2^20 logical leaves. The target's
# leaf-range check once copied every leaf into a vector, past its RssBound; it now walks them
# in place, and only for items of at most 2^18 logical nodes.
def memo_doubled_leaves(levels=20):
    p = bytearray(b"\x80\x04")
    p += short_unicode("__hp_tuple__") + b"\x94"                              # memo 0
    p += short_unicode("__hp_bytes__") + b"K\x00K\x00\x87\x94" + b"00"      # memo 1, popped
    for level in range(levels):                                              # memo 2 + level
        below = 1 + level
        p += b"h\x00h" + bytes([below]) + b"h" + bytes([below]) + b"\x86\x86\x94" + b"0"
    p += b"](" + short_unicode("k") + b"h" + bytes([1 + levels]) + b"\x86e."
    return b"HPB1" + struct.pack(">QQ", len(p), 0) + bytes(p)


def regression_inputs():
    return {
        "pickle_read": [flood_dict_pickle(), STACK_PUSHES],
        "segment_decode": [flood_mapping_frame(), STACK_PUSHES, memo_doubled_leaves()],
        # One split: flag 0x80 gives it the whole buffer; merging checks the keys.
        "received_merge": [bytes([0x81, 0, 0]) + flood_legacy_segment()],
    }


def write_corpus(target, blobs, clean, large=()):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    if clean:
        for name in os.listdir(d):
            os.remove(os.path.join(d, name))
    written = set()
    skipped = 0
    # `large`: the regressions, kept whatever their size.
    for b, exempt in [(b, False) for b in blobs] + [(b, True) for b in large]:
        if len(b) > MAX_FILE and not exempt:
            skipped += 1
            continue
        name = hashlib.sha1(b).hexdigest()
        if name in written:
            continue
        written.add(name)
        with open(os.path.join(d, name), "wb") as f:
            f.write(b)
    print(f"make_corpus: {target}: {len(written)} files ({skipped} over {MAX_FILE} bytes left out)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hpref", default=os.path.join(ROOT, "build", "fuzzcheck", "tools", "hpref"))
    ap.add_argument("--clean", action="store_true", help="empty the corpus directories first")
    ap.add_argument("--regressions-only", action="store_true",
                    help="write only the issue-10 regression inputs (no hpref binary needed)")
    args = ap.parse_args()
    regressions = regression_inputs()
    if args.regressions_only:
        for target, blobs in regressions.items():
            write_corpus(target, [], False, large=blobs)
        return
    hp = Hpref(args.hpref)

    r = random.Random(1)
    shapes = [rand_items(r, r.randint(1, 4), r.randint(0, 3)) for _ in range(12)]
    shapes += [rand_items(r, r.randint(1, 3), r.randint(0, 3), binary=False) for _ in range(5)]
    shapes.append([[{"key": [i, 0]}, i] for i in range(40)])
    encoded = hp.encode(shapes)
    encoded += hp.encode(shapes[:2] + shapes[12:13], key_class=KEY_CLASS)
    truncated = [encoded[0][:n] for n in (3, 19, 20, 25, len(encoded[0]) - 1)]
    segment = encoded + python_frames() + legacy_segments() + bad_frames() + frames_jsonl() + \
        truncated
    slabs = slab_segments(hp)
    write_corpus("segment_decode", segment, args.clean,
                 large=regressions["segment_decode"] + slabs)

    golden = hp.pickle_write([rand_value(r, 3, binary=True) for _ in range(8)] +
                             [{"list": [None] * 1001}, {"dict": [[i, i] for i in range(200)]}])
    write_corpus("pickle_read", cpython_pickles() + hand_pickles() + golden, args.clean,
                 large=regressions["pickle_read"])
    write_corpus("received_merge", merge_inputs(hp), args.clean,
                 large=regressions["received_merge"] +
                 [merge_input(slabs[:2]), merge_input(slabs[2:], flags=0x80)])
    write_corpus("json_value", json_texts(), args.clean)
    write_corpus("route_args", route_args_seeds(), args.clean)
    write_corpus("batch_header", batch_header_seeds(), args.clean)
    write_corpus("canary", [b"", b"HPB1", b"HPB1\x00", b"HPB0\xc5", b"HPB1\xc4", b"hpb1\xc5"],
                 args.clean)


if __name__ == "__main__":
    main()
