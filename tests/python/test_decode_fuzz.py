"""Python-side fuzz of decoding a peer's segment into torch tensors and numpy arrays (SPEC
2.4: the bytes give items or one error, never a crash). The C++ fuzzers (fuzz/) cannot see
this class of bug: torch's own code on tensors we hand it, and the binding that makes them.
Until 2026-12-01 a non-empty quantized tensor killed the process with SIGSEGV inside torch.

hypothesis writes segments the way a peer does: an HPB1 frame whose metadata is
pickle.dumps of schema nodes (SPEC 2.2) over a binary region, with dtype names from all of
SPEC 1.3 and some that are not, shapes with zero, huge, negative and bool dims, ranges that
fit or not, nested mapping/tuple/list nodes, plain values; some frames then get bytes
flipped or cut. A worker process decodes each with tensors='torch', then 'numpy', and uses
every tensor it gets (reshape, clone or copy, sum, repr); it also decodes each with two key
classes (tests/python/fuzz_keys.py: some item keys are their pickled instances, with fields
of any kind), inspects it and merges it received twice (decode_received). The test fails
when one of those raises anything but hpref.Error, or when the worker dies: then with the
segment in hex, to replay.
Torch's own exceptions from using a tensor (bits16 has no repr) are torch's answers.

Cases: the segments it found, then 300, the same every run; HPREF_FUZZ_EXAMPLES=N runs N
random ones (a failure prints hypothesis's seed to replay it)."""
import os
import pathlib
import pickle
import select
import struct
import subprocess
import sys

import pytest

pytest.importorskip("torch", reason="decoding into torch tensors needs torch")
from hypothesis import HealthCheck, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).parents[1] / "interop"))
sys.path.insert(0, str(pathlib.Path(__file__).parent))
import fuzz_keys  # noqa: E402
import hpref_interop as J  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
EXAMPLES = int(os.environ.get("HPREF_FUZZ_EXAMPLES", "0"))
SETTINGS = settings(max_examples=EXAMPLES or 300, deadline=None, derandomize=not EXAMPLES,
                    suppress_health_check=list(HealthCheck))

# The worker: reads cases (8-byte little-endian length, then the bytes) from stdin, decodes
# each into torch tensors, then into numpy arrays, and answers with one line of two answers
# joined by " | ", each "ok N" (N tensors used), "refused KIND" or "raised TYPE (how): ...";
# then inspects it (strict) and merges it received twice (a duplicate key, or none), adding
# a "raised" answer if either raises anything but hpref.Error.
WORKER = r"""
import struct, sys
import hpref, numpy, torch
sys.path.insert(0, sys.argv[1])  # this file's folder, for fuzz_keys
import fuzz_keys

def tensors(v):
    if isinstance(v, (torch.Tensor, numpy.ndarray)):
        yield v
    elif isinstance(v, dict):
        for k, x in v.items():
            yield from tensors(k)
            yield from tensors(x)
    elif isinstance(v, (list, tuple)):
        for x in v:
            yield from tensors(x)

def use(t):
    if isinstance(t, numpy.ndarray):
        ops = (lambda: t.reshape(-1), t.copy, lambda: repr(t),
               lambda: t.sum() if t.size <= 1 << 20 else None)
    else:
        ops = (lambda: t.reshape(-1), t.clone, t.contiguous, lambda: repr(t),
               lambda: t.sum() if t.numel() <= 1 << 20 else None)
    for op in ops:
        try:
            op()
        except Exception:  # torch's answer (an op it lacks for the dtype): not a crash
            pass

stdin, stdout = sys.stdin.buffer, sys.stdout
while True:
    head = stdin.read(8)
    if len(head) < 8:
        break
    data = stdin.read(struct.unpack("<Q", head)[0])
    answers = []
    for kind in ("torch", "numpy"):
        try:
            items = hpref.codec.decode(data, tensors=kind)
        except hpref.Error as e:
            answers.append(f"refused {e.kind}")
        except BaseException as e:
            answers.append(f"raised {type(e).__name__} ({kind}): {e}".replace("\n", " "))
        else:
            n = 0
            for t in tensors(items):
                use(t)
                n += 1
            answers.append(f"ok {n}")
    for name, call in (("key class", lambda: hpref.codec.decode(data, key_class=fuzz_keys.Key,
                                                                tensors="raw")),
                       ("slots key class", lambda: hpref.codec.decode(
                           data, key_class=fuzz_keys.SlotKey, tensors="raw")),
                       ("inspect", lambda: hpref.codec.inspect(data, strict=True)),
                       ("received", lambda: hpref.codec.decode_received(
                           data + data, [len(data), len(data)], tensors="raw"))):
        try:
            call()
        except hpref.Error:
            pass
        except BaseException as e:
            answers.append(f"raised {type(e).__name__} ({name}): {e}".replace("\n", " "))
    stdout.write(" | ".join(answers) + "\n")
    stdout.flush()
"""


