"""hpref's refusals as Python exceptions: every C++ ``hpref::Error`` arrives as an
:class:`Error` whose ``kind`` is the CLI's error kind."""
from __future__ import annotations


class Error(Exception):
    """An hpref refusal: ``kind`` (as in the CLI's JSON) and one sentence naming the bad
    value (``message``, also ``str(err)``)."""

    kind = "error"

    def __init__(self, message: str, kind: str | None = None):
        super().__init__(message)
        self.message = message
        if kind is not None:
            self.kind = kind


def _from_core(kind: str, message: str) -> Error:
    """The exception for a C++ error of ``kind`` (called by hpref._core)."""
    return Error(message, kind)
