"""Refusals by name (SPEC 2.3): pickles CPython writes (or that are hand-assembled where
CPython cannot write them) that hold anything but plain data, or break one of the SPEC 2.3
divergences, are refused with ok:false, the right error kind, and a sentence naming the
offending global / opcode / value. Decoding never runs code: the same pickles inside an
HPB1 frame or as a legacy segment are refused by decode_segment too.

Usage: test_refusals.py <hpref>
"""

import codecs
import dataclasses
import os
import pickle
import struct
import subprocess
import sys

import hpref_interop as hi

PROTOCOLS = (2, 3, 4, 5)


class Reduce:
    """An object whose pickle calls f(*args) on load."""

    def __init__(self, f, args):
        self.f, self.args = f, args

    def __reduce__(self):
        return (self.f, self.args)


def nested_lists(depth):
    """`depth` nested lists: [[...[]...]]."""
    v = []
    for _ in range(depth - 1):
        v = [v]
    return v


def refuse(suite, label, data, kinds, names, **extra):
    req = {"op": "pickle_read", "pickle_hex": data.hex()}
    req.update(extra)
    suite.ask(label, req, hi.expect_refusal(kinds, names, hi.describe_pickle(data)))


def accept(suite, label, data, expected, **extra):
    req = {"op": "pickle_read", "pickle_hex": data.hex()}
    req.update(extra)
    suite.ask(label, req, hi.expect_value(expected, hi.describe_pickle(data)))


def code_running_globals(suite):
    system_name = "%s.system" % os.system.__module__     # posix.system on Linux
    cases = [
        ("os.system('echo pwned')", Reduce(os.system, ("echo pwned",)),
         (system_name, "os.system")),
        ("builtins.eval", Reduce(eval, ("__import__('os').system('echo pwned')",)), "eval"),
        ("builtins.exec", Reduce(exec, ("pass",)), "exec"),
        # protocol 2 writes it as commands.Popen (fix_imports)
        ("subprocess.Popen", Reduce(subprocess.Popen, (["echo", "pwned"],)),
         ("subprocess.Popen", "commands.Popen")),
        ("builtins.getattr", Reduce(getattr, (Reduce, "__init__")), "getattr"),
        ("a set (protocols 2-3: builtins.set)", {1, 2}, "set"),
        ("codecs.decode", Reduce(codecs.decode, (b"abc", "latin1")), "decode"),
        ("os.system inside a list", [1, Reduce(os.system, ("echo pwned",))],
         (system_name, "os.system")),
    ]
    for label, obj, names in cases:
        for p in PROTOCOLS:
            data = pickle.dumps(obj, protocol=p)
            if label.startswith("a set") and p >= 4:
                continue
            names_in = [n for n, _, _ in hi.opcodes(data)]
            if "REDUCE" not in names_in:
                raise SystemExit("test bug: %s at protocol %d has no REDUCE" % (label, p))
            refuse(suite, "%s [protocol %d]" % (label, p), data, "pickle_global", names)
    # the pickle really names posix.system (CPython resolves os.system's module)
    data = pickle.dumps(Reduce(os.system, ("echo pwned",)), protocol=2)
    if (b"c%s\nsystem\n" % os.system.__module__.encode()) not in data:
        raise SystemExit("test bug: os.system pickled as %r" % data)

    # the same pickles at segment level: a legacy segment, and the metadata of a frame
    evil = Reduce(os.system, ("echo pwned",))
    for p in PROTOCOLS:
        seg = pickle.dumps((((0, 0), evil),), protocol=p)
        suite.ask("legacy segment holding os.system [protocol %d]" % p,
                  {"op": "decode_segment", "frame_hex": seg.hex()},
                  hi.expect_refusal("pickle_global", (system_name, "os.system"),
                                    "segment %s" % seg.hex()))
        meta = pickle.dumps((((0, 0), ("__hp_value__", evil)),
                             ((0, 1), ("__hp_bytes__", 0, 1))), protocol=p)
        seg = struct.pack("!4sQQ", b"HPB1", len(meta), 1) + meta + b"x"
        suite.ask("HPB1 frame whose metadata holds os.system [protocol %d]" % p,
                  {"op": "decode_segment", "frame_hex": seg.hex()},
                  hi.expect_refusal("pickle_global", (system_name, "os.system"),
                                    "segment %s" % seg.hex()))
        received = pickle.dumps((((1, 0), "fine"),), protocol=p) + seg
        suite.ask("decode_received with one peer's segment holding os.system [protocol %d]" % p,
                  {"op": "decode_received", "received_hex": received.hex(),
                   "splits": [len(received) - len(seg), len(seg)]},
                  hi.expect_refusal("pickle_global", (system_name, "os.system"),
                                    "received %s" % received.hex()))


