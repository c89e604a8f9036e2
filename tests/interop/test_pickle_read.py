"""CPython -> us (SPEC 2.3): what `pickle.dumps(v, protocol=2..5)` writes for Values is
read by `pickle_read` to the structurally equal Value (type-exact: bytes vs bytearray,
tuple vs list, bool vs int, floats by bit pattern, dict order).

Usage: test_pickle_read.py <hpref> [all|random|scalars|bulk]
"""

import pickle
import random
import sys

import hpref_interop as hi
import values

PROTOCOLS = (2, 3, 4, 5)


def picklers():
    """The C pickler and the pure-Python one (they differ in framing details)."""
    return (("C", pickle.dumps), ("py", pickle._dumps))


def ask_read(suite, label, value, data, request_extra=None, expected=None):
    # our own sanity: CPython reads it back to the value we meant
    back = pickle.loads(data)
    d = hi.diff(value, back, nan_payload=True)
    if d:
        raise SystemExit("test bug: CPython round trip of %s differs: %s" % (label, d))
    req = {"op": "pickle_read", "pickle_hex": data.hex()}
    if request_extra:
        req.update(request_extra)
    suite.ask(label, req, hi.expect_value(value if expected is None else expected,
                                          hi.describe_pickle(data)))


def ask_all_protocols(suite, label, value, expected=None, need_ops=None, protocols=PROTOCOLS,
                      request_extra=None):
    for p in protocols:
        for pname, dumps in picklers():
            data = dumps(value, protocol=p)
            if need_ops:
                names = {n for n, _, _ in hi.opcodes(data)}
                for op, protos in need_ops.items():
                    if p in protos and op not in names:
                        raise SystemExit("test bug: %s at protocol %d (%s) has no %s" %
                                         (label, p, pname, op))
            ask_read(suite, "%s [protocol %d, %s pickler]" % (label, p, pname), value, data,
                     request_extra=request_extra, expected=expected)


def random_values(suite):
    rng = random.Random(20240601)
    for i in range(250):
        v = values.rand_value(rng, max_depth=rng.choice((1, 2, 3, 4, 5)))
        ask_all_protocols(suite, "random value #%d" % i, v)
    # dicts with many kinds of hashable keys
    for i in range(60):
        d = {}
        for _ in range(rng.randrange(1, 12)):
            d[values.rand_key(rng)] = values.rand_value(rng, max_depth=2)
        ask_all_protocols(suite, "random dict #%d" % i, d)


def scalars(suite):
    for n in values.INT_EDGES:
        ask_all_protocols(suite, "int %d" % n, n)
    ask_all_protocols(suite, "int edges in a list", list(values.INT_EDGES))
    for x in values.FLOAT_EDGES:
        ask_all_protocols(suite, "float %r" % x, x)
    ask_all_protocols(suite, "float edges in a tuple", tuple(values.FLOAT_EDGES))
    for s in values.STR_EDGES:
        ask_all_protocols(suite, "str %s" % hi.short(s, 40), s)
    ask_all_protocols(suite, "str edges in a list", list(values.STR_EDGES))
    for b in values.BYTES_EDGES:
        ask_all_protocols(suite, "bytes %s" % hi.short(b, 40), b)
        ask_all_protocols(suite, "bytearray %s" % hi.short(b, 40), bytearray(b))
    ask_all_protocols(suite, "bytes and bytearray, empty and not, in a list",
                      [b"", bytearray(), b"x", bytearray(b"x"), bytes(range(256)),
                       bytearray(range(256))])
    ask_all_protocols(suite, "empty bytes (protocol 2: __builtin__.bytes())", b"",
                      need_ops={"GLOBAL": (2,), "REDUCE": (2,)})
    ask_all_protocols(suite, "bytes (protocol 2: _codecs.encode(str, 'latin1'))", b"\x00\xff",
                      need_ops={"GLOBAL": (2,), "REDUCE": (2,), "SHORT_BINBYTES": (3, 4, 5)})
    ask_all_protocols(suite, "bytearray (protocols 2-4: bytearray(bytes))", bytearray(b"\x01\x80"),
                      need_ops={"GLOBAL": (2, 3), "STACK_GLOBAL": (4,), "REDUCE": (2, 3, 4),
                                "BYTEARRAY8": (5,)})
    ask_all_protocols(suite, "empty bytearray (protocols 2-4: bytearray())", bytearray(),
                      need_ops={"REDUCE": (2, 3, 4), "BYTEARRAY8": (5,)})
    ask_all_protocols(suite, "None, bools, ints: type-exact",
                      [None, True, False, 1, 0, 1.0, 0.0, (True,), {True: False, 2: 0}])
    ask_all_protocols(suite, "empty containers", [(), [], {}, ((),), [[]], {(): {}}])
    ask_all_protocols(suite, "tuples of 0..5 elements",
                      [(), (1,), (1, 2), (1, 2, 3), (1, 2, 3, 4), (1, 2, 3, 4, 5)])


