"""The original (../shared/original), unmodified, on hpref's simulated cluster (issue 12,
"Acceptance: the original, unmodified, on the simulator"): `hpref.sim.run` forks the ranks
and torch.distributed inside them is served by the simulator (hpref._torch_pg), whatever
backend name the original asks for.

1. Data step: 8 ranks, mesh dp=2 x cp=4, 5 steps of `hpref demo`'s corpus through the
   original's transport (groups with cpu_backend="gloo", metadata gather to the planner,
   plan broadcast, payload all-to-all, model-parallel batch broadcast) and its dispatch of
   each batch: per rank and step, the received items, the batch and the dispatch results
   (and the planner's plan) equal what hpref's own C++ transports produced for the same
   inputs and seed (`hpref demo --dump`, decoded by hpref.codec; by value, tensors
   bitwise); every rank's sent bytes, received items, batch and dispatch results also equal
   hpref's Python pieces (codec, planning, oracle), the data checksum equals the demo's,
   and a second run has the same trace hash.
2. Dispatch: async_sequence_dispatch forward and backward, window and document-prefix
   routes, 4 and 8 ranks, float32, bfloat16 and float16, bitwise equal to hpref.oracle.
3. Planted bugs: copies of the original with one bug each (textual substitutions that must
   match exactly once) are found within 64 seeds with the right failure class, and the replay
   (same seed and faults) reproduces the class, every rank's error and the trace hash.
4. Faults: a reader crashed at its payload all-to-all ends every other rank with
   PeerFailed at once; flipped payload bytes give the original's decode error or wrong
   data, as the test predicts for the byte chosen.

Skips, saying why, where ../shared/original, torch or hpref._torch_pg is absent.
`original_harness.py` holds the demo's corpus rebuilt in Python and the rank programs."""
from __future__ import annotations

import json
import pathlib
import struct
import subprocess
import time

import pytest

torch = pytest.importorskip("torch", reason="the original runs on torch; torch is not importable")

import hpref  # noqa: E402
import hpref.codec as codec  # noqa: E402
import hpref.oracle as oracle  # noqa: E402
import hpref.routes as routes  # noqa: E402
import hpref.sim as sim  # noqa: E402

import original_harness as H  # noqa: E402
from original_harness import Substitution as Sub  # noqa: E402
from tensor_cases import bank_and_grads, bits  # noqa: E402

if not H.original_present():
    pytest.skip(f"the original implementation is absent ({H.ORIGINAL})", allow_module_level=True)
try:
    import hpref._torch_pg  # noqa: F401,E402
except ImportError as e:  # the process-group adapter is what puts the original on the simulator
    pytest.skip(f"torch.distributed on the simulator (hpref._torch_pg) is not importable: {e}",
                allow_module_level=True)

TRANSPORT, _, STUBS = H.load_original()
H.warm_torch()

SEED = 7       # corpus, gradients and schedule of the data step
STEPS = 5
TIMEOUT_S = 60.0
MESH = H.Mesh(dp=2, cp=4)


def same_tensor(a, b) -> bool:
    """Same dtype, shape and bits."""
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(bits(a), bits(b))


def same_value(a, b) -> bool:
    """Equal by value, tensors bitwise (dicts in order, lists, tuples, scalars, bytes)."""
    if torch.is_tensor(a) or torch.is_tensor(b):
        return torch.is_tensor(a) and torch.is_tensor(b) and same_tensor(a, b)
    if isinstance(a, dict):
        return (isinstance(b, dict) and list(a) == list(b)
                and all(same_value(a[k], b[k]) for k in a))
    if isinstance(a, (list, tuple)):
        return (type(a) is type(b) and len(a) == len(b)
                and all(same_value(x, y) for x, y in zip(a, b)))
    return type(a) is type(b) and a == b


def same_items(got, want) -> bool:
    """The same (key, value) pairs in the same order."""
    return len(got) == len(want) and all(
        kg == kw and type(kg) is type(kw) and same_value(vg, vw) for (kg, vg), (kw, vw) in zip(got, want))