def wrong_reduce_shapes(suite):
    # the accepted globals with arguments other than the three shapes of SPEC 2.3
    cases = [
        ("_codecs.encode(str, 'utf-8')", Reduce(codecs.encode, ("abc", "utf-8")),
         "_codecs.encode"),
        ("_codecs.encode(str, 'rot13')", Reduce(codecs.encode, ("abc", "rot13")),
         "_codecs.encode"),
        ("_codecs.encode(str)", Reduce(codecs.encode, ("abc",)), "_codecs.encode"),
        ("_codecs.encode(str, 'latin1', 'strict')",
         Reduce(codecs.encode, ("abc", "latin1", "strict")), "_codecs.encode"),
        ("bytearray(str, 'utf-8')", Reduce(bytearray, ("abc", "utf-8")), "bytearray"),
        ("bytearray(str)", Reduce(bytearray, ("abc",)), "bytearray"),
        ("bytearray(5)", Reduce(bytearray, (5,)), "bytearray"),
        ("bytearray(list)", Reduce(bytearray, ([1, 2],)), "bytearray"),
    ]
    for label, obj, name in cases:
        for p in PROTOCOLS:
            refuse(suite, "%s [protocol %d]" % (label, p), pickle.dumps(obj, protocol=p),
                   "pickle_reduce", name)
    # latin1 cannot encode U+20AC: Python would raise; we refuse
    data = (b"\x80\x02c_codecs\nencode\nX\x03\x00\x00\x00\xe2\x82\xac"
            b"X\x06\x00\x00\x00latin1\x86R.")
    refuse(suite, "_codecs.encode('\u20ac', 'latin1')", data, "pickle_reduce", "_codecs.encode")
    # a bare accepted global used as a value, not called
    for p in PROTOCOLS:
        refuse(suite, "the bytearray class itself [protocol %d]" % p,
               pickle.dumps(bytearray, protocol=p), ("pickle_global", "pickle_reduce"),
               "bytearray")
        refuse(suite, "the _codecs.encode function itself [protocol %d]" % p,
               pickle.dumps(codecs.encode, protocol=p), ("pickle_global", "pickle_reduce"),
               "encode")


def opcodes_refused(suite):
    # protocols 0 and 1: text opcodes
    refuse(suite, "protocol 0 int (INT)", pickle.dumps(1, protocol=0), "pickle_opcode", "INT")
    refuse(suite, "protocol 0 str (UNICODE)", pickle.dumps("abc", protocol=0), "pickle_opcode",
           "UNICODE")
    refuse(suite, "protocol 0 list (first text opcode)", pickle.dumps([1, 2], protocol=0),
           "pickle_opcode", ("MARK", "LIST", "INT", "PUT"))
    refuse(suite, "protocol 0 float (FLOAT)", pickle.dumps(1.5, protocol=0), "pickle_opcode",
           "FLOAT")
    refuse(suite, "protocol 1 bool (INT)", pickle.dumps(True, protocol=1), "pickle_opcode", "INT")
    refuse(suite, "protocol 1 big int (LONG)", pickle.dumps(2**40, protocol=1), "pickle_opcode",
           "LONG")
    refuse(suite, "protocol 0 tuple with a bool", pickle.dumps((False,), protocol=0),
           "pickle_opcode", ("MARK", "INT", "TUPLE"))
    # PROTO outside 2..5
    for p in (0, 1, 6, 255):
        refuse(suite, "PROTO %d" % p, bytes([0x80, p]) + b"N.", "pickle_protocol", str(p))
    # INST, OBJ, PERSID, BINPERSID, EXT*, BUILD elsewhere, NEWOBJ_EX, sets
    refuse(suite, "INST", b"(i__main__\nFoo\n.", "pickle_opcode", "INST")
    refuse(suite, "OBJ", b"\x80\x02(No.", "pickle_opcode", "OBJ")
    refuse(suite, "PERSID", b"\x80\x02Pid\n.", "pickle_opcode", "PERSID")
    refuse(suite, "BINPERSID", b"\x80\x02NQ.", "pickle_opcode", "BINPERSID")
    refuse(suite, "EXT1", b"\x80\x02\x82\x01.", "pickle_opcode", "EXT1")
    refuse(suite, "EXT2", b"\x80\x02\x83\x01\x00.", "pickle_opcode", "EXT2")
    refuse(suite, "EXT4", b"\x80\x02\x84\x01\x00\x00\x00.", "pickle_opcode", "EXT4")
    refuse(suite, "NEWOBJ_EX", b"\x80\x04N)}\x92.", ("pickle_opcode", "pickle_reduce"),
           "NEWOBJ_EX")
    refuse(suite, "BUILD on a list", b"\x80\x02]}b.", ("pickle_reduce", "pickle_opcode"), "BUILD")
    refuse(suite, "NEXT_BUFFER", b"\x80\x05\x97.", "pickle_opcode", "NEXT_BUFFER")
    refuse(suite, "READONLY_BUFFER", b"\x80\x05C\x01a\x98.", "pickle_opcode", "READONLY_BUFFER")
    for p in (4, 5):
        refuse(suite, "set [protocol %d] (EMPTY_SET)" % p, pickle.dumps({1, 2}, protocol=p),
               "pickle_opcode", "EMPTY_SET")
        refuse(suite, "frozenset [protocol %d] (FROZENSET)" % p,
               pickle.dumps(frozenset({1}), protocol=p), "pickle_opcode", "FROZENSET")
        refuse(suite, "empty set in a dict [protocol %d]" % p,
               pickle.dumps({"s": set()}, protocol=p), "pickle_opcode", "EMPTY_SET")
    for p in (2, 3):
        refuse(suite, "frozenset [protocol %d] (builtins.frozenset)" % p,
               pickle.dumps(frozenset({1}), protocol=p), "pickle_global", "frozenset")
    # LONG4 (ints of 256+ bytes) and LONG1 beyond 64 bits
    refuse(suite, "2**3000 (LONG4)", pickle.dumps(2**3000, protocol=5),
           ("pickle_opcode", "pickle_int_range"), "LONG4")