class Worker:
    """One long-lived decoding process, started again after it dies or hangs."""

    # A case's deadline (the first includes importing torch): a hang, not a speed bound.
    DEADLINE_S = 120

    def __init__(self):
        self.proc = None

    def decode(self, data):
        """The worker's answer line for `data`, or None and how it ended on it: its exit
        status when it died, "hung" when it gave no answer within DEADLINE_S (then killed)."""
        if self.proc is None or self.proc.poll() is not None:
            self.proc = subprocess.Popen([sys.executable, "-c", WORKER, str(HERE)],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.DEVNULL, text=False)
        line = ""
        try:
            self.proc.stdin.write(struct.pack("<Q", len(data)) + data)
            self.proc.stdin.flush()
            # The worker writes one whole line per case, so a readable pipe holds it (or EOF).
            if select.select([self.proc.stdout], [], [], self.DEADLINE_S)[0]:
                line = self.proc.stdout.readline().decode()
            else:
                self.proc.kill()
                self.proc.wait()
                self.proc = None
                return None, "hung"
        except BrokenPipeError:
            try:
                self.proc.stdin.close()  # drops what the dead process never read
            except BrokenPipeError:
                pass
        if line:
            return line.strip(), None
        status = self.proc.wait(timeout=60)
        self.proc = None
        return None, status

    def close(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=60)


@pytest.fixture(scope="module")
def worker():
    w = Worker()
    yield w
    w.close()


DTYPES = ["torch." + d for d in J.DTYPE_SIZES]
BAD_DTYPES = ["torch.float", "torch.long", "torch.half", "torch.nope", "float32", "", "torch.",
              "torch.Size", 5, None]
HUGE = [2 ** 31, 2 ** 32 + 1, 2 ** 62, 2 ** 63 - 1]
NOT_DIMS = [-1, True, 1.0, "1", None, 2 ** 63, 2 ** 64]


def percent(draw):
    """0-99: rare branches test `< k`. (hypothesis favours the ends of a range, so a flag of
    0 or 1 would take the rare branch as often as the common one.)"""
    return draw(st.integers(0, 99))


@st.composite
def tensor_node(draw):
    """A tensor node over the binary region (its offset from 0; the region is made to cover
    it), most of them valid so that they reach torch: any SPEC 1.3 dtype, small shapes, some
    with a huge dim beside a zero one (no elements); a few broken in one field."""
    dtype = draw(st.sampled_from(BAD_DTYPES if percent(draw) < 5 else DTYPES))
    shape = draw(st.lists(st.integers(0, 4), max_size=4))
    roll = percent(draw)
    if roll < 10:
        shape += [0, draw(st.sampled_from(HUGE))]
    elif roll < 15 and shape:
        shape[draw(st.integers(0, len(shape) - 1))] = draw(st.sampled_from(HUGE))
    elif roll < 20 and shape:
        shape[draw(st.integers(0, len(shape) - 1))] = draw(st.sampled_from(NOT_DIMS))
    numel = 1
    for d in shape:
        numel *= d if type(d) is int else 1
    size = numel * J.DTYPE_SIZES.get(str(dtype).removeprefix("torch."), 1)
    if not 0 <= size <= 4096 or percent(draw) < 5:
        size = draw(st.sampled_from([0, 1, 7, 4096, -1, True]))
    offset = draw(st.integers(0, 64))
    if percent(draw) < 5:
        offset = draw(st.sampled_from([-1, 2 ** 63 - 1, 2 ** 64, 1.0, False]))
    if percent(draw) < 3:  # a wrong field count
        return ("__hp_tensor__", dtype, tuple(shape), offset)
    return ("__hp_tensor__", dtype, tuple(shape), offset, size)


LEAVES = st.one_of(
    tensor_node(), tensor_node(), tensor_node(),
    st.tuples(st.sampled_from(["__hp_bytes__", "__hp_bytearray__"]),
              st.integers(0, 64), st.integers(0, 64)),
    st.tuples(st.just("__hp_value__"),
              st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=8))),
    st.sampled_from([("__hp_nope__", 1), (), "not a node", 5]))
SCHEMA = st.recursive(LEAVES, lambda kids: st.one_of(
    st.tuples(st.sampled_from(["__hp_tuple__", "__hp_list__"]),
              st.lists(kids, max_size=3).map(tuple)),
    st.tuples(st.just("__hp_mapping__"),
              st.lists(st.tuples(st.one_of(st.text(max_size=4), st.integers(0, 3)), kids),
                       max_size=3).map(tuple))), max_leaves=6)


def end_of_ranges(node):
    """The largest offset + size of the well-formed ranges in `node` (0 if none)."""
    if not isinstance(node, tuple) or not node:
        return 0
    if node[0] in ("__hp_tensor__", "__hp_bytes__", "__hp_bytearray__") and \
            all(type(x) is int and 0 <= x <= 1 << 16 for x in node[-2:]):
        return node[-2] + node[-1]
    if node[0] == "__hp_mapping__" and len(node) > 1:
        return max([end_of_ranges(child) for _, child in node[1]] + [0])
    if node[0] in ("__hp_tuple__", "__hp_list__") and len(node) > 1:
        return max([end_of_ranges(child) for child in node[1]] + [0])
    return 0


