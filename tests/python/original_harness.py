"""Helpers of tests/python/test_original_on_sim.py: the original (../shared/original) run
unmodified on hpref's simulated cluster (issue 12, "Acceptance: the original, unmodified,
on the simulator").

- Loading the original's modules, and copies of them with one planted bug made by textual
  substitution (each substitution must match exactly once, so a changed original fails
  loudly instead of silently testing nothing).
- `hpref demo`'s synthetic corpus, planner and batch rebuilt in Python from
  tools/src/cluster_demo.cpp (SplitMix64 streams, longest-first balancing, the packed
  batch, the dispatch banks and gradients) and its data checksum (FNV-1a 64), so that the
  original's data step can be compared with hpref's C++ transports on the same inputs.
- `DemoBatchLayout`: the ModelBatchLayout the original's ModelParallelTransport binds.
  stubs.py's stand-in raises NotImplementedError (the real module is not in the seeds);
  this one declares the demo's batch (tokens, doc_lens, images) and does SPEC 6.2-6.3's
  header and shapes with hpref.planning.
- The rank programs sim.run runs: the data step (group creation with cpu_backend="gloo",
  metadata gather to the planner, plan broadcast, payload all-to-all, model-parallel batch
  broadcast, then the context-parallel dispatch of the batch) and a dispatch program."""
from __future__ import annotations

import dataclasses
import importlib.util
import pathlib
import sys
from typing import Any, Dict, List, Sequence, Tuple

import numpy as np

ORIGINAL = pathlib.Path(__file__).resolve().parents[3] / "shared" / "original"
CLI = pathlib.Path(__file__).resolve().parents[2] / "build" / "release" / "tools" / "hpref"

MASK64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
SAMPLES_PER_READER = 16  # cluster_demo.cpp kSamplesPerReader
WIDTH = 16               # cluster_demo.cpp kWidth: row width of the float32 banks


# ---- the original ------------------------------------------------------------------------

def original_present() -> bool:
    """Whether ../shared/original holds the two seed modules."""
    return (ORIGINAL / "seed_transport.py").exists() and (ORIGINAL / "seed_sequence_dispatch.py").exists()


def load_original():
    """The original's (seed_transport, seed_sequence_dispatch, stubs) modules, imported as
    they are, with ORIGINAL on sys.path."""
    if str(ORIGINAL) not in sys.path:
        sys.path.insert(0, str(ORIGINAL))
    import seed_sequence_dispatch
    import seed_transport
    import stubs
    return seed_transport, seed_sequence_dispatch, stubs


def warm_torch() -> None:
    """Runs one autograd backward in this (the parent) process: torch 2.x imports
    torch.fx's symbolic shapes (and sympy, ~0.4 s) on the first backward, which every forked
    rank would otherwise do again, one after another on the simulator's single baton."""
    import torch
    x = torch.ones(2, requires_grad=True)
    (x * 2).backward(torch.ones(2))  # a given output gradient: the path that imports sympy


@dataclasses.dataclass(frozen=True)
class Substitution:
    """Replace `old` (which must occur exactly once in the file) with `new`."""

    old: str
    new: str


def planted_copy(directory: pathlib.Path, module: str, name: str, substitutions: Sequence[Substitution]):
    """A copy of the original's `module` ("seed_transport" or "seed_sequence_dispatch") with
    the substitutions applied, written to directory/name/module.py and imported under a
    unique module name. Raises AssertionError when a substitution does not match exactly
    once."""
    load_original()  # stubs on sys.path and imported: the copy shares its SampleKey
    text = (ORIGINAL / f"{module}.py").read_text()
    for s in substitutions:
        count = text.count(s.old)
        assert count == 1, f"planted bug {name}: {s.old!r} occurs {count} times in {module}.py (expected once)"
        text = text.replace(s.old, s.new)
    folder = directory / name
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{module}.py"
    path.write_text(text)
    unique = f"{module}__planted_{name}"
    spec = importlib.util.spec_from_file_location(unique, path)
    copy = importlib.util.module_from_spec(spec)
    sys.modules[unique] = copy
    spec.loader.exec_module(copy)
    return copy