# ---- 1. the data step ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def expected():
    """Every step as hpref's pieces predict it (corpus, planner, codec order, batches)."""
    return [H.expected_step(SEED, step, MESH) for step in range(STEPS)]


@pytest.fixture(scope="module")
def data_run():
    """The original's 5-step data step on 8 simulated ranks, and its wall time."""
    start = time.perf_counter()
    result = sim.run(MESH.world, H.data_step, H.StepOptions(seed=SEED, steps=STEPS, mesh=MESH), seed=SEED,
                     timeout_s=TIMEOUT_S, trace=True)
    return result, time.perf_counter() - start


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    """`hpref demo --json --dump DIR` (hpref's C++ transports on the simulator) for the same
    mesh, steps, seed and corpus: its JSON report, the dump folder and its manifest."""
    if not H.CLI.exists():
        pytest.skip(f"the hpref command is not built at {H.CLI}")
    folder = tmp_path_factory.mktemp("demo-dump")
    run = subprocess.run([str(H.CLI), "demo", "--json", "--seed", str(SEED), "--steps", str(STEPS), "--ranks",
                          str(MESH.world), "--dp", str(MESH.dp), "--dump", str(folder)],
                         capture_output=True, text=True, timeout=120)
    report = json.loads(run.stdout)
    assert report["ok"] and report["exit_code"] == 0, run.stdout + run.stderr
    assert report["dump"] == str(folder / "manifest.json")
    return report, folder, json.loads((folder / "manifest.json").read_text())


@pytest.fixture(scope="module")
def demo_json(demo_run):
    """The JSON report of `hpref demo` (the run that wrote the dump)."""
    return demo_run[0]


class CppDump:
    """What `hpref demo --dump` wrote: per step and rank, the C++ transports' received items,
    batch and dispatch results, and the planner's plan, decoded by hpref.codec."""

    def __init__(self, folder: pathlib.Path, manifest):
        self.folder = folder
        self.manifest = manifest

    def _decode(self, relative: str):
        return codec.decode((self.folder / relative).read_bytes(), strict=True, key_class=STUBS.SampleKey)

    def _entry(self, step: int, rank: int):
        entry = self.manifest["files"][step]["ranks"][rank]
        assert entry["rank"] == rank
        return entry

    def items(self, step: int, rank: int):
        """The items rank's exchange returned, in its order (None: not a data-plane rank)."""
        relative = self._entry(step, rank)["items"]
        return None if relative is None else self._decode(relative)

    def batch(self, step: int, rank: int):
        """The model-parallel batch the rank ended the step with."""
        [(key, batch)] = self._decode(self._entry(step, rank)["batch"])
        assert key == "batch"
        return batch

    def dispatch(self, step: int, rank: int):
        """Window forward, window input gradient, prefix forward, prefix input gradient."""
        items = self._decode(self._entry(step, rank)["dispatch"])
        assert [k for k, _ in items] == ["window_forward", "window_backward", "prefix_forward", "prefix_backward"]
        return [v for _, v in items]

    def plan(self, step: int):
        """The plan the planner broadcast: ([((sample_id, position), constructor)], before, after)."""
        [(key, plan)] = self._decode(self.manifest["files"][step]["plan"])
        assert key == "plan"
        return plan


@pytest.fixture(scope="module")
def cpp_dump(demo_run):
    return CppDump(demo_run[1], demo_run[2])


def oracle_dispatch(batch, seed=SEED):
    """hpref's routes and oracle for the demo's dispatch of `batch`: per cp rank the window
    forward, window input gradient, prefix forward, prefix input gradient."""
    def window(b, local):
        return routes.plan_all("sliding_window", b, local, MESH.cp, 64)

    def prefix(b, local):
        return routes.plan_all("document_prefix", b, local, MESH.cp, 2)
    inputs = H.dispatch_inputs(batch, MESH.cp, seed, window, prefix, 2, routes.compressed_document_offsets)
    w, p = window(inputs.boundaries, inputs.local), prefix(inputs.boundaries, inputs.local)
    wf = oracle.dispatch_forward(inputs.bank, w)
    wb = oracle.dispatch_backward([inputs.window_grads[k] for k in range(MESH.cp)], w)
    pf = oracle.dispatch_forward(inputs.compressed, p)
    pb = oracle.dispatch_backward([inputs.prefix_grads[k] for k in range(MESH.cp)], p)
    return [[wf[k], wb[k], pf[k], pb[k]] for k in range(MESH.cp)]


