"""Us -> CPython (SPEC 2.3 "Writer bytes (golden)"): `pickle_write` output is read by
`pickle.loads` to the structurally equal Value, and its bytes are exactly the golden form:
PROTO 5, no FRAME, the opcode choice rules of SPEC 2.3, and its memo (revised by issue 15):
each distinct str used as a mapping key, and the key-class global, is followed by MEMOIZE
at its first occurrence and fetched with BINGET (index < 256) or LONG_BINGET after; nothing
else is memoized. Checks of our bytes, each independent of the others:
  - `golden`: a transcription of the SPEC 2.3 rules, memo included, byte for byte;
  - the memo audit (pickletools): MEMOIZE only right after a str or the STACK_GLOBAL of a
    class, no entry twice, no PUT/BINPUT/GET, BINGET exactly for indices < 256; and with
    the memo expanded (each fetch replaced by the bytes it stands for, MEMOIZE dropped) the
    bytes are CPython's pure-Python protocol-5 pickler in fast mode (no memo), FRAMEs cut.
The transcription is itself checked against `spec_pickle`: CPython's pure-Python pickler
in fast mode taught the SPEC's memo rule (mapping-key strs and classes only) through its
own `save`/`save_global`/`get`, so its batching and opcode choice stay CPython's.

Usage: test_pickle_write.py <hpref>
"""

import io
import math
import pickle
import random
import struct

import hpref_interop as hi
import values

STR_OPS = {"SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8"}


class MappingKey:
    """A mapping key written outside a dict: the key of a framed __hp_mapping__ node's
    (key, child) pair (SPEC 2.2), a user mapping's key although the pickle holds it in a
    tuple. Both oracles write it as the key itself, through the memo when it is a str."""

    def __init__(self, key):
        self.key = key

    def __repr__(self):
        return "MappingKey(%r)" % (self.key,)


def mark_key(k):
    """What a framed schema holds for the mapping key k, for the oracles."""
    return MappingKey(k) if type(k) is str else k


def golden(v):
    """SPEC 2.3 writer bytes, transcribed (one memo for the whole pickle)."""
    return b"\x80\x05" + _golden(v, {}) + b"."


def _memo_key(k, memo):
    """A mapping key: a str through the memo (MEMOIZE first, BINGET/LONG_BINGET after)."""
    if type(k) is not str:
        return _golden(k, memo)
    if k in memo:
        i = memo[k]
        return b"h" + bytes([i]) if i < 256 else b"j" + struct.pack("<I", i)
    memo[k] = len(memo)
    return _golden(k, memo) + b"\x94"


def _golden(v, memo):
    if isinstance(v, MappingKey):
        return _memo_key(v.key, memo)
    if v is None:
        return b"N"
    if v is True:
        return b"\x88"
    if v is False:
        return b"\x89"
    if isinstance(v, int):
        if 0 <= v <= 255:
            return b"K" + bytes([v])
        if 256 <= v <= 65535:
            return b"M" + struct.pack("<H", v)
        if -2**31 <= v < 2**31:
            return b"J" + struct.pack("<i", v)
        n = 1
        while not -2**(8 * n - 1) <= v < 2**(8 * n - 1):
            n += 1
        return b"\x8a" + bytes([n]) + v.to_bytes(n, "little", signed=True)
    if isinstance(v, float):
        return b"G" + struct.pack(">d", v)
    if isinstance(v, str):
        b = v.encode("utf-8")
        if len(b) < 256:
            return b"\x8c" + bytes([len(b)]) + b
        if len(b) < 2**32:
            return b"X" + struct.pack("<I", len(b)) + b
        return b"\x8d" + struct.pack("<Q", len(b)) + b
    if isinstance(v, bytes):
        if len(v) < 256:
            return b"C" + bytes([len(v)]) + v
        if len(v) < 2**32:
            return b"B" + struct.pack("<I", len(v)) + v
        return b"\x8e" + struct.pack("<Q", len(v)) + v
    if isinstance(v, bytearray):
        return b"\x96" + struct.pack("<Q", len(v)) + bytes(v)
    if isinstance(v, tuple):
        body = b"".join(_golden(e, memo) for e in v)
        if len(v) == 0:
            return b")"
        if len(v) <= 3:
            return body + b"\x85\x86\x87"[len(v) - 1:len(v)]
        return b"(" + body + b"t"
    if isinstance(v, list):
        out = b"]"
        for i in range(0, len(v), 1000):
            batch = v[i:i + 1000]
            if len(batch) == 1:
                out += _golden(batch[0], memo) + b"a"
            else:
                out += b"(" + b"".join(_golden(e, memo) for e in batch) + b"e"
        return out
    if isinstance(v, dict):
        entries = list(v.items())
        out = b"}"
        for i in range(0, len(entries), 1000):
            batch = entries[i:i + 1000]
            if len(batch) == 1:
                out += _memo_key(batch[0][0], memo) + _golden(batch[0][1], memo) + b"s"
            else:
                out += b"(" + b"".join(_memo_key(k, memo) + _golden(x, memo)
                                       for k, x in batch) + b"u"
        return out
    raise TypeError(repr(v))