# ---- hpref demo's corpus (tools/src/cluster_demo.cpp make_sample) ------------------------

def splitmix64(seed: int, count: int, skip: int = 0) -> np.ndarray:
    """Values skip+1 .. skip+count of hpref::SplitMix64(seed), as uint64."""
    with np.errstate(over="ignore"):
        state = (np.arange(skip + 1, skip + count + 1, dtype=np.uint64) * np.uint64(GOLDEN)
                 + np.uint64(seed & MASK64))
        z = state
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


@dataclasses.dataclass
class Sample:
    """One synthetic document: its key (the original's SampleKey), token count and value."""

    key: Any
    tokens: int
    value: Dict[str, Any]


def make_sample(seed: int, step: int, reader: int, i: int) -> Sample:
    """cluster_demo.cpp's make_sample: a variable-length document with an image."""
    import torch
    _, _, stubs = load_original()
    g_seed = (seed * GOLDEN + step * 1000003 + reader * 131 + i) & MASK64
    head = splitmix64(g_seed, 2)
    sample_id = step * 100000 + reader * 1000 + i
    tokens = 16 + int(head[0] % np.uint64(1009))
    image_bytes = 256 + int(head[1] % np.uint64(4096))
    rest = splitmix64(g_seed, tokens + image_bytes + 1, skip=2)
    ids = (rest[:tokens] % np.uint64(50257)).astype(np.int64)
    image = (rest[tokens:tokens + image_bytes] & np.uint64(0xFF)).astype(np.uint8).tobytes()
    quality = float(int(rest[-1] % np.uint64(1000))) / 1000.0
    meta = {"source": "web/crawl-2026-10" if sample_id % 3 else "books/ü-set",
            "quality": quality,
            "tags": ["en", "long" if tokens > 100 else "short"]}
    value = {"input_ids": torch.from_numpy(ids), "image": image, "meta": meta}
    return Sample(stubs.SampleKey(sample_id, 0), tokens, value)


def reader_samples(seed: int, step: int, reader_index: int) -> List[Sample]:
    """The samples reader `reader_index` materialises in `step`."""
    return [make_sample(seed, step, reader_index, i) for i in range(SAMPLES_PER_READER)]


def imbalance(loads: Sequence[int]) -> float:
    """max / mean of the loads (1.0 for an empty load), as cluster_demo.cpp."""
    mean = float(sum(loads)) / float(len(loads))
    return float(max(loads)) / mean if mean > 0 else 1.0


def balance(reports: Sequence[Sequence[Tuple[Any, int]]], constructors: Sequence[int]):
    """cluster_demo.cpp's planner: longest document first onto the least-loaded constructor
    with capacity left. Returns ([(key, constructor rank)], imbalance before, after)."""
    entries = [(key, tokens) for report in reports for key, tokens in report]
    dp = len(constructors)
    naive, load, count = [0] * dp, [0] * dp, [0] * dp
    for i, (_, tokens) in enumerate(entries):
        naive[i % dp] += tokens
    capacity = (len(entries) + dp - 1) // dp
    targets = []
    for key, tokens in sorted(entries, key=lambda e: -e[1]):  # stable, as std::stable_sort
        best = dp
        for d in range(dp):
            if count[d] < capacity and (best == dp or load[d] < load[best]):
                best = d
        load[best] += tokens
        count[best] += 1
        targets.append((key, constructors[best]))
    return targets, imbalance(naive), imbalance(load)


# ---- the model batch --------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class BatchField:
    """A declared field as the original's ModelParallelTransport reads it (.name, .dtype a
    torch dtype, .device "cpu" or "accelerator")."""

    name: str
    dtype: Any
    device: str
    dims: Tuple[Any, ...]


