"""Key classes for tests/python/test_decode_fuzz.py (SPEC 1.4): importable by name from the
test process, which pickles their instances as a peer does, and from its worker process,
which decodes them. A plain dataclass pickles its state as a dict; a frozen slots=True one
as the list of its values."""
from dataclasses import dataclass
from typing import Any


@dataclass
class Key:
    sample_id: Any
    position: Any


@dataclass(frozen=True, slots=True)
class SlotKey:
    sample_id: Any
    position: Any