def test_the_harness_corpus_is_hpref_demos(expected, demo_json):
    """The Python rebuild of the demo (corpus, planner, batches; dispatch by hpref.oracle)
    has the C++ demo's data checksum, sample count and imbalance: the inputs below are the
    ones hpref's C++ transports move."""
    per_rank = [[] for _ in range(MESH.world)]
    for step in expected:
        for c in MESH.constructors:
            digest = H.batch_digest(step.batches[c])
            for k, tensors in enumerate(oracle_dispatch(step.batches[c])):
                per_rank[c + k].append((digest, tensors))
    assert f"{H.demo_data_checksum(per_rank):016x}" == demo_json["data_checksum"]
    assert sum(len(s.plan) for s in expected) == demo_json["samples"]
    assert sum(s.before for s in expected) / STEPS == demo_json["imbalance_before"]
    assert sum(s.after for s in expected) / STEPS == demo_json["imbalance_after"]


def test_the_cpp_dump_covers_the_same_run(demo_run):
    """The dump is of the harness's mesh, seed and steps, lists every rank of every step and
    nothing else is in its folders."""
    _, folder, manifest = demo_run
    assert (manifest["seed"], manifest["steps"], manifest["ranks"], manifest["dp"], manifest["cp"]) == (
        SEED, STEPS, MESH.world, MESH.dp, MESH.cp)
    assert tuple(manifest["data_plane"]) == MESH.data_plane
    listed = {"manifest.json"}
    for step, files in enumerate(manifest["files"]):
        assert files["step"] == step and [e["rank"] for e in files["ranks"]] == list(range(MESH.world))
        listed.add(files["plan"])
        for e in files["ranks"]:
            assert (e["items"] is not None) == (e["rank"] in MESH.data_plane)
            listed.update(v for k, v in e.items() if k != "rank" and v is not None)
    assert len(manifest["files"]) == STEPS
    assert {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()} == listed


def test_every_rank_receives_the_items_hprefs_cpp_transports_received(data_run, cpp_dump):
    """Acceptance 1: per step and rank, the items the original's exchange returned equal, in
    order and by value (tensors bitwise), those hpref's C++ DataPlaneTransport returned."""
    values = data_run[0].values()
    for step in range(STEPS):
        received = 0
        for rank in range(MESH.world):
            got = values[rank]["steps"][step]
            cpp = cpp_dump.items(step, rank)
            if rank not in MESH.data_plane:
                assert cpp is None and "received" not in got, (step, rank)
                continue
            assert same_items(got["received"], cpp), (step, rank)
            received += len(cpp)
        assert received == len(MESH.readers) * H.SAMPLES_PER_READER  # every sample arrived once


def test_every_rank_ends_with_the_batch_hprefs_cpp_transports_produced(data_run, cpp_dump):
    """Acceptance 1: per step and rank, the model-parallel batch equals the C++ one (field
    order, dtype, shape, bits)."""
    values = data_run[0].values()
    for step in range(STEPS):
        for rank in range(MESH.world):
            cpp = cpp_dump.batch(step, rank)
            assert list(cpp) == ["tokens", "doc_lens", "images"] and cpp["tokens"].numel() > 0
            assert same_value(values[rank]["steps"][step]["batch"], cpp), (step, rank)


def test_every_rank_dispatches_what_hprefs_cpp_dispatch_produced(data_run, cpp_dump):
    """Per step and rank, the original's dispatch outputs and input gradients are the C++
    sequence_dispatch's, bitwise."""
    values = data_run[0].values()
    for step in range(STEPS):
        for rank in range(MESH.world):
            got = values[rank]["steps"][step]["dispatch"]
            for name, a, b in zip(("window out", "window grad", "prefix out", "prefix grad"), got,
                                  cpp_dump.dispatch(step, rank)):
                assert same_tensor(a, b), (step, rank, name)