def _cut_frames(data):
    out = bytearray()
    ops = hi.opcodes(data)
    for i, (name, _, pos) in enumerate(ops):
        end = ops[i + 1][2] if i + 1 < len(ops) else len(data)
        if name != "FRAME":
            out += data[pos:end]
    return bytes(out)


def cpython_fast(v):
    """CPython's pure-Python protocol-5 pickler (pickle._Pickler) without memo (fast mode),
    FRAME opcodes cut out. (The C pickler writes a final batch of one list item as MARK
    item APPENDS; SPEC 2.3 and the pure-Python pickler write item APPEND.) A MappingKey is
    written as its key."""
    f = io.BytesIO()
    p = _FastPickler(f, protocol=5)
    p.fast = True
    p.dump(v)
    return _cut_frames(f.getvalue())


class _FastPickler(pickle._Pickler):
    def save(self, obj, save_persistent_id=True):
        if isinstance(obj, MappingKey):
            obj = obj.key
        super().save(obj, save_persistent_id)


class _SpecPickler(pickle._Pickler):
    """Fast mode (CPython memoizes nothing) plus the SPEC 2.3 memo: a str dict key (or a
    MappingKey's str) and a class (the key-class global) get MEMOIZE after their first
    writing and CPython's own `get` (BINGET below 256, LONG_BINGET from 256) after."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fast = True
        self.spec_memo = {}
        self.plain_keys = False  # the next dict is a BUILD state: keys outside the memo

    def _memo_or_write(self, ident, write):
        if ident in self.spec_memo:
            self.write(self.get(self.spec_memo[ident]))
            return
        write()
        self.write(pickle.MEMOIZE)
        self.spec_memo[ident] = len(self.spec_memo)

    def save(self, obj, save_persistent_id=True):
        if isinstance(obj, _StateDict):
            self.plain_keys = True
            super().save(obj.state, save_persistent_id)
            return
        if isinstance(obj, MappingKey):
            if type(obj.key) is str:
                self._memo_or_write(("str", obj.key), lambda: super(_SpecPickler, self).save(obj.key))
            else:
                super().save(obj.key, save_persistent_id)
            return
        super().save(obj, save_persistent_id)

    def _batch_setitems(self, items, *rest):
        plain, self.plain_keys = self.plain_keys, False
        super()._batch_setitems(items if plain else ((mark_key(k), x) for k, x in items), *rest)

    def save_reduce(self, func, args, state=None, *rest, **kwargs):
        # The state BUILD takes (a dataclass's __dict__) is not a mapping Value: its keys,
        # the field names, are not memoized (our reading of SPEC 2.3, docs/wire-format.md).
        if type(state) is dict:
            state = _StateDict(state)
        super().save_reduce(func, args, state, *rest, **kwargs)

    def save_global(self, obj, name=None):
        ident = ("global", obj.__module__, name or obj.__qualname__)
        self._memo_or_write(ident, lambda: super(_SpecPickler, self).save_global(obj, name))


class _StateDict:
    def __init__(self, state):
        self.state = state


def spec_pickle(v):
    """CPython's pure-Python protocol-5 pickler with the SPEC 2.3 memo rule, FRAMEs cut."""
    f = io.BytesIO()
    _SpecPickler(f, protocol=5).dump(v)
    return _cut_frames(f.getvalue())