def int_range(suite):
    for v in (2**63, 2**64, -2**63 - 1, 2**64 + 1, -2**64, 2**100, -2**100):
        for p in PROTOCOLS:
            refuse(suite, "int %d [protocol %d]" % (v, p), pickle.dumps(v, protocol=p),
                   "pickle_int_range", "LONG1")
        refuse(suite, "int %d in a list" % v, pickle.dumps([1, v], protocol=4),
               "pickle_int_range", "LONG1")
    # the edges just inside are read
    for v in (2**63 - 1, -2**63):
        accept(suite, "int %d" % v, pickle.dumps(v, protocol=2), v)
    # LONG1 of 9 bytes is refused even when the value would fit (SPEC 2.3: LONG1 <= 8 bytes)
    data = b"\x80\x05\x8a\x09" + (5).to_bytes(9, "little") + b"."
    refuse(suite, "LONG1 of 9 bytes holding 5", data, "pickle_int_range", "LONG1")


def invalid_utf8(suite):
    for s in ("\ud800", "a\udfffb", "\udbff\udc00"[0], "ok \ud83d"):
        for p in PROTOCOLS:
            data = pickle.dumps(s, protocol=p)
            refuse(suite, "lone surrogate %r [protocol %d]" % (s, p), data,
                   "pickle_invalid_utf8", ("UTF-8", "utf-8"))
        refuse(suite, "lone surrogate %r as a dict key" % s, pickle.dumps({s: 1}, protocol=2),
               "pickle_invalid_utf8", ("UTF-8", "utf-8"))
    # other invalid UTF-8, hand-assembled
    for bad in (b"\xff", b"\xc0\x80", b"\xe2\x82", b"\xf4\x90\x80\x80", b"a\x80"):
        data = b"\x80\x05\x8c" + bytes([len(bad)]) + bad + b"."
        refuse(suite, "invalid UTF-8 %s" % bad.hex(), data, "pickle_invalid_utf8",
               ("UTF-8", "utf-8"))
    # what CPython writes for valid non-BMP text is read (not a surrogate pair)
    accept(suite, "non-BMP text", pickle.dumps("\U0001f600", protocol=2), "\U0001f600")


