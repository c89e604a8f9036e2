#!/usr/bin/env python3
"""Regenerates tests/vectors/golden.jsonl: the item lists of the golden vectors and the
segment bytes `hpref frame --batch` (our writer) produces for them, and section 5 of
docs/wire-format.md, which shows them (the unit test golden_vectors checks both).

Run only when the wire format deliberately changes:
    python3 tests/vectors/make_golden.py build/release/tools/hpref
It also checks, with CPython's pickle, that every metadata pickle loads.

tests/vectors/old_writer.jsonl is not regenerated: it keeps segments the first writer (no
memo, before issue 15) wrote, which must still decode to their items."""
import json
import pickle
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

SAMPLE_KEY = "hyper_parallel.distributed_data.schema.SampleKey"

VECTORS = [
    ("empty", []),
    ("legacy scalars", [[{"key": [1, 0]}, None], [{"key": [2, 0]}, True],
                        [{"key": ["doc-7", 3]}, 42], [{"key": [3, 1]}, False]]),
    ("legacy integer boundaries", [[{"key": [1, 0]}, {"list": [
        0, 255, 256, 65535, 65536, -1, 2**31 - 1, -2**31, 2**31, -2**31 - 1, 2**40,
        -2**63, 2**63 - 1]}]]),
    ("legacy floats", [[{"key": [1, 0]}, {"tuple": [
        {"float": 0.5}, {"float": -0.0}, {"float": "nan"}, {"float": "inf"},
        {"float": "-inf"}, {"float": 1e300}, {"float": 5e-324}]}]]),
    ("legacy unicode", [[{"key": ["d\u00e9j\u00e0-vu", 0]}, {"list": [
        "", "\u00e9", "\u65e5\u672c\u8a9e", "\U0001F600", "line\nbreak\u0000nul", "x" * 256]}]]),
    ("legacy nested containers", [[{"key": [5, 0]}, {"dict": [
        ["a", {"list": [1, {"tuple": [2, 3]}]}],
        [{"tuple": [1, 2]}, {"dict": []}],
        [{"bytes": "6b6579"}, {"tuple": []}],
        [None, {"tuple": [1, 2, 3, 4]}]]}]]),
    ("legacy non-SampleKey keys", [["plain", 1], [{"tuple": [-1, 0]}, 2],
                                   [{"tuple": [True, 0]}, 3], [7, 4]]),
    ("legacy list batches of 1000", [[{"key": [1, 0]}, {"list": [i % 7 for i in range(1001)]}],
                                     [{"key": [2, 0]}, {"dict": [[i, None] for i in range(1002)]}]]),
    ("framed bytes and bytearray", [[{"key": [1, 0]}, {"bytes": "89504e470d0a1a0a"}],
                                    [{"key": [2, 0]}, {"bytearray": "00ff"}],
                                    [{"key": [3, 0]}, {"bytes": ""}]]),
    ("framed float32 matrix", [[{"key": [9, 0]}, {"tensor": {
        "dtype": "torch.float32", "shape": [2, 2],
        "hex": struct.pack("<4f", 1, 2, 3, 4).hex()}}]]),
    ("framed 0-d and empty tensors", [[{"key": [1, 0]}, {"tuple": [
        {"tensor": {"dtype": "torch.int64", "shape": [], "hex": struct.pack("<q", 42).hex()}},
        {"tensor": {"dtype": "torch.float16", "shape": [0, 3], "hex": ""}}]}]]),
    ("framed training sample", [[{"key": ["shard-00017/doc-4", 0]}, {"dict": [
        ["input_ids", {"tensor": {"dtype": "torch.int64", "shape": [4],
                                  "hex": struct.pack("<4q", 1, 2, 3, 50256).hex()}}],
        ["image", {"bytes": "ffd8ffe0"}],
        ["meta", {"dict": [["source", "web"], ["length", 4], ["score", {"float": 0.75}],
                           ["tags", {"list": ["en", "clean"]}], ["extra", None]]}]]}]]),
    ("framed dtypes", [[{"key": [2, 5]}, {"list": [
        {"tensor": {"dtype": "torch.bfloat16", "shape": [2], "hex": "803f0040"}},
        {"tensor": {"dtype": "torch.complex64", "shape": [1], "hex": struct.pack("<2f", 1, 0).hex()}},
        {"tensor": {"dtype": "torch.bool", "shape": [3], "hex": "010001"}},
        {"tensor": {"dtype": "torch.uint64", "shape": [1], "hex": "ff" * 8}},
        {"tensor": {"dtype": "torch.float8_e4m3fn", "shape": [2, 1], "hex": "3840"}}]}]]),
    ("framed with Python key class", [[{"key": [11, 0]}, {"bytes": "01"}],
                                      [{"key": ["doc", 2]}, {"dict": [["x", 1]]}]],
     SAMPLE_KEY),
    # SPEC 2.3 memo (issue 15): str mapping keys and the key-class global, nothing else
    ("legacy repeated mapping keys", [
        ["text", {"dict": [["text", "text"], ["n", 1], [{"tuple": ["text", 1]}, 2],
                           ["inner", {"dict": [["n", 2], ["text", None]]}]]}],
        [{"key": [1, 0]}, {"dict": [["inner", {"list": [{"dict": [["text", 3]]}]}],
                                    [1, "n"], [None, {"dict": [["n", "inner"]]}]]}]]),
    ("framed repeated mapping keys", [
        [{"key": [i, 0]}, {"dict": [["tokens", 100 + i], ["score", {"float": i / 4}],
                                    ["ok", i % 2 == 0],
                                    ["emb", {"tensor": {"dtype": "torch.float32", "shape": [2],
                                                        "hex": struct.pack("<2f", i, -i).hex()}}]]}]
        for i in range(3)]),
    ("framed repeated keys with Python key class", [
        [{"key": [i, 0]}, {"dict": [["tokens", i], ["emb", {"bytes": "%02x" % i}]]}]
        for i in range(3)] + [
        [{"key": ["doc", 2]}, {"list": [{"dict": [["tokens", 7]]}, {"bytearray": "ff"}]}]],
     SAMPLE_KEY),
    ("legacy 300 distinct keys, LONG_BINGET", [
        [{"key": [1, 0]}, {"dict": [[str(i), i % 3] for i in range(300)]}],
        [{"key": [2, 0]}, {"dict": [["0", None], ["255", None], ["256", None], ["299", None]]}]]),
]


