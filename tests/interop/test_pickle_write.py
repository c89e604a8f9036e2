"""Us -> CPython (SPEC 2.3 "Writer bytes (golden)"): `pickle_write` output is read by
`pickle.loads` to the structurally equal Value, and its bytes are exactly the golden form:
PROTO 5, no FRAME, no memo opcodes, the opcode choice rules of SPEC 2.3. Two oracles for
the bytes: a transcription of the SPEC 2.3 rules (`golden`), and CPython's pure-Python
protocol-5 pickler in fast mode (no memo) with its FRAME opcodes cut out.

Usage: test_pickle_write.py <hpref>
"""

import io
import math
import pickle
import random
import struct

import hpref_interop as hi
import values

MEMO_OPS = {"MEMOIZE", "PUT", "BINPUT", "LONG_BINPUT", "GET", "BINGET", "LONG_BINGET"}


def golden(v):
    """SPEC 2.3 writer bytes, transcribed."""
    return b"\x80\x05" + _golden(v) + b"."


def _golden(v):
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
        body = b"".join(_golden(e) for e in v)
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
                out += _golden(batch[0]) + b"a"
            else:
                out += b"(" + b"".join(_golden(e) for e in batch) + b"e"
        return out
    if isinstance(v, dict):
        entries = list(v.items())
        out = b"}"
        for i in range(0, len(entries), 1000):
            batch = entries[i:i + 1000]
            if len(batch) == 1:
                out += _golden(batch[0][0]) + _golden(batch[0][1]) + b"s"
            else:
                out += b"(" + b"".join(_golden(k) + _golden(x) for k, x in batch) + b"u"
        return out
    raise TypeError(repr(v))


def cpython_fast(v):
    """CPython's pure-Python protocol-5 pickler (pickle._Pickler) without memo (fast mode),
    FRAME opcodes cut out. (The C pickler writes a final batch of one list item as MARK
    item APPENDS; SPEC 2.3 and the pure-Python pickler write item APPEND.)"""
    f = io.BytesIO()
    p = pickle._Pickler(f, protocol=5)
    p.fast = True
    p.dump(v)
    data = f.getvalue()
    out = bytearray()
    ops = hi.opcodes(data)
    for i, (name, _, pos) in enumerate(ops):
        end = ops[i + 1][2] if i + 1 < len(ops) else len(data)
        if name != "FRAME":
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
        memo = sorted(set(names) & MEMO_OPS)
        if memo:
            return "has memo opcodes %s; %s" % (memo, what)
        if ops[-1][2] != len(data) - 1 or names[-1] != "STOP":
            return "STOP is not the last byte; %s" % what
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

    for v in cases:
        suite.ask("pickle_write %s" % hi.short(v, 80), {"op": "pickle_write", "value": hi.to_json(v)},
                  check_write(v))

    # Our transcription of SPEC 2.3 must agree with CPython's fast-mode protocol-5 pickler
    # (checked here, without hpref, so a wrong oracle cannot hide a wrong writer).
    for v in cases:
        if has_nan(v):
            continue
        g, c = golden(v), cpython_fast(v)
        suite.expect("oracle agreement %s" % hi.short(v, 80), g == c,
                     "SPEC 2.3 transcription %s != CPython fast pickle %s" %
                     (hi.short_hex(g, 200), hi.short_hex(c, 200)))
    suite.finish()


if __name__ == "__main__":
    main()