def memo_audit(data):
    """None, or what is wrong with the memo opcodes of our pickle `data` (SPEC 2.3): MEMOIZE
    only right after a str or a class's STACK_GLOBAL, no entry made twice, no other store
    or fetch opcode, BINGET exactly for the indices below 256."""
    ops = hi.opcodes(data)
    memo = []
    for i, (name, arg, pos) in enumerate(ops):
        if name in ("PUT", "BINPUT", "LONG_BINPUT", "GET"):
            return "%s at byte %d (the writer stores with MEMOIZE only)" % (name, pos)
        if name == "MEMOIZE":
            prev = ops[i - 1]
            if prev[0] in STR_OPS:
                entry = ("str", prev[1])
            elif prev[0] == "STACK_GLOBAL" and ops[i - 2][0] in STR_OPS and ops[i - 3][0] in STR_OPS:
                entry = ("global", ops[i - 3][1], ops[i - 2][1])
            else:
                return "MEMOIZE after %s at byte %d (only a str or a class is memoized)" % (
                    prev[0], pos)
            if entry in memo:
                return "%r memoized twice (second at byte %d)" % (entry, pos)
            memo.append(entry)
        if name in ("BINGET", "LONG_BINGET"):
            if arg >= len(memo):
                return "%s %d at byte %d fetches an entry never made" % (name, arg, pos)
            if (name == "BINGET") != (arg < 256):
                return "memo index %d written with %s at byte %d" % (arg, name, pos)
    return None


def expand_memo(data):
    """`data` with every BINGET/LONG_BINGET replaced by the bytes of the object it fetches
    (a str opcode, or module, name, STACK_GLOBAL) and MEMOIZE dropped: our pickle without
    its memo, to compare with CPython's fast-mode pickle. Assumes memo_audit passed."""
    ops = hi.opcodes(data)
    spans, entries, out = [], [], bytearray()
    for i, (name, arg, pos) in enumerate(ops):
        end = ops[i + 1][2] if i + 1 < len(ops) else len(data)
        spans.append((pos, end))
        if name == "MEMOIZE":
            first = i - 1 if ops[i - 1][0] in STR_OPS else i - 3
            entries.append(bytes(data[spans[first][0]:spans[i - 1][1]]))
        elif name in ("BINGET", "LONG_BINGET"):
            out += entries[arg]
        else:
            out += data[pos:end]
    return bytes(out)


def has_nan(v):
    if isinstance(v, float):
        return math.isnan(v)
    if isinstance(v, (tuple, list)):
        return any(has_nan(e) for e in v)
    if isinstance(v, dict):
        return any(has_nan(k) or has_nan(x) for k, x in v.items())
    return False


def check_write(value):
    expected = golden(value)
    fast = cpython_fast(value)
    exact = not has_nan(value)   # NaN payloads do not survive JSON

    def check(a):
        if not a.get("ok"):
            return "refused (%s: %s); value %s" % (a.get("kind"), a.get("error"), hi.short(value))
        data = bytes.fromhex(a["pickle_hex"])
        what = "value %s; our pickle %s" % (hi.short(value, 200), hi.short_hex(data, 300))
        try:
            back = pickle.loads(data)
        except Exception as e:
            return "pickle.loads failed: %s: %s; %s" % (type(e).__name__, e, what)
        d = hi.diff(value, back)
        if d:
            return "pickle.loads gives a different value: %s; %s" % (d, what)
        if not data.startswith(b"\x80\x05"):
            return "does not start with PROTO 5; %s" % what
        ops = hi.opcodes(data)
        names = [n for n, _, _ in ops]
        if "FRAME" in names:
            return "has a FRAME opcode; %s" % what
        if ops[-1][2] != len(data) - 1 or names[-1] != "STOP":
            return "STOP is not the last byte; %s" % what
        problem = memo_audit(data)
        if problem:
            return "memo: %s; %s" % (problem, what)
        if exact and expand_memo(data) != fast:
            return ("with its memo expanded, not CPython's fast-mode pickle %s; %s" %
                    (hi.short_hex(fast, 300), what))
        if exact and data != expected:
            # name the first differing opcode
            exp_ops = hi.opcodes(expected)
            for i, (o, e) in enumerate(zip(ops, exp_ops)):
                if (o[0], o[1]) != (e[0], e[1]) or o[2] != e[2]:
                    return ("bytes differ from SPEC 2.3 golden form at opcode #%d (byte %d): "
                            "ours %s %s, golden %s %s; %s; golden %s" %
                            (i, o[2], o[0], hi.short(o[1], 60), e[0], hi.short(e[1], 60), what,
                             hi.short_hex(expected, 300)))
            return "bytes differ from SPEC 2.3 golden form (lengths %d vs %d); %s" % (
                len(data), len(expected), what)
        if not exact:
            exp_names = [n for n, _, _ in hi.opcodes(expected)]
            if names != exp_names:
                return "opcodes differ from SPEC 2.3 golden form: %s vs %s; %s" % (
                    hi.short(names, 300), hi.short(exp_names, 300), what)
        return None
    return check


