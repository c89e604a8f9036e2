"""Shared helpers of the CPython interop tests (tests/interop, ctest label `interop`).

Standard library only. Each test script imports this module, builds a list of requests,
sends them to one `hpref frame --batch` process (ARCHITECTURE.md, "The CLI interchange
format (JSON)") and checks every answer; failures are collected, printed with the input
(hex), the expectation and the answer, and make the script exit 1.

The Python-side value model (SPEC 1.1): None, bool, int, float, str, bytes, bytearray,
tuple, list, dict, and `Tensor` below. An item key that arrives as {"key": [id, pos]} is
the 2-tuple (id, pos).
"""

import dataclasses
import json
import math
import pickletools
import struct
import subprocess
import sys
import types

# --- the SampleKey stand-in (SPEC 1.4) ------------------------------------------------

KEY_CLASS = "hyper_parallel.distributed_data.schema.SampleKey"


def make_key_class(dotted, extra_fields=(), fields=None, slots=False):
    """A frozen dataclass with fields sample_id and position (plus `extra_fields`), or
    exactly `fields`, that pickle finds under `dotted` ("pkg.mod.Name"): the module
    hierarchy is created in sys.modules. slots=True makes a frozen slots dataclass, which
    pickles its state as the list of field values (SPEC 1.4 `values` state)."""
    module_name, _, class_name = dotted.rpartition(".")
    parts = module_name.split(".")
    for i in range(1, len(parts) + 1):
        name = ".".join(parts[:i])
        if name not in sys.modules:
            sys.modules[name] = types.ModuleType(name)
            if i > 1:
                setattr(sys.modules[".".join(parts[: i - 1])], parts[i - 1], sys.modules[name])
    if fields is None:
        fields = ("sample_id", "position") + tuple(extra_fields)
    cls = dataclasses.make_dataclass(class_name, [(f, object) for f in fields], frozen=True,
                                     slots=slots)
    cls.__module__ = module_name
    cls.__qualname__ = class_name
    setattr(sys.modules[module_name], class_name, cls)
    return cls


def key_fields(cls):
    """The field names of a key dataclass, in order."""
    return [f.name for f in dataclasses.fields(cls)]


def key_request(cls, slots=None):
    """The batch members describing `cls` as a SPEC 1.4 key class: key_class, key_fields,
    key_state ("values" for a slots dataclass)."""
    if slots is None:
        slots = "__slots__" in vars(cls)
    return {"key_class": "%s.%s" % (cls.__module__, cls.__qualname__),
            "key_fields": key_fields(cls), "key_state": "values" if slots else "dict"}


def key_values(obj):
    """The tuple of a key dataclass instance's field values, in field order (what hpref
    decodes it to)."""
    return tuple(getattr(obj, f) for f in key_fields(type(obj)))


SampleKey = make_key_class(KEY_CLASS)


# --- tensors --------------------------------------------------------------------------

DTYPE_SIZES = {
    "float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "complex32": 4, "complex64": 8,
    "complex128": 16, "int64": 8, "int32": 4, "int16": 2, "int8": 1, "uint8": 1, "uint16": 2,
    "uint32": 4, "uint64": 8, "bool": 1, "qint8": 1, "quint8": 1, "qint32": 4, "quint4x2": 1,
    "quint2x4": 1, "float8_e4m3fn": 1, "float8_e4m3fnuz": 1, "float8_e5m2": 1,
    "float8_e5m2fnuz": 1, "float8_e8m0fnu": 1, "bits8": 1, "bits16": 2,
}


class Tensor:
    """dtype ("torch.float32"), shape (tuple of ints), data (bytes, little-endian)."""

    def __init__(self, dtype, shape, data):
        self.dtype, self.shape, self.data = dtype, tuple(shape), bytes(data)

    def __eq__(self, other):
        return (isinstance(other, Tensor) and self.dtype == other.dtype
                and self.shape == other.shape and self.data == other.data)

    def __hash__(self):
        raise TypeError("Tensor is not hashable")

    def __repr__(self):
        return "Tensor(%r, %r, %s)" % (self.dtype, self.shape, short_hex(self.data))


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


# --- JSON <-> Python values -------------------------------------------------------------

def to_json(v):
    """A Python value as the CLI's JSON Value."""
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, int):
        return v
    if isinstance(v, float):
        if math.isnan(v):
            return {"float": "nan"}
        if math.isinf(v):
            return {"float": "inf" if v > 0 else "-inf"}
        return {"float": v}
    if isinstance(v, bytes):
        return {"bytes": v.hex()}
    if isinstance(v, bytearray):
        return {"bytearray": bytes(v).hex()}
    if isinstance(v, tuple):
        return {"tuple": [to_json(e) for e in v]}
    if isinstance(v, list):
        return {"list": [to_json(e) for e in v]}
    if isinstance(v, dict):
        return {"dict": [[to_json(k), to_json(x)] for k, x in v.items()]}
    if isinstance(v, Tensor):
        return {"tensor": {"dtype": v.dtype, "shape": list(v.shape), "hex": v.data.hex()}}
    if isinstance(v, SampleKey):
        return {"key": [v.sample_id, v.position]}
    raise TypeError("no JSON form for %r" % (v,))