def test_the_planner_broadcasts_the_cpp_planners_plan(data_run, cpp_dump):
    values = data_run[0].values()
    for step in range(STEPS):
        targets, before, after = values[0]["steps"][step]["plan"]
        cpp_targets, cpp_before, cpp_after = cpp_dump.plan(step)
        assert [((k.sample_id, k.position), t) for k, t in targets] == [tuple(e) for e in cpp_targets]
        assert (before, after) == (cpp_before, cpp_after)


def test_the_data_step_runs_on_8_simulated_ranks(data_run):
    result, wall = data_run
    assert result.ok and result.failure == "none", [(r.rank, r.status, r.message) for r in result.ranks]
    values = result.values()
    assert all(v["backend"] == "gloo" for v in values)  # dist.get_backend answers the asked name
    assert all(len(v["steps"]) == STEPS for v in values)
    print(f"data step: {STEPS} steps on {MESH.world} ranks in {wall:.2f} s, {result.decisions} decisions")


def test_every_data_plane_rank_sends_and_receives_what_hpref_predicts(data_run, expected):
    """The planner's plan, each rank's send segments (decoded by hpref.codec; binary regions
    byte for byte those hpref.codec.encode writes) and each constructor's received items."""
    values = data_run[0].values()
    for index, want in enumerate(expected):
        targets, before, after = values[0]["steps"][index]["plan"]
        assert targets == want.plan and before == want.before and after == want.after
        for rank in MESH.data_plane:
            got = values[rank]["steps"][index]
            cursor = 0
            for target, size in zip(MESH.data_plane, got["input_splits"]):
                segment = got["sent"][cursor:cursor + size]
                cursor += size
                items = want.outgoing[rank].get(target, [])
                assert size == 0 if not items else size > 0
                if not items:
                    continue
                decoded = codec.decode(segment, key_class=STUBS.SampleKey)
                assert same_items(decoded, items), (index, rank, target)
                ours = codec.encode(items, key_class=STUBS.SampleKey)
                assert binary_region(segment) == binary_region(ours), (index, rank, target)
            received = got["received"]
            if rank in MESH.constructors:
                assert same_items(received, want.received[rank]), (index, rank)
            else:
                assert received == []


def binary_region(segment: bytes) -> bytes:
    """The tensor/bytes region of an HPB1 segment (after the header and metadata pickle)."""
    magic, metadata, binary = struct.unpack_from("!4sQQ", segment)
    assert magic == b"HPB1" and 20 + metadata + binary == len(segment)
    return segment[20 + metadata:]


def test_every_rank_holds_its_constructors_batch(data_run, expected):
    values = data_run[0].values()
    for index, want in enumerate(expected):
        for rank in range(MESH.world):
            batch = values[rank]["steps"][index]["batch"]
            constructor = rank // MESH.cp * MESH.cp
            assert list(batch) == ["tokens", "doc_lens", "images"]
            assert same_value(batch, want.batches[constructor]), (index, rank)


def test_the_dispatch_of_each_batch_equals_the_oracle(data_run, expected):
    values = data_run[0].values()
    for index, want in enumerate(expected):
        for c in MESH.constructors:
            for k, tensors in enumerate(oracle_dispatch(want.batches[c])):
                got = values[c + k]["steps"][index]["dispatch"]
                for name, a, b in zip(("window out", "window grad", "prefix out", "prefix grad"), got, tensors):
                    assert same_tensor(a, b), (index, c + k, name)


def test_the_data_checksum_equals_hpref_demos(data_run, demo_json):
    """What the original's ranks hold (batches and dispatch results) hashed as `hpref demo`
    hashes what hpref's C++ transports hold, for the same seed."""
    values = data_run[0].values()
    per_rank = [[(H.batch_digest(s["batch"]), s["dispatch"]) for s in v["steps"]] for v in values]
    assert f"{H.demo_data_checksum(per_rank):016x}" == demo_json["data_checksum"]