class DemoBatchLayout:
    """The ModelBatchLayout the original binds (its module is not in the seeds): the demo's
    declaration, SPEC 6.2-6.3 header and shapes by hpref.planning."""

    def __init__(self, model_batch_spec: Any) -> None:
        import torch
        import hpref.planning as planning
        self.spec = model_batch_spec
        self._layout = planning.batch_layout(model_batch_spec)
        self.fields = tuple(BatchField(f.name, getattr(torch, f.dtype), "cpu" if f.placement == "cpu" else f.placement,
                                       tuple(f.dims)) for f in self._layout.fields)
        self.dynamic_dimensions = len(self._layout.symbols)

    def flatten(self, batch: Dict[str, Any]) -> list:
        """The batch's tensors in field order, after SPEC 6.2's checks."""
        import hpref.planning as planning
        planning.batch_header(self._layout, batch)
        return [batch[f.name] for f in self.fields]

    def dimensions(self, tensors: Sequence[Any]) -> list:
        """The symbol values of the flattened tensors (the header after its status)."""
        import hpref.planning as planning
        return list(planning.batch_header(self._layout, dict(zip((f.name for f in self.fields), tensors)))[1:])

    def shapes(self, values: Sequence[int]) -> list:
        """Every field's shape from the symbol values."""
        import hpref.planning as planning
        return [tuple(s) for s in planning.batch_shapes(self._layout, (1, *values))]

    def rebuild(self, tensors: Sequence[Any]) -> Dict[str, Any]:
        """The batch mapping from the received tensors."""
        return {f.name: t for f, t in zip(self.fields, tensors)}


def batch_spec():
    """cluster_demo.cpp's batch_layout(): tokens (accelerator), doc_lens and images (cpu)."""
    import hpref.planning as planning
    return [planning.Field("tokens", "int64", "accelerator", ("T",)),
            planning.Field("doc_lens", "int64", "cpu", ("N",)),
            planning.Field("images", "uint8", "cpu", ("I",))]


def pack(items: Sequence[Tuple[Any, Dict[str, Any]]]) -> Dict[str, Any]:
    """cluster_demo.cpp's pack: the received samples sorted by sample id, their tokens,
    document lengths and images concatenated."""
    import torch
    ordered = sorted(items, key=lambda kv: kv[0].sample_id)
    tokens = [v["input_ids"] for _, v in ordered]
    return {"tokens": torch.cat(tokens) if tokens else torch.empty(0, dtype=torch.int64),
            "doc_lens": torch.tensor([t.numel() for t in tokens], dtype=torch.int64),
            "images": torch.frombuffer(bytearray(b"".join(v["image"] for _, v in ordered)), dtype=torch.uint8)
            if ordered else torch.empty(0, dtype=torch.uint8)}


# ---- the context-parallel dispatch of a batch -------------------------------------------

def float_rows(rows: int, values: np.ndarray) -> Any:
    """`values` (rows x WIDTH, already float32 as cluster_demo.cpp computes them) as a
    contiguous (rows, WIDTH) float32 torch tensor."""
    import torch
    return torch.from_numpy(np.ascontiguousarray(values, dtype=np.float32).reshape(rows, WIDTH))


@dataclasses.dataclass
class DispatchInputs:
    """One model-parallel group's dispatch of a batch: the document boundaries, rows per
    rank, the raw and compressed banks and each route family's per-rank output gradients."""

    boundaries: Tuple[int, ...]
    local: int
    bank: Any
    compressed: Any
    window_grads: Dict[int, Any]
    prefix_grads: Dict[int, Any]