def memo_sharing(suite):
    shared_list = [1, "two", 3.0]
    shared_dict = {"k": [None], 5: b"five"}
    shared_str = "a shared string"
    shared_bytes = b"shared bytes"
    shared_ba = bytearray(b"shared bytearray")
    shared_tuple = (shared_list, "t")
    v = [shared_list, shared_list, shared_dict, shared_dict, shared_str, shared_str,
         shared_bytes, shared_bytes, shared_ba, shared_ba, shared_tuple, shared_tuple,
         {"a": shared_list, "b": shared_dict, "c": shared_tuple}, (shared_str, shared_list)]
    ask_all_protocols(suite, "memo sharing (the same objects referenced twice)", v,
                      need_ops={"BINGET": PROTOCOLS})
    # a shared key string (dict keys fetched from the memo)
    key = "a key"
    ask_all_protocols(suite, "shared dict key strings",
                      [{key: 1}, {key: 2}, {(key, 1): key}], need_ops={"BINGET": PROTOCOLS})
    # more than 256 memo entries: BINPUT becomes LONG_BINPUT, BINGET becomes LONG_BINGET
    strings = ["s%d" % i for i in range(400)]
    late = ["late", "list"]
    ask_all_protocols(suite, "LONG_BINPUT / LONG_BINGET (memo past 256 entries)",
                      [strings, late, late, strings[300], strings[300]],
                      need_ops={"LONG_BINPUT": (2, 3), "LONG_BINGET": PROTOCOLS})
    # nested sharing: each level refers twice to the level below (small pickle, 2**12 leaves)
    x = ["leaf"]
    for _ in range(12):
        x = [x, x]
    ask_all_protocols(suite, "nested sharing 2**12 leaves", x, need_ops={"BINGET": PROTOCOLS})


def frames_and_batches(suite):
    big_list = ["%05d-" % i + "x" * 90 for i in range(2000)]   # ~200 KB: several frames
    for p in (4, 5):
        data = pickle.dumps(big_list, protocol=p)
        frames = sum(1 for n, _, _ in hi.opcodes(data) if n == "FRAME")
        if frames < 2:
            raise SystemExit("test bug: only %d FRAME opcodes at protocol %d" % (frames, p))
    ask_all_protocols(suite, "list of 2000 strings > 64 KiB (several FRAMEs)", big_list,
                      need_ops={"FRAME": (4, 5), "APPENDS": PROTOCOLS})
    big_bytes = bytes(range(256)) * 400   # 100 KiB: written outside frames
    ask_all_protocols(suite, "100 KiB bytes (BINBYTES outside a frame)", big_bytes)
    ask_all_protocols(suite, "100 KiB bytearray", bytearray(big_bytes))
    ask_all_protocols(suite, "80 KiB str (BINUNICODE)", "é\U0001f600" * 13000,
                      need_ops={"BINUNICODE": PROTOCOLS})
    ask_all_protocols(suite, "small values around big ones",
                      [1, "x" * 70000, 2, b"y" * 70000, {"z": "w" * 66000}, (3, 4)],
                      need_ops={"FRAME": (4, 5)})
    for n in (1, 2, 999, 1000, 1001, 2000, 2001, 2500):
        ask_all_protocols(suite, "list of %d ints" % n, list(range(n)))
        ask_all_protocols(suite, "dict of %d entries" % n,
                          {("k%d" % i if i % 2 else i): i * 0.5 for i in range(n)})
    ask_all_protocols(suite, "list of 3000 (APPENDS x3)", [None] * 3000,
                      need_ops={"APPENDS": PROTOCOLS})
    ask_all_protocols(suite, "dict of 2500 (SETITEMS batches)", {i: str(i) for i in range(2500)},
                      need_ops={"SETITEMS": PROTOCOLS})
    ask_all_protocols(suite, "tuple of 1500 (MARK ... TUPLE)", tuple(range(1500)),
                      need_ops={"TUPLE": PROTOCOLS})