def structure(suite):
    for p in PROTOCOLS:
        refuse(suite, "bytes after STOP [protocol %d]" % p, pickle.dumps([1], protocol=p) + b"\x00",
               "pickle_trailing_bytes", ("STOP", "1 bytes", "1 byte"))
        refuse(suite, "two pickles back to back [protocol %d]" % p,
               pickle.dumps(1, protocol=p) + pickle.dumps(2, protocol=p),
               "pickle_trailing_bytes", "STOP")
        refuse(suite, "truncated (no STOP) [protocol %d]" % p,
               pickle.dumps([1, "abc"], protocol=p)[:-1], ("pickle_truncated",), ())
    refuse(suite, "two items on the stack at STOP", b"\x80\x05NN.", "pickle_stack", "STOP")
    refuse(suite, "empty stack at STOP", b"\x80\x05.", "pickle_stack", "STOP")
    refuse(suite, "MARK left open at STOP", b"\x80\x05(N.", "pickle_stack", ())
    refuse(suite, "APPENDS without MARK", b"\x80\x05]Ne.", "pickle_stack", "APPENDS")
    refuse(suite, "length field past the input", b"\x80\x05\x8d\xff\xff\xff\xff\xff\xff\xff\x7f",
           "pickle_truncated", "BINUNICODE8")
    refuse(suite, "BINBYTES length past the input", b"\x80\x05B\x00\x00\x00\x10abc.",
           "pickle_truncated", "BINBYTES")
    refuse(suite, "empty input", b"", "pickle_truncated", ())
    refuse(suite, "BINGET of an index never stored", b"\x80\x05h\x05.", "pickle_memo_missing",
           "5")
    refuse(suite, "LONG_BINGET of an index never stored", b"\x80\x05j\x00\x00\x01\x00.",
           "pickle_memo_missing", "65536")


def duplicate_keys(suite):
    # {1: 'a', True: 'b'} cannot be made in Python: hand-assembled, several ways
    K1, TRUE, ONE_F = b"K\x01", b"\x88", b"G" + struct.pack(">d", 1.0)
    A, B = b"\x8c\x01a", b"\x8c\x01b"
    cases = [
        ("1 and True (SETITEMS)", b"}(" + K1 + A + TRUE + B + b"u", "True"),
        ("1 and 1.0 (SETITEM x2)", b"}" + K1 + A + b"s" + ONE_F + B + b"s", "1.0"),
        ("True and 1 (DICT)", b"(" + TRUE + A + K1 + B + b"d", "1"),
        ("0.0 and -0.0", b"}(G" + struct.pack(">d", 0.0) + A + b"G" + struct.pack(">d", -0.0)
         + B + b"u", "0.0"),
        ("'a' twice", b"}(" + A + K1 + A + K1 + b"u", "a"),
        ("(1,) and (True,)", b"}(" + K1 + b"\x85" + A + TRUE + b"\x85" + B + b"u", "True"),
        ("None twice", b"}(N" + A + b"N" + B + b"u", "None"),
        ("b'k' twice", b"}(C\x01k" + A + b"C\x01k" + B + b"u", "k"),
        ("0 and False", b"}(K\x00" + A + b"\x89" + B + b"u", "False"),
    ]
    for label, body, name in cases:
        refuse(suite, "duplicate dict key " + label, b"\x80\x05" + body + b".",
               "pickle_duplicate_key", name)
    # keys that are not equal under Python's key equality are fine
    body = b"}(" + K1 + A + b"\x8c\x011" + B + b"C\x011" + b"K\x02" + b"\x89" + b"K\x03" + b"u"
    accept(suite, "1, '1', b'1', False are four keys", b"\x80\x05" + body + b".",
           {1: "a", "1": "b", b"1": 2, False: 3})
    # NaN != NaN in Python: two NaN keys (CPython writes them) are two keys
    accept(suite, "two NaN keys are two keys",
           pickle.dumps({float("nan"): 1, float("nan"): 2}, protocol=5),
           {float("nan"): 1, float("nan"): 2})
    # unhashable keys cannot come from CPython either
    refuse(suite, "list as a dict key", b"\x80\x05}]K\x01s.", "pickle_unhashable_key", "list")
    refuse(suite, "dict as a dict key", b"\x80\x05}}K\x01s.", "pickle_unhashable_key", "dict")
    refuse(suite, "tuple holding a list as a dict key", b"\x80\x05}]\x85K\x01s.",
           "pickle_unhashable_key", "tuple")
    refuse(suite, "bytearray as a dict key", b"\x80\x05}\x96\x00\x00\x00\x00\x00\x00\x00\x00K\x01s.",
           "pickle_unhashable_key", "bytearray")
    # duplicate keys in an __hp_mapping__ node (tuples: CPython can write this one)
    meta = pickle.dumps((((0, 0), ("__hp_mapping__", ((1, ("__hp_bytes__", 0, 1)),
                                                      (True, ("__hp_bytes__", 0, 1))))),),
                        protocol=4)
    seg = struct.pack("!4sQQ", b"HPB1", len(meta), 1) + meta + b"x"
    suite.ask("__hp_mapping__ with keys 1 and True",
              {"op": "decode_segment", "frame_hex": seg.hex()},
              hi.expect_refusal("duplicate_mapping_key", "True", "segment %s" % seg.hex()))