def dispatch_inputs(batch: Dict[str, Any], cp: int, seed: int, window_routes, prefix_routes_fn, ratio: int,
                    compressed_document_offsets) -> DispatchInputs:
    """cluster_demo.cpp's banks and gradients for `batch`; `window_routes(boundaries,
    local)` and `prefix_routes_fn(boundaries, local)` give the per-rank routes."""
    tokens = batch["tokens"].numpy().astype(np.int64)
    n_tokens = tokens.size
    local = (n_tokens + cp - 1) // cp
    boundaries = [0]
    for n in batch["doc_lens"].tolist():
        boundaries.append(boundaries[-1] + n)
    if local * cp > n_tokens:
        boundaries.append(local * cp)  # a padding document
    boundaries = tuple(boundaries)
    rows = local * cp
    token = np.zeros(rows, dtype=np.int64)
    token[:n_tokens] = tokens
    j = np.arange(WIDTH, dtype=np.int64)
    bank = float_rows(rows, ((token[:, None] * 31 + j[None, :] * 7) % 1000).astype(np.float32) / np.float32(8))
    keys = compressed_document_offsets(boundaries, ratio)
    blocks = np.arange(keys[-1], dtype=np.int64)
    compressed = float_rows(int(keys[-1]), ((blocks[:, None] * 17 + j[None, :]) % 251).astype(np.float32)
                            / np.float32(4))

    def grads(routes):
        out = {}
        for r, route in enumerate(routes):
            n = route.global_end - route.global_start
            row = np.arange(n, dtype=np.int64)
            out[r] = float_rows(n, ((seed + r * 7 + row[:, None] * 13 + j[None, :]) % 97).astype(np.float32)
                                / np.float32(16))
        return out

    return DispatchInputs(boundaries, local, bank, compressed,
                          grads(window_routes(boundaries, local)), grads(prefix_routes_fn(boundaries, local)))


def owner_offsets(routes) -> List[int]:
    """Where each rank's owner shard starts in the global bank (and the end)."""
    out = [0]
    for r in routes:
        out.append(out[-1] + r.local_length)
    return out


# ---- FNV-1a 64 (hpref::fnv1a64) ----------------------------------------------------------

FNV_OFFSET = 0xCBF29CE484222325


def fnv1a64(data: bytes, h: int = FNV_OFFSET) -> int:
    """FNV-1a 64 of `data` continuing from `h`."""
    prime = 0x100000001B3
    for b in data:
        h = ((h ^ b) * prime) & MASK64
    return h


def tensor_bytes(t: Any) -> bytes:
    """A tensor's bytes in row-major order."""
    import torch
    return t.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def demo_data_checksum(per_rank: Sequence[Sequence[Tuple[int, Sequence[Any]]]]) -> int:
    """hpref demo's data checksum: for each rank, per step, FNV-1a of the batch digest then
    of each dispatch result (window forward, window input gradient, prefix forward, prefix
    input gradient); then FNV-1a of the ranks' values (uint64 little-endian, rank order).
    `per_rank[r]` lists (batch digest, [four tensors]) per step."""
    finals = []
    for steps in per_rank:
        h = FNV_OFFSET
        for digest, tensors in steps:
            h = fnv1a64(digest.to_bytes(8, "little"), h)
            for t in tensors:
                h = fnv1a64(tensor_bytes(t), h)
        finals.append(h)
    return fnv1a64(b"".join(v.to_bytes(8, "little") for v in finals))


def batch_digest(batch: Dict[str, Any]) -> int:
    """cluster_demo.cpp's batch_digest: FNV-1a over the fields' bytes in field order."""
    h = FNV_OFFSET
    for name in ("tokens", "doc_lens", "images"):
        h = fnv1a64(tensor_bytes(batch[name]), h)
    return h


# ---- the mesh ---------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Mesh:
    """The demo's mesh: dp x cp ranks, readers the last cp rank of each replica, planner 0."""

    dp: int = 2
    cp: int = 4

    @property
    def world(self) -> int:
        return self.dp * self.cp

    @property
    def readers(self) -> Tuple[int, ...]:
        return tuple(d * self.cp + self.cp - 1 for d in range(self.dp))

    @property
    def constructors(self) -> Tuple[int, ...]:
        return tuple(d * self.cp for d in range(self.dp))

    @property
    def data_plane(self) -> Tuple[int, ...]:
        return tuple(sorted(set(self.readers) | set(self.constructors)))

    def topology(self, rank: int):
        """The original's DataTopology (stubs.py's stand-in) of `rank`, derived by
        hpref.planning.topology (SPEC 3.1)."""
        import hpref.planning as planning
        _, _, stubs = load_original()
        t = planning.topology((self.dp, self.cp), ("dp", "cp"), range(self.world), rank)
        return stubs.DataTopology(rank_list=tuple(t.rank_list), global_rank=t.global_rank,
                                  constructor_ranks=tuple(t.constructor_ranks), constructor_rank=t.constructor_rank,
                                  model_parallel_ranks=tuple(t.model_parallel_ranks),
                                  model_parallel_rank_groups=tuple(tuple(g) for g in t.model_parallel_rank_groups))


