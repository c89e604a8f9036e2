"""Bad arguments to the public Python API are refused naming the parameter and the value
(docs/python.md: one sentence naming the bad value, the documented exception type), never a
bare TypeError from the binding, a truncated message, a silent fallback or a silent wrong
answer. Each case was found by an audit of the API (2026-12-03) and failed before its fix:
the comment says how."""
from __future__ import annotations

import os
import pickle
import subprocess
import sys
from dataclasses import dataclass

import numpy as np
import pytest

import hpref
import hpref.codec as codec
from hpref import oracle, routes

SEGMENT = codec.encode([((1, 0), 5)])


@dataclass(frozen=True)
class SK:
    sample_id: object
    position: object


# ---- codec ----------------------------------------------------------------------------------

def test_a_nul_in_a_quoted_value_does_not_end_the_message():
    # The message ended at the NUL (C++'s what() is a C string): 'cannot encode segment:
    # items[0].value["a' - what was wrong and why were lost.
    with pytest.raises(hpref.errors.UnencodableValueError) as e:
        codec.encode([((1, 0), {"a\x00b": {1}})])
    assert str(e.value) == ('cannot encode segment: items[0].value["a\\x00b"]: a Python set is not a SPEC 1.1 '
                            "Value (None, bool, int, float, str, bytes, bytearray, tuple, list, mapping, tensor)")


@pytest.mark.parametrize("call, kind, message", [
    # decode(None) and the flags reached nanobind: "incompatible function arguments" naming
    # internal parameters (make_tensor, key_arity); strict=1 and tensors="" were taken.
    (lambda: codec.decode(None), hpref.errors.InvalidArgumentError,
     "a segment must be bytes, a C-contiguous buffer (bytearray, memoryview, numpy uint8 array) or a "
     "contiguous CPU torch.uint8 tensor, got a Python NoneType"),
    (lambda: codec.decode(SEGMENT, strict=1), hpref.errors.InvalidArgumentError, "strict must be True or False, got 1"),
    (lambda: codec.decode(SEGMENT, copy=None), hpref.errors.InvalidArgumentError, "copy must be True or False, got None"),
    (lambda: codec.inspect(SEGMENT, strict=None), hpref.errors.InvalidArgumentError,
     "strict must be True or False, got None"),
    (lambda: codec.decode_received(SEGMENT, None), hpref.errors.InvalidArgumentError,
     "splits must be a sequence of byte counts, got None"),
    (lambda: codec.decode_received(None, [len(SEGMENT)]), hpref.errors.InvalidArgumentError,
     "a segment must be bytes, a C-contiguous buffer"),
    (lambda: codec.decode(SEGMENT, tensors=""), ValueError, "tensors must be 'torch', 'numpy' or 'raw', got ''"),
    (lambda: codec.decode(SEGMENT, tensors=0), ValueError, "tensors must be 'torch', 'numpy' or 'raw', got 0"),
    # torch_version=2: AttributeError ('int' object has no attribute 'split'); "2.x" was 2.0.
    (lambda: codec.decode(SEGMENT, torch_version=2), TypeError,
     "torch_version must be a str such as '2.13' or '1.13.0', got 2"),
    (lambda: codec.torch_dtypes("2.x"), ValueError, "torch_version must look like '2.13' or '1.13.0', got '2.x'"),
])
def test_codec_arguments(call, kind, message):
    with pytest.raises(kind) as e:
        call()
    assert str(e.value).startswith(message), str(e.value)


@pytest.mark.parametrize("items", [None, 5, "ab"])
def test_encode_items_must_be_pairs_or_a_mapping(items):
    # A bare TypeError ("'NoneType' object is not iterable") naming no parameter.
    with pytest.raises(hpref.errors.InvalidArgumentError,
                       match="items must be a sequence of \\(key, value\\) pairs or a mapping, got "):
        codec.encode(items)


def test_a_release_candidate_version_is_its_release():
    # "2.1rc1" was read as 2.11 (every digit of the minor part): all 28 dtypes.
    assert codec.torch_dtypes("2.1rc1") == codec.torch_dtypes("2.1") == codec.torch_dtypes("2.1.0a0+git1")
    assert codec.torch_dtypes("2.1") != codec.torch_dtypes("2.11")