def memo_cases(rng):
    """Values whose mappings repeat str keys (SPEC 2.3 memo): nested and sibling dicts,
    keys equal to values or inside tuple keys, long keys, and more than 256 entries."""
    cases = [
        [{"a": 1, "b": {"a": "a", ("a", 1): "b", 1: "a"}}, {"b": 2, "a": None}],
        ({"text": "text"}, "text", ["text", {"text": {"text": ()}}]),
        [{"k%d" % i: i for i in range(300)}, {"k0": 0, "k255": 1, "k256": 2, "k299": 3}],
        {"x" * 300: 1, "y": {"x" * 300: 2, "é" * 200: 3}, "é" * 200: 4},
        [{str(i): None for i in range(1001)}, {"999": 1, "1000": 2}],
        [{"": 0}, {"": 1, b"": 2, 0: 3}],
    ]
    for _ in range(40):
        pool = [values.rand_str(rng)[:12] for _ in range(rng.randrange(1, 6))] + [1, None, ("t",)]
        def rand_dict(depth):
            d = {}
            for _ in range(rng.randrange(0, 5)):
                k = rng.choice(pool)
                d[k] = rand_dict(depth + 1) if depth < 3 and rng.random() < 0.3 else \
                    values.rand_scalar(rng, with_binary=False)
            return d
        cases.append([rand_dict(0) for _ in range(rng.randrange(1, 5))])
    return cases


def main():
    hpref = hi.main_args()
    suite = hi.Suite("interop pickle_write", hpref)

    cases = []
    rng = random.Random(20240602)
    for _ in range(300):
        cases.append(values.rand_value(rng, max_depth=rng.choice((1, 2, 3, 4))))
    for _ in range(40):
        cases.append({values.rand_key(rng): values.rand_value(rng, max_depth=2)
                      for _ in range(rng.randrange(1, 10))})
    cases += list(values.INT_EDGES) + list(values.FLOAT_EDGES) + list(values.STR_EDGES)
    cases += list(values.BYTES_EDGES) + [bytearray(b) for b in values.BYTES_EDGES]
    cases += [None, True, False, [True, 1, 1.0, False, 0, 0.0], {True: 1, None: 2, 0.5: 3}]
    cases += [(), (1,), (1, 2), (1, 2, 3), (1, 2, 3, 4), tuple(range(1500)), ((), [], {})]
    cases += [[x for x in range(n)] for n in (0, 1, 2, 999, 1000, 1001, 1002, 2000, 2001, 3500)]
    cases += [{i: -i for i in range(n)} for n in (0, 1, 2, 999, 1000, 1001, 1002, 2000, 2001)]
    cases += [{("t", i): [i] for i in range(1001)}]
    cases += [b"z" * 65536, bytearray(b"q" * 70000), "w" * 70000, "é" * 128, "é" * 127,
              b"\x00" * 255, b"\x00" * 256]
    cases += [-2**31 - 1, -2**31, 2**31 - 1, 2**31, 2**63 - 1, -2**63, 255, 256, 65535, 65536,
              -1, -256, 0x7fff, 0x8000, 0xffffff, 0x1000000]
    cases += memo_cases(rng)

    for v in cases:
        suite.ask("pickle_write %s" % hi.short(v, 80), {"op": "pickle_write", "value": hi.to_json(v)},
                  check_write(v))

    # The two oracles must agree (checked here, without hpref, so a wrong oracle cannot hide
    # a wrong writer): our transcription of SPEC 2.3 is CPython's pure-Python pickler taught
    # the SPEC memo rule, and with its memo expanded CPython's fast-mode pickle.
    for v in cases:
        if has_nan(v):
            continue
        g, c = golden(v), spec_pickle(v)
        suite.expect("oracle agreement %s" % hi.short(v, 80), g == c,
                     "SPEC 2.3 transcription %s != CPython pickle with the SPEC memo %s" %
                     (hi.short_hex(g, 200), hi.short_hex(c, 200)))
        f = cpython_fast(v)
        suite.expect("oracle agreement, memo expanded %s" % hi.short(v, 80),
                     memo_audit(g) is None and expand_memo(g) == f,
                     "SPEC 2.3 transcription %s (audit: %s) expanded != CPython fast pickle %s" %
                     (hi.short_hex(g, 200), memo_audit(g), hi.short_hex(f, 200)))
    suite.finish()


if __name__ == "__main__":
    main()