def cycles_and_limits(suite):
    a = []
    a.append(a)
    d = {}
    d["self"] = d
    t = ([],)
    t[0].append(t)
    b = [1]
    b.append({"back": b})
    for label, obj in (("a list holding itself", a), ("a dict holding itself", d),
                       ("a tuple whose list holds the tuple", t),
                       ("a list holding a dict holding the list", b)):
        for p in PROTOCOLS:
            refuse(suite, "cycle: %s [protocol %d]" % (label, p), pickle.dumps(obj, protocol=p),
                   "pickle_frozen_mutation", ("APPEND", "SETITEM"))
    # depth: 256 nested containers are read, 257 are refused (SPEC 2.3)
    for p in (2, 5):
        data = pickle.dumps(nested_lists(256), protocol=p)
        accept(suite, "256 nested lists [protocol %d]" % p, data, nested_lists(256))
        refuse(suite, "257 nested lists [protocol %d]" % p,
               pickle.dumps(nested_lists(257), protocol=p), "pickle_depth_limit", "257")
        v = ()
        for _ in range(300):
            v = (v,)
        refuse(suite, "301 nested tuples [protocol %d]" % p, pickle.dumps(v, protocol=p),
               "pickle_depth_limit", ())
        v = {}
        for _ in range(400):
            v = {"k": v}
        refuse(suite, "401 nested dicts [protocol %d]" % p, pickle.dumps(v, protocol=p),
               "pickle_depth_limit", ())
    # memo references counted as copies: 2**31 leaves from a pickle of a few hundred bytes
    x = [1]
    for _ in range(30):
        x = [x, x]
    for p in PROTOCOLS:
        data = pickle.dumps(x, protocol=p)
        assert len(data) < 2000
        refuse(suite, "exponential memo expansion [protocol %d]" % p, data, "pickle_node_limit",
               ())
    # memo: 1 Mi entries are fine, one more is refused
    accept(suite, "2**20 memo entries", b"\x80\x05N" + b"\x94" * 2**20 + b".", None)
    refuse(suite, "2**20 + 1 memo entries", b"\x80\x05N" + b"\x94" * (2**20 + 1) + b".",
           "pickle_memo_limit", ())


def key_class(suite):
    SK = hi.SampleKey
    mod = sys.modules[SK.__module__]
    try:
        Extra = hi.make_key_class(hi.KEY_CLASS, ("extra",))
        extra = pickle.dumps(Extra(1, 2, 3), protocol=5)

        @dataclasses.dataclass(frozen=True, slots=True)
        class Slotted:
            sample_id: object
            position: int
        Slotted.__module__, Slotted.__qualname__ = SK.__module__, "SampleKey"
        mod.SampleKey = Slotted
        slotted = pickle.dumps(Slotted(1, 2), protocol=5)
    finally:
        mod.SampleKey = SK
    refuse(suite, "key class BUILD state with an extra field", extra, "pickle_reduce", "extra")
    refuse(suite, "key class with slots (BUILD state is a list)", slotted, "pickle_reduce",
           "SampleKey")
    missing = pickle.dumps(SK(1, 2), protocol=2).replace(b"X\x08\x00\x00\x00positionq\x04K\x02",
                                                         b"")
    refuse(suite, "key class BUILD state without position", missing, "pickle_reduce",
           "SampleKey")
    refuse(suite, "key class not named by the key_class option", pickle.dumps(SK(1, 2), protocol=5),
           "pickle_global", "hyper_parallel.distributed_data.schema.SampleKey",
           key_class="other.module.Key")
    Other = hi.make_key_class("interop_tests.keys.OtherKey")
    for p in (2, 5):
        refuse(suite, "another dataclass under the default option [protocol %d]" % p,
               pickle.dumps(Other(1, 2), protocol=p), "pickle_global",
               "interop_tests.keys.OtherKey")
    # NEWOBJ with arguments
    data = pickle.dumps(SK(1, 2), protocol=2).replace(b")\x81", b"K\x01\x85\x81", 1)
    refuse(suite, "key class NEWOBJ with arguments", data, ("pickle_reduce", "pickle_global"),
           "SampleKey")
    described_key_classes(suite)