@pytest.fixture(scope="module")
def second_data_run():
    return sim.run(MESH.world, H.data_step, H.StepOptions(seed=SEED, steps=STEPS, mesh=MESH), seed=SEED,
                   timeout_s=TIMEOUT_S, trace=True)


def test_a_second_run_has_the_same_trace_hash(data_run, second_data_run):
    first = data_run[0]
    assert second_data_run.ok and second_data_run.trace_hash == first.trace_hash
    assert second_data_run.trace == first.trace
    other = sim.run(MESH.world, H.data_step, H.StepOptions(seed=SEED, steps=STEPS, mesh=MESH), seed=SEED + 1,
                    timeout_s=TIMEOUT_S)
    assert other.ok and other.trace_hash != first.trace_hash  # the seed picks the schedule


# ---- 2. the dispatch ---------------------------------------------------------------------

DTYPES = ("float32", "bfloat16", "float16")
# (name, route kind, window or ratio, sequence dim, bank shape with None for the sequence)
CASES = [("window", "sliding_window", 11, 0, (None, 5)),
         ("window-dim1", "sliding_window", 3, 1, (2, None, 3)),
         ("prefix", "document_prefix", 2, 0, (None, 5)),
         ("prefix-dim-2", "document_prefix", 1, -2, (None, 4))]
LOCAL = 8
# documents over 4 and 8 ranks of 8 rows, some across three or more ranks
BOUNDARIES = {4: (0, 3, 27, 28, 32), 8: (0, 3, 27, 28, 45, 46, 64)}


@pytest.fixture(scope="module", params=[4, 8])
def dispatch_run(request):
    world = request.param
    result = sim.run(world, H.dispatch_program, CASES, BOUNDARIES[world], LOCAL, DTYPES, bank_and_grads,
                     seed=world, timeout_s=TIMEOUT_S)
    return world, result


@pytest.mark.parametrize("case", range(len(CASES)), ids=[c[0] for c in CASES])
def test_the_dispatch_equals_the_oracle_bitwise(dispatch_run, case):
    world, result = dispatch_run
    assert result.ok, [(r.rank, r.status, r.error_type, r.message) for r in result.ranks]
    values = result.values()
    name, kind, last, dim, shape = CASES[case]
    plan = routes.plan_all(kind, BOUNDARIES[world], LOCAL, world, last)
    assert any(r.needs_exchange and sum(r.output_splits) > 0 for r in plan)
    for dtype in DTYPES:  # bfloat16 too on torch 1.13: the simulator moves bytes, gloo 1.13 refuses it
        bank, grads = bank_and_grads(shape, dim, dtype, plan, case)
        forward = oracle.dispatch_forward(bank, plan, dim)
        backward = oracle.dispatch_backward(grads, plan, dim)
        for rank in range(world):
            out, grad = values[rank][(name, dtype)]
            assert same_tensor(out, forward[rank]), (world, name, dtype, rank)
            assert same_tensor(grad, backward[rank]), (world, name, dtype, rank)


@pytest.mark.parametrize("world", [4, 8])
@pytest.mark.parametrize("kind,last", [("sliding_window", 11), ("document_prefix", 2)])
def test_some_gradient_sums_three_or_more_terms(world, kind, last):
    """The cases above exercise the order of a float sum: some row is its owner's and two
    peers' (a sum of two terms would be the same in either order)."""
    plan = routes.plan_all(kind, BOUNDARIES[world], LOCAL, world, last)
    rows = sum(r.local_length for r in plan)
    assert max(sum(1 for q in plan if q.global_start <= row < q.global_end) for row in range(rows)) >= 3


# ---- 3. planted bugs ---------------------------------------------------------------------