@pytest.mark.parametrize("key, why", [
    (SK(-1, 0), "sample_id -1 and position 0"),
    (SK("", 0), "sample_id '' and position 0"),
    (SK(1, -1), "sample_id 1 and position -1"),
    (SK(1, 0.5), "sample_id 1 and position 0.5"),
    (SK(True, 0), "sample_id True and position 0"),
])
def test_an_instance_of_the_key_class_that_is_no_sample_key_is_refused(key, why):
    # It was written as a plain tuple: the receiver's items[SK(...)] missed it, silently.
    with pytest.raises(hpref.errors.InvalidSampleKeyError) as e:
        codec.encode([(key, 5)], key_class=SK)
    assert str(e.value) == (f"cannot encode segment: items[0].key: an instance of the key class SK with {why} is "
                            "not a SampleKey (SPEC 1.4: sample_id a non-negative int or a non-empty str, position a "
                            "non-negative int), so it has no key-class form")
    # A valid one is written in the class's pattern, as before; a plain tuple stays a tuple.
    assert pickle.loads(codec.encode([(SK(1, 0), 5), ((-1, 0), 6)], key_class=SK)) == ((SK(1, 0), 5), ((-1, 0), 6))


@pytest.mark.parametrize("key_class, message", [
    # InternalError ("KeyClass.type is not a class"), a TypeError about weak references, an
    # AttributeError from inside decode, a bare ModuleNotFoundError.
    (hpref.KeyClass("os", "getcwd"), "key class os.getcwd is a builtin_function_or_method, not a class"),
    (hpref.KeyClass("os", "sep"), "key class os.sep is a str, not a class"),
    (hpref.KeyClass("builtins", "int"), "key class builtins.int: its instances cannot be made as pickle makes them "
                                        "(object.__new__, then each field set): AttributeError: "),
    # (the original's own class, DEFAULT_KEY_CLASS, named explicitly where it is not importable)
    (hpref.KeyClass("no_such_module_here", "SampleKey"),
     "key class no_such_module_here.SampleKey cannot be imported (ModuleNotFoundError: No module named "
     "'no_such_module_here'): its instances are the keys made and read here (key_class=None: hpref.Key)"),
])
def test_a_key_class_that_cannot_make_keys_is_named(key_class, message):
    with pytest.raises(hpref.errors.InvalidArgumentError) as e:
        codec.decode(SEGMENT, key_class=key_class)
    assert str(e.value).startswith(message), str(e.value)


def test_python_equivalent_of_a_misspelt_kind_raises():
    # It returned None: "the original accepts this".
    with pytest.raises(ValueError, match="python_equivalent: 'frame_size_mismach' is not an error kind"):
        hpref.python_equivalent("frame_size_mismach")
    assert hpref.python_equivalent("frame_size_mismatch") is ValueError


# ---- planning -------------------------------------------------------------------------------

def test_planning_layouts_and_headers_must_be_sequences():
    # Bare TypeErrors ("'NoneType' object is not iterable") naming no parameter.
    from hpref import planning
    with pytest.raises(hpref.errors.BatchSpecError, match="a layout is a BatchLayout or a sequence of Field"):
        planning.batch_layout(None)
    with pytest.raises(hpref.errors.BatchSpecError,
                       match="batch field 'x': dims must be a tuple of ints and symbol names, got None"):
        planning.batch_layout([("x", "float32", "cpu", None)])
    # dims that are a sequence of another type are taken, as before
    assert planning.batch_layout([("x", "float32", "cpu", range(2))]).fields[0].dims == (0, 1)
    assert planning.batch_layout([("x", "float32", "cpu", np.array([4, 2]))]).fields[0].dims == (4, 2)
    layout = planning.batch_layout(iter([("x", "float32", "cpu", ("B",))]))  # any iterable, read once
    with pytest.raises(hpref.errors.BatchHeaderError, match="header must be a sequence of int64, got None"):
        planning.header_status(layout, None)
    # status=True with a batch was taken (True == 1)
    with pytest.raises(ValueError, match="a header of a batch has status 1, got status=True"):
        planning.batch_header(layout, {"x": np.zeros(2, np.float32)}, status=True)
    assert planning.batch_header(layout, {"x": np.zeros(2, np.float32)}, status=1) == (1, 2)


# ---- oracle ---------------------------------------------------------------------------------

PLAN = routes.plan_all("sliding_window", (0, 5, 8), 2, 4, 2)


