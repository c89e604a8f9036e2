"""Key classes from Python (SPEC 1.4, issue 11): the user's real key class — a frozen
dataclass with extra fields, or a frozen slots=True dataclass — described by
hpref.KeyClass.from_type; hpref decodes what CPython's pickle (and the original's encoder,
where present) writes for its instances into instances of that class, and what hpref writes
is rebuilt by pickle.loads into equal instances."""
import dataclasses
import pathlib
import pickle
import sys
import types

import pytest

import hpref

MODULE = "hpref_test_keys.schema"


def register(cls):
    """Makes `cls` importable as MODULE.<name>, as pickle needs."""
    for name in ("hpref_test_keys", MODULE):
        sys.modules.setdefault(name, types.ModuleType(name))
    sys.modules["hpref_test_keys"].schema = sys.modules[MODULE]
    cls.__module__ = MODULE
    setattr(sys.modules[MODULE], cls.__qualname__, cls)
    return cls


@register
@dataclasses.dataclass(frozen=True)
class ShardKey:
    sample_id: object
    position: int
    shard: str


@register
@dataclasses.dataclass(frozen=True, slots=True)
class SlotKey:
    sample_id: object
    position: int


@register
@dataclasses.dataclass(slots=True)
class MutableSlotKey:
    sample_id: object
    position: int


ITEMS = {
    ShardKey: [(ShardKey(1, 0, "a"), {"x": 1}), (ShardKey("doc", 3, "b"), ["\x00", 2.5])],
    SlotKey: [(SlotKey(1, 0), {"x": 1}), (SlotKey("doc", 3), (None, True))],
}


def test_from_type_describes_fields_and_state():
    assert hpref.KeyClass.from_type(ShardKey) == hpref.KeyClass(
        MODULE, "ShardKey", ("sample_id", "position", "shard"), "dict")
    assert hpref.KeyClass.from_type(SlotKey).state == "values"
    with pytest.raises(hpref.Error) as e:
        hpref.KeyClass.from_type(MutableSlotKey)
    assert e.value.kind == "invalid_argument" and "not frozen" in e.value.message


def test_a_class_is_described_once_and_forgotten_with_it():
    import gc
    import weakref
    from hpref import codec
    assert hpref.KeyClass.coerce(ShardKey) is hpref.KeyClass.coerce(ShardKey)
    assert hpref.KeyClass.coerce(ShardKey) == hpref.KeyClass.from_type(ShardKey)

    Passing = dataclasses.make_dataclass("Passing", [("sample_id", int), ("position", int)], frozen=True)
    described = hpref.KeyClass.coerce(Passing)
    assert described.fields == ("sample_id", "position")
    gone = weakref.ref(Passing)
    del Passing
    gc.collect()
    assert gone() is None and len([c for c in codec._DESCRIBED if c.__name__ == "Passing"]) == 0


@pytest.mark.parametrize("cls", list(ITEMS), ids=lambda c: c.__name__)
@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_decodes_what_cpython_pickles(cls, protocol):
    items = ITEMS[cls]
    legacy = pickle.dumps(tuple(items), protocol=protocol)  # the original's legacy segment
    got = hpref.codec.decode(legacy, key_class=cls)
    assert got == items and all(type(k) is cls for k, _ in got)
    with pytest.raises(hpref.Error):  # without the description the pattern is refused
        hpref.codec.decode(legacy)


@pytest.mark.parametrize("cls", list(ITEMS), ids=lambda c: c.__name__)
def test_pickle_rebuilds_what_hpref_writes(cls):
    items = ITEMS[cls]
    segment = hpref.codec.encode(items, key_class=cls)  # no binary leaf: a legacy segment
    rebuilt = pickle.loads(segment)  # what the original does with it
    assert list(rebuilt) == items and all(type(k) is cls for k, _ in rebuilt)
    assert hpref.codec.decode(hpref.codec.encode(items, key_class=cls), key_class=cls) == items


def test_framed_segments_with_the_original_codec():
    torch = pytest.importorskip("torch", reason="the original's codec needs torch")
    original_dir = pathlib.Path(__file__).resolve().parents[3] / "shared" / "original"
    if not (original_dir / "seed_transport.py").exists():
        pytest.skip(f"the original implementation is not at {original_dir}")
    sys.path.insert(0, str(original_dir))
    import seed_transport as original

    for cls in ITEMS:
        items = [(k, {"t": torch.arange(3, dtype=torch.int16), "v": v}) for k, v in ITEMS[cls]]
        ours = hpref.codec.decode(original._encode_payload_segment(items), key_class=cls)
        theirs = original._decode_payload_segment(hpref.codec.encode(items, key_class=cls))
        for got in (ours, list(theirs)):
            assert [k for k, _ in got] == [k for k, _ in items]
            assert all(type(k) is cls for k, _ in got)
            assert all(torch.equal(g["t"], w["t"]) and g["v"] == w["v"]
                       for (_, g), (_, w) in zip(got, items))


def test_keys_of_the_wrong_arity_stay_tuples_and_nested_classes_are_refused():
    segment = hpref.codec.encode([((1, 0), 5)])  # a 2-tuple key, ShardKey has three fields
    (key, _), = hpref.codec.decode(segment, key_class=ShardKey)
    assert type(key) is tuple and key == (1, 0)
    with pytest.raises(hpref.Error) as e:
        hpref.KeyClass(MODULE, "Outer.Inner")
    assert e.value.kind == "invalid_argument" and "nested" in e.value.message


def test_a_description_of_the_wrong_types_is_refused_by_name():
    """A list for the class name, or one str for the fields (whose letters would otherwise
    become nine fields), is a TypeError naming it, not a description that matches nothing."""
    with pytest.raises(TypeError, match="qualname must be a str, got \\['x'\\]"):
        hpref.KeyClass(MODULE, ["x"])
    with pytest.raises(TypeError, match="module must be a str, got 3"):
        hpref.KeyClass(3, "Key")
    with pytest.raises(TypeError, match="the str 'sample_id'"):
        hpref.KeyClass(MODULE, "Key", "sample_id")