# ---- expected results, from hpref's pieces -----------------------------------------------

@dataclasses.dataclass
class ExpectedStep:
    """One step as hpref's pieces predict it: the planner's reports and plan, each reader's
    outgoing items per target, each constructor's received items (in the order the
    original merges them) and batch."""

    reports: List[List[Tuple[Any, int]]]
    plan: List[Tuple[Any, int]]
    before: float
    after: float
    outgoing: Dict[int, Dict[int, List[Tuple[Any, Any]]]]
    received: Dict[int, List[Tuple[Any, Any]]]
    batches: Dict[int, Dict[str, Any]]


def expected_step(seed: int, step: int, mesh: Mesh) -> ExpectedStep:
    """What every data-plane rank sends and receives in `step`, and every constructor's
    batch."""
    samples = {r: reader_samples(seed, step, i) for i, r in enumerate(mesh.readers)}
    reports = [[(s.key, s.tokens) for s in samples.get(r, [])] for r in mesh.data_plane]
    plan, before, after = balance(reports, mesh.constructors)
    outgoing: Dict[int, Dict[int, List[Tuple[Any, Any]]]] = {r: {} for r in mesh.data_plane}
    for key, target in plan:
        for r, ss in samples.items():
            for s in ss:
                if s.key == key:
                    outgoing[r].setdefault(target, []).append((s.key, s.value))
    received = {c: [item for r in mesh.data_plane for item in outgoing[r].get(c, [])] for c in mesh.constructors}
    batches = {c: pack(received[c]) for c in mesh.constructors}
    return ExpectedStep(reports, plan, before, after, outgoing, received, batches)


# ---- the rank programs --------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class StepOptions:
    """What the data step runs: steps, seed (corpus and gradients), the route parameters,
    whether each rank returns its tensors (or only a small summary), and the modules (the
    original's, or planted copies: names in sys.modules, so a forked rank finds them)."""

    seed: int = 1
    steps: int = 5
    window: int = 64
    ratio: int = 2
    mesh: Mesh = Mesh()
    transport: str = "seed_transport"
    dispatch: str = "seed_sequence_dispatch"
    keep: bool = True


def data_step(rank: int, options: StepOptions) -> Dict[str, Any]:
    """One simulated rank of the original's data step (the demo's, step for step): groups,
    then per step the metadata gather to the planner, the plan broadcast, the payload
    all-to-all, the model-parallel batch broadcast and the context-parallel dispatch of the
    batch (sliding-window and document-prefix routes, forward and backward). Returns what
    this rank sent, received and computed, per step."""
    import torch
    import torch.distributed as dist
    load_original()
    transport = sys.modules[options.transport]
    dispatch = sys.modules[options.dispatch]
    transport.ModelBatchLayout = DemoBatchLayout  # stubs.py's stand-in models no batch
    mesh = options.mesh
    topology = mesh.topology(rank)
    groups = transport.create_data_groups(topology, mesh.readers, 0, cpu_backend="gloo", payload_backend=None,
                                          communication_device=None, enable_payload_exchange=True)
    data = transport.DataPlaneTransport(groups, rank)
    model = transport.ModelParallelTransport(topology, groups, model_batch_spec=batch_spec())
    reader_index = mesh.readers.index(rank) if rank in mesh.readers else None
    k = rank % mesh.cp
    out: Dict[str, Any] = {"backend": dist.get_backend(groups.model_parallel_group), "steps": []}
    for step in range(options.steps):
        record: Dict[str, Any] = {}
        batch = None
        if data.is_member:
            samples = reader_samples(options.seed, step, reader_index) if reader_index is not None else []
            gathered = data.gather_object_to_planner([(s.key, s.tokens) for s in samples])
            plan = None
            if gathered is not None:
                plan = balance(gathered, topology.constructor_ranks)
            plan = data.broadcast_from_planner(plan)
            outgoing: Dict[int, list] = {}
            for key, target in plan[0]:
                for s in samples:
                    if s.key == key:
                        outgoing.setdefault(target, []).append((s.key, s.value))
            prepared = data.prepare_exchange(outgoing)
            received = data.exchange_prepared(prepared)
            record.update(plan=plan if rank == 0 else None, input_splits=prepared.input_splits,
                          sent=bytes(prepared.send_storage), received=list(received.items()))
            if rank == topology.constructor_rank:
                batch = pack(list(received.items()))
        got = model.broadcast(batch)
        record["batch"] = got
        if got is not None:
            inputs, results = _dispatch_batch(dispatch, got, k, options, groups.model_parallel_group)
            record["dispatch"] = results
            record["boundaries"] = inputs.boundaries
        if not options.keep:
            record = {"digest": batch_digest(got) if got is not None else None}
        out["steps"].append(record)
    return out