# name: (module, substitutions, failure class, {rank: kind} the root cause shows, message part)
BUGS = {
    # the split sizes go out in reversed peer order: each receiver expects another peer's count
    "split_sizes_in_wrong_order": (
        "seed_transport",
        [Sub("    size_input = torch.tensor(tuple(input_splits), dtype=torch.int64, device=size_device)\n",
             "    size_input = torch.tensor(tuple(input_splits)[::-1], dtype=torch.int64, device=size_device)\n")],
        "collective mismatch", {0: "comm_mismatch", 3: "comm_mismatch", 4: "comm_mismatch", 7: "comm_mismatch"},
        "all_to_all_v counts disagree on group 1"),
    # the last rank skips creating a model-parallel group it is not a member of
    "one_rank_skips_new_group": (
        "seed_transport",
        [Sub("        is_member = topology.global_rank in rank_group\n",
             "        is_member = topology.global_rank in rank_group\n"
             "        if not is_member and topology.global_rank == topology.rank_list[-1]:\n"
             "            continue\n")],
        "collective mismatch", {r: "comm_mismatch" for r in range(8)}, "rank 7 asked for [4, 5, 6, 7]"),
    # one model peer builds its batch header in int32, the others in int64
    "broadcast_dtype_differs_on_one_rank": (
        "seed_transport",
        [Sub("        return torch.tensor(values, dtype=torch.int64, device=device)\n",
             "        return torch.tensor(values, dtype=torch.int32 if self._global_rank == 6 else torch.int64,"
             " device=device)\n")],
        "collective mismatch", {4: "comm_mismatch", 5: "comm_mismatch", 6: "comm_mismatch", 7: "comm_mismatch"},
        "but rank 6 launched broadcast(root 4, 16 bytes)"),
    # the send storage is reused (cleared for the next step) before the exchange is waited on
    "send_buffer_reused_before_wait": (
        "seed_transport",
        [Sub("            group=self._payload_group,\n            async_op=True,\n        )\n",
             "            group=self._payload_group,\n            async_op=True,\n        )\n"
             "        prepared.send_storage[:] = bytes(len(prepared.send_storage))\n")],
        "check failed", {3: "comm_buffer_mutated", 7: "comm_buffer_mutated"},
        "changed its send buffer of all_to_all_v"),
    # the dispatch's receive count includes one row before the interval: i->j != j<-i
    "asymmetric_all_to_all_splits": (
        "seed_sequence_dispatch",
        [Sub("max(owners[peer], global_start))", "max(owners[peer], global_start - 1))")],
        "collective mismatch", {r: "comm_mismatch" for r in range(8)}, "which expects"),
    # the model-parallel transport's constructor fails on rank 5 (its batch spec is lost)
    "constructor_fails_on_one_rank": (
        "seed_transport",
        [Sub("        self._layout = None if model_batch_spec is None else ModelBatchLayout(model_batch_spec)\n",
             "        self._layout = None if model_batch_spec is None or self._global_rank == 5 else "
             "ModelBatchLayout(model_batch_spec)\n")],
        "peer failure", {5: "exception", 4: "comm_peer_failed", 6: "comm_peer_failed", 7: "comm_peer_failed"},
        "requires the same model_batch_spec"),
    # a rank with nothing to send skips the exchange: its readers wait for it, it waits for them
    "empty_sender_skips_the_exchange": (
        "seed_transport",
        [Sub("        if len(self._ranks) == 1:\n            return PayloadExchangeWork(\n",
             "        if len(self._ranks) == 1 or not any(prepared.input_splits):\n"
             "            return PayloadExchangeWork(\n")],
        "deadlock", {r: "comm_deadlock" for r in range(8)}, "deadlock: no rank can run"),
}
BUG_STEPS = 1


@pytest.fixture(scope="module")
def bug_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("planted")


def bug_options(bug_dir, name):
    module, substitutions = BUGS[name][:2]
    copy = H.planted_copy(bug_dir, module, name, substitutions)
    key = "transport" if module == "seed_transport" else "dispatch"
    return H.StepOptions(seed=SEED, steps=BUG_STEPS, mesh=MESH, keep=False, **{key: copy.__name__})


_FOUND = {}


