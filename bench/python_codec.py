"""bench/python_codec: hpref.codec from Python against the original's codec, in the same run
(issue 11's speed targets). Workloads as bench/codec.cpp's:
  (a) 8 float32 tensors of 1 MiB with a small nested metadata mapping (one item)
  (b) 10,000 small items: scalars and one 64-byte float32 tensor each
Keys are the original's SampleKey. Each operation is timed as the best of --repeat runs of
--number calls (time.perf_counter_ns), after one warm-up call; the ratio is the original's
time over hpref's (> 1: hpref is faster). Targets: (b) decode >= 10x, (b) encode >= 20x,
(a) decode >= 5x (zero copy). Also a memcpy of (a)'s bytes, for scale.

Run: ./dev bench python_codec [--repeat N] [--number N] [--json FILE]
Needs torch and ../shared/original (the original's codec); without the latter only hpref's
times are printed."""
from __future__ import annotations

import argparse
import json
import pathlib
import random
import sys
import time

import torch

import hpref

ORIGINAL = pathlib.Path(__file__).resolve().parents[2] / "shared" / "original"


def load_original():
    if not (ORIGINAL / "seed_transport.py").exists():
        return None, None
    sys.path.insert(0, str(ORIGINAL))
    import seed_transport
    from stubs import SampleKey
    return seed_transport, SampleKey


def workload_a(key):
    g = torch.Generator().manual_seed(1)
    layers = [torch.rand(512, 512, generator=g) for _ in range(8)]
    meta = {"step": 1200, "source": "shard-00017", "lr": 3e-4, "tags": ["train", "bf16"]}
    return [(key(1, 0), {"layers": layers, "meta": meta})]


def workload_b(key):
    rng = random.Random(2)
    g = torch.Generator().manual_seed(2)
    return [(key(i, 0), {"tokens": rng.randrange(4096), "score": rng.randrange(1000) / 7.0,
                         "ok": i % 3 != 0, "emb": torch.rand(16, generator=g)})
            for i in range(10000)]


def best_ns(fn, repeat, number):
    fn()
    best = None
    for _ in range(repeat):
        start = time.perf_counter_ns()
        for _ in range(number):
            fn()
        per = (time.perf_counter_ns() - start) / number
        best = per if best is None or per < best else best
    return best


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per operation (best kept)")
    parser.add_argument("--number", type=int, default=3, help="calls per timed run")
    parser.add_argument("--json", help="also write the rows as JSON to this file")
    args = parser.parse_args(argv)
    if args.repeat < 1 or args.number < 1:
        parser.error("--repeat and --number must be at least 1")

    original, SampleKey = load_original()
    if original is None:
        print(f"python_codec: the original is not at {ORIGINAL}: hpref's times only")
        key = lambda i, p: (i, p)  # noqa: E731
        key_class = None
    else:
        key, key_class = SampleKey, SampleKey

    rows = []
    for name, items in (("a", workload_a(key)), ("b", workload_b(key))):
        ours_frame = hpref.codec.encode(items, key_class=key_class)
        ops = [("encode", lambda: hpref.codec.encode(items, key_class=key_class),
                (lambda: original._encode_payload_segment(items)) if original else None)]
        theirs_frame = original._encode_payload_segment(items) if original else ours_frame
        ops.append(("decode", lambda: hpref.codec.decode(ours_frame, key_class=key_class),
                    (lambda: original._decode_payload_segment(theirs_frame)) if original else None))
        # a writable buffer (a received torch uint8 tensor's memory) is decoded in place
        ours_buf, theirs_buf = bytearray(ours_frame), bytearray(theirs_frame)
        ops.append(("decode-ba", lambda: hpref.codec.decode(ours_buf, key_class=key_class),
                    (lambda: original._decode_payload_segment(theirs_buf)) if original else None))
        for op, ours, theirs in ops:
            t_ours = best_ns(ours, args.repeat, args.number)
            t_theirs = best_ns(theirs, args.repeat, args.number) if theirs else None
            rows.append({"workload": name, "op": op, "hpref_ns": t_ours, "original_ns": t_theirs,
                         "ratio": (t_theirs / t_ours) if t_theirs else None,
                         "hpref_bytes": len(ours_frame),
                         "original_bytes": len(theirs_frame) if original else None})
        if name == "a":
            src = bytearray(ours_frame)
            memcpy = best_ns(lambda: bytes(src), args.repeat, args.number)
            rows.append({"workload": "a", "op": "memcpy", "hpref_ns": memcpy, "original_ns": None,
                         "ratio": None, "hpref_bytes": len(src), "original_bytes": None})

    targets = {("b", "decode"): 10.0, ("b", "encode"): 20.0, ("a", "decode"): 5.0,
               ("a", "decode-ba"): 5.0, ("b", "decode-ba"): 10.0}
    print(f"python_codec: torch {torch.__version__}, best of {args.repeat} x {args.number} calls")
    print("decode: from bytes (hpref copies them once); decode-ba: from a bytearray (hpref decodes in place)")
    print(f"{'workload':8} {'op':9} {'hpref':>12} {'original':>12} {'ratio':>8} {'target':>7}  bytes (hpref/original)")
    for r in rows:
        t = targets.get((r["workload"], r["op"]))
        ratio = f"{r['ratio']:.1f}x" if r["ratio"] else "-"
        verdict = "" if t is None or r["ratio"] is None else (f">={t:.0f}x " + ("met" if r["ratio"] >= t else "NOT met"))
        theirs = f"{r['original_ns'] / 1e6:9.3f} ms" if r["original_ns"] else f"{'-':>12}"
        sizes = f"{r['hpref_bytes']}/{r['original_bytes']}" if r["original_bytes"] else f"{r['hpref_bytes']}"
        print(f"{r['workload']:8} {r['op']:9} {r['hpref_ns'] / 1e6:9.3f} ms {theirs} {ratio:>8} {verdict:>7}  {sizes}")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
