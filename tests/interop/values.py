"""Seeded generators of Values (SPEC 1.1) for the interop tests: the scalars at their
boundaries and random trees of tuples, lists and dicts with hashable keys."""

import struct

INT_EDGES = [
    0, 1, -1, 127, 128, 255, 256, 257, 65535, 65536, 65537, -255, -256, -257, -65535, -65536,
    2**31 - 1, 2**31, -2**31, -2**31 - 1, 2**32 - 1, 2**32, -2**32, 2**40, -2**40,
    2**55 - 1, 2**56, -2**56, 2**62, 2**63 - 1, -2**63, -2**63 + 1, -2**63 // 3,
    0x7f, 0x80, 0x7fff, 0x8000, 0x7fffff, 0x800000, 2**47, -2**47 - 1,
]

FLOAT_EDGES = [
    0.0, -0.0, 1.0, -1.5, 0.1, 1e300, -1e-300, float("inf"), float("-inf"), float("nan"),
    5e-324, -5e-324, 2.2250738585072009e-308, 2.2250738585072014e-308, 1.7976931348623157e308,
    -1.7976931348623157e308, 2.0**53, 2.0**63, -2.0**63, 123456789.125, 1 / 3,
]

STR_EDGES = [
    "", "a", "hello world", "é", "€", "\u00ff", "\uffff", "\U0001f600", "\U0010ffff",
    "mixed é€\U0001f600 text", "\x00", "nul\x00inside", "a" * 255, "a" * 256, "é" * 127,
    "é" * 128, "€" * 85, "€" * 86, "\U0001f600" * 64, "x" * 70000, "line\nbreak\ttab",
    "sample_id", "position", "__hp_tensor__",
]

BYTES_EDGES = [b"", b"\x00", b"abc", bytes(range(256)), bytes(range(256)) * 3, b"\xff" * 255,
               b"\x80" * 256, b"latin1 \xe9\xff"]


def rand_float(rng):
    r = rng.random()
    if r < 0.3:
        return rng.choice(FLOAT_EDGES)
    if r < 0.6:
        # any bit pattern: subnormals, NaNs with payloads, infinities included
        return struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0]
    if r < 0.8:
        # subnormal
        return struct.unpack("<d", struct.pack("<Q", rng.getrandbits(52)))[0] * rng.choice((1, -1))
    return rng.uniform(-1e6, 1e6)


def rand_int(rng):
    r = rng.random()
    if r < 0.5:
        return rng.choice(INT_EDGES)
    bits = rng.choice((7, 8, 15, 16, 31, 32, 48, 63))
    return rng.randrange(-2**bits, 2**bits)


def rand_char(rng):
    r = rng.random()
    if r < 0.5:
        return chr(rng.randrange(0x20, 0x7f))
    if r < 0.65:
        return chr(rng.randrange(0x80, 0x800))
    if r < 0.85:
        c = rng.randrange(0x800, 0x10000)
        return chr(c) if not 0xD800 <= c <= 0xDFFF else "\ufffd"
    if r < 0.95:
        return chr(rng.randrange(0x10000, 0x110000))
    return chr(rng.randrange(0, 0x20))


def rand_str(rng):
    if rng.random() < 0.25:
        return rng.choice(STR_EDGES)
    n = rng.choice((0, 1, 2, 5, 10, 40, 100, 300))
    return "".join(rand_char(rng) for _ in range(n))


def rand_bytes(rng):
    if rng.random() < 0.3:
        return rng.choice(BYTES_EDGES)
    n = rng.choice((0, 1, 3, 17, 255, 256, 1000))
    return bytes(rng.getrandbits(8) for _ in range(n))


def rand_scalar(rng, with_binary=True):
    kinds = ["none", "bool", "int", "int", "float", "float", "str", "str"]
    if with_binary:
        kinds += ["bytes", "bytearray"]
    k = rng.choice(kinds)
    if k == "none":
        return None
    if k == "bool":
        return rng.random() < 0.5
    if k == "int":
        return rand_int(rng)
    if k == "float":
        return rand_float(rng)
    if k == "str":
        return rand_str(rng)
    if k == "bytes":
        return rand_bytes(rng)
    return bytearray(rand_bytes(rng))


def rand_key(rng, depth=0):
    """A hashable Value; no NaN (two NaN keys in one dict are a separate, targeted check)."""
    k = rng.choice(("none", "bool", "int", "int", "float", "str", "str", "bytes", "tuple"))
    if k == "none":
        return None
    if k == "bool":
        return rng.random() < 0.5
    if k == "int":
        return rand_int(rng)
    if k == "float":
        f = rand_float(rng)
        return 0.5 if f != f else f
    if k == "str":
        return rand_str(rng)[:50]
    if k == "bytes":
        return rand_bytes(rng)[:20]
    if depth >= 2:
        return ()
    return tuple(rand_key(rng, depth + 1) for _ in range(rng.randrange(0, 4)))


def rand_value(rng, depth=0, max_depth=4, with_binary=True):
    if depth >= max_depth or rng.random() < 0.35:
        return rand_scalar(rng, with_binary)
    k = rng.choice(("tuple", "list", "dict"))
    n = rng.choice((0, 1, 2, 3, 4, 5, 8))
    if k == "tuple":
        return tuple(rand_value(rng, depth + 1, max_depth, with_binary) for _ in range(n))
    if k == "list":
        return [rand_value(rng, depth + 1, max_depth, with_binary) for _ in range(n)]
    d = {}
    for _ in range(n):
        d[rand_key(rng)] = rand_value(rng, depth + 1, max_depth, with_binary)
    return d