def _routes(dispatch, options: StepOptions, cp: int):
    def window(boundaries, local):
        return [dispatch.sliding_window_route(boundaries, local, cp, r, options.window) for r in range(cp)]

    def prefix(boundaries, local):
        return [dispatch.document_prefix_route(boundaries, local, cp, r, options.ratio) for r in range(cp)]
    return window, prefix


def _dispatch_batch(dispatch, batch, k: int, options: StepOptions, group):
    """The original's async_sequence_dispatch of this rank's shard of the batch's banks,
    forward and backward, over the model-parallel (context-parallel) group."""
    _, _, stubs = load_original()
    cp = options.mesh.cp
    window, prefix = _routes(dispatch, options, cp)
    inputs = dispatch_inputs(batch, cp, options.seed, window, prefix, options.ratio, stubs.compressed_document_offsets)
    results = []
    for routes, bank, grads in ((window(inputs.boundaries, inputs.local), inputs.bank, inputs.window_grads),
                                (prefix(inputs.boundaries, inputs.local), inputs.compressed, inputs.prefix_grads)):
        owners = owner_offsets(routes)
        shard = bank[owners[k]:owners[k + 1]].clone().requires_grad_(True)
        output = dispatch.async_sequence_dispatch(shard, 0, routes[k], group).wait()
        output.backward(grads[k])
        results += [output.detach().clone(), shard.grad.clone()]
    return inputs, results


def dispatch_program(rank: int, cases: Sequence[Tuple[str, str, int, int, tuple]], boundaries: Tuple[int, ...],
                     local: int, dtypes: Sequence[str], bank_and_grads) -> Dict[Tuple[str, str], Any]:
    """The original's async_sequence_dispatch of every case and dtype on the world group,
    forward and backward: {(case, dtype): (output, input gradient)} or the refusal's text."""
    import torch
    import torch.distributed as dist
    _, dispatch, _ = load_original()
    world = dist.get_world_size()
    results: Dict[Tuple[str, str], Any] = {}
    for index, (name, kind, last, dim, shape) in enumerate(cases):
        one = dispatch.sliding_window_route if kind == "sliding_window" else dispatch.document_prefix_route
        plan = [one(boundaries, local, world, r, last) for r in range(world)]
        owners = owner_offsets(plan)
        for dtype in dtypes:
            bank, grads = bank_and_grads(shape, dim, dtype, plan, index)
            shard = bank.narrow(dim, owners[rank], owners[rank + 1] - owners[rank]).contiguous().requires_grad_(True)
            output = dispatch.async_sequence_dispatch(shard, dim, plan[rank], None).wait()
            output.backward(grads[rank])
            results[(name, dtype)] = (output.detach().clone(), shard.grad.clone())
    return results


def trace_launches(trace: Sequence[str], rank: int) -> List[List[str]]:
    """Rank `rank`'s operation launches in a run's trace, in order, as split lines
    ("rR gG sS kind bytes=... ...")."""
    tag = f"r{rank}"
    return [w for w in (line.split() for line in trace)
            if len(w) > 3 and w[0] == tag and w[1].startswith("g") and w[2].startswith("s")]