@pytest.mark.parametrize("raw, kind, message", [
    # A 1-d RawTensor's shape was ignored: (4,) over 8 elements' bytes read as 8 rows.
    (hpref.RawTensor("int64", (4,), np.arange(8).tobytes()), hpref.errors.InvalidTensorError,
     "tensor of dtype int64 needs 32 bytes, got 64"),
    (hpref.RawTensor("int64", (-8,), bytes(64)), hpref.errors.InvalidTensorError, "tensor shape (-8,) has a negative dim (-8)"),
    # torch's own RuntimeError ("shape '[8, 2]' is invalid for input of size 8").
    (hpref.RawTensor("int64", (8, 2), np.arange(8).tobytes()), hpref.errors.InvalidTensorError,
     "tensor of dtype int64 needs 128 bytes, got 64"),
    # A bare TypeError from memoryview().
    (hpref.RawTensor("int64", (8,), None), hpref.errors.InvalidTensorError,
     "the bytes of a torch.int64 tensor must be a C-contiguous buffer, got a Python NoneType"),
])
def test_oracle_checks_a_raw_tensor_as_encode_does(raw, kind, message):
    with pytest.raises(kind) as e:
        oracle.dispatch_forward(raw, PLAN)
    assert str(e.value).startswith(message), str(e.value)


def test_oracle_takes_dtype_aliases():
    # "long" was refused: "torch.long is not a dtype of torch 2.13.0+cpu" (SPEC 1.3: aliases
    # are accepted on input).
    data = bytearray(np.arange(8, dtype=np.int64).tobytes())
    by_alias = oracle.dispatch_forward(hpref.RawTensor("long", (8,), data), PLAN, tensors="numpy")
    by_name = oracle.dispatch_forward(hpref.RawTensor("int64", (8,), data), PLAN, tensors="numpy")
    assert len(by_alias) == len(PLAN) and [a.tolist() for a in by_alias] == [b.tolist() for b in by_name]


def test_oracle_gradients_must_be_a_sequence():
    with pytest.raises(TypeError, match="output_grads must be a sequence of tensors \\(one per rank\\), got None"):
        oracle.dispatch_backward(None, PLAN)


@pytest.mark.parametrize("backends", [None, 5])
def test_checked_mode_backends_must_be_names(backends):
    ht = pytest.importorskip("hpref.torch", reason="hpref.torch needs torch.distributed")
    with pytest.raises(hpref.errors.InvalidArgumentError) as e:
        ht.enable(backends)
    assert str(e.value) == f'backends must be a library name or a sequence of them ("gloo", "nccl"), got {backends!r}'
    assert "original" not in ht._ENABLED


def test_oracle_reads_bytes_without_torch_warning():
    # torch warned "The given buffer is not writable ..." for a RawTensor over bytes (once
    # per process: so in a fresh one).
    code = ("import warnings, numpy as np, hpref, hpref.routes as r, hpref.oracle as o\n"
            "warnings.simplefilter('error')\n"
            "plan = r.plan_all('sliding_window', (0, 5, 8), 2, 4, 2)\n"
            "o.dispatch_forward(hpref.RawTensor('int64', (8,), np.arange(8).tobytes()), plan)\n")
    pytest.importorskip("torch", reason="the warning is torch's")
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert got.returncode == 0, got.stderr


# ---- sim ------------------------------------------------------------------------------------

@pytest.mark.parametrize("trace, message", [
    ("/", "trace: '/' is a directory; name a file"),
    ("/nonexistent/dir/x.txt", "trace: '/nonexistent/dir/x.txt': no directory '/nonexistent/dir'"),
])
def test_a_trace_path_that_cannot_be_written_is_refused_before_the_run(tmp_path, trace, message):
    # Found by an OSError after every rank had run: the run's result was lost.
    sim = pytest.importorskip("hpref.sim", reason="hpref.sim (the simulator binding) is not built")
    ran = tmp_path / "ran"
    with pytest.raises(ValueError) as e:
        sim.run(1, lambda rank: ran.write_text("yes"), trace=trace, torch_distributed=False)
    assert str(e.value) == message
    assert not ran.exists()


def test_torch_distributed_must_be_a_bool():
    # "no" was read as True.
    sim = pytest.importorskip("hpref.sim", reason="hpref.sim (the simulator binding) is not built")
    with pytest.raises(TypeError, match="torch_distributed must be True or False, got 'no'"):
        sim.run(1, lambda rank: rank, torch_distributed="no")