def described_key_classes(suite):
    """SPEC 1.4: a described key class accepts exactly its pattern: the other state form,
    missing, extra or other fields, and the wrong number of values are refused."""
    Shard = hi.make_key_class("interop_tests.refused.ShardKey",
                              fields=("shard", "sample_id", "position"))
    Slotted = hi.make_key_class("interop_tests.refused.Slotted", fields=("a", "b", "c"),
                                slots=True)
    shard, slotted = hi.key_request(Shard), hi.key_request(Slotted)
    for p in (2, 5):
        dict_state = pickle.dumps(Shard("s", 1, 2), protocol=p)
        list_state = pickle.dumps(Slotted(1, 2, 3), protocol=p)
        refuse(suite, "dict state read as the values state [protocol %d]" % p, dict_state,
               "pickle_reduce", ("must be the list of its 3 field values", "{'shard': 's'"),
               **dict(shard, key_state="values"))
        refuse(suite, "values state read as the dict state [protocol %d]" % p, list_state,
               "pickle_reduce", ("must be a dict of exactly 'a', 'b' and 'c'", "[1, 2, 3]"),
               **dict(slotted, key_state="dict"))
        refuse(suite, "dict state with a field the description lacks [protocol %d]" % p,
               dict_state, "pickle_reduce", "'shard'",
               **dict(shard, key_fields=["sample_id", "position"]))
        refuse(suite, "dict state without a described field [protocol %d]" % p, dict_state,
               "pickle_reduce", "'extra'",
               **dict(shard, key_fields=["shard", "sample_id", "position", "extra"]))
        refuse(suite, "dict state with another field name [protocol %d]" % p, dict_state,
               "pickle_reduce", "'part'", **dict(shard, key_fields=["part", "sample_id",
                                                                    "position"]))
        refuse(suite, "values state with fewer values than fields [protocol %d]" % p,
               list_state, "pickle_reduce", "4 field values",
               **dict(slotted, key_fields=["a", "b", "c", "d"]))
        refuse(suite, "values state with more values than fields [protocol %d]" % p,
               list_state, "pickle_reduce", "2 field values",
               **dict(slotted, key_fields=["a", "b"]))
    # BUILD with a tuple of the values (not what CPython writes)
    list_p2 = pickle.dumps(Slotted(1, 2, 3), protocol=2)
    data = list_p2.replace(b"]q\x02(K\x01K\x02K\x03e", b"K\x01K\x02K\x03\x87", 1)
    assert data != list_p2, "test bug: the list state was not found in %s" % list_p2.hex()
    refuse(suite, "values state as a tuple", data, "pickle_reduce", "got (1, 2, 3)", **slotted)
    # a non-frozen slots dataclass pickles (None, {fields}): neither SPEC 1.4 state
    @dataclasses.dataclass(slots=True)
    class Mutable:
        a: object
        b: object
        c: object
    Mutable.__module__, Mutable.__qualname__ = "interop_tests.refused", "Mutable"
    sys.modules["interop_tests.refused"].Mutable = Mutable
    data = pickle.dumps(Mutable(1, 2, 3), protocol=5)
    for state in ("dict", "values"):
        refuse(suite, "a non-frozen slots dataclass (%s state)" % state, data, "pickle_reduce",
               "got (None, {'a': 1", key_class="interop_tests.refused.Mutable",
               key_fields=["a", "b", "c"], key_state=state)
    # invalid descriptions are refused before reading
    refuse(suite, "key_fields naming a field twice", list_state, "invalid_argument",
           "names field 'a' twice", **dict(slotted, key_fields=["a", "b", "a"]))
    refuse(suite, "key_state neither dict nor values", list_state, "invalid_argument",
           "'slots'", **dict(slotted, key_state="slots"))


def main():
    hpref = hi.main_args()
    suite = hi.Suite("interop refusals", hpref)
    code_running_globals(suite)
    wrong_reduce_shapes(suite)
    opcodes_refused(suite)
    int_range(suite)
    invalid_utf8(suite)
    structure(suite)
    duplicate_keys(suite)
    cycles_and_limits(suite)
    key_class(suite)
    suite.finish()


if __name__ == "__main__":
    main()