def explore(bug_dir, name):
    """Seeds 1..64 until the first failing run: (options, seed, result)."""
    if name not in _FOUND:
        options = bug_options(bug_dir, name)
        found = None
        for seed in range(1, 65):
            result = sim.run(MESH.world, H.data_step, options, seed=seed, timeout_s=TIMEOUT_S)
            if result.failure != "none":
                found = (options, seed, result)
                break
        _FOUND[name] = found
    assert _FOUND[name] is not None, f"planted bug {name} not found within 64 seeds"
    return _FOUND[name]


@pytest.mark.parametrize("name", list(BUGS))
def test_a_planted_bug_is_found_named_and_replayed(bug_dir, name):
    options, seed, result = explore(bug_dir, name)
    _, _, failure, causes, message = BUGS[name]
    for rank, kind in causes.items():
        assert result.ranks[rank].status == "error" and result.ranks[rank].kind == kind, \
            (rank, result.ranks[rank])
    assert any(message in result.ranks[r].message for r in causes), [r.message for r in result.ranks]
    assert f"seed={seed}" in result.replay and "data_step" in result.replay
    again = sim.run(MESH.world, H.data_step, options, seed=result.seed, faults=result.faults, timeout_s=TIMEOUT_S)
    assert (again.failure, again.trace_hash) == (result.failure, result.trace_hash)
    assert [(r.status, r.kind, r.message) for r in again.ranks] == [(r.status, r.kind, r.message) for r in result.ranks]
    clean = sim.run(MESH.world, H.data_step, H.StepOptions(seed=SEED, steps=BUG_STEPS, mesh=MESH, keep=False),
                    seed=seed, timeout_s=TIMEOUT_S)
    assert clean.ok, "the unmodified original fails the same program"


@pytest.mark.parametrize("name", list(BUGS))
def test_a_planted_bug_has_the_right_failure_class(bug_dir, name):
    _, _, result = explore(bug_dir, name)
    assert result.failure == BUGS[name][2], [(r.rank, r.kind, r.message) for r in result.ranks]


def test_every_substitution_must_match_exactly_once(tmp_path):
    with pytest.raises(AssertionError, match="occurs 0 times"):
        H.planted_copy(tmp_path, "seed_transport", "absent", [Sub("no such line\n", "")])
    with pytest.raises(AssertionError, match="occurs 2 times"):
        H.planted_copy(tmp_path, "seed_transport", "twice", [Sub("        if len(self._ranks) == 1:\n"
                                                                 "            return value\n", "")])


# ---- 4. faults ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def one_step():
    """A clean 1-step run with its trace: where each rank's operations are."""
    options = H.StepOptions(seed=SEED, steps=1, mesh=MESH)
    result = sim.run(MESH.world, H.data_step, options, seed=SEED, timeout_s=TIMEOUT_S, trace=True)
    assert result.ok
    return options, result


def payload_launch(trace, rank) -> int:
    """Index (0-based) of `rank`'s payload all-to-all among its launches in step 0: its
    second all_to_all_v (the first exchanges the split sizes)."""
    launches = H.trace_launches(trace, rank)
    return [i for i, w in enumerate(launches) if w[3] == "all_to_all_v"][1]


def test_a_reader_crashed_mid_exchange_fails_every_other_rank_at_once(one_step):
    options, clean = one_step
    reader = MESH.readers[-1]
    groups = sum(1 for line in clean.trace if line.startswith("new_group"))
    # calls before it: every new_group, then a launch and a wait per operation
    call = groups + 2 * payload_launch(clean.trace, reader) + 1
    timeout_s = 100.0
    start = time.perf_counter()
    result = sim.run(MESH.world, H.data_step, options, seed=SEED, faults=[f"crash:{reader}@{call}"],
                     timeout_s=timeout_s, trace=True)
    wall = time.perf_counter() - start
    assert result.unfired_faults == [] and f"r{reader} died" in result.trace
    launched = H.trace_launches(result.trace, reader)
    assert len(launched) == payload_launch(clean.trace, reader)  # died at the payload launch, not before
    assert result.ranks[reader].status == "died" and result.failure == "peer failure"
    for r in result.ranks:
        if r.rank != reader:
            assert r.status == "error" and r.kind == "comm_peer_failed", r
            assert isinstance(r.exception(), hpref.PeerFailed)
    for r in MESH.data_plane:
        if r != reader:
            assert f"needs rank {reader}, which died" in result.ranks[r].message
    assert wall < timeout_s / 10, f"{wall:.1f} s: a rank waited for the timeout"


