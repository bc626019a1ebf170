"""A program's result, read from the JSON text its ``Done`` frame carries."""

from __future__ import annotations

import json
from typing import Any

import msgspec

from .. import _texts
from .._protocol import Done
from .nesting import RESULT_TOO_DEEP, fresh_stack

__all__ = ["read_done"]


def read_done(done: Done) -> tuple[Any, str | None]:
    """The result and error a finished run's outcome carries: its own, or none and a
    sentence saying why the result could not be read."""
    try:
        try:
            return _read_result(done.result_json), done.error
        except RecursionError:  # read again from an empty stack (codemode/_host/nesting.py)
            return fresh_stack(_read_result, done.result_json), done.error
    except RecursionError:
        return None, RESULT_TOO_DEEP
    except ValueError:
        return None, "The program's result arrived unreadable."


def _read_result(text: str | None) -> Any:
    """A program's result from its JSON text. msgspec refuses lone surrogate escapes, which
    JSON.stringify writes for a JS string holding half a pair: such text is read with the
    stdlib, and those repaired."""
    if text is None:
        return None
    try:
        return msgspec.json.decode(text)
    except msgspec.DecodeError:
        return _well_formed_data(json.loads(text))


def _well_formed_data(value: Any) -> Any:
    if isinstance(value, str):
        return _texts.well_formed(value)
    if isinstance(value, list):
        return [_well_formed_data(v) for v in value]
    if isinstance(value, dict):
        return {_texts.well_formed(k): _well_formed_data(v) for k, v in value.items()}
    return value