FIELD = st.one_of(st.integers(-2, 2 ** 63 - 1), st.text(max_size=4), st.none(), st.booleans(),
                  st.floats(), st.tuples(st.integers(0, 3), st.text(max_size=2)),
                  st.binary(max_size=3))


@st.composite
def item_key(draw, i):
    """An item key: mostly an int, else an instance of a fuzz_keys class (pickled as the
    SPEC 1.4 object pattern) with fields of any kind, hashable or not."""
    kind = percent(draw)
    if kind < 60:
        return i
    cls = fuzz_keys.Key if kind < 80 else fuzz_keys.SlotKey
    if percent(draw) < 70:  # a valid SampleKey's fields: decoded as an instance
        key = cls(draw(st.one_of(st.integers(0, 2 ** 40), st.text(min_size=1, max_size=4))),
                  draw(st.integers(0, 3)))
    else:  # anything: decoded as a tuple, or refused
        key = cls(draw(FIELD), draw(st.one_of(st.integers(0, 3), FIELD)))
    if cls is fuzz_keys.Key and percent(draw) < 10:
        key.sample_id = [draw(FIELD)]  # a list: not hashable
    return key


@st.composite
def segments(draw):
    pairs = tuple((draw(item_key(i)), draw(SCHEMA)) for i in range(draw(st.integers(1, 3))))
    region = max(end_of_ranges(node) for _, node in pairs) + draw(st.integers(0, 8))
    binary = draw(st.binary(min_size=region, max_size=region))
    metadata = pickle.dumps(pairs, protocol=draw(st.integers(2, 5)))
    frame = b"HPB1" + struct.pack(">QQ", len(metadata), len(binary)) + metadata + binary
    roll = percent(draw)
    if roll < 8:  # flip a few bytes past the magic, the header's sizes included
        frame = bytearray(frame)
        for _ in range(draw(st.integers(1, 3))):
            at = draw(st.integers(4, len(frame) - 1))
            frame[at] ^= draw(st.integers(1, 255))
        frame = bytes(frame)
    elif roll < 12:
        frame = frame[:draw(st.integers(0, len(frame)))]
    return frame


# What this test found, kept as fixed cases (run first, every time): a 0-d complex128 at a
# binary region not 16-byte aligned (SIGSEGV in torch's clone); a float tensor of shape
# (0, 2, 0, 2**62), whose strides overflow (torch 2.13's RuntimeError from decode).
FOUND = [
    "485042310000000000000058000000000000001080024b00580c0000005f5f68705f7475706c655f5f710028"
    "580d0000005f5f68705f74656e736f725f5f71015810000000746f7263682e636f6d706c6578313238710229"
    "4b004b107471038571048671058671068571072e00000000000000000000000000000000",
    "48504231000000000000004d000000000000000080024b0028580d0000005f5f68705f74656e736f725f5f71"
    "00580b000000746f7263682e666c6f61747101284b004b024b008a0800000000000000407471024b004b0074"
    "71038671048571052e",
]


@SETTINGS
@given(segments())
@example(bytes.fromhex(FOUND[0]))
@example(bytes.fromhex(FOUND[1]))
def test_a_peers_segment_decodes_to_usable_tensors_or_an_hpref_error(worker, frame):
    answer, status = worker.decode(frame)
    assert answer is not None, (
        f"the decoding process died or hung ({status}) on the segment {frame.hex()}")
    assert "raised" not in answer, f"{answer} on the segment {frame.hex()}"


def test_the_worker_reports_a_death_as_a_failure(worker):
    """The harness itself: a case that kills the worker is seen (not read as a refusal), the
    next case gets a fresh worker, and a worker that never answers is killed and reported."""
    assert worker.decode(b"HPB1" + bytes(15)) == (
        "refused truncated_header | refused truncated_header", None)
    proc = worker.proc
    proc.kill()
    proc.wait()
    answer, status = worker.decode(b"")
    assert answer == "ok 0 | ok 0" and status is None  # a fresh worker: the empty segment
    worker.proc.kill()
    worker.proc.wait()
    worker.proc.poll = lambda: None  # as if alive: the write or the read finds it dead
    answer, status = worker.decode(b"")
    assert answer is None and status != 0
    # A hang: a worker that reads and never answers is killed at the deadline.
    silent = "import sys, time\nsys.stdin.buffer.read(8)\ntime.sleep(600)"
    worker.proc = subprocess.Popen([sys.executable, "-c", silent], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE)
    worker.DEADLINE_S = 2
    try:
        assert worker.decode(b"") == (None, "hung") and worker.proc is None
    finally:
        del worker.DEADLINE_S  # the class's again, for whatever runs next