def key_class(suite):
    SK = hi.SampleKey
    cases = [
        ("SampleKey(3, 4)", SK(3, 4), (3, 4)),
        ("SampleKey('img-7', 0)", SK("img-7", 0), ("img-7", 0)),
        ("SampleKey(2**63-1, 2**63-1)", SK(2**63 - 1, 2**63 - 1), (2**63 - 1, 2**63 - 1)),
        ("tuple of SampleKeys (class and field names fetched from the memo)",
         (SK(1, 0), SK(1, 1), SK("a", 2)), ((1, 0), (1, 1), ("a", 2))),
        ("SampleKey items as a legacy tuple of pairs",
         ((SK(0, 0), {"x": 1}), (SK(0, 1), [2.5])), (((0, 0), {"x": 1}), ((0, 1), [2.5]))),
        ("SampleKeys as dict keys", {SK(5, 1): "a", SK("b", 2): "b"}, {(5, 1): "a", ("b", 2): "b"}),
    ]
    for label, v, expected in cases:
        ask_all_protocols(suite, "key class: " + label, v, expected=expected,
                          need_ops={"GLOBAL": (2, 3), "STACK_GLOBAL": (4, 5), "NEWOBJ": PROTOCOLS,
                                    "BUILD": PROTOCOLS})
    # the reader option names another class
    Other = hi.make_key_class("interop_tests.keys.OtherKey")
    for p in PROTOCOLS:
        data = pickle.dumps((Other(9, 1), Other("q", 0)), protocol=p)
        suite.ask("key class option key_class=interop_tests.keys.OtherKey [protocol %d]" % p,
                  {"op": "pickle_read", "pickle_hex": data.hex(),
                   "key_class": "interop_tests.keys.OtherKey"},
                  hi.expect_value(((9, 1), ("q", 0)), hi.describe_pickle(data)))
    described_key_classes(suite)


def described_key_classes(suite):
    """SPEC 1.4 key classes described by name, fields and state: CPython's pickles of a
    frozen dataclass with other fields (dict state) and of frozen slots=True dataclasses
    (values state: BUILD with the list of field values) read as the tuple of the field
    values in the description's field order."""
    Shard = hi.make_key_class("interop_tests.keys.ShardKey", fields=("shard", "sample_id",
                                                                      "position"))
    Slotted = hi.make_key_class("interop_tests.keys.SlottedKey", slots=True)
    Slotted3 = hi.make_key_class("interop_tests.keys.Slotted3", fields=("a", "b", "c"),
                                 slots=True)
    One = hi.make_key_class("interop_tests.keys.OneField", fields=("id",), slots=True)
    build = {"GLOBAL": (2, 3), "STACK_GLOBAL": (4, 5), "NEWOBJ": PROTOCOLS, "BUILD": PROTOCOLS}
    values_state = dict(build, EMPTY_LIST=PROTOCOLS)
    cases = [
        (Shard, build, [Shard("s0", 7, 1), Shard("s1", "doc", 2), Shard("", (1, "t"), -3)]),
        (Slotted, values_state, [Slotted(3, 4), Slotted("img-7", 0), Slotted(2**63 - 1, None)]),
        (Slotted3, values_state, [Slotted3(1, "x", None), Slotted3(b"k", 2.5, (True, "t"))]),
        (One, values_state, [One(5), One("only")]),
    ]
    for cls, need_ops, keys in cases:
        req = hi.key_request(cls)
        expected_keys = [hi.key_values(k) for k in keys]
        label = "key class %s %s" % (req["key_class"].rpartition(".")[2], req["key_state"])
        ask_all_protocols(suite, label + ": one key", keys[0], expected=expected_keys[0],
                          need_ops=need_ops, request_extra=req)
        # several keys: the class (and field names) fetched from the memo; as dict keys
        ask_all_protocols(suite, label + ": a tuple of keys", tuple(keys),
                          expected=tuple(expected_keys), request_extra=req)
        ask_all_protocols(suite, label + ": items", tuple((k, {"v": i}) for i, k in enumerate(keys)),
                          expected=tuple((e, {"v": i}) for i, e in enumerate(expected_keys)),
                          request_extra=req)
    # the key is the tuple in the description's field order, whatever the dict's order
    req = dict(hi.key_request(Shard), key_fields=["position", "shard", "sample_id"])
    ask_all_protocols(suite, "key class ShardKey described in another field order",
                      Shard("s0", 7, 1), expected=(1, "s0", 7), request_extra=req)


def main():
    hpref = sys.argv[1]
    part = sys.argv[2] if len(sys.argv) > 2 else "all"
    suite = hi.Suite("interop pickle_read (%s)" % part, hpref)
    if part in ("all", "random"):
        random_values(suite)
    if part in ("all", "scalars"):
        scalars(suite)
        memo_sharing(suite)
        key_class(suite)
    if part in ("all", "bulk"):
        frames_and_batches(suite)
    suite.finish()


if __name__ == "__main__":
    main()