def main():
    hpref = sys.argv[1]
    requests = []
    for v in VECTORS:
        req = {"op": "encode_segment", "items": v[1]}
        if len(v) > 2:
            req["key_class"] = v[2]
        requests.append(json.dumps(req))
    out = subprocess.run([hpref, "frame", "--batch"], input="\n".join(requests) + "\n",
                         capture_output=True, text=True, check=True).stdout.splitlines()
    lines = []
    for v, answer in zip(VECTORS, out):
        a = json.loads(answer)
        assert a["ok"], a
        frame = bytes.fromhex(a["frame_hex"])
        if frame.startswith(b"HPB1"):
            meta_size, = struct.unpack(">Q", frame[4:12])
            pickle_bytes = frame[20:20 + meta_size]
        else:
            pickle_bytes = frame
        if pickle_bytes and len(v) == 2:
            pickle.loads(pickle_bytes)  # CPython reads every metadata pickle we write
        entry = {"name": v[0], "items": v[1], "frame_hex": a["frame_hex"]}
        if len(v) > 2:
            entry["key_class"] = v[2]
        lines.append(json.dumps(entry, ensure_ascii=False))
    Path(__file__).with_name("golden.jsonl").write_text("\n".join(lines) + "\n")
    write_doc([json.loads(line) for line in lines])
    print(f"wrote {len(lines)} vectors")


DOC = Path(__file__).resolve().parents[2] / "docs" / "wire-format.md"
SHOWN_HEX_MAX = 2000  # longer vectors live in golden.jsonl only (golden_vectors skips them too)


def write_doc(vectors):
    """Rewrites docs/wire-format.md from "## 5. Golden vectors" to its end."""
    text = DOC.read_text()
    head = text[:text.index("## 5. Golden vectors")]
    hidden = [v for v in vectors if len(v["frame_hex"]) > SHOWN_HEX_MAX]
    shown = ['the %s-byte "%s" vector' % (f"{len(v['frame_hex']) // 2:,}", v["name"])
             for v in hidden]
    names = " and ".join([", ".join(shown[:-1]), shown[-1]] if len(shown) > 1 else shown)
    out = ["## 5. Golden vectors", "", textwrap.fill(
        "Each vector: the items (JSON, as above) and the exact segment our writer produces. "
        "The complete set, including %s, is `tests/vectors/golden.jsonl`; "
        "`tests/vectors/make_golden.py` regenerates it and this section." % names, 92)]
    for v in vectors:
        if len(v["frame_hex"]) > SHOWN_HEX_MAX:
            continue
        out += ["", "### " + v["name"], ""]
        if "key_class" in v:
            out += ["Writer option `key_class = %s`." % v["key_class"], ""]
        out += ["```json", json.dumps(v["items"], ensure_ascii=False), "```", ""]
        h = v["frame_hex"]
        out += ["%d bytes:" % (len(h) // 2), "", "```"]
        out += [h[i:i + 96] for i in range(0, len(h), 96)] if h else ["(empty: 0 bytes)"]
        out += ["```"]
    DOC.write_text(head + "\n".join(out) + "\n")


if __name__ == "__main__":
    main()