class DictEntries(list):
    """A decoded mapping whose keys Python cannot hold in a dict (unhashable/duplicate
    under Python equality): kept as a list of pairs. Compared like a dict."""


def from_json(j):
    """The CLI's JSON Value as a Python value (type-exact)."""
    if j is None or isinstance(j, (bool, str)):
        return j
    if isinstance(j, int):
        return j
    if isinstance(j, float):
        raise ValueError("a bare JSON float is not a Value: %r" % (j,))
    if isinstance(j, dict) and len(j) == 1:
        (form, body), = j.items()
        if form == "float":
            if isinstance(body, str):
                if body not in ("nan", "inf", "-inf"):
                    raise ValueError("bad float string %r" % body)
                return float(body)
            if isinstance(body, bool) or not isinstance(body, (int, float)):
                raise ValueError("bad float body %r" % (body,))
            return float(body)
        if form == "bytes":
            return bytes.fromhex(body)
        if form == "bytearray":
            return bytearray.fromhex(body)
        if form == "tuple":
            return tuple(from_json(e) for e in body)
        if form == "list":
            return [from_json(e) for e in body]
        if form == "dict":
            pairs = [(from_json(k), from_json(v)) for k, v in body]
            d = {}
            try:
                for k, v in pairs:
                    d[k] = v
            except TypeError:
                return DictEntries(pairs)
            if len(d) != len(pairs):
                return DictEntries(pairs)
            return d
        if form == "tensor":
            return Tensor(body["dtype"], body["shape"], bytes.fromhex(body["hex"]))
        if form == "key":
            if not (isinstance(body, list) and len(body) == 2):
                raise ValueError("bad key %r" % (body,))
            return (body[0], body[1])
    raise ValueError("not a JSON Value: %r" % (j,))


def items_from_json(j):
    return [(from_json(k), from_json(v)) for k, v in j]


# --- structural equality (SPEC 1.1) ------------------------------------------------------

def float_bits(x):
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def diff(expected, actual, path="value", nan_payload=False):
    """None when `actual` is structurally equal to `expected` (type-exact, floats by bit
    pattern, dicts in order), else a sentence naming the first difference. NaN payloads do
    not survive JSON (ARCHITECTURE.md), so any NaN equals any NaN unless nan_payload."""
    if isinstance(expected, SampleKey):
        expected = (expected.sample_id, expected.position)
    if isinstance(actual, SampleKey):
        actual = (actual.sample_id, actual.position)
    if type(expected) is not type(actual) and not (
            isinstance(expected, dict) and isinstance(actual, DictEntries)):
        return "%s: expected %s %s, got %s %s" % (
            path, type(expected).__name__, short(expected), type(actual).__name__, short(actual))
    if isinstance(expected, float):
        if math.isnan(expected) and math.isnan(actual) and not nan_payload:
            return None
        if float_bits(expected) != float_bits(actual):
            return "%s: expected float %r (0x%016x), got %r (0x%016x)" % (
                path, expected, float_bits(expected), actual, float_bits(actual))
        return None
    if isinstance(expected, (tuple, list)):
        if len(expected) != len(actual):
            return "%s: expected %s of %d elements, got %d" % (
                path, type(expected).__name__, len(expected), len(actual))
        for i, (e, a) in enumerate(zip(expected, actual)):
            d = diff(e, a, "%s[%d]" % (path, i), nan_payload)
            if d:
                return d
        return None
    if isinstance(expected, dict):
        e_items = list(expected.items())
        a_items = list(actual) if isinstance(actual, DictEntries) else list(actual.items())
        if len(e_items) != len(a_items):
            return "%s: expected dict of %d entries, got %d" % (path, len(e_items), len(a_items))
        for i, ((ek, ev), (ak, av)) in enumerate(zip(e_items, a_items)):
            d = diff(ek, ak, "%s.key#%d" % (path, i), nan_payload)
            if d:
                return d
            d = diff(ev, av, "%s[%s]" % (path, short(ek, 40)), nan_payload)
            if d:
                return d
        return None
    if expected != actual:
        return "%s: expected %s, got %s" % (path, short(expected), short(actual))
    return None


def short(v, limit=120):
    r = repr(v)
    return r if len(r) <= limit else r[:limit] + "...(%d chars)" % len(r)


def short_hex(b, limit=400):
    h = bytes(b).hex()
    return h if len(h) <= limit else h[:limit] + "...(%d bytes)" % len(b)


# --- the hpref process --------------------------------------------------------------------