def segment_from_first_reader(one_step):
    """Rank 0's payload all-to-all: its launch number (1-based) and the segment it receives
    first (from reader MESH.readers[0]; rank 0 sends itself nothing), as the original encodes
    it."""
    options, clean = one_step
    step = H.expected_step(SEED, 0, MESH)
    assert not step.outgoing[0].get(0) and MESH.data_plane[:2] == (0, MESH.readers[0])
    items = step.outgoing[MESH.readers[0]][0]
    return payload_launch(clean.trace, 0) + 1, items, TRANSPORT._encode_payload_segment(items)


def test_a_flipped_metadata_size_is_the_originals_decode_error(one_step):
    """Byte 11 is the last byte of the segment's metadata length: the original refuses the
    frame (ValueError, "size does not match"), as hpref's decoder does (frame_size_mismatch,
    whose Python equivalent is ValueError); rank 0 raises it and its model peers fail at once."""
    options, _ = one_step
    launch, _, segment = segment_from_first_reader(one_step)
    flipped = bytearray(segment)
    flipped[11] ^= 0xFF
    with pytest.raises(hpref.Error) as ours:
        codec.decode(bytes(flipped))
    assert ours.value.kind == "frame_size_mismatch" and hpref.python_equivalent(ours.value) is ValueError
    result = sim.run(MESH.world, H.data_step, options, seed=SEED, faults=[f"flip:0@{launch}:11"], timeout_s=TIMEOUT_S)
    assert result.unfired_faults == []
    zero = result.ranks[0]
    assert zero.status == "error" and zero.error_type == "ValueError"
    assert "Payload frame size does not match its metadata and binary descriptors" in zero.message
    assert result.failure == "peer failure"
    for r in result.ranks[1:]:  # its model peers wait for its batch; the other replica finishes its step
        assert (r.kind == "comm_peer_failed" and "needs rank 0" in r.message) if r.rank < MESH.cp else r.status == "ok"


def test_a_flipped_tensor_byte_is_wrong_data_nobody_sees(one_step):
    """A byte of the first item's input_ids (binary region): every rank finishes, and rank 0
    holds that item with exactly that byte inverted — in its received items and in the batch
    its model peers get; the simulator moves bytes and checks none of them."""
    options, _ = one_step
    launch, items, segment = segment_from_first_reader(one_step)
    _, metadata, _ = struct.unpack_from("!4sQQ", segment)
    offset = 3  # byte 3 of the first token id of the first item (its tensor comes first)
    result = sim.run(MESH.world, H.data_step, options, seed=SEED,
                     faults=[f"flip:0@{launch}:{20 + metadata + offset}"], timeout_s=TIMEOUT_S)
    assert result.ok and result.unfired_faults == []
    step = H.expected_step(SEED, 0, MESH)
    received = result.values()[0]["steps"][0]["received"]
    want = step.received[0]
    assert [k for k, _ in received] == [k for k, _ in want]
    wrong = [i for i, ((_, a), (_, b)) in enumerate(zip(received, want)) if not same_value(a, b)]
    assert wrong == [0]
    got_ids = bits(received[0][1]["input_ids"]).view(torch.uint8).numpy()
    want_ids = bits(want[0][1]["input_ids"]).view(torch.uint8).numpy()
    assert list((got_ids != want_ids).nonzero()[0]) == [offset] and got_ids[offset] == want_ids[offset] ^ 0xFF
    assert same_value({k: v for k, v in received[0][1].items() if k != "input_ids"},
                      {k: v for k, v in want[0][1].items() if k != "input_ids"})
    for rank in range(MESH.cp):  # the constructor's batch, wrong the same way on its peers
        batch = result.values()[rank]["steps"][0]["batch"]
        assert not same_tensor(batch["tokens"], step.batches[0]["tokens"])
        assert same_tensor(batch["tokens"], H.pack(received)["tokens"])