def run_batch(hpref, requests, timeout=600):
    """Send requests (dicts) to one `hpref frame --batch`; return the answers (dicts), in
    order, checking that every id is echoed."""
    lines = []
    for i, r in enumerate(requests):
        r = dict(r)
        r["id"] = i
        lines.append(json.dumps(r, ensure_ascii=False, allow_nan=False))
    data = ("\n".join(lines) + "\n").encode("utf-8")
    proc = subprocess.run([hpref, "frame", "--batch", "--keep-going"], input=data, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=timeout)
    # split on "\n" only: str.splitlines() would also split on U+2028, U+0085, \x1c...
    out = proc.stdout.decode("utf-8").split("\n")
    if out and out[-1] == "":
        out.pop()
    # refusals are answers, not failures of the batch: with --keep-going the exit status
    # is 0 (without it, 2 when any line was refused)
    if proc.returncode != 0 or len(out) != len(requests):
        raise SystemExit("hpref frame --batch exited %d with %d answers for %d requests; "
                         "stderr: %s" % (proc.returncode, len(out), len(requests),
                                         proc.stderr.decode("utf-8", "replace")[-2000:]))
    answers = []
    for i, line in enumerate(out):
        a = json.loads(line)
        if a.get("id") != i:
            raise SystemExit("answer %d has id %r: %s" % (i, a.get("id"), line[:300]))
        answers.append(a)
    return answers


class Suite:
    """Collects named checks; `finish()` prints the failures and exits 1 if any."""

    def __init__(self, name, hpref):
        self.name, self.hpref = name, hpref
        self.pending = []   # (request, callback(answer) -> None or failure sentence, label)
        self.failures = []
        self.passed = 0

    def ask(self, label, request, check):
        self.pending.append((label, request, check))

    def fail(self, label, message):
        self.failures.append("%s: %s" % (label, message))

    def expect(self, label, condition, message):
        if condition:
            self.passed += 1
        else:
            self.fail(label, message)

    def flush(self):
        if not self.pending:
            return
        pending, self.pending = self.pending, []
        answers = run_batch(self.hpref, [r for _, r, _ in pending])
        for (label, request, check), answer in zip(pending, answers):
            try:
                problem = check(answer)
            except Exception as e:  # a malformed answer is a failure, not a crash
                problem = "checking the answer raised %s: %s; answer %s" % (
                    type(e).__name__, e, short(answer, 400))
            if problem:
                self.fail(label, problem)
            else:
                self.passed += 1

    def finish(self):
        self.flush()
        for f in self.failures:
            print("FAIL " + f)
        print("%s: %d checks passed, %d failed" % (self.name, self.passed, len(self.failures)))
        sys.exit(1 if self.failures else 0)


# --- answer checks ----------------------------------------------------------------------

def expect_value(expected, what):
    """A check: the answer is ok with "value" structurally equal to `expected`."""
    def check(a):
        if not a.get("ok"):
            return "refused (%s: %s); input %s" % (a.get("kind"), a.get("error"), what)
        return _with_input(diff(expected, from_json(a["value"])), what)
    return check


def expect_items(expected, what):
    def check(a):
        if not a.get("ok"):
            return "refused (%s: %s); input %s" % (a.get("kind"), a.get("error"), what)
        got = items_from_json(a["items"])
        return _with_input(diff([tuple(p) for p in expected], [tuple(p) for p in got], "items"),
                           what)
    return check


def expect_refusal(kinds, names, what):
    """A check: ok:false, kind in `kinds` (str or tuple), and the error sentence contains
    one of `names` (str or tuple; empty: not checked)."""
    kinds = (kinds,) if isinstance(kinds, str) else tuple(kinds)
    names = (names,) if isinstance(names, str) else tuple(names)

    def check(a):
        if a.get("ok") is not False:
            return "accepted, expected a refusal of kind %s; answer %s; input %s" % (
                "/".join(kinds), short(a, 300), what)
        if a.get("kind") not in kinds:
            return "refused with kind %r (%s), expected %s; input %s" % (
                a.get("kind"), a.get("error"), "/".join(kinds), what)
        err = a.get("error", "")
        if names and not any(n in err for n in names):
            return "error %r does not name %s; input %s" % (err, " or ".join(map(repr, names)),
                                                            what)
        if not err or len(err) > 2000:
            return "error sentence empty or too long: %r" % err[:300]
        return None
    return check


def _with_input(problem, what):
    return None if problem is None else "%s; input %s" % (problem, what)


def opcodes(data):
    """[(opcode name, arg, pos)] of a pickle."""
    return [(op.name, arg, pos) for op, arg, pos in pickletools.genops(data)]


def pickle_hex(data):
    return bytes(data).hex()


def describe_pickle(data, limit=600):
    return "pickle %s" % short_hex(data, limit)


def main_args():
    if len(sys.argv) != 2:
        raise SystemExit("usage: %s <path to hpref>" % sys.argv[0])
    return sys.argv[1]
